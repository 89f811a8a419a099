import json

from tilegraph.build.cache import LIBRARY_FILE, MANIFEST_FILE, SOURCE_FILE, BuildCache, cache_key, sha256_file


def _workdir(cache, key, payload=b"library bytes"):
    workdir = cache.new_workdir(key)
    (workdir / SOURCE_FILE).write_text("int x;")
    (workdir / LIBRARY_FILE).write_bytes(payload)
    return workdir


def test_cache_key_is_order_independent_and_content_sensitive():
    assert cache_key({"a": 1, "b": [1, 2]}) == cache_key({"b": [1, 2], "a": 1})
    assert cache_key({"a": 1}) != cache_key({"a": 2})


def test_publish_then_lookup(tmp_path):
    cache = BuildCache(tmp_path)
    key = "k" * 64
    assert cache.lookup(key) is None
    library = cache.publish(_workdir(cache, key), key, {"name": "x"})
    assert library == tmp_path / key / LIBRARY_FILE and cache.lookup(key) == library
    manifest = json.loads((tmp_path / key / MANIFEST_FILE).read_text())
    assert manifest["so_sha256"] == sha256_file(library) and manifest["name"] == "x"


def test_second_publisher_keeps_the_first_valid_entry(tmp_path):
    cache = BuildCache(tmp_path)
    key = "a" * 64
    first = cache.publish(_workdir(cache, key), key, {})
    loser = _workdir(cache, key)
    assert cache.publish(loser, key, {}) == first
    assert not loser.exists()


def test_publish_replaces_a_broken_entry(tmp_path):
    cache = BuildCache(tmp_path)
    key = "b" * 64
    library = cache.publish(_workdir(cache, key, b"old"), key, {})
    library.write_bytes(b"ol")
    assert cache.lookup(key) is None
    assert cache.publish(_workdir(cache, key, b"new"), key, {}) == library
    assert library.read_bytes() == b"new" and cache.lookup(key) == library
    assert sorted(p.name for p in tmp_path.iterdir()) == [key]

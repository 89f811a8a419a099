"""The shipped model loads; a missing, corrupt or other-version model is refused with one line."""

import json
import shutil

import pytest

pytest.importorskip("torch")

from tilegraph.tune.tlm.language import VOCAB, LanguageError  # noqa: E402
from tilegraph.tune.tlm.weights import FORMAT_VERSION, WEIGHTS_DIR, load_model, read_meta  # noqa: E402


def test_the_shipped_model_loads_and_says_how_it_was_made():
    net, meta = load_model()
    assert meta["format_version"] == FORMAT_VERSION and meta["vocabulary"] == VOCAB.digest
    assert 1_000_000 <= net.parameter_count() == meta["parameters"] <= 10_000_000
    assert "python -m tilegraph.tlm.train" in meta["trained"]["command"] and "seed" in meta["trained"]
    held = meta["metrics"]["held_out"]
    assert 0.0 <= held["top1"] <= 1.0 and held["loss"] > 0
    assert sum(f.stat().st_size for f in WEIGHTS_DIR.iterdir()) <= 20 * 2**20  # ships within 20 MB


def _copy(src, dst):
    shutil.copytree(src, dst)
    return dst


def test_another_vocabulary_or_version_is_refused(tiny_model_dir, tmp_path):
    d = _copy(tiny_model_dir, tmp_path / "m")
    meta = json.loads((d / "tlm.json").read_text())
    (d / "tlm.json").write_text(json.dumps({**meta, "vocabulary": "0" * 16}))
    with pytest.raises(LanguageError, match="another vocabulary"):
        load_model(d)
    (d / "tlm.json").write_text(json.dumps({**meta, "format_version": FORMAT_VERSION + 1}))
    with pytest.raises(LanguageError, match="retrain"):
        read_meta(d)


def test_missing_or_corrupt_files_are_refused(tiny_model_dir, tmp_path):
    with pytest.raises(LanguageError, match="no TLM model"):
        load_model(tmp_path / "nowhere")
    d = _copy(tiny_model_dir, tmp_path / "m")
    (d / "tlm.pt").write_bytes(b"not a torch file")
    with pytest.raises(LanguageError, match="cannot load"):
        load_model(d)
    (d / "tlm.json").write_text("{broken")
    with pytest.raises(LanguageError, match="not a TLM model description"):
        load_model(d)

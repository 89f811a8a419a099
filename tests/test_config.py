from pathlib import Path

from tilegraph import config


def test_env_overrides(monkeypatch, tmp_path):
    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("TILEGRAPH_DATA_DIR", str(tmp_path / "d"))
    assert config.cache_dir() == tmp_path / "c"
    assert config.data_dir() == tmp_path / "d"


def test_defaults_name_tilegraph(monkeypatch):
    monkeypatch.delenv("TILEGRAPH_CACHE_DIR", raising=False)
    monkeypatch.delenv("TILEGRAPH_DATA_DIR", raising=False)
    assert isinstance(config.cache_dir(), Path) and "tilegraph" in str(config.cache_dir())
    assert "tilegraph" in str(config.data_dir())

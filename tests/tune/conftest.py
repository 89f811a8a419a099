"""Fixtures for tuning tests."""

import pytest


@pytest.fixture
def tune_dirs(tmp_path, monkeypatch):
    """Private cache and data folders."""
    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TILEGRAPH_DATA_DIR", str(tmp_path / "data"))
    return tmp_path

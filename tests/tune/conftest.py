"""Fixtures for tuning tests."""

import pytest


@pytest.fixture
def tune_dirs(tmp_path, monkeypatch):
    """Private cache/data folders and test hooks on."""
    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TILEGRAPH_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TILEGRAPH_TEST_HOOKS", "1")
    return tmp_path

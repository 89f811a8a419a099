"""Fixtures for tuning tests."""

import pytest


@pytest.fixture
def tune_dirs(tmp_path, monkeypatch):
    """Private cache and data folders."""
    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TILEGRAPH_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A tiny random schedule language model on disk (tests that need a model, not the shipped one's quality)."""
    pytest.importorskip("torch")
    from tilegraph.tune.tlm.network import ModelConfig, ScheduleLM, torch
    from tilegraph.tune.tlm.weights import save_model

    torch.manual_seed(0)
    net = ScheduleLM(ModelConfig(width=32, layers=1, heads=2, dropout=0.0))
    return save_model(net, {"trained": {"command": "tests: random tiny model", "seed": 0}},
                      tmp_path_factory.mktemp("tlm") / "tiny")

"""The shipped model loads; a missing, corrupt or other-version model is refused with one line."""

import json
import shutil

import pytest

pytest.importorskip("torch")

from tilegraph.tune.tlm.language import VOCAB, LanguageError  # noqa: E402
from tilegraph.tune.tlm.network import ModelConfig, ScheduleLM, torch  # noqa: E402
from tilegraph.tune.tlm.weights import FORMAT_VERSION, WEIGHTS_DIR, load_model, read_meta, save_model  # noqa: E402


def test_the_shipped_model_loads_and_says_how_it_was_made():
    net, meta = load_model()
    assert meta["format_version"] == FORMAT_VERSION
    assert meta["vocabulary"] == VOCAB.prefix_digest(meta["config"]["vocab"]) and net.cfg.vocab == len(VOCAB)
    grown_rows = (len(VOCAB) - meta["config"]["vocab"]) * meta["config"]["width"]
    assert 1_000_000 <= net.parameter_count() == meta["parameters"] + grown_rows <= 10_000_000
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


def test_a_model_of_an_earlier_vocabulary_loads_grown(tmp_path):
    torch.manual_seed(0)
    old_size = 4207  # version 1: the GPU sketch tokens are not in it
    net = ScheduleLM(ModelConfig(vocab=old_size, width=16, layers=1, heads=2, dropout=0.0))
    d = save_model(net, {"trained": {"command": "tests", "seed": 0}}, tmp_path / "v1")
    meta = json.loads((d / "tlm.json").read_text())
    (d / "tlm.json").write_text(json.dumps({**meta, "language_version": 1, "vocabulary": VOCAB.prefix_digest(old_size)}))
    grown, _ = load_model(d)
    assert grown.cfg.vocab == len(VOCAB) and grown.embed.weight.shape[0] == len(VOCAB)
    old = net.embed.weight.detach().half().float()  # as stored
    assert torch.equal(grown.embed.weight[:old_size].detach(), old)
    sketches = [i for i, t in enumerate(VOCAB.tokens[:old_size]) if t.startswith("sketch:")]
    new = VOCAB.tokens.index("sketch:gpu_flat")
    assert torch.allclose(grown.embed.weight[new].detach(), old[sketches].mean(dim=0))
    with torch.no_grad():  # it writes: logits over the whole grown vocabulary
        assert grown(torch.tensor([[VOCAB.id("<bos>"), new]])).shape == (1, 2, len(VOCAB))
    # a prefix digest of another size is another vocabulary
    (d / "tlm.json").write_text(json.dumps({**meta, "vocabulary": VOCAB.prefix_digest(old_size - 1)}))
    with pytest.raises(LanguageError, match="another vocabulary"):
        load_model(d)

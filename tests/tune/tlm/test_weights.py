"""The shipped model loads; a missing, corrupt or other-version model is refused with one line."""

import json
import shutil

import pytest

pytest.importorskip("torch")

from tilegraph.tune.tlm.language import LanguageError  # noqa: E402
from tilegraph.tune.tlm.weights import FORMAT_VERSION, load_model, read_meta  # noqa: E402


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

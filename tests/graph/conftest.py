"""Shared fixtures: ONNX models exported once per session (both exporters, reduced depth)."""

import contextlib
import io
import warnings

import pytest


@pytest.fixture(scope="session")
def exported(tmp_path_factory):
    """exported(name, exporter, small, dynamic) -> path of the reference model as ONNX (cached per
    session); dynamic: its sequence length a dim_param `seq`; dynamic_batch: its batch `batch`."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("onnxscript")
    from tilegraph.graph import zoo

    folder = tmp_path_factory.mktemp("onnx")
    cache = {}

    def get(name, exporter="dynamo", small=True, dynamic=False, dynamic_batch=False):
        key = (name, exporter, small, dynamic, dynamic_batch)
        if key not in cache:
            path = folder / (f"{name}_{exporter}_{'small' if small else 'full'}{'_seq' if dynamic else ''}"
                             f"{'_batch' if dynamic_batch else ''}.onnx")
            with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                warnings.simplefilter("ignore")
                zoo.export_onnx(name, path, small=small, exporter=exporter, dynamic=dynamic,
                                dynamic_batch=dynamic_batch)
            cache[key] = path
        return cache[key]

    return get

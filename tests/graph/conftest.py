"""Shared fixtures: ONNX models exported once per session (both exporters, reduced depth)."""

import contextlib
import io
import warnings

import pytest


@pytest.fixture(scope="session")
def exported(tmp_path_factory):
    """exported(name, exporter) -> path of the reduced reference model as ONNX (cached per session)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("onnxscript")
    from tilegraph.graph import zoo

    folder = tmp_path_factory.mktemp("onnx")
    cache = {}

    def get(name, exporter="dynamo", small=True):
        key = (name, exporter, small)
        if key not in cache:
            path = folder / f"{name}_{exporter}_{'small' if small else 'full'}.onnx"
            with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                warnings.simplefilter("ignore")
                zoo.export_onnx(name, path, small=small, exporter=exporter)
            cache[key] = path
        return cache[key]

    return get

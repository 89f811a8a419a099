"""The compile display: stages and kernel counts once a compile has run `delay` seconds, nothing
before; a last line with the outcome."""

import io

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.graph import GraphBuilder, TensorType
from tilegraph.graph.compile_progress import CompileProgress


def _graph():
    b = GraphBuilder("small")
    x = b.input("x", TensorType((4, 8), "float32"))
    w = b.constant(np.ones((8, 3), np.float32), "w")
    return b.build([b.add("relu", [b.add("matmul", [x, w])])])


@pytest.mark.needs_cc
@pytest.mark.parametrize("orchestration", ["greedy", "blp"])
def test_stages_and_counts_are_shown_after_the_delay(orchestration):
    out = io.StringIO()
    with CompileProgress("small", stream=out, delay=0.0, interval=0.0) as show:
        tg.compile(_graph(), orchestration=orchestration, progress=show)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("compiling small: reading the model")
    assert any("graph passes" in line for line in lines) and any("memory plan" in line for line in lines)
    assert any("building" in line and "1/1" in line for line in lines)
    assert lines[-1].startswith("compiling small: done in ")


def test_a_short_compile_prints_nothing_and_a_failure_says_so():
    quiet = io.StringIO()
    with CompileProgress("m", stream=quiet, delay=60.0) as show:
        show.stage("graph passes")
        show(1, 2)
    assert quiet.getvalue() == ""
    loud = io.StringIO()
    with pytest.raises(RuntimeError), CompileProgress("m", stream=loud, delay=0.0) as show:
        show.stage("fusion groups")
        raise RuntimeError("boom")
    assert loud.getvalue().splitlines()[-1].startswith("compiling m: failed in ")

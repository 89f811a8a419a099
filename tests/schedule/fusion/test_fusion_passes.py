"""write_once, inline_prologue, fuse_epilogue and tensor_value on scheduled loop IR, run by the
interpreter (which defines what the IR means) against numpy."""

import numpy as np
import pytest

from tilegraph import Workload, ops, te
from tilegraph.errors import ScheduleError
from tilegraph.loop.interpret import interpret
from tilegraph.loop.ir import Buffer
from tilegraph.schedule.defaults import default_schedule
from tilegraph.schedule.fusion.epilogue import fuse_epilogue
from tilegraph.schedule.fusion.inline import tensor_value
from tilegraph.schedule.fusion.prologue import inline_prologue, with_params
from tilegraph.schedule.fusion.write_once import reads_back, write_once
from tilegraph.te.expr import BufferLoad, Var
from tilegraph.te.visit import walk

RNG = np.random.default_rng(2)


def _matmul_schedule(m=5, k=7, n=9):
    a = te.placeholder((m, k), "float32", name="in0")
    b = te.placeholder((k, n), "float32", name="in1")
    return default_schedule(Workload([a, b], [ops.matmul(a, b)]))


def test_write_once_keeps_the_result_and_stops_reading_the_output():
    sch = _matmul_schedule()
    out = sch.func.params[-1].name
    assert reads_back(sch, out)
    write_once(sch, out)
    assert not reads_back(sch, out)
    a, b = RNG.standard_normal((5, 7)).astype(np.float32), RNG.standard_normal((7, 9)).astype(np.float32)
    np.testing.assert_allclose(interpret(sch.func, a, b), a @ b, rtol=1e-5, atol=1e-5)


def test_transposed_prologue_and_bias_relu_epilogue():
    sch = _matmul_schedule()
    write_once(sch, sch.func.params[-1].name)
    wt = Buffer("wt", (9, 7), sch.func.params[1].dtype)  # the kernel now reads B transposed in place
    bias = Buffer("bias", (9,), wt.dtype)
    y = Buffer("y", (5, 9), wt.dtype)
    func = inline_prologue(sch.func, "in1", lambda idx: BufferLoad(wt, (idx[1], idx[0])))
    func = fuse_epilogue(func, sch.func.params[-1].name, y, lambda idx: idx,
                         lambda v, idx: te.max_(v + BufferLoad(bias, (idx[1],)), te.const(0.0, "float32")))
    a_param = func.params[0]
    func = with_params(func, [a_param, wt, bias], [y])
    a, w, c = (RNG.standard_normal(s).astype(np.float32) for s in ((5, 7), (9, 7), (9,)))
    np.testing.assert_allclose(interpret(func, a, w, c), np.maximum(a @ w.T + c, 0), rtol=1e-5, atol=1e-5)


def test_epilogue_refuses_an_accumulating_output():
    sch = _matmul_schedule()
    out = sch.func.params[-1]
    with pytest.raises(ScheduleError, match="reads its output"):
        fuse_epilogue(sch.func, out.name, out, lambda i: i, lambda v, i: v)


def test_with_params_names_stray_buffers():
    sch = _matmul_schedule()
    with pytest.raises(ScheduleError, match="in1"):
        with_params(sch.func, [sch.func.params[0]], [sch.func.params[-1]])


def test_tensor_value_inlines_injective_chains_and_refuses_reductions():
    x = te.placeholder((4, 6), "float32", name="x")
    b = te.placeholder((6,), "float32", name="b")
    y = ops.relu(ops.add(x, b))
    bx, bb = Buffer("x", (4, 6), x.dtype), Buffer("b", (6,), b.dtype)
    i, j = Var("i"), Var("j")
    e = tensor_value(y, (i, j), {id(x): bx, id(b): bb})
    loads = {n.buffer.name for n in walk(e) if isinstance(n, BufferLoad)}
    assert loads == {"x", "b"}
    with pytest.raises(ValueError, match="reduction"):
        tensor_value(ops.matmul(x, te.placeholder((6, 2), "float32", name="w")), (i, j), {id(x): bx})

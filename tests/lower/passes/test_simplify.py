"""The lowering simplify pass folds packed-panel indices (`j // NR`, `j % NR`) within the
enclosing loop ranges, so a copy packed one register tile wide still vectorizes."""

from __future__ import annotations

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import ops, te
from tilegraph.loop.ir import BufferStore, For
from tilegraph.loop.visit import walk_stmts
from tilegraph.lower.pipeline import lower
from tilegraph.te.expr import BinOp, BufferLoad, Ramp
from tilegraph.te.visit import walk

AVX512 = tg.Target.from_string("cpu -isa=avx512")


def packed_gemm(m: int = 32, n: int = 256, k: int = 24, mr: int = 4, nr: int = 64, task: int = 128) -> tg.Schedule:
    """B packed in panels one register tile (nr) wide, per parallel task `task` columns wide."""
    a = te.placeholder((m, k), "float32", name="A")
    b = te.placeholder((k, n), "float32", name="B")
    c = ops.matmul(a, b, name="C")
    sch = tg.Schedule(tg.Workload([a, b], [c]))
    i, j, kk = sch.loops(c)
    jo, jt = sch.split(j, [None, task])
    jr, jn = sch.split(jt, [None, nr])
    ic, ir = sch.split(i, [None, mr])
    jv, jl = sch.split(jn, [nr // 16, 16])
    sch.reorder(jo, jr, ic, kk, ir, jv, jl)
    acc = sch.cache_write(c, "local")
    sch.reverse_compute_at(acc, ic)
    pack = sch.cache_read(c, "B", "global", layout={"split": [[1, nr]], "order": [1, 0, 2]})
    sch.compute_at(pack, jo)
    sch.parallel(jo)
    sch.unroll(ir)
    sch.unroll(jv)
    sch.vectorize(jl)
    return sch


def _packed_loads(func: tg.loop.ir.Func) -> list[BufferLoad]:
    out = []
    for s in walk_stmts(func.body):
        if isinstance(s, BufferStore):
            out += [x for x in walk(s.value) if isinstance(x, BufferLoad) and x.buffer.name.startswith("B_global")]
    return out


def test_panel_wider_task_vectorizes_the_packed_reads() -> None:
    lowered = lower(packed_gemm().func, AVX512)
    loads = _packed_loads(lowered)
    assert loads and all(isinstance(x.indices[0], Ramp) and x.indices[0].stride == 1 for x in loads)
    assert not any(isinstance(x, BinOp) and x.op in ("floordiv", "floormod")
                   for load in loads for x in walk(load.indices[0]))
    assert not [s for s in walk_stmts(lowered.body) if isinstance(s, For) and s.kind == "vectorized"]


def test_packed_gemm_interprets_correctly() -> None:
    sch = packed_gemm(m=8, n=256, k=5)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 5)).astype(np.float32)
    b = rng.standard_normal((5, 256)).astype(np.float32)
    out = tg.interpret(lower(sch.func, AVX512), a.ravel(), b.ravel())  # lowered buffers are flat
    out = (out[0] if isinstance(out, tuple) else out).reshape(8, 256)
    np.testing.assert_allclose(out, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)


@pytest.mark.needs_cc
def test_packed_gemm_builds_and_matches_numpy() -> None:
    sch = packed_gemm()
    kernel = tg.build(sch, target="cpu")
    rng = np.random.default_rng(1)
    a = rng.standard_normal((32, 24)).astype(np.float32)
    b = rng.standard_normal((24, 256)).astype(np.float32)
    out = np.full((32, 256), np.nan, dtype=np.float32)
    kernel(a, b, out=out)
    np.testing.assert_allclose(out, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)

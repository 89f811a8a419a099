"""relax_dims_guards on a bucket's padding guard: a tile of 14 rows over a bucket of 32 rows (the
arrays' storage 95) tests its outer loop against 42, not each row against 32 inside the
reduction; where the rows run would leave a buffer (an intermediate sized by the bucket, the top
bucket), the guard stays. The meaning below the run-time extent is checked on the interpreter (the
lowered program, which refuses an access past a buffer) and in C, outputs and the inputs' rows
past the extent poisoned."""

from __future__ import annotations

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import te
from tilegraph.dtype import poisoned
from tilegraph.loop.interpret import interpret
from tilegraph.loop.ir import Block
from tilegraph.loop.visit import walk_stmts
from tilegraph.lower.passes import hoist_reduction_init, relax_dims_guards, skip_past_dims
from tilegraph.lower.pipeline import lower
from tilegraph.te.dims import dim, dims_array
from tilegraph.te.expr import Var, conjuncts
from tilegraph.te.printer import expr_str
from tilegraph.te.visit import walk

UPPER, K, N = 95, 24, 32


def _matmul(bucket: int, scale_first: bool = False) -> tg.Workload:
    """C = A . B with A's rows a run-time dim of [1, 95], at the bucket whose upper bound is
    `bucket`; with `scale_first`, A * 2 is an intermediate (sized by the bucket's rows)."""
    m = dim("m", UPPER)
    a, b = te.placeholder((m, K), name="A"), te.placeholder((K, N), name="B")
    src = te.compute((m, K), lambda i, k: a[i, k] * 2.0, name="A2") if scale_first else a
    r = te.reduce_axis(K, "r")
    c = te.compute((m, N), lambda i, j: te.sum(src[i, r] * b[r, j], axis=r), name="C")
    return tg.Workload([a, b], [c]).at({"m": bucket})


def _register_tile(wl: tg.Workload, rows: int = 14) -> tg.Schedule:
    """Rows in tiles of `rows` (as many as the range's 95 rows take: the top bucket's schedule
    replayed on a lower one), the columns in vectors of 16, the rows unrolled."""
    sch = tg.Schedule(wl)
    io, ii = sch.split("i", [-(-UPPER // rows), rows])
    jo, ji = sch.split("j", [None, 16])
    sch.reorder(io, jo, "r", ii, ji)
    sch.unroll(ii)
    sch.vectorize(ji)
    return sch


def _relaxed(func):
    return relax_dims_guards.run(skip_past_dims.run(hoist_reduction_init.run(func, None), None), None)


def _guards(func, block: str) -> list[tuple[str, set[str]]]:
    """The block's predicate, a conjunct at a time: (its text, the loop variables it reads)."""
    (blk,) = [b for b in walk_stmts(func.body) if isinstance(b, Block) and b.name == block]
    return [(expr_str(c), {x.name for x in walk(c) if isinstance(x, Var)}) for c in conjuncts(blk.predicate)]


def _check_meaning(sch: tg.Schedule, n: int) -> None:
    wl = sch.workload
    rng = np.random.default_rng(n)
    a = np.full((UPPER, K), np.nan, np.float32)
    a[:n] = rng.standard_normal((n, K))
    b = rng.standard_normal((K, N)).astype(np.float32)
    want = a[:n].astype(np.float64) @ b.astype(np.float64)
    dims = dims_array(wl.dims, {"m": n})
    lowered = lower(sch.func, tg.target.as_target("cpu"))
    got_ir = interpret(lowered, a, b, dims, outputs=["C"])
    np.testing.assert_allclose(got_ir.reshape(UPPER, N)[:n], want, rtol=1e-4, atol=1e-4, err_msg=f"interpreter n={n}")
    kernel = tg.build(sch)
    got = poisoned((UPPER, N), np.float32)
    kernel(a, b, dims, out=got)
    np.testing.assert_allclose(got[:n], want, rtol=1e-4, atol=1e-4, err_msg=f"C n={n}")


def test_a_tile_past_the_bucket_tests_its_outer_loop_against_the_bucket_rounded_up():
    sch = _register_tile(_matmul(32))
    ((guard, reads),) = _guards(_relaxed(sch.func), "C")
    assert guard.endswith("< 42)") and reads == {"i_0"}, guard   # 3 tiles of 14, the rows unguarded
    before = [(g, v) for g, v in _guards(hoist_reduction_init.run(sch.func, None), "C") if "tg_dims" not in g]
    assert before and all(v == {"i_0", "i_1"} and g.endswith("< 32)") for g, v in before)


def test_a_bucket_that_the_tile_divides_is_rounded_exactly():
    sch = _register_tile(_matmul(28))
    ((guard, reads),) = _guards(_relaxed(sch.func), "C")
    assert guard.endswith("< 28)") and reads == {"i_0"}, guard


@pytest.mark.needs_cc
@pytest.mark.parametrize("bucket, tile", [(32, 14), (64, 14), (95, 14), (16, 12)])
def test_the_rows_run_past_the_bucket_keep_the_meaning_below_the_extent(bucket, tile):
    sch = _register_tile(_matmul(bucket), tile)
    for n in sorted({1, tile - 1, tile, tile + 1, bucket - 1, bucket}):
        if 1 <= n <= bucket:
            _check_meaning(sch, n)


def test_the_top_bucket_keeps_its_guard_within_the_storage():
    sch = _register_tile(_matmul(UPPER))   # 7 tiles of 14 = 98 rows over 95 stored
    guards = _guards(_relaxed(sch.func), "C")
    assert any(g.endswith("< 95)") and "i_1" in v for g, v in guards), guards


def test_an_intermediate_sized_by_the_bucket_keeps_its_guard():
    wl = _matmul(32, scale_first=True)
    sch = tg.Schedule(wl)
    io, ii = sch.split(sch.loops("A2")[0], [None, 14])
    guards = _guards(_relaxed(sch.func), "A2")
    assert any(g.endswith("< 32)") and ii in v for g, v in guards), guards
    for n in (1, 29, 32):
        rng = np.random.default_rng(n)
        a = np.full((UPPER, K), np.nan, np.float32)
        a[:n] = rng.standard_normal((n, K))
        b = rng.standard_normal((K, N)).astype(np.float32)
        lowered = lower(sch.func, tg.target.as_target("cpu"))   # the interpreter refuses a row past A2's 32
        got = interpret(lowered, a, b, dims_array(wl.dims, {"m": n}), outputs=["C"]).reshape(UPPER, N)
        np.testing.assert_allclose(got[:n], 2.0 * a[:n].astype(np.float64) @ b, rtol=1e-4, atol=1e-4)

"""pin_operand_vectors: a vector load several register updates read is loaded once into a pinned
operand register, keeping the meaning, and only where the registers suffice."""

from dataclasses import replace

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import dtype as dt
from tilegraph import ops, te
from tilegraph.codegen.c import codegen_c
from tilegraph.loop.edit import rewrite_stmt
from tilegraph.loop.ir import Allocate, Buffer, BufferStore, Func, seq
from tilegraph.loop.visit import walk_stmts
from tilegraph.lower.passes import pin_operand_vectors
from tilegraph.lower.passes.pin_operand_vectors import OPERAND_SCOPE
from tilegraph.lower.pipeline import lower
from tilegraph.target import Target, host_arch
from tilegraph.te.expr import BinOp, Broadcast, BufferLoad, Cmp, Const, Ramp, Select

AVX2 = Target("cpu", arch="x86_64", isa="avx2")


def _rank_one_update(rows: int, lanes: int = 8):
    """acc[r] = acc[r] + broadcast(a[r]) * b[0:lanes] for each row r, then y[r] = acc[r]: every
    update reads the same vector of b."""
    a, b = Buffer("a", (rows,), dt.float32), Buffer("b", (lanes,), dt.float32)
    y = Buffer("y", (rows * lanes,), dt.float32)
    acc = Buffer("acc", (rows,), dt.float32.with_lanes(lanes), scope="local")
    vec_b = BufferLoad(b, (Ramp(Const(0), 1, lanes),))
    zero = Broadcast(Const(0.0, dt.float32), lanes)
    init = [BufferStore(acc, (Const(r),), zero) for r in range(rows)]
    update = [BufferStore(acc, (Const(r),), BinOp("add", BufferLoad(acc, (Const(r),)),
                                                 BinOp("mul", Broadcast(BufferLoad(a, (Const(r),)), lanes), vec_b)))
              for r in range(rows)]
    out = [BufferStore(y, (Ramp(Const(r * lanes), 1, lanes),), BufferLoad(acc, (Const(r),))) for r in range(rows)]
    return Func("f", (a, b, y), Allocate(acc, seq(*init, *update, *out)))


def _operand_buffers(func):
    return [s.buffer for s in walk_stmts(func.body) if isinstance(s, Allocate) and s.buffer.scope == OPERAND_SCOPE]


def test_a_shared_vector_load_is_read_once_and_the_meaning_is_kept():
    func = _rank_one_update(rows=4)
    pinned = pin_operand_vectors.run(func, AVX2)
    (opnd,) = _operand_buffers(pinned)
    assert opnd.dtype == dt.float32.with_lanes(8) and opnd.shape == (1,)
    loads_of_b = [s for s in walk_stmts(pinned.body) if isinstance(s, BufferStore)
                  and any(isinstance(x, BufferLoad) and x.buffer.name == "b" for x in te.visit.walk(s.value))]
    assert len(loads_of_b) == 1 and loads_of_b[0].buffer == opnd
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(4).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    np.testing.assert_array_equal(tg.interpret(pinned, a, b), tg.interpret(func, a, b))


def test_a_tile_without_a_spare_register_keeps_the_loads():
    # 15 accumulators + the operand + a broadcast exceed AVX2's 16 registers
    func = _rank_one_update(rows=15)
    assert pin_operand_vectors.run(func, AVX2) == func
    assert _operand_buffers(pin_operand_vectors.run(_rank_one_update(rows=14), AVX2))


def test_a_guarded_load_is_never_hoisted_out_of_its_guard():
    """select(r < 2, b[0:8], 0): the guard may be what keeps the load in bounds, so it stays."""
    func = _rank_one_update(rows=4)

    def guarded(s):
        if isinstance(s, BufferStore) and s.buffer.name == "acc" and isinstance(s.value, BinOp):
            add = s.value
            product = add.b
            guard = Cmp("lt", Const(s.indices[0].value), Const(2))
            vec_b = product.b
            zero = Broadcast(Const(0.0, dt.float32), 8)
            return BufferStore(s.buffer, s.indices, BinOp("add", add.a, BinOp("mul", product.a,
                                                                             Select(guard, vec_b, zero))))
        return None

    func = replace(func, body=rewrite_stmt(func.body, guarded))
    assert pin_operand_vectors.run(func, AVX2) == func


def test_a_store_before_the_operand_is_loaded_still_reads_memory():
    """Row 0 reads b only under a guard, rows 1-3 always: b is pinned before row 1, and row 0's
    guarded read stays a read of memory (the register holds nothing yet)."""
    func = _rank_one_update(rows=4)

    def guard_row_0(s):
        if isinstance(s, BufferStore) and s.buffer.name == "acc" and isinstance(s.value, BinOp) \
                and s.indices[0].value == 0:
            product = s.value.b
            zero = Broadcast(Const(0.0, dt.float32), 8)
            guarded = Select(Cmp("lt", Const(0), Const(1)), product.b, zero)
            return BufferStore(s.buffer, s.indices, BinOp("add", s.value.a, BinOp("mul", product.a, guarded)))
        return None

    func = replace(func, body=rewrite_stmt(func.body, guard_row_0))
    pinned = pin_operand_vectors.run(func, AVX2)
    (opnd,) = _operand_buffers(pinned)
    stores = [s for s in walk_stmts(pinned.body) if isinstance(s, BufferStore)]
    row_0 = next(s for s in stores if s.buffer.name == "acc" and isinstance(s.value, BinOp))
    assert stores.index(row_0) < next(n for n, s in enumerate(stores) if s.buffer == opnd)
    assert any(isinstance(x, BufferLoad) and x.buffer.name == "b" for x in te.visit.walk(row_0.value))
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal(4).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    np.testing.assert_array_equal(tg.interpret(pinned, a, b), tg.interpret(func, a, b))


def test_other_vector_widths_and_gpu_targets_are_left_alone():
    func = _rank_one_update(rows=4, lanes=4)  # not AVX2's native width: no register class to pin it in
    assert pin_operand_vectors.run(func, AVX2) == func
    assert pin_operand_vectors.run(_rank_one_update(rows=4), Target("cuda")) == _rank_one_update(rows=4)


def _register_tiled_matmul(m: int, n_vectors: int, k: int, lanes: int) -> tg.Schedule:
    """C = A @ B with an m x (n_vectors * lanes) register tile: each B vector feeds m FMAs."""
    a = te.placeholder((m, k), "float32", name="A")
    b = te.placeholder((k, n_vectors * lanes), "float32", name="B")
    c = ops.matmul(a, b, name="C")
    sch = tg.Schedule(tg.Workload([a, b], [c]))
    i, j, kk = sch.loops(c)
    jv, jl = sch.split(j, [n_vectors, lanes])
    sch.reorder(kk, i, jv, jl)
    acc = sch.cache_write(c, "local")
    wr, wc = sch.loops(acc)[-2:]
    wco, wci = sch.split(wc, [None, lanes])
    for loop in (i, jv, wr, wco):
        sch.unroll(loop)
    sch.vectorize(jl)
    sch.vectorize(wci)
    return sch


def test_a_register_tiled_matmul_prints_its_pins_and_computes_the_product():
    target = Target("cpu")
    lanes = target.lanes("float32")
    sch = _register_tiled_matmul(3, 2, 9, lanes)  # 6 accumulators, 2 operands, odd K
    kernel = tg.build(sch, target)
    assert "TGH_PIN(" in kernel.source and "#define TGH_PIN" in kernel.source
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 9)).astype(np.float32)
    b = rng.standard_normal((9, 2 * lanes)).astype(np.float32)
    out = np.full((3, 2 * lanes), np.nan, dtype=np.float32)
    kernel(a, b, out=out)
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    # the lowered IR (operands pinned) means what the schedule means; C contracts FMAs, so it agrees to rounding
    assert _operand_buffers(kernel.lowered)
    lowered = tg.interpret(kernel.lowered, a.ravel(), b.ravel())
    np.testing.assert_array_equal(lowered.reshape(3, -1), tg.interpret(sch.func, a, b))


@pytest.mark.skipif(host_arch() != "x86_64", reason="compiles x86 kernels with the host's gcc")
def test_the_pin_compiles_for_every_x86_vector_width():
    """AVX-512's 16-lane operands are pinned in its 32-register class (`+v`), AVX2's in `+x`; a
    host that cannot run a width still compiles it."""
    from tests.foreign_isa import compile_only

    for isa in ("avx2", "avx512"):
        target = Target("cpu", arch="x86_64", isa=isa)
        sch = _register_tiled_matmul(3, 2, 9, target.lanes("float32"))
        entry, library = compile_only(sch, target)
        assert library.exists() and entry
        assert "TGH_PIN(" in codegen_c(lower(sch.func, target)).code

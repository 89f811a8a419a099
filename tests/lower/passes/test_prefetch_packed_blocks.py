"""prefetch_packed_blocks: a prepacked compute kernel prefetches the packed operand's next block
while it computes on one; the prefetches cover every line that block reads, and change no value."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.codegen.c import codegen_c
from tilegraph.errors import LoweringError
from tilegraph.graph.prepack import _build
from tilegraph.loop.interpret import interpret
from tilegraph.loop.ir import For, Func, Prefetch
from tilegraph.loop.printer import func_str
from tilegraph.loop.verify import verify
from tilegraph.loop.visit import loads_under, stmt_children, walk_stmts
from tilegraph.lower.passes import prefetch_packed_blocks
from tilegraph.lower.prepack import split_constant_packing
from tilegraph.schedule.schedule import Schedule
from tilegraph.te.arith import int_const
from tilegraph.te.expr import Const, Ramp
from tilegraph.te.simplify import simplify
from tilegraph.te.visit import substitute
from tilegraph.testing import random_inputs, reference_outputs
from tilegraph.workloads import from_spec

CPU = tg.Target("cpu")
LINE = 64


def packed_split(spec: str, block: int, rows: int = 4, depth: int = 4):
    """A GEMM whose B slab of `block` columns is packed per parallel column block, with a micro-
    kernel of `rows` x `depth` steps unrolled over vectors of the block's columns (the nest Gensor's
    packed schedules lower to), built, and its packing split out: (workload, kernel, split)."""
    wl = from_spec(spec)
    sch = Schedule(wl)
    out = wl.outputs[0].name
    i, j, k = sch.loops(out)
    j0, j1 = sch.split(j, [None, block])
    i0, i1 = sch.split(i, [None, rows])
    k0, k1 = sch.split(k, [None, depth])
    sch.reorder(j0, i0, k0, i1, k1, j1)
    sch.parallel(j0)
    sch.unroll(i1)
    sch.unroll(k1)
    sch.vectorize(j1)
    sch.compute_at(sch.cache_read(out, wl.inputs[1].name, "global"), j0)
    kernel = tg.build(sch)
    split = split_constant_packing(kernel.lowered, kernel.lowered.params[1].name, 2)
    assert split is not None
    return wl, kernel, split


def _prefetches(func: Func) -> list[Prefetch]:
    return [s for s in walk_stmts(func.body) if isinstance(s, Prefetch)]


def _nest(func: Func, stmt) -> list[For]:
    """The loops around `stmt`, outermost first."""
    def down(s, path):
        if s is stmt:
            return path
        inner = [*path, s] if isinstance(s, For) else path
        for kid in stmt_children(s):
            found = down(kid, inner)
            if found is not None:
                return found
        return None
    return down(func.body, [])


def _value(e, env) -> int:
    v = int_const(simplify(substitute(e, {var: Const(x, var.dtype) for var, x in env.items()})))
    assert v is not None
    return v


@pytest.mark.needs_cc
@pytest.mark.parametrize("spec, block, lines", [("matmul:8,256,128", 32, None), ("matmul:12,200,96", 32, None),
                                                ("matmul:5,300,160", 32, None), ("matmul:12,256,128", 64, 6)])
def test_the_next_blocks_lines_are_prefetched_while_a_block_is_computed_on(spec, block, lines):
    """For every block o, the prefetches issued while computing on it cover every cache line the
    kernel reads of block o + 1 (and stay inside the buffer); 1 to MAX_LINES lines an iteration, an
    iteration's elements not a whole number of lines in the second and third; in the fourth, 3 row
    tiles x 32 steps over a block of 128 x 64 (few row tiles over a wide block, as GPT-2's LM head at
    32 tokens), 6 lines an iteration."""
    _, _, split = packed_split(spec, block=block)
    out = prefetch_packed_blocks.run(split.compute, CPU, split.packed.name)
    (pf,) = _prefetches(out)
    assert pf.buffer.name == split.packed.name and 1 <= pf.lines <= prefetch_packed_blocks.MAX_LINES
    assert lines is None or pf.lines == lines
    verify(out)
    loops = _nest(out, pf)
    block_loop, inner = loops[0], loops[1:]
    assert block_loop.kind == "parallel" and block_loop.extent >= 2
    reads: dict[int, set[int]] = {}   # block -> lines its loads touch
    fetched: dict[int, set[int]] = {}  # block -> lines prefetched while computing on it
    packed_loads = [ld for ld in loads_under(inner[-1].body) if ld.buffer.name == split.packed.name]
    itemsize = split.packed.dtype.itemsize
    for index in np.ndindex(*(lp.extent for lp in loops)):
        env = {lp.var: int(x) for lp, x in zip(loops, index)}
        block = env[block_loop.var]
        at = _value(pf.index, env)
        assert 0 <= at < split.packed.size
        fetched.setdefault(block, set()).update((at * itemsize + LINE * n) // LINE for n in range(pf.lines))
        for ld in packed_loads:
            idx = ld.indices[0]
            first = _value(idx.base if isinstance(idx, Ramp) else idx, env)
            last = first + ((idx.lanes - 1) * idx.stride if isinstance(idx, Ramp) else 0)
            reads.setdefault(block, set()).update(range(first * itemsize // LINE, last * itemsize // LINE + 1))
    for block in range(block_loop.extent - 1):
        assert reads[block + 1] <= fetched[block]


@pytest.mark.needs_cc
@pytest.mark.parametrize("spec, block", [("matmul:10,200,96", 32), ("matmul:5,300,160", 32)])
def test_a_prefetching_kernel_computes_exactly_what_it_computed_without(spec, block):
    """Bit for bit the split kernel's output without the prefetches, in C and in the interpreter
    (which skips them); outputs poisoned first."""
    wl, kernel, split = packed_split(spec, block)
    with_prefetch = prefetch_packed_blocks.run(split.compute, CPU, split.packed.name)
    assert _prefetches(with_prefetch)
    assert "__builtin_prefetch(" in codegen_c(with_prefetch).code
    assert "prefetch(" in func_str(with_prefetch)
    built = _build(kernel, 1, split, CPU)  # runtime/prepacked.py applies the pass
    assert built is not None
    pack, compute = built
    assert "__builtin_prefetch(" in compute.source
    inputs = random_inputs(wl, 7)
    packed = pack(inputs[1], out=np.full(split.packed.shape, np.nan, split.packed.dtype.numpy))
    poisoned = np.full(wl.outputs[0].shape, np.nan, np.float32)
    got = compute(inputs[0], packed, out=poisoned)
    np.testing.assert_array_equal(got, kernel(*inputs))
    interpreted = interpret(with_prefetch, inputs[0], packed)
    np.testing.assert_array_equal(interpreted, interpret(split.compute, inputs[0], packed))
    (ref,) = reference_outputs(wl, inputs)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.needs_cc
def test_blocks_too_small_to_wait_on_nests_it_cannot_follow_and_other_targets_are_left_alone():
    _, _, split = packed_split("matmul:8,16,64", block=16)  # 1 KiB blocks
    assert prefetch_packed_blocks.run(split.compute, CPU, split.packed.name) is split.compute
    _, _, split = packed_split("matmul:9,203,96", block=32)  # K's tail reads the block in a second nest
    assert prefetch_packed_blocks.run(split.compute, CPU, split.packed.name) is split.compute
    _, _, split = packed_split("matmul:12,200,96", block=32)
    assert prefetch_packed_blocks.run(split.compute, tg.Target("cuda"), split.packed.name) is split.compute
    assert prefetch_packed_blocks.run(split.compute, CPU, "no_such_param") is split.compute


@pytest.mark.needs_cc
def test_the_verifier_refuses_a_malformed_prefetch():
    _, _, split = packed_split("matmul:12,200,96", block=32)
    out = prefetch_packed_blocks.run(split.compute, CPU, split.packed.name)
    (pf,) = _prefetches(out)
    from tilegraph.loop.edit import replace_node

    bad = replace_node(out, pf, Prefetch(pf.buffer, pf.index, lines=1, locality=7))
    with pytest.raises(LoweringError, match="locality"):
        verify(bad)

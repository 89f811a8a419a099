"""Prepacking (lower/prepack.py): a kernel's packing of an input split into a packing kernel and the
rest; packing once and running the rest computes exactly what the kernel computed."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.graph.prepack import _build
from tilegraph.loop.printer import func_str
from tilegraph.lower.prepack import split_constant_packing
from tilegraph.schedule.schedule import Schedule
from tilegraph.testing import random_inputs, reference_outputs
from tilegraph.tune.strategy.base import TuneContext
from tilegraph.tune.strategy.gensor import GensorStrategy
from tilegraph.workloads import from_spec

pytestmark = pytest.mark.needs_cc
CPU = tg.Target("cpu")


def packing_schedule(wl, block_split=16):
    """C = A . B with B's column slab packed per parallel column block (a non-dividing split)."""
    sch = Schedule(wl)
    out = wl.outputs[0].name
    i, j, k = sch.loops(out)
    j0, j1 = sch.split(j, [None, block_split])
    sch.reorder(j0, i, k, j1)
    sch.parallel(j0)
    sch.compute_at(sch.cache_read(out, wl.inputs[1].name, "global"), j0)
    return sch


def _check_split_is_exact(kernel, position, seed):
    """Pack, then run the rest: bit for bit the kernel's own output on fresh inputs."""
    lowered = kernel.lowered
    split = split_constant_packing(lowered, lowered.params[position].name, len(kernel.inputs))
    if split is None:
        return False
    pack, compute = _build(kernel, position, split, CPU)
    inputs = random_inputs_for(kernel, seed)
    packed = pack(inputs[position], out=np.full(split.packed.shape, np.nan, split.packed.dtype.numpy))
    want = kernel(*inputs)
    got = compute(*[packed if j == position else x for j, x in enumerate(inputs)])
    np.testing.assert_array_equal(got, want)
    return True


def random_inputs_for(kernel, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(b.shape).astype(b.dtype.numpy) for b in kernel.inputs]


@pytest.mark.parametrize("spec", ["matmul:37,53,91", "matmul:1,7,5", "matmul:64,33,48"])
def test_a_packed_operand_splits_into_pack_and_compute(spec):
    wl = from_spec(spec)
    kernel = tg.build(packing_schedule(wl))
    assert _check_split_is_exact(kernel, 1, seed=3)
    split = split_constant_packing(kernel.lowered, kernel.lowered.params[1].name, 2)
    assert split.pack.params[0].name == kernel.lowered.params[1].name
    assert [b.name for b in split.compute.params] == [kernel.lowered.params[0].name, split.packed.name,
                                                       kernel.lowered.params[2].name]
    # the packing left the compute kernel: it allocates no copy and never reads the operand
    compute_text = func_str(split.compute)
    assert "allocate" not in compute_text and f"{kernel.lowered.params[1].name}[" not in compute_text
    inputs = random_inputs(wl, 5)
    (ref,) = reference_outputs(wl, inputs)
    np.testing.assert_allclose(kernel(*inputs), ref, rtol=1e-4, atol=1e-5)


def test_an_operand_that_is_not_packed_does_not_split():
    wl = from_spec("matmul:37,53,91")
    kernel = tg.build(packing_schedule(wl))
    assert split_constant_packing(kernel.lowered, kernel.lowered.params[0].name, 2) is None  # A is read in place
    assert split_constant_packing(kernel.lowered, "no_such_param", 2) is None
    plain = tg.build(wl)  # the default schedule copies nothing
    assert all(split_constant_packing(plain.lowered, p.name, 2) is None for p in plain.lowered.params[:2])


@pytest.mark.parametrize("spec", ["dense:67,129,96", "matmul:128,256,192", "conv2d_nhwc:1,9,9,40,72,1,1,0"])
def test_every_split_of_gensors_schedules_is_exact(spec):
    """Whatever Gensor picks on this machine: each operand it packs splits into an exact pair."""
    wl = from_spec(spec)
    ctx = TuneContext(wl, CPU, 0, None, trials_left=4)
    for candidate in GensorStrategy(top_k=4).propose(ctx, 4):
        kernel = tg.build(Schedule.replay(wl, candidate.trace_json))
        for position in range(len(kernel.inputs)):
            _check_split_is_exact(kernel, position, seed=position)


def test_the_interpreter_agrees_that_pack_then_compute_is_the_kernel():
    """The interpreter defines the IR's meaning: the original kernel, and the packing followed by the
    rest, give the same output (packed buffer poisoned first; the rest reads only what was packed)."""
    from tilegraph.loop.interpret import run_func

    wl = from_spec("matmul:7,5,19")
    kernel = tg.build(packing_schedule(wl, block_split=4))
    lowered = kernel.lowered
    split = split_constant_packing(lowered, lowered.params[1].name, 2)
    assert split is not None
    rng = np.random.default_rng(9)
    a, b = (rng.standard_normal(p.shape).astype(np.float32) for p in lowered.params[:2])
    want = {lowered.params[0].name: a, lowered.params[1].name: b,
            lowered.params[2].name: np.full(lowered.params[2].shape, np.nan, np.float32)}
    run_func(lowered, want)
    packed = np.full(split.packed.shape, np.nan, np.float32)
    run_func(split.pack, {lowered.params[1].name: b, split.packed.name: packed})
    got = {lowered.params[0].name: a, split.packed.name: packed,
           lowered.params[2].name: np.full(lowered.params[2].shape, np.nan, np.float32)}
    run_func(split.compute, got)
    np.testing.assert_array_equal(got[lowered.params[2].name], want[lowered.params[2].name])
    assert not np.isnan(want[lowered.params[2].name]).any()


def test_a_parallel_loop_fusing_row_blocks_packs_one_slab_per_column_block():
    """A parallel loop fusing row blocks with B's column blocks reads B's slab through `fused % 3`:
    3 slabs are packed, not one per task (the copy of every task would otherwise stay in the
    kernel, MAX_GROWTH refusing 12 copies), and pack-then-compute is exactly the kernel."""
    wl = from_spec("matmul:32,48,40")
    sch = Schedule(wl)
    i, j, k = sch.loops("matmul")
    i0, i1 = sch.split(i, [None, 8])
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(i0, j0, i1, k, j1)
    fused = sch.fuse(i0, j0)
    sch.parallel(fused)
    sch.compute_at(sch.cache_read("matmul", "b", "global"), fused)
    kernel = tg.build(sch)
    split = split_constant_packing(kernel.lowered, kernel.lowered.params[1].name, 2)
    k, n = wl.inputs[1].shape
    assert split is not None and split.packed.size == 3 * k * 16  # 3 slabs of k x 16 (n = 40: 16, 16 and 8 used)
    assert n == 40
    assert _check_split_is_exact(kernel, 1, seed=4)


def test_a_packing_inside_the_accumulators_declaration_splits():
    """Gensor's matrix-vector schedule declares its accumulators between the packed copy and the
    nest filling it (allocate b_global { allocate acc { fill; compute } }): the split takes the fill
    out and leaves the accumulators around the rest, exactly."""
    from tilegraph import ops, te
    from tilegraph.loop.ir import Allocate
    from tilegraph.loop.visit import walk_stmts

    a, b = te.placeholder((1, 301), name="a"), te.placeholder((301, 777), name="b")
    wl = tg.Workload([a, b], [ops.matmul(a, b)], constants=(1,))
    (candidate,) = GensorStrategy(top_k=1).propose(TuneContext(wl, CPU, 0, None, trials_left=1), 1)
    kernel = tg.build(Schedule.replay(wl, candidate.trace_json))
    packed_copy = next(s for s in walk_stmts(kernel.lowered.body) if isinstance(s, Allocate)
                       and s.buffer.name.endswith("_global"))
    assert isinstance(packed_copy.body, Allocate)  # the shape this test is about
    assert _check_split_is_exact(kernel, 1, seed=11)

import pytest

from tilegraph.target import Target
from tilegraph.tune.gensor.markov import MarkovConfig, reachable
from tilegraph.tune.gensor.policy import SearchSetup
from tilegraph.tune.gensor.state import EtirState, IterSpace, canonical
from tilegraph.tune.gensor.transitions import feasible, neighbours
from tilegraph.tune.hardware import hardware_model

from .conftest import matmul_workload


def test_every_reachable_state_is_feasible_and_canonical(hw):
    setup = SearchSetup.create(matmul_workload(16, 32, 8), hw, MarkovConfig())
    states = reachable(setup.graph, [setup.minimal])
    assert len(states) == len(set(states)) > 20
    for s in states:
        assert canonical(setup.space, s) == s
        assert s == setup.minimal or feasible(setup.space, hw, s, setup.minimal) is None
        assert s.accumulators + s.interleave + 1 <= hw.vector_registers


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_register_limit_removes_edges(isa):
    """The register tile grows until accumulators + operand vectors + 1 fill the register file of
    the target's ISA (16 on AVX2, 32 on AVX-512), whatever the host is."""
    hw = hardware_model(Target("cpu", isa=isa), measure=False)
    assert hw.vector_registers == {"avx2": 16, "avx512": 32}[isa]
    lanes = hw.simd_lanes_fp32
    interleave = 2
    rows = (hw.vector_registers - interleave - 1) // interleave  # 14 rows on AVX-512, 6 on AVX2
    space = IterSpace.from_workload(matmul_workload(64, 64, 64))
    cols = interleave * lanes
    big = canonical(space, EtirState((rows, cols), (rows, cols), (rows, cols), (8,), 1, lanes))
    assert big.accumulators + big.interleave + 1 <= hw.vector_registers
    assert feasible(space, hw, big) is None
    labels = {e.label for e in neighbours(space, hw, big)}
    assert "enlarge(reg,i)" not in labels and "enlarge(reg,j)" not in labels
    too_big = canonical(space, EtirState((rows + 2, cols), (rows + 2, cols), (rows + 2, cols), (8,), 1, lanes))
    assert "registers" in feasible(space, hw, too_big)


def test_avx2_int8_pair_steps_count_two_registers_per_operand():
    """AVX2's int8 step holds B's two pairs per column and A's two broadcast pairs: a 4 x 3-vector
    tile (12 accumulators) fits 16 registers for float32 but not for those steps, whose
    construction keeps to tiles that do (GCC spilled the 4 x 3 tile's products to the stack)."""
    from dataclasses import replace

    from tilegraph.tune.strategy.gensor import workload_dot_group

    avx2 = Target.from_string("cpu -isa=avx2 -arch=x86_64")  # whatever this machine is
    hw = hardware_model(avx2, measure=False)
    space = IterSpace.from_workload(matmul_workload(64, 96, 64))
    tile = canonical(space, EtirState((4, 24), (4, 24), (4, 24), (8,), 1, 8))
    assert feasible(space, hw, tile) is None
    assert "registers" in feasible(space, hw, replace(tile, dot_group=2))

    import tilegraph as tg
    from tilegraph import ops, te

    a, b = te.placeholder((64, 64), "uint8", name="A"), te.placeholder((64, 96), "int8", name="B")
    wl = tg.Workload([a, b], [ops.matmul(a, b, accumulate="int32")])
    assert workload_dot_group(wl, avx2) == 2 and workload_dot_group(matmul_workload(8, 8, 8), avx2) == 0
    setup = SearchSetup.create(wl, hw, MarkovConfig(), workload_dot_group(wl, avx2))
    for s in reachable(setup.graph, [setup.minimal]):
        assert s.dot_group == 2
        assert s == setup.minimal or s.accumulators + s.operand_vectors <= hw.vector_registers


def _row_sum_workload(rows: int, cols: int):
    import tilegraph as tg
    from tilegraph import te

    x = te.placeholder((rows, cols), name="x")
    r = te.reduce_axis(cols, "r")
    return tg.Workload([x], [te.compute((rows,), lambda i: te.sum(x[i, r], axis=r), name="s")])


def test_cache_capacity_and_tail_waste(hw):
    plain = IterSpace.from_workload(_row_sum_workload(4096, 4096))
    assert plain.kind == "plain"
    s = canonical(plain, EtirState((16,), (4096,), (4096,), (4096,), 0, 16))
    assert "L1" in feasible(plain, hw, s)
    odd = IterSpace.from_workload(matmul_workload(40, 48, 8))
    waste = canonical(odd, EtirState((1, 32), (1, 32), (1, 32), (8,), 1, 16))  # 48 -> 64: 33 % padding
    assert "pads" in feasible(odd, hw, waste)


def test_micro_kernel_family_runs_whole_reductions(hw):
    space = IterSpace.from_workload(matmul_workload(1024, 1024, 1024))
    s = canonical(space, EtirState((4, 16), (256, 256), (256, 256), (256,), 1, 16, pack=("B", "A")))
    assert s.rstep == (1024,) and s.l1 == s.reg  # k is never blocked outside the register tile
    assert s.pack == ("B",)  # only the operand reused across rows is packed
    assert feasible(space, hw, s) is None  # traffic is priced by the model, not cut by capacity


def test_edges_lead_to_distinct_states(hw):
    setup = SearchSetup.create(matmul_workload(64, 48, 40), hw)
    edges = setup.graph.edges(setup.minimal)
    targets = [e.target for e in edges]
    assert len(targets) == len(set(targets)) and setup.minimal not in targets
    kinds = {e.kind for e in edges}
    assert {"enlarge", "parallel", "pack"} <= kinds
    plain = SearchSetup.create(_row_sum_workload(64, 256), hw)
    assert "rstep" in {e.kind for e in plain.graph.edges(plain.minimal)}


def test_an_enlarge_steps_over_sizes_that_pad_too_much():
    """C1D-4's 32 rows in L2 blocks of 18 (register tiles of 6): 24 would pad to 48 (50%), so the
    enlarge goes to 36 (12.5%). It was a dead end, and the whole-M block, which copies the packed
    weights once instead of twice, measured 1.3x faster and was never visited."""
    from tilegraph import workloads

    hw = hardware_model(Target("cpu", isa="avx2", num_cores=2), measure=False)
    space = IterSpace.from_workload(workloads.get("C1D-4"))
    s = canonical(space, EtirState((1, 6, 16), (1, 6, 16), (1, 18, 64), (3, 512), 2, 8, 8, 1, ("w",)))
    grown = {e.target.l2 for e in neighbours(space, hw, s) if e.label == "enlarge(l2,l)"}
    assert grown == {(1, 36, 64)}

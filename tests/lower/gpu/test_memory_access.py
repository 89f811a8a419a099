"""memory_access: the static coalescing and bank-conflict analysis of a kernel's first warp."""

import pytest

import tilegraph as tg
from tilegraph import dtype as dt
from tilegraph import workloads
from tilegraph.loop.ir import Allocate, Buffer, BufferStore, For, Func
from tilegraph.lower.gpu.memory_access import analyze, summary
from tilegraph.lower.gpu.pipeline import lower_gpu
from tilegraph.schedule.defaults import flat_gpu_schedule
from tilegraph.schedule.gpu_rows import row_gpu_schedule
from tilegraph.schedule.schedule import Schedule
from tilegraph.te.expr import BufferLoad, Const, Var
from tilegraph.tune.gensor.gpu_state import GpuState, gpu_schedule

CUDA = tg.Target("cuda", device_name="NVIDIA A100", compute_capability="8.0")


def _kernel(index_of_tx, scope="global", size=2048):
    """for tx in range(32) threadIdx.x: buf[index(tx)] = a[tx]."""
    a = Buffer("a", (32,), dt.float32)
    buf = Buffer("buf", (size,), dt.float32, scope)
    out = Buffer("out", (32,), dt.float32)
    tx = Var("tx")
    store = BufferStore(buf, (index_of_tx(tx),), BufferLoad(a, (tx,)))
    body = For(tx, 32, "threadIdx.x", store if scope == "global" else Allocate(buf, store))
    return Func("f", (a, out), For(Var("bx"), 1, "blockIdx.x", body))


@pytest.mark.parametrize("index,sectors,coalesced", [
    (lambda tx: tx, 4, True),                       # 32 lanes x 4 B = 4 sectors of 32 B
    (lambda tx: tx + Const(3), 5, False),           # misaligned: one sector more
    (lambda tx: tx * Const(2), 8, False),           # stride 2 touches twice the sectors
    (lambda tx: tx * Const(64), 32, False),         # a sector per lane
    (lambda tx: Const(7), 1, True),                 # one address for every lane: a broadcast
])
def test_global_coalescing(index, sectors, coalesced):
    (store,) = [r for r in analyze(_kernel(index)) if r.buffer == "buf"]
    assert (store.sectors, store.coalesced) == (sectors, coalesced)


@pytest.mark.parametrize("index,ways", [
    (lambda tx: tx, 1), (lambda tx: tx * Const(2), 2), (lambda tx: tx * Const(32), 32),
    (lambda tx: tx * Const(33), 1),                 # a padded row per lane: no conflict
    (lambda tx: Const(5), 1),                       # broadcast
])
def test_shared_bank_conflicts(index, ways):
    (store,) = [r for r in analyze(_kernel(index, "shared")) if r.buffer == "buf"]
    assert store.conflict_ways == ways and store.conflict_free is (ways == 1)


def test_row_kernels_coalesce_where_one_thread_per_row_does_not():
    wl = workloads.from_spec("softmax:64,768")
    flat = Schedule(wl)
    for name in flat.block_names():
        flat_gpu_schedule(flat, name)
    naive = analyze(lower_gpu(flat.func, CUDA).kernels[0])
    assert any(r.buffer == "x" and not r.coalesced and r.lane_stride == 768 for r in naive)
    rows = analyze(lower_gpu(row_gpu_schedule(wl, 4).func, CUDA).kernels[0])
    assert all(r.coalesced for r in rows if r.scope == "global")
    assert "UNCOALESCED" in summary(naive) and "UNCOALESCED" not in summary(rows)


def test_gemm_cooperative_fetch_is_coalesced_and_padding_removes_conflicts():
    wl = workloads.from_spec("matmul:64,64,64")
    for pad in (0, 1):
        state = GpuState(block=(32, 32), thread=(4, 4), vthread=(1, 1), rstep=(8,), pad=pad, shared=True)
        reports = analyze(lower_gpu(gpu_schedule(wl, state).func, CUDA).kernels[0])
        fetch = [r for r in reports if r.scope == "global" and r.kind == "load"]
        assert fetch and all(r.coalesced for r in fetch)
        reads = [r.conflict_ways for r in reports if r.scope == "shared" and r.kind == "load"]
        writes = [r.conflict_ways for r in reports if r.scope == "shared" and r.kind == "store"]
        if pad == 0:  # thread tiles of 4 contiguous elements: lanes 4 words apart share banks
            assert max(reads) == 4 and set(writes) == {1}, "the float4 tile copies are conflict-free"
        else:  # one word of padding per row spreads the rows over the banks; the copies stay scalar
            assert max(reads) == 1 and max(writes) == 2

"""cooperative_fetch: the threads of a block copy a shared tile together."""

from tests.lower.gpu.stages import means_matmul, stages
from tilegraph.loop.ir import Block
from tilegraph.loop.visit import walk_stmts
from tilegraph.te.visit import free_vars


def _copy_vars(func, name="a_shared"):
    block = next(x for x in walk_stmts(func.body) if isinstance(x, Block) and x.name == name)
    return {v.name for e in block.bindings for v in free_vars(e)}


def test_the_copy_is_spread_over_every_thread_of_the_block():
    wl, s = stages()
    before, after = _copy_vars(s["compact_gpu_buffers"]), _copy_vars(s["cooperative_fetch"])
    assert "j_1" not in before, "before: threads with the same threadIdx.y copy the same rows"
    assert {"i_1", "j_1"} <= after and ({"ax0_2_coop", "ax0_2_vec"} & after), "after: every thread copies its share"
    assert means_matmul(wl, s["cooperative_fetch"])

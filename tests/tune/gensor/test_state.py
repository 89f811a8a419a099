from dataclasses import replace

from tilegraph import te
from tilegraph.te.dims import dim
from tilegraph.tune.gensor.state import EtirState, IterSpace, canonical, footprint_bytes, minimal_state

from .conftest import matmul_workload


def test_iter_space_of_matmul():
    space = IterSpace.from_workload(matmul_workload(64, 48, 40))
    assert space.anchor == "C"
    assert space.extents == (64, 48, 40) and space.num_spatial == 2
    assert space.kind == "reuse" and space.vec_axis == 1
    a, b = space.operands
    assert a.axes_used() == {0, 2} and b.axes_used() == {1, 2}
    assert b.contiguous_axis() == 1 and a.contiguous_axis() == 2
    assert footprint_bytes(a, (4, 16, 8)) == 4 * 8 * 4


def test_equal_states_hash_equal_and_dedup():
    space = IterSpace.from_workload(matmul_workload(64, 48, 40))
    s1 = canonical(space, EtirState((4, 16), (8, 16), (16, 48), (8,), 1, 16))
    # l1 beyond one covering tile and an unaligned l2 normalise to the same program
    s2 = canonical(space, EtirState((4, 16), (8, 16), (15, 40), (8,), 1, 16))
    assert s1 == s2 and hash(s1) == hash(s2)
    assert len({s1, s2, replace(s1, unroll=1)}) == 1
    assert s1 != replace(s1, rstep=(16,))


def test_minimal_state_and_roundtrip():
    space = IterSpace.from_workload(matmul_workload(64, 48, 40))
    s = minimal_state(space, 16)
    assert s.reg == (1, 16) and s.l1 == s.reg and s.l2 == s.reg and s.interleave == 1
    assert EtirState.from_dict(s.to_dict()) == s
    assert s.accumulators == 1


def test_canonical_keeps_levels_nested():
    space = IterSpace.from_workload(matmul_workload(64, 48, 40))
    s = canonical(space, EtirState((6, 32), (8, 16), (8, 16), (64,), 1, 16, unroll=16))
    for r, m1, m2 in zip(s.reg, s.l1, s.l2):
        assert m1 % r == 0 and m2 % m1 == 0
    assert s.reg[1] % 16 == 0 and s.rstep == (40,) and s.unroll == 1  # 16 does not divide 40


def test_a_group_index_counts_the_groups_a_tile_touches():
    """Grouped convolution reads x[..., (co // 32) * 16 + rc]: a tile of 128 output channels
    touches 4 groups of input channels, not a span of 49 (nor, as before, all 64). Counting the
    whole dimension made the model pick one-pixel tiles of 128 channels (GRP-1: 0.36x torch, and
    1.06x with tiles of 7 pixels)."""
    from tilegraph import workloads
    from tilegraph.tune.gensor.state import IterSpace, footprint_bytes, touched_extent

    space = IterSpace.from_workload(workloads.get("GRP-1"))
    x = next(o for o in space.operands if o.name == "x")
    assert x.dims[3] == ((3, 16, 32), (6, 1))  # (axis co, coefficient 16, divisor 32) + rc
    tiles = (1, 1, 1, 128, 1, 1, 1)
    assert touched_extent(x, 3, tiles) == 4
    assert touched_extent(x, 3, (1, 1, 1, 32, 1, 1, 16)) == 16  # one group, its 16 channels
    assert footprint_bytes(x, tiles) == 4 * 4
    assert x.contiguous_axis() is None and 3 in x.axes_used()


def _conv(channels, out_channels, size=7, groups=1, constants=(1,)):
    import tilegraph as tg
    from tilegraph import ops, te

    x = te.placeholder((1, size, size, channels), name="x")
    w = te.placeholder((1, 1, channels // groups, out_channels) if groups == 1 else (3, 3, 1, channels), name="w")
    out = ops.conv2d_nhwc(x, w) if groups == 1 else ops.conv2d_nhwc(x, w, padding=1, groups=groups)
    return tg.Workload([x, w], [out], constants=constants)


def _wide(space, lanes=16):
    reg = tuple(lanes * 2 if a == space.vec_axis else 1 for a in range(space.num_spatial))
    return canonical(space, EtirState(reg, reg, reg, space.reduce, space.vec_axis, lanes))


def test_a_weight_with_rows_a_kib_or_more_apart_is_always_packed():
    """A model's weight of 512 output channels (2 KiB rows) is packed in every state that can pack
    it: the compiled model packs it once; read in place, each reduction step reads a few lines of a
    new row (1.57 against 0.38 ms on ResNet-50's 7x7x2048 -> 512 convolution)."""
    from tilegraph.tune.gensor.state import always_packed

    space = IterSpace.from_workload(_conv(2048, 512))
    assert space.constants == ("w",) and always_packed(space) == ("w",)
    assert _wide(space).pack == ("w",)


def test_short_rows_depthwise_weights_and_inputs_keep_the_walks_choice():
    from tilegraph.tune.gensor.state import always_packed

    short = IterSpace.from_workload(_conv(16, 96))  # 384-byte rows: faster read in place
    assert always_packed(short) == () and _wide(short).pack == ()
    depthwise = IterSpace.from_workload(_conv(960, 960, groups=960))  # no broadcast operand
    assert always_packed(depthwise) == ()
    not_constant = IterSpace.from_workload(_conv(2048, 512, constants=()))
    assert not_constant.constants == () and _wide(not_constant).pack == ()


def test_a_gemms_weights_keep_the_walks_choice():
    """GEMMs are left to the walk: forcing GPT-2's LM head weights into panels picked other tiles."""
    import tilegraph as tg
    from tilegraph import ops, te
    from tilegraph.tune.gensor.state import always_packed

    a, b = te.placeholder((128, 768), name="a"), te.placeholder((768, 1024), name="b")
    space = IterSpace.from_workload(tg.Workload([a, b], [ops.matmul(a, b)], constants=(1,)))
    assert space.constants == ("b",) and always_packed(space) == ()


def _gemv(rows, columns, constants=(1,), transposed=False, m=1):
    import tilegraph as tg
    from tilegraph import ops, te

    a = te.placeholder((m, rows), name="a")
    b = te.placeholder((columns, rows) if transposed else (rows, columns), name="b")
    out = ops.matmul(a, b, transpose_b=True) if transposed else ops.matmul(a, b)
    return IterSpace.from_workload(tg.Workload([a, b], [out], constants=constants))


def test_a_matrix_vector_products_constant_weights_are_always_packed():
    """One row in (a decoder's step): the weights are read once and never reused, so no walk packs
    them for reuse; packed once when the model is compiled, each task's panel is one stream
    (GPT-2's decode step 23.5 -> 17.5 ms on the Xeon)."""
    from tilegraph.tune.gensor.state import always_packed, packable_operands

    for space in (_gemv(3072, 768), _gemv(768, 2304, transposed=True)):
        assert space.constants == ("b",) and always_packed(space) == ("b",) == packable_operands(space)
        assert _wide(space).pack == ("b",)


def test_short_rows_inputs_and_reused_weights_keep_the_walks_choice_in_a_product():
    from tilegraph.tune.gensor.state import always_packed, packable_operands

    assert always_packed(_gemv(3072, 128)) == ()  # 512-byte rows: a few lines a row read anyway
    not_constant = _gemv(3072, 768, constants=())
    assert always_packed(not_constant) == () == packable_operands(not_constant)  # packing would run every call
    reused = _gemv(3072, 768, m=8)  # eight rows reuse the weights: the walk decides (as GEMMs)
    assert packable_operands(reused) == ("b",) and always_packed(reused) == ()


def test_a_buckets_space_has_the_buckets_extents():
    """A bucket's loops run to its upper bound (Workload.at): Gensor tiles those rows, not the
    range's storage (GPT-2's LM head at 16 tokens had been tiled as 7 x 14 rows of 95)."""
    m = dim("m", 95)
    a, b = te.placeholder((m, 40), name="A"), te.placeholder((40, 48), name="B")
    r = te.reduce_axis(40, "r")
    c = te.compute((m, 48), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    wl = te.Workload([a, b], [c])
    assert IterSpace.from_workload(wl).extents == (95, 48, 40)
    assert IterSpace.from_workload(wl.at({"m": 16})).extents == (16, 48, 40)
    assert wl.at({"m": 16}).flops() == 2 * 16 * 48 * 40


def test_a_small_batch_range_is_tiled_for_one_image():
    """One kernel serves a batch of 1..8 (a dim the default buckets leave whole): Gensor tiles the
    batch axis at its lower bound, so a call of one image runs a batch-1 schedule (at 8 the conv's
    register tile had held 2 images and its parallel loop run over the batch). Its loop stays whole
    and serial, inside the parallel loop. A wide range (its buckets tuned at their own sizes) and a
    bucket keep their extents."""
    from tilegraph import ops
    from tilegraph.loop.printer import func_str
    from tilegraph.tune.gensor.to_trace import state_to_schedule

    def conv(upper):
        x = te.placeholder((dim("batch", upper), 14, 14, 32), name="x")
        w = te.placeholder((3, 3, 32, 32), name="w")
        return te.Workload([x, w], [ops.conv2d_nhwc(x, w, 1, 1)])

    assert IterSpace.from_workload(conv(8)).spatial == (1, 14, 14, 32)
    assert IterSpace.from_workload(conv(64)).spatial == (64, 14, 14, 32)
    assert IterSpace.from_workload(conv(8).at({"batch": 4})).spatial == (4, 14, 14, 32)
    space = IterSpace.from_workload(conv(8))
    state = canonical(space, replace(minimal_state(space, 16), l2=(1, 7, 14, 32), parallel=2))
    text = func_str(state_to_schedule(conv(8), space, state).func)
    assert text.index("for h_0 in range(2) parallel") < text.index("for n in range(8)")


def test_the_rows_of_a_batch_of_sequences_are_tiled_for_one_sequence():
    """M = batch*seq rows (a batch of 1..8 merged into the rows of a projection): tiled for one
    sequence, the loop split into 8 runs of 128 rows, each tiled as the state says, the runs
    inside the parallel loop (a kernel tiled for 1024 rows had run a batch of 1 on one core)."""
    from tilegraph import ops
    from tilegraph.loop.printer import func_str
    from tilegraph.tune.gensor.to_trace import state_to_schedule

    x = te.placeholder((dim("batch", 8) * dim("seq", 128), 64), name="x")
    w = te.placeholder((64, 96), name="w")
    wl = te.Workload([x, w], [ops.matmul(x, w)])
    space = IterSpace.from_workload(wl)
    assert space.spatial == (128, 96)
    state = canonical(space, replace(minimal_state(space, 16), l2=(128, 48), parallel=1))
    text = func_str(state_to_schedule(wl, space, state).func)
    assert text.index("parallel") < text.index("for i_0 in range(8)")

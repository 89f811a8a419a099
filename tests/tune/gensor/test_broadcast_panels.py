import numpy as np
import pytest

import tilegraph as tg
from tilegraph import ops, te
from tilegraph.testing import random_inputs, reference_outputs
from tilegraph.tune.gensor.broadcast_panels import aliasing_broadcast_operands, tile_rows_layout
from tilegraph.tune.gensor.state import EtirState, IterSpace, canonical
from tilegraph.tune.gensor.to_trace import state_to_schedule


def _conv1x1(size, channels, out_channels):
    x = te.placeholder((1, size, size, channels), name="x")
    w = te.placeholder((1, 1, channels, out_channels), name="w")
    return tg.Workload([x, w], [ops.conv2d_nhwc(x, w)])


def _state(space, reg_h, reg_w, lanes=8):
    co = space.spatial[3]
    return canonical(space, EtirState((1, reg_h, reg_w, lanes), (1, reg_h, reg_w, lanes), (1, reg_h, reg_w, co),
                                      (space.extents[-1],), 3, lanes, parallel=2, pack=("w",)))


def test_pixels_4_kib_apart_are_interleaved_per_tile():
    """1024 channels put every pixel 4 KiB after the previous: the tile's 8 rows share one L1 set,
    so x is copied as [n, h // 2, w // 4, c, h % 2, w % 4]."""
    space = IterSpace.from_workload(_conv1x1(8, 1024, 16))
    state = _state(space, 2, 4)
    (x,) = aliasing_broadcast_operands(space, state)
    assert x.name == "x"
    assert tile_rows_layout(space, state, x) == {"split": [[1, 2], [2, 4]], "order": [0, 1, 3, 5, 2, 4]}


@pytest.mark.parametrize("channels, reg_w", [(256, 8), (1024, 4)])
def test_rows_spread_over_sets_are_read_in_place(channels, reg_w):
    """256 channels (1 KiB) spread 8 pixels over 4 sets; 4 rows in one set still fit its ways."""
    space = IterSpace.from_workload(_conv1x1(8, channels, 16))
    assert aliasing_broadcast_operands(space, _state(space, 1, reg_w)) == []


def test_tiles_that_do_not_divide_or_window_the_input_keep_its_layout():
    space = IterSpace.from_workload(_conv1x1(7, 1024, 16))
    x = next(o for o in space.operands if o.name == "x")
    assert tile_rows_layout(space, _state(space, 2, 7), x) is None  # 2 does not divide 7
    xs = te.placeholder((1, 9, 9, 1024), name="x")
    ws = te.placeholder((3, 3, 1024, 16), name="w")
    space = IterSpace.from_workload(tg.Workload([xs, ws], [ops.conv2d_nhwc(xs, ws)]))
    x = next(o for o in space.operands if o.name == "x")
    assert tile_rows_layout(space, _state(space, 1, 7), x) is None  # x[h + rh, w + rw, c]


def test_the_copy_runs_over_pixels_in_parallel_and_reads_each_row_along_its_channels():
    """The parallel loop covers the tile's outer pixel parts only, and the channel loop is
    innermost: fused into the parallel loop, the channel index was split back with a floordiv and
    floormod per element (ResNet-50's 1x1 convolution over 512 channels spent over half its time
    in that copy)."""
    from tilegraph.schedule.primitives.common import get_loop

    wl = _conv1x1(8, 1024, 16)
    space = IterSpace.from_workload(wl)
    sch = state_to_schedule(wl, space, _state(space, 2, 4))
    loops = [get_loop(sch.func, name) for name in sch.loops("x_global")]
    assert [(loop.extent, loop.kind) for loop in loops] == [(4 * 2, "parallel"), (2, "serial"), (4, "serial"),
                                                           (1024, "serial")]


@pytest.mark.needs_cc
def test_the_interleaved_copy_computes_the_convolution():
    """Interpreter and C (outputs poisoned) against float64 numpy, at an odd output-channel count."""
    wl = _conv1x1(6, 1024, 24)
    space = IterSpace.from_workload(wl)
    sch = state_to_schedule(wl, space, _state(space, 2, 3))
    assert "x_global" in sch.block_names()
    args = random_inputs(wl, seed=4)
    (ref,) = reference_outputs(wl, args)
    np.testing.assert_allclose(tg.interpret(sch, *args), ref, rtol=1e-4, atol=1e-4)
    kernel = tg.build(sch, "cpu")
    out = np.full(ref.shape, np.nan, dtype=np.float32)
    kernel(*args, out=out, num_threads=2)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_the_model_charges_aliased_rows_read_in_place(monkeypatch):
    """A 2 x 7 tile over 7 x 7 pixels of 2048 channels cannot be interleaved (2 does not divide 7):
    its 14 rows miss L1 at every step, which the model adds; 7 x 2 over 14 x 14 pixels is copied
    instead, for one pass over the input."""
    from tilegraph.tune.gensor.broadcast_panels import aliased_rows
    from tilegraph.tune.gensor.perf_model import PerfModel
    from tilegraph.tune.hardware import hardware_model

    hw = hardware_model(measure=False)
    space = IterSpace.from_workload(_conv1x1(7, 2048, 64))
    ragged = _state(space, 2, 7)
    x = next(o for o in space.operands if o.name == "x")
    assert aliased_rows(space, ragged, x) == 14 and tile_rows_layout(space, ragged, x) is None
    model = PerfModel(space, hw)
    plain = model.predict(ragged)
    import importlib

    perf_model = importlib.import_module("tilegraph.tune.gensor.perf_model")
    monkeypatch.setattr(perf_model, "ALIASED_ROW_CYCLES", 0.0)
    assert PerfModel(space, hw).predict(ragged) < plain

"""The schedules of Winograd's two transforms (ops/winograd.py): the points of a tile unrolled, so
each transformed value is its few nonzero terms (the selects between points fold away), and the
channels a vector.

    sch = winograd_schedule(workload, target)     # None unless the workload is one of the transforms

input (V[a, b, t, c] = (Bᵀ d B)[a, b]):            output (Y[n, y, z, k] = (Aᵀ M A)[y % m, z % m]):
    for t (parallel):                                  for n, y // m, z // m (fused, parallel):
      for c / lanes:                                     for k / lanes:
        for a, b (unrolled):                               for y % m, z % m (unrolled):
          for c % lanes (vector): V = Σ terms of d           for k % lanes (vector): Y = Σ terms of M

Unrolling is what makes the transforms cheap: left as loops, every point's select evaluates each
case's terms (vector selects compute both sides), and the C for F(4x4) runs to megabytes. Both
kernels read each input element a few times and write each output once. Built from public
primitives, so the trace replays like any schedule; the same one for every target (the vector
loop takes the target's lanes).
"""

from __future__ import annotations

from tilegraph.errors import TilegraphError
from tilegraph.loop.visit import find_block
from tilegraph.schedule.defaults import inline_producers, is_padding, schedule_block
from tilegraph.schedule.schedule import Schedule
from tilegraph.target import Target
from tilegraph.te.workload import Workload

INPUT_TAG, OUTPUT_TAG = "winograd_input_nhwc", "winograd_output_nhwc"


def winograd_tag(workload: Workload) -> str | None:
    """The transform the workload computes (its output's op), or None."""
    tags = {t.op.tag for t in workload.outputs}
    found = tags & {INPUT_TAG, OUTPUT_TAG}
    return next(iter(found)) if len(found) == 1 and len(workload.outputs) == 1 else None


def _vector_factor(extent: int, lanes: int) -> int:
    """The largest vector length dividing the channel count (no tail), 1 when none does."""
    return next((f for f in (lanes, lanes // 2, lanes // 4) if f >= 4 and extent % f == 0), 1)


def winograd_schedule(workload: Workload, target: Target) -> Schedule | None:
    tag = winograd_tag(workload)
    if tag is None:
        return None
    sch = Schedule(workload)
    name = workload.outputs[0].name
    # the input's zero-bordered copy stays a loop nest of its own (a plain copy): inlined, every
    # read of a window would carry the border's guards
    padding = {b for b in sch.block_names()
               if tag == INPUT_TAG and b != name and is_padding(find_block(sch.func, b))}
    inline_producers(sch, "cheap", keep=padding)
    try:
        for block in padding & set(sch.block_names()):
            schedule_block(sch, block, target)
        if tag == INPUT_TAG:
            _input(sch, name, target)
        else:
            _output(sch, name, target)
    except TilegraphError:
        return None
    return sch


def _split_channels(sch: Schedule, loop: str, extent: int, target: Target) -> tuple[str, str | None]:
    factor = _vector_factor(extent, target.lanes("float32"))
    if factor == 1:
        return loop, None
    outer, inner = sch.split(loop, factor)[:2]
    return outer, inner


def _input(sch: Schedule, name: str, target: Target) -> None:
    a, b, t, c = sch.loops(name)
    channels = find_block(sch.func, name).iter_vars[3].extent
    c_outer, c_inner = _split_channels(sch, c, channels, target)
    sch.reorder(t, c_outer, a, b, *([c_inner] if c_inner else []))
    sch.parallel(t)
    sch.unroll(a)
    sch.unroll(b)
    if c_inner:
        sch.vectorize(c_inner)


def _output(sch: Schedule, name: str, target: Target) -> None:
    block = find_block(sch.func, name)
    m = _tile_size(sch)
    n, y, z, k = sch.loops(name)
    channels = block.iter_vars[3].extent
    y_outer, y_inner = sch.split(y, m)
    z_outer, z_inner = sch.split(z, m)
    k_outer, k_inner = _split_channels(sch, k, channels, target)
    sch.reorder(n, y_outer, z_outer, k_outer, y_inner, z_inner, *([k_inner] if k_inner else []))
    sch.parallel(sch.fuse(n, y_outer, z_outer))
    sch.unroll(y_inner)
    sch.unroll(z_inner)
    if k_inner:
        sch.vectorize(k_inner)


def _tile_size(sch: Schedule) -> int:
    params = dict(dict(sch.workload.outputs[0].op.attrs).get("ref_params", ()))
    return int(params.get("m", 4))

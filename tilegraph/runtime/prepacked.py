"""A CPU kernel that packs a constant input at every call, built as two kernels: the packing, run
once per value of the input, and the rest (lower/prepack.py splits the lowered function). The
compiled model runs the packing when it compiles (graph/prepack.py); tuning runs it once per
check, before the timing (tune/builder.py, tune/runner.py), so a candidate is timed as the model
runs it.

    split = split_constant_packing(lowered, lowered.params[1].name, n_inputs=2)
    pack, compute = prepacked_kernels(inputs, outputs, 1, split, target)
    packed = pack(weight, out=np.zeros(split.packed.shape, split.packed.dtype.array_numpy))
    compute(x, packed, out=y)      # what kernel(x, weight, out=y) computed
"""

from __future__ import annotations

from collections.abc import Sequence

from tilegraph.loop.ir import Buffer, Func
from tilegraph.lower.passes import prefetch_packed_blocks
from tilegraph.lower.prepack import PackSplit
from tilegraph.runtime.backends import compile_lowered_cpu
from tilegraph.runtime.kernel import Kernel
from tilegraph.target import Target
from tilegraph.te.dims import Dim


def compiled_cpu_kernel(lowered: Func, inputs: Sequence[Buffer], outputs: Sequence[Buffer], target: Target,
                        dims: Sequence[Dim] = (), dims_limit: dict[str, int] | None = None) -> Kernel:
    """A lowered function printed, compiled (backends.compile_lowered_cpu) and loaded as a Kernel
    taking `inputs` and `outputs` (the last input the values of `dims`, where it has some)."""
    lib, entry, code = compile_lowered_cpu(lowered, target)
    return Kernel(lib, entry, list(inputs), list(outputs), code, target, lowered, dims=dims, dims_limit=dims_limit)


def prepacked_kernels(inputs: Sequence[Buffer], outputs: Sequence[Buffer], position: int, split: PackSplit,
                      target: Target, dims: Sequence[Dim] = (),
                      dims_limit: dict[str, int] | None = None) -> tuple[Kernel, Kernel]:
    """(packing kernel: input `position` -> the packed copy, compute kernel: `inputs` with the packed
    copy in that position -> `outputs`, prefetching the packed copy's next block as it computes on
    one: lower/passes/prefetch_packed_blocks.py). Raises what printing or compiling raises."""
    pack = compiled_cpu_kernel(split.pack, [inputs[position]], [split.packed], target)
    compute_inputs = [split.packed if j == position else b for j, b in enumerate(inputs)]
    compute = prefetch_packed_blocks.run(split.compute, target, split.packed.name)
    return pack, compiled_cpu_kernel(compute, compute_inputs, outputs, target, dims, dims_limit)


__all__ = ["compiled_cpu_kernel", "prepacked_kernels"]

"""group_int8_products: four register updates of a uint8 x int8 GEMM micro-kernel that add the
products of neighbouring elements of A become one AVX512_VNNI dot-product step (vpdpbusd: 64
multiply-adds per instruction, against 16 for an int32 multiply and add; 8-lane accumulators, a
tile's 8-column tail, on a ymm register); on an x86 target with
AVX2 alone the same step on 8 lanes, computed exactly from vpmaddwd's 16-bit pairs (codegen/int8.py;
target.int8_dot_lanes). Anywhere else the IR is left as it is.

    acc[2] = acc[2] + broadcast(int32(A[i*K + k]), 16) * int32(B[ramp(k*N + j, 1, 16)])
    ...                                            (other registers in between)
    acc[2] = acc[2] + broadcast(int32(A[i*K + k + 3]), 16) * int32(B[ramp((k+3)*N + j, 1, 16)])
==>
    acc[2] = u8s8_dot4(acc[2], A[i*K + k], .., A[i*K + k + 3], B[ramp(k*N + j, 1, 16)], .., B[ramp((k+3)*N + j, 1, 16)])

u8s8_dot4(acc, a0..a3, b0..b3) is `acc + a0*b0 + a1*b1 + a2*b2 + a3*b3` per lane in int32,
wrapping past 2**31 (the interpreter's meaning). The instruction computes exactly that (each product
and the sum of four fit in 18 bits; the accumulation wraps, vpdpbusd does not saturate), so
compiled kernels agree with the interpreter bit for bit. A must be uint8 (activations shifted by
128 when quantized signed: graph/frontends/onnx_qdq.py) and B int8.

B read from a copy packed in quads (target.dot_group 4, AVX512_VNNI) or pairs (2, AVX2) groups the
same way, and the step loads each lane's bytes at once (tgh_u8s8_dot4q / dot4p in codegen/int8.py):
on VNNI the interleaving of four rows per step (vpermb) is gone, on AVX2 the unpacking of four.

The grouping and the unrolling of the reduction loop by four are lower/passes/dot_groups.py's.
"""

from __future__ import annotations

from tilegraph import dtype as dt
from tilegraph.loop.ir import Func
from tilegraph.lower.passes import dot_groups
from tilegraph.lower.passes.common import all_buffers

DOT4 = "u8s8_dot4"
LANES = (8, 16)  # int32 accumulators: a ymm register (AVX2's vpmaddwd pairs), a zmm register (vpdpbusd)


def pattern(lanes: int, grouped: int = 0) -> dot_groups.DotPattern:
    """The updates a step of `lanes` takes: B read as rows, or from a copy packed in K groups of
    `grouped` (target.dot_group: 4, vpdpbusd's quads; 2, the pairs of AVX2's vpmaddwd)."""
    strides = (1, grouped) if grouped > 1 else (1,)
    return dot_groups.DotPattern(DOT4, 4, lanes, dt.int32.with_lanes(lanes), (dt.uint8,), (dt.int8,), dt.int32,
                                 strides)


def run(func: Func, target: object) -> Func:
    from tilegraph.target import dot_group, int8_dot_lanes

    lanes = int8_dot_lanes(target)
    if not lanes or not any(b.dtype == dt.int8 for b in all_buffers(func)):
        return func
    grouped = dot_group(target, "int8")
    func = dot_groups.run(func, pattern(lanes, grouped))
    return dot_groups.run(func, pattern(8, grouped)) if lanes == 16 else func  # 8-column tails: a ymm


__all__ = ["DOT4", "run"]

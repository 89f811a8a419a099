"""pair_bf16_products: two register updates of a bfloat16 GEMM micro-kernel that add the products of
neighbouring elements of A become one AVX512_BF16 dot-product step (vdpbf16ps: 32 multiply-adds
per instruction, against 16 for a float32 FMA). Only for targets that have the instruction
(target.has_bf16_dot); anywhere else the IR is left as it is.

    acc[3] = acc[3] + broadcast(float32(A[i*K + k]), 16) * float32(B[ramp(k*N + j, 1, 16)])
    acc[0] = ...                                   (other registers in between)
    acc[3] = acc[3] + broadcast(float32(A[i*K + k + 1]), 16) * float32(B[ramp((k+1)*N + j, 1, 16)])
==>
    acc[3] = bf16_dot2(acc[3], A[i*K + k], A[i*K + k + 1], B[ramp(k*N + j, 1, 16)], B[ramp((k+1)*N + j, 1, 16)])
    acc[0] = ...

bf16_dot2(acc, a0, a1, b0, b1) is `acc + a0*b0 + a1*b1` per lane (the interpreter's meaning: the
products are exact in float32, the two additions rounded in that order). The instruction rounds as
its vendor implements it: Intel documents the odd product added first, subnormal inputs and
results flushed to zero; on AMD Zen 4 about 1% of random inputs differ from either order in the
last bit, subnormal products flush, and two overflowing products of opposite sign give the sign
of their exact sum, not NaN (measured against the emulation). Results therefore move within
float32 rounding of the accumulation, as FMA contraction already moves them; tests compare with
tolerances, never bit for bit.

The second update moves up to the first, and a serial reduction loop of such updates is first
unrolled by two so its iterations pair up (lower/passes/dot_groups.py, the analysis shared with
group_int8_products):

    for k in range(37):  <updates at k>   ==>   for k_g2 in range(18): <updates at 2*k_g2, 2*k_g2 + 1>
                                                <updates at 36>
"""

from __future__ import annotations

from tilegraph import dtype as dt
from tilegraph.loop.ir import Func
from tilegraph.lower.passes import dot_groups
from tilegraph.lower.passes.common import all_buffers

DOT2 = "bf16_dot2"
LANES = 16  # vdpbf16ps on a zmm register: 16 float32 accumulators
PATTERN = dot_groups.DotPattern(DOT2, 2, LANES, dt.float32.with_lanes(LANES), (dt.bfloat16,), (dt.bfloat16,),
                                dt.float32, (1, 2))  # B as rows, or packed in pairs (target.dot_group)


def run(func: Func, target: object) -> Func:
    from tilegraph.target import has_bf16_dot

    if not has_bf16_dot(target) or not any(b.dtype == dt.bfloat16 for b in all_buffers(func)):
        return func
    return dot_groups.run(func, PATTERN)


__all__ = ["DOT2", "run"]

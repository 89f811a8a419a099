"""bfloat16 in C: a storage type (uint16_t bits in memory) whose values are floats.

The printers keep a bfloat16 value in a `float` (a vector of them in a float vector) holding a
number bfloat16 represents exactly; loads widen the bits, stores narrow them, and every operation
whose IR dtype is bfloat16 is computed in float and rounded back (tgh_round_bf16), which is what
the interpreter does (tilegraph.dtype.bfloat16_bits defines the rounding):

    Y: bfloat16[n] = X[i] * c        ->  b_Y[i] = tgh_bf16_bits(tgh_round_bf16(tgh_bf16_value(b_X[i]) * c));
    Y[ramp(b, 1, 16)] = ...          ->  tgh_bf16_store_v16sf(b_Y + b, ...);

GCC 12's __bf16 has no arithmetic or conversions, hence the bit manipulation; on x86 the vector
forms compile to vpmovzxwd/vpslld (loads) and a few integer ops per 16 lanes (stores).
"""

from __future__ import annotations

from tilegraph.codegen.writer import CodeWriter

STORAGE = "uint16_t"  # the C type of a bfloat16 buffer's elements

_SCALAR = """QUALIFIER float tgh_bf16_value(uint16_t h) {
  union { uint32_t u; float f; } v; v.u = (uint32_t)h << 16; return v.f;
}
QUALIFIER uint16_t tgh_bf16_bits(float x) {
  union { float f; uint32_t u; } v; v.f = x;
  uint32_t rounded = (v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16, nan = ((v.u >> 16) & 0x8000u) | 0x7fc0u;
  return (uint16_t)((v.u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);  /* a select: loops of it vectorise */
}
QUALIFIER float tgh_round_bf16(float x) { return tgh_bf16_value(tgh_bf16_bits(x)); }"""

# VF: float vector, VI: int32 vector, VU: uint32 vector, VH: uint16 vector (unaligned)
_VECTOR = """typedef uint32_t VU __attribute__((vector_size(LANES * 4)));
typedef uint16_t VH __attribute__((vector_size(LANES * 2), aligned(2)));
static inline VF tgh_bf16_load_VF(const uint16_t* p) {
  return (VF)(__builtin_convertvector(*(const VH*)p, VU) << 16);
}
static inline VU tgh_bf16_bits_VF(VF x) {
  VU u = (VU)x;
  VI nan = (VI)((u & 0x7fffffffu) > 0x7f800000u);
  VU r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return (VU)tgh_blend_VI(nan, (VI)(((u >> 16) & 0x8000u) | 0x7fc0u), (VI)r);
}
static inline void tgh_bf16_store_VF(uint16_t* p, VF x) {
  *(VH*)p = __builtin_convertvector(tgh_bf16_bits_VF(x), VH);
}
static inline VF tgh_round_bf16_VF(VF x) { return (VF)(tgh_bf16_bits_VF(x) << 16); }"""


# acc + a0*b0 + a1*b1 on 16 lanes: AVX512_BF16's vdpbf16ps where the compiler targets it (B's two
# rows interleaved into pairs by one vpermw, A's pair broadcast as one 32-bit word), else float math
_DOT2 = """#if defined(__AVX512BF16__)
#include <immintrin.h>
static inline v16sf tgh_bf16_dot2_v16sf(v16sf acc, uint16_t a0, uint16_t a1, const uint16_t* b0, const uint16_t* b1) {
  const __m512i pairs = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                         23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  __m512i rows = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i*)b0)),
                                    _mm256_loadu_si256((const __m256i*)b1), 1);
  __m512i b = _mm512_permutexvar_epi16(pairs, rows);
  __m512i a = _mm512_set1_epi32((int32_t)((uint32_t)a0 | ((uint32_t)a1 << 16)));
  return (v16sf)_mm512_dpbf16_ps((__m512)acc, (__m512bh)b, (__m512bh)a);
}
#else
static inline v16sf tgh_bf16_dot2_v16sf(v16sf acc, uint16_t a0, uint16_t a1, const uint16_t* b0, const uint16_t* b1) {
  return (acc + tgh_splat_v16sf(tgh_bf16_value(a0)) * tgh_bf16_load_v16sf(b0))
         + tgh_splat_v16sf(tgh_bf16_value(a1)) * tgh_bf16_load_v16sf(b1);
}
#endif"""


# The same step reading B from a copy packed in pairs (tune/gensor/to_trace.py packed_layout): each
# lane's (b0, b1) together, vdpbf16ps's operand as it is (one load); elsewhere in float, as above.
_DOT2_PAIRS = """#if defined(__AVX512BF16__)
#include <immintrin.h>
static inline v16sf tgh_bf16_dot2p_v16sf(v16sf acc, uint16_t a0, uint16_t a1, const uint16_t* b) {
  __m512i a = _mm512_set1_epi32((int32_t)((uint32_t)a0 | ((uint32_t)a1 << 16)));
  return (v16sf)_mm512_dpbf16_ps((__m512)acc, (__m512bh)_mm512_loadu_si512((const void*)b), (__m512bh)a);
}
#else
static inline v16sf tgh_bf16_dot2p_v16sf(v16sf acc, uint16_t a0, uint16_t a1, const uint16_t* b) {
  v16sf b0, b1;
  for (int l = 0; l < 16; ++l) { b0[l] = tgh_bf16_value(b[2 * l]); b1[l] = tgh_bf16_value(b[2 * l + 1]); }
  return (acc + tgh_splat_v16sf(tgh_bf16_value(a0)) * b0) + tgh_splat_v16sf(tgh_bf16_value(a1)) * b1;
}
#endif"""


def bfloat16_helpers(vector_lanes: set[int], qualifier: str = "static inline", dot: set[str] | bool = False) -> str:
    """The C helpers for bfloat16: the scalar ones (GPU dialects: with their function qualifier),
    and the vector ones for each width used (C only: the GPU printers keep bfloat16 scalar); `dot`:
    the layouts of B ("rows", "pairs") the dot-product steps read."""
    w = CodeWriter()
    for line in _SCALAR.replace("QUALIFIER", qualifier).splitlines():
        w.raw(line)
    for lanes in sorted(vector_lanes):
        text = (_VECTOR.replace("VF", f"v{lanes}sf").replace("VI", f"v{lanes}si").replace("VU", f"v{lanes}bu")
                .replace("VH", f"v{lanes}bh").replace("LANES", str(lanes)))
        for line in text.splitlines():
            w.raw(line)
    layouts = {"rows"} if dot is True else set(dot or ())
    for layout in sorted(layouts):
        for line in (_DOT2 if layout == "rows" else _DOT2_PAIRS).splitlines():
            w.raw(line)
    return w.text()


__all__ = ["STORAGE", "bfloat16_helpers"]

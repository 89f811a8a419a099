"""8-bit integers in C vector code: widening loads and the uint8 x int8 dot-product step.

    tgh_u8_load_v16si(p)    16 uint8 at p, zero-extended to int32 lanes (vpmovzxbd)
    tgh_i8_load_v16si(p)    16 int8 at p, sign-extended (vpmovsxbd); also 4 and 8 lanes
    tgh_u8_store_v16si(p, x), tgh_i8_store_v16si(p, x)
                            int32 lanes stored as their low 8 bits (vpmovdb: C's conversion)
    tgh_u8s8_dot4_v16si(acc, a, b0, b1, b2, b3), tgh_u8s8_dot4_v8si (8 lanes, b0..b3: 8 int8 each)
                            acc + a[0]*b0 + a[1]*b1 + a[2]*b2 + a[3]*b3 per lane, in int32, wrapping
                            (a: four consecutive uint8, b0..b3: 16 int8 each; lower/passes/group_int8_products.py)

With AVX512_VNNI the dot step is one vpdpbusd: A's four bytes broadcast as one 32-bit word, B's
four rows interleaved so each lane holds its column's four bytes (byte unpacks, or one vpermb
with AVX512_VBMI). The instruction's accumulation wraps like the IR's int32 arithmetic, so every
path gives the interpreter's bits; without VNNI the helper computes the same sum in int32 vectors.
"""

from __future__ import annotations

from tilegraph.codegen.writer import CodeWriter

_LOAD = """typedef SCALAR VB __attribute__((vector_size(LANES), aligned(1)));
static inline VI tgh_NAME_load_VI(const SCALAR* p) {
  VB bytes;
  __builtin_memcpy(&bytes, p, LANES);
  return __builtin_convertvector(bytes, VI);
}
static inline void tgh_NAME_store_VI(SCALAR* p, VI x) {
  VB bytes = __builtin_convertvector(x, VB);  /* each lane's low 8 bits */
  __builtin_memcpy(p, &bytes, LANES);
}"""

_DOT4 = """#if defined(__AVX512VNNI__) && defined(__AVX512F__)
#include <immintrin.h>
static inline v16si tgh_u8s8_dot4_v16si(v16si acc, const uint8_t* a, const int8_t* b0, const int8_t* b1,
                                        const int8_t* b2, const int8_t* b3) {
  int32_t word;
  __builtin_memcpy(&word, a, 4);
#if defined(__AVX512VBMI__)
  const __m512i columns = _mm512_set_epi8(63, 47, 31, 15, 62, 46, 30, 14, 61, 45, 29, 13, 60, 44, 28, 12,
                                          59, 43, 27, 11, 58, 42, 26, 10, 57, 41, 25, 9, 56, 40, 24, 8,
                                          55, 39, 23, 7, 54, 38, 22, 6, 53, 37, 21, 5, 52, 36, 20, 4,
                                          51, 35, 19, 3, 50, 34, 18, 2, 49, 33, 17, 1, 48, 32, 16, 0);
  __m512i rows = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i*)b0));
  rows = _mm512_inserti32x4(rows, _mm_loadu_si128((const __m128i*)b1), 1);
  rows = _mm512_inserti32x4(rows, _mm_loadu_si128((const __m128i*)b2), 2);
  rows = _mm512_inserti32x4(rows, _mm_loadu_si128((const __m128i*)b3), 3);
  __m512i b = _mm512_permutexvar_epi8(columns, rows);
#else
  __m128i r0 = _mm_loadu_si128((const __m128i*)b0), r1 = _mm_loadu_si128((const __m128i*)b1);
  __m128i r2 = _mm_loadu_si128((const __m128i*)b2), r3 = _mm_loadu_si128((const __m128i*)b3);
  __m128i lo01 = _mm_unpacklo_epi8(r0, r1), hi01 = _mm_unpackhi_epi8(r0, r1);
  __m128i lo23 = _mm_unpacklo_epi8(r2, r3), hi23 = _mm_unpackhi_epi8(r2, r3);
  __m512i b = _mm512_castsi128_si512(_mm_unpacklo_epi16(lo01, lo23));
  b = _mm512_inserti32x4(b, _mm_unpackhi_epi16(lo01, lo23), 1);
  b = _mm512_inserti32x4(b, _mm_unpacklo_epi16(hi01, hi23), 2);
  b = _mm512_inserti32x4(b, _mm_unpackhi_epi16(hi01, hi23), 3);
#endif
  return (v16si)_mm512_dpbusd_epi32((__m512i)acc, _mm512_set1_epi32(word), b);
}
#else
static inline v16si tgh_u8s8_dot4_v16si(v16si acc, const uint8_t* a, const int8_t* b0, const int8_t* b1,
                                        const int8_t* b2, const int8_t* b3) {
  v16si sum = tgh_splat_v16si(a[0]) * tgh_i8_load_v16si(b0) + tgh_splat_v16si(a[1]) * tgh_i8_load_v16si(b1)
            + tgh_splat_v16si(a[2]) * tgh_i8_load_v16si(b2) + tgh_splat_v16si(a[3]) * tgh_i8_load_v16si(b3);
  return (v16si)((v16su)acc + (v16su)sum);  /* wrapping, as the IR's int32 */
}
#endif"""

# The same step on 8 lanes: vpdpbusd on a ymm register with AVX512_VNNI and AVX512VL (a tile's
# 8-column tail, MobileNet-V2's 24-channel projections); for AVX2 without VNNI, exact: A's bytes zero-extended to 16-bit pairs
# (a0, a1) and (a2, a3), each broadcast as one 32-bit word; B's rows sign-extended to 16 bits and
# interleaved into (b0[c], b1[c]) and (b2[c], b3[c]) pairs per column; vpmaddwd sums each pair of
# 16-bit products into 32 bits (|a0*b0 + a1*b1| <= 2 * 255 * 128: no saturation, vpmaddwd saturates
# only for two (-32768)**2 products); the two sums and the accumulator added wrapping, as the IR's.
_DOT4_8 = """#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#include <immintrin.h>
static inline v8si tgh_u8s8_dot4_v8si(v8si acc, const uint8_t* a, const int8_t* b0, const int8_t* b1,
                                      const int8_t* b2, const int8_t* b3) {
  int32_t word;
  __builtin_memcpy(&word, a, 4);
  const __m128i r01 = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i*)b0), _mm_loadl_epi64((const __m128i*)b1));
  const __m128i r23 = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i*)b2), _mm_loadl_epi64((const __m128i*)b3));
  const __m256i b = _mm256_set_m128i(_mm_unpackhi_epi16(r01, r23), _mm_unpacklo_epi16(r01, r23));
  return (v8si)_mm256_dpbusd_epi32((__m256i)acc, _mm256_set1_epi32(word), b);
}
#elif defined(__AVX2__)
#include <immintrin.h>
static inline v8si tgh_u8s8_dot4_v8si(v8si acc, const uint8_t* a, const int8_t* b0, const int8_t* b1,
                                      const int8_t* b2, const int8_t* b3) {
  uint32_t word;
  __builtin_memcpy(&word, a, 4);
  const __m256i a01 = _mm256_set1_epi32((int32_t)((word & 0xffu) | ((word & 0xff00u) << 8)));
  const __m256i a23 = _mm256_set1_epi32((int32_t)(((word >> 16) & 0xffu) | ((word >> 24) << 16)));
  const __m128i r0 = _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i*)b0));
  const __m128i r1 = _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i*)b1));
  const __m128i r2 = _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i*)b2));
  const __m128i r3 = _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i*)b3));
  const __m256i b01 = _mm256_set_m128i(_mm_unpackhi_epi16(r0, r1), _mm_unpacklo_epi16(r0, r1));
  const __m256i b23 = _mm256_set_m128i(_mm_unpackhi_epi16(r2, r3), _mm_unpacklo_epi16(r2, r3));
  const __m256i sum = _mm256_add_epi32(_mm256_madd_epi16(a01, b01), _mm256_madd_epi16(a23, b23));
  return (v8si)((v8su)acc + (v8su)sum);
}
#else
static inline v8si tgh_u8s8_dot4_v8si(v8si acc, const uint8_t* a, const int8_t* b0, const int8_t* b1,
                                      const int8_t* b2, const int8_t* b3) {
  v8si sum = tgh_splat_v8si(a[0]) * tgh_i8_load_v8si(b0) + tgh_splat_v8si(a[1]) * tgh_i8_load_v8si(b1)
           + tgh_splat_v8si(a[2]) * tgh_i8_load_v8si(b2) + tgh_splat_v8si(a[3]) * tgh_i8_load_v8si(b3);
  return (v8si)((v8su)acc + (v8su)sum);  /* wrapping, as the IR's int32 */
}
#endif"""

# The same step reading B from a copy packed in K groups (tune/gensor/to_trace.py packed_layout):
# quads, each lane's four bytes together (vpdpbusd's operand as it is: one load), or pairs, (b0, b1)
# and (b2, b3) of each lane together (vpmaddwd's operands after one sign extension). Elsewhere the
# same sums from the lanes gathered: every path gives the interpreter's bits.
_DOT4_QUADS = """#if defined(__AVX512VNNI__) && defined(__AVX512F__) && LANES == 16
#include <immintrin.h>
static inline VI tgh_u8s8_dot4q_VI(VI acc, const uint8_t* a, const int8_t* b) {
  int32_t word;
  __builtin_memcpy(&word, a, 4);
  return (VI)_mm512_dpbusd_epi32((__m512i)acc, _mm512_set1_epi32(word), _mm512_loadu_si512((const void*)b));
}
#elif defined(__AVX512VNNI__) && defined(__AVX512VL__) && LANES == 8
#include <immintrin.h>
static inline VI tgh_u8s8_dot4q_VI(VI acc, const uint8_t* a, const int8_t* b) {
  int32_t word;
  __builtin_memcpy(&word, a, 4);
  return (VI)_mm256_dpbusd_epi32((__m256i)acc, _mm256_set1_epi32(word), _mm256_loadu_si256((const __m256i*)b));
}
#else
static inline VI tgh_u8s8_dot4q_VI(VI acc, const uint8_t* a, const int8_t* b) {
  VI sum;
  for (int l = 0; l < LANES; ++l)
    sum[l] = a[0] * b[4 * l] + a[1] * b[4 * l + 1] + a[2] * b[4 * l + 2] + a[3] * b[4 * l + 3];
  return (VI)((VU)acc + (VU)sum);  /* wrapping, as the IR's int32 */
}
#endif"""

_DOT4_PAIRS = """#if defined(__AVX2__) && LANES == 8
#include <immintrin.h>
static inline VI tgh_u8s8_dot4p_VI(VI acc, const uint8_t* a, const int8_t* b01, const int8_t* b23) {
  uint32_t word;
  __builtin_memcpy(&word, a, 4);
  const __m256i a01 = _mm256_set1_epi32((int32_t)((word & 0xffu) | ((word & 0xff00u) << 8)));
  const __m256i a23 = _mm256_set1_epi32((int32_t)(((word >> 16) & 0xffu) | ((word >> 24) << 16)));
  const __m256i p01 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)b01));
  const __m256i p23 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)b23));
  const __m256i sum = _mm256_add_epi32(_mm256_madd_epi16(a01, p01), _mm256_madd_epi16(a23, p23));
  return (VI)((VU)acc + (VU)sum);
}
#else
static inline VI tgh_u8s8_dot4p_VI(VI acc, const uint8_t* a, const int8_t* b01, const int8_t* b23) {
  VI sum;
  for (int l = 0; l < LANES; ++l)
    sum[l] = a[0] * b01[2 * l] + a[1] * b01[2 * l + 1] + a[2] * b23[2 * l] + a[3] * b23[2 * l + 1];
  return (VI)((VU)acc + (VU)sum);  /* wrapping, as the IR's int32 */
}
#endif"""

LOADS = {"uint8": ("u8", "uint8_t"), "int8": ("i8", "int8_t")}
LAYOUTS = {"rows": "dot4", "quads": "dot4q", "pairs": "dot4p"}  # B's layout -> the step's helper name


def int8_helpers(loads: set[tuple[str, int]], steps: set[tuple[int, str]]) -> str:
    """The widening loads and narrowing stores of the (dtype name, lanes) used and the dot-product
    steps in `steps`: (lanes, B's layout in LAYOUTS)."""
    loads = loads | {("int8", lanes) for lanes, layout in steps if layout == "rows"}
    w = CodeWriter()
    for lanes in sorted({lanes for lanes, _ in steps}):
        w.raw(f"typedef uint32_t v{lanes}su __attribute__((vector_size({lanes * 4})));")
    for name, lanes in sorted(loads):
        short, scalar = LOADS[name]
        text = (_LOAD.replace("VB", f"v{lanes}{short}b").replace("VI", f"v{lanes}si").replace("LANES", str(lanes))
                .replace("SCALAR", scalar).replace("NAME", short))
        for line in text.splitlines():
            w.raw(line)
    for lanes, layout in sorted(steps):
        if layout == "rows":
            text = _DOT4 if lanes == 16 else _DOT4_8
        else:
            text = (_DOT4_QUADS if layout == "quads" else _DOT4_PAIRS).replace("VI", f"v{lanes}si") \
                .replace("VU", f"v{lanes}su").replace("LANES", str(lanes))
        for line in text.splitlines():
            w.raw(line)
    return w.text()


__all__ = ["int8_helpers", "LAYOUTS", "LOADS"]

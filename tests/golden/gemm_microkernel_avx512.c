#include <math.h>
#include <stdint.h>
#include <stdlib.h>

typedef float v4sf __attribute__((vector_size(16)));
typedef float v4sf_u __attribute__((vector_size(16), aligned(4)));
typedef int32_t v4si __attribute__((vector_size(16)));
typedef int32_t v4si_u __attribute__((vector_size(16), aligned(4)));
typedef float v8sf __attribute__((vector_size(32)));
typedef float v8sf_u __attribute__((vector_size(32), aligned(4)));
typedef int32_t v8si __attribute__((vector_size(32)));
typedef int32_t v8si_u __attribute__((vector_size(32), aligned(4)));
typedef float v16sf __attribute__((vector_size(64)));
typedef float v16sf_u __attribute__((vector_size(64), aligned(4)));
typedef int32_t v16si __attribute__((vector_size(64)));
typedef int32_t v16si_u __attribute__((vector_size(64), aligned(4)));

static inline void* tgh_alloc(size_t n) { return aligned_alloc(64, (n + 63) / 64 * 64); }
typedef _Float16 tg_half;
static inline int32_t tgh_floordiv_int32_t(int32_t a, int32_t b) { if (b == 0) return 0; if (b == -1) return (int32_t)((uint32_t)0 - (uint32_t)a); int32_t q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; }
static inline int32_t tgh_floormod_int32_t(int32_t a, int32_t b) { if (b == 0 || b == -1) return 0; int32_t r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
static inline int64_t tgh_floordiv_int64_t(int64_t a, int64_t b) { if (b == 0) return 0; if (b == -1) return (int64_t)((uint64_t)0 - (uint64_t)a); int64_t q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; }
static inline int64_t tgh_floormod_int64_t(int64_t a, int64_t b) { if (b == 0 || b == -1) return 0; int64_t r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
static inline uint32_t tgh_floordiv_uint32_t(uint32_t a, uint32_t b) { return b == 0 ? 0 : a / b; }
static inline uint32_t tgh_floormod_uint32_t(uint32_t a, uint32_t b) { return b == 0 ? 0 : a % b; }
static inline uint64_t tgh_floordiv_uint64_t(uint64_t a, uint64_t b) { return b == 0 ? 0 : a / b; }
static inline uint64_t tgh_floormod_uint64_t(uint64_t a, uint64_t b) { return b == 0 ? 0 : a % b; }
static inline float tgh_floordiv_float(float a, float b) { return floorf(a / b); }
static inline float tgh_floormod_float(float a, float b) { float r = fmodf(a, b); if (r != 0) { if ((r < 0) != (b < 0)) r += b; } else r = copysignf((float)0, b); return r; }
static inline double tgh_floordiv_double(double a, double b) { return floor(a / b); }
static inline double tgh_floormod_double(double a, double b) { double r = fmod(a, b); if (r != 0) { if ((r < 0) != (b < 0)) r += b; } else r = copysign((double)0, b); return r; }
static inline tg_half tgh_floordiv_tg_half(tg_half a, tg_half b) { return floorf((float)a / (float)b); }
static inline tg_half tgh_floormod_tg_half(tg_half a, tg_half b) { return tgh_floormod_float((float)a, (float)b); }
static inline tg_half tgh_sigmoid_tg_half(tg_half x) { return 1.0f / (1.0f + expf(-(float)x)); }
static inline tg_half tgh_abs_tg_half(tg_half x) { return fabsf((float)x); }
static inline tg_half tgh_max_tg_half(tg_half a, tg_half b) { return (a > b || a != a) ? a : b; }
static inline tg_half tgh_min_tg_half(tg_half a, tg_half b) { return (a < b || a != a) ? a : b; }
static inline float tgh_sigmoid_float(float x) { return (float)1 / ((float)1 + expf(-x)); }
static inline double tgh_sigmoid_double(double x) { return (double)1 / ((double)1 + exp(-x)); }
static inline float tgh_abs_float(float x) { union { float f; uint32_t u; } v = {x}; v.u &= 0x7fffffffu; return v.f; }
static inline double tgh_abs_double(double x) { union { double f; uint64_t u; } v = {x}; v.u &= 0x7fffffffffffffffull; return v.f; }
static inline float tgh_max_float(float a, float b) { return (a > b || a != a) ? a : b; }
static inline float tgh_min_float(float a, float b) { return (a < b || a != a) ? a : b; }
static inline double tgh_max_double(double a, double b) { return (a > b || a != a) ? a : b; }
static inline double tgh_min_double(double a, double b) { return (a < b || a != a) ? a : b; }
static inline int8_t tgh_max_int8_t(int8_t a, int8_t b) { return a > b ? a : b; }
static inline int8_t tgh_min_int8_t(int8_t a, int8_t b) { return a < b ? a : b; }
static inline uint8_t tgh_max_uint8_t(uint8_t a, uint8_t b) { return a > b ? a : b; }
static inline uint8_t tgh_min_uint8_t(uint8_t a, uint8_t b) { return a < b ? a : b; }
static inline int16_t tgh_max_int16_t(int16_t a, int16_t b) { return a > b ? a : b; }
static inline int16_t tgh_min_int16_t(int16_t a, int16_t b) { return a < b ? a : b; }
static inline uint16_t tgh_max_uint16_t(uint16_t a, uint16_t b) { return a > b ? a : b; }
static inline uint16_t tgh_min_uint16_t(uint16_t a, uint16_t b) { return a < b ? a : b; }
static inline uint32_t tgh_max_uint32_t(uint32_t a, uint32_t b) { return a > b ? a : b; }
static inline uint32_t tgh_min_uint32_t(uint32_t a, uint32_t b) { return a < b ? a : b; }
static inline uint64_t tgh_max_uint64_t(uint64_t a, uint64_t b) { return a > b ? a : b; }
static inline uint64_t tgh_min_uint64_t(uint64_t a, uint64_t b) { return a < b ? a : b; }
static inline int32_t tgh_max_int32_t(int32_t a, int32_t b) { return a > b ? a : b; }
static inline int32_t tgh_min_int32_t(int32_t a, int32_t b) { return a < b ? a : b; }
static inline int64_t tgh_max_int64_t(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t tgh_min_int64_t(int64_t a, int64_t b) { return a < b ? a : b; }
static inline v4sf tgh_splat_v4sf(float x) { return (v4sf){x, x, x, x}; }
static inline v4sf tgh_blend_v4sf(v4si m, v4sf a, v4sf b) { return (v4sf)((m & (v4si)a) | (~m & (v4si)b)); }
static inline v4sf tgh_max_v4sf(v4sf a, v4sf b) { v4si m = (a > b) | (a != a); return (v4sf)((m & (v4si)a) | (~m & (v4si)b)); }
static inline v4sf tgh_min_v4sf(v4sf a, v4sf b) { v4si m = (a < b) | (a != a); return (v4sf)((m & (v4si)a) | (~m & (v4si)b)); }
static inline v4si tgh_splat_v4si(int32_t x) { return (v4si){x, x, x, x}; }
static inline v4si tgh_blend_v4si(v4si m, v4si a, v4si b) { return (v4si)((m & (v4si)a) | (~m & (v4si)b)); }
static inline v4si tgh_max_v4si(v4si a, v4si b) { v4si m = (a > b); return (v4si)((m & (v4si)a) | (~m & (v4si)b)); }
static inline v4si tgh_min_v4si(v4si a, v4si b) { v4si m = (a < b); return (v4si)((m & (v4si)a) | (~m & (v4si)b)); }
static inline v8sf tgh_splat_v8sf(float x) { return (v8sf){x, x, x, x, x, x, x, x}; }
static inline v8sf tgh_blend_v8sf(v8si m, v8sf a, v8sf b) { return (v8sf)((m & (v8si)a) | (~m & (v8si)b)); }
static inline v8sf tgh_max_v8sf(v8sf a, v8sf b) { v8si m = (a > b) | (a != a); return (v8sf)((m & (v8si)a) | (~m & (v8si)b)); }
static inline v8sf tgh_min_v8sf(v8sf a, v8sf b) { v8si m = (a < b) | (a != a); return (v8sf)((m & (v8si)a) | (~m & (v8si)b)); }
static inline v8si tgh_splat_v8si(int32_t x) { return (v8si){x, x, x, x, x, x, x, x}; }
static inline v8si tgh_blend_v8si(v8si m, v8si a, v8si b) { return (v8si)((m & (v8si)a) | (~m & (v8si)b)); }
static inline v8si tgh_max_v8si(v8si a, v8si b) { v8si m = (a > b); return (v8si)((m & (v8si)a) | (~m & (v8si)b)); }
static inline v8si tgh_min_v8si(v8si a, v8si b) { v8si m = (a < b); return (v8si)((m & (v8si)a) | (~m & (v8si)b)); }
static inline v16sf tgh_splat_v16sf(float x) { return (v16sf){x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x}; }
static inline v16sf tgh_blend_v16sf(v16si m, v16sf a, v16sf b) { return (v16sf)((m & (v16si)a) | (~m & (v16si)b)); }
static inline v16sf tgh_max_v16sf(v16sf a, v16sf b) { v16si m = (a > b) | (a != a); return (v16sf)((m & (v16si)a) | (~m & (v16si)b)); }
static inline v16sf tgh_min_v16sf(v16sf a, v16sf b) { v16si m = (a < b) | (a != a); return (v16sf)((m & (v16si)a) | (~m & (v16si)b)); }
static inline v16si tgh_splat_v16si(int32_t x) { return (v16si){x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x}; }
static inline v16si tgh_blend_v16si(v16si m, v16si a, v16si b) { return (v16si)((m & (v16si)a) | (~m & (v16si)b)); }
static inline v16si tgh_max_v16si(v16si a, v16si b) { v16si m = (a > b); return (v16si)((m & (v16si)a) | (~m & (v16si)b)); }
static inline v16si tgh_min_v16si(v16si a, v16si b) { v16si m = (a < b); return (v16si)((m & (v16si)a) | (~m & (v16si)b)); }

void tg_matmul(float* restrict b_A, float* restrict b_B, float* restrict b_C, int32_t num_threads) {
  if (num_threads < 1) num_threads = 1;
#pragma omp parallel for num_threads(num_threads)
  for (int32_t x_i_0 = 0; x_i_0 < 7; ++x_i_0) {
    for (int32_t x_j_0 = 0; x_j_0 < 2; ++x_j_0) {
      {
        float b_C_local[192] __attribute__((aligned(64)));
        {
          float b_B_global[1600] __attribute__((aligned(64)));
          for (int32_t x_ax0_1 = 0; x_ax0_1 < 2; ++x_ax0_1) {
            for (int32_t x_ax1_1 = 0; x_ax1_1 < 256; ++x_ax1_1) {
              if ((x_ax1_1 < 50)) {
                for (int32_t x_ax2_1 = 0; x_ax2_1 < 16; ++x_ax2_1) {
                  b_B_global[(((x_ax0_1 * 800) + (x_ax1_1 * 16)) + x_ax2_1)] = b_B[((((x_ax1_1 * 64) + (x_j_0 * 32)) + (x_ax0_1 * 16)) + x_ax2_1)];
                }
              }
            }
          }
          for (int32_t x_k_1_u0 = 0; x_k_1_u0 < 256; ++x_k_1_u0) {
            if ((((x_i_0 * 6) < 37) && (x_k_1_u0 < 50))) {
              for (int32_t x_j_1_0_u0 = 0; x_j_1_0_u0 < 2; ++x_j_1_0_u0) {
                if ((x_k_1_u0 == 0)) {
                  *(v16sf_u*)(b_C_local + (x_j_1_0_u0 * 16)) = tgh_splat_v16sf(0x0.0p+0f);
                }
                *(v16sf_u*)(b_C_local + (x_j_1_0_u0 * 16)) = ((*(v16sf_u*)(b_C_local + (x_j_1_0_u0 * 16))) + (tgh_splat_v16sf(b_A[((x_i_0 * 300) + x_k_1_u0)]) * (*(v16sf_u*)(b_B_global + ((x_j_1_0_u0 * 800) + (x_k_1_u0 * 16))))));
              }
            }
          }
          for (int32_t x_k_1_u1 = 0; x_k_1_u1 < 256; ++x_k_1_u1) {
            if (((((x_i_0 * 6) + 1) < 37) && (x_k_1_u1 < 50))) {
              for (int32_t x_j_1_0_u1 = 0; x_j_1_0_u1 < 2; ++x_j_1_0_u1) {
                if ((x_k_1_u1 == 0)) {
                  *(v16sf_u*)(b_C_local + ((x_j_1_0_u1 * 16) + 32)) = tgh_splat_v16sf(0x0.0p+0f);
                }
                *(v16sf_u*)(b_C_local + ((x_j_1_0_u1 * 16) + 32)) = ((*(v16sf_u*)(b_C_local + ((x_j_1_0_u1 * 16) + 32))) + (tgh_splat_v16sf(b_A[(((x_i_0 * 300) + x_k_1_u1) + 50)]) * (*(v16sf_u*)(b_B_global + ((x_j_1_0_u1 * 800) + (x_k_1_u1 * 16))))));
              }
            }
          }
          for (int32_t x_k_1_u2 = 0; x_k_1_u2 < 256; ++x_k_1_u2) {
            if (((((x_i_0 * 6) + 2) < 37) && (x_k_1_u2 < 50))) {
              for (int32_t x_j_1_0_u2 = 0; x_j_1_0_u2 < 2; ++x_j_1_0_u2) {
                if ((x_k_1_u2 == 0)) {
                  *(v16sf_u*)(b_C_local + ((x_j_1_0_u2 * 16) + 64)) = tgh_splat_v16sf(0x0.0p+0f);
                }
                *(v16sf_u*)(b_C_local + ((x_j_1_0_u2 * 16) + 64)) = ((*(v16sf_u*)(b_C_local + ((x_j_1_0_u2 * 16) + 64))) + (tgh_splat_v16sf(b_A[(((x_i_0 * 300) + x_k_1_u2) + 100)]) * (*(v16sf_u*)(b_B_global + ((x_j_1_0_u2 * 800) + (x_k_1_u2 * 16))))));
              }
            }
          }
          for (int32_t x_k_1_u3 = 0; x_k_1_u3 < 256; ++x_k_1_u3) {
            if (((((x_i_0 * 6) + 3) < 37) && (x_k_1_u3 < 50))) {
              for (int32_t x_j_1_0_u3 = 0; x_j_1_0_u3 < 2; ++x_j_1_0_u3) {
                if ((x_k_1_u3 == 0)) {
                  *(v16sf_u*)(b_C_local + ((x_j_1_0_u3 * 16) + 96)) = tgh_splat_v16sf(0x0.0p+0f);
                }
                *(v16sf_u*)(b_C_local + ((x_j_1_0_u3 * 16) + 96)) = ((*(v16sf_u*)(b_C_local + ((x_j_1_0_u3 * 16) + 96))) + (tgh_splat_v16sf(b_A[(((x_i_0 * 300) + x_k_1_u3) + 150)]) * (*(v16sf_u*)(b_B_global + ((x_j_1_0_u3 * 800) + (x_k_1_u3 * 16))))));
              }
            }
          }
          for (int32_t x_k_1_u4 = 0; x_k_1_u4 < 256; ++x_k_1_u4) {
            if (((((x_i_0 * 6) + 4) < 37) && (x_k_1_u4 < 50))) {
              for (int32_t x_j_1_0_u4 = 0; x_j_1_0_u4 < 2; ++x_j_1_0_u4) {
                if ((x_k_1_u4 == 0)) {
                  *(v16sf_u*)(b_C_local + ((x_j_1_0_u4 * 16) + 128)) = tgh_splat_v16sf(0x0.0p+0f);
                }
                *(v16sf_u*)(b_C_local + ((x_j_1_0_u4 * 16) + 128)) = ((*(v16sf_u*)(b_C_local + ((x_j_1_0_u4 * 16) + 128))) + (tgh_splat_v16sf(b_A[(((x_i_0 * 300) + x_k_1_u4) + 200)]) * (*(v16sf_u*)(b_B_global + ((x_j_1_0_u4 * 800) + (x_k_1_u4 * 16))))));
              }
            }
          }
          for (int32_t x_k_1_u5 = 0; x_k_1_u5 < 256; ++x_k_1_u5) {
            if (((((x_i_0 * 6) + 5) < 37) && (x_k_1_u5 < 50))) {
              for (int32_t x_j_1_0_u5 = 0; x_j_1_0_u5 < 2; ++x_j_1_0_u5) {
                if ((x_k_1_u5 == 0)) {
                  *(v16sf_u*)(b_C_local + ((x_j_1_0_u5 * 16) + 160)) = tgh_splat_v16sf(0x0.0p+0f);
                }
                *(v16sf_u*)(b_C_local + ((x_j_1_0_u5 * 16) + 160)) = ((*(v16sf_u*)(b_C_local + ((x_j_1_0_u5 * 16) + 160))) + (tgh_splat_v16sf(b_A[(((x_i_0 * 300) + x_k_1_u5) + 250)]) * (*(v16sf_u*)(b_B_global + ((x_j_1_0_u5 * 800) + (x_k_1_u5 * 16))))));
              }
            }
          }
        }
        for (int32_t x_ax0_2 = 0; x_ax0_2 < 6; ++x_ax0_2) {
          if ((((x_i_0 * 6) + x_ax0_2) < 37)) {
            for (int32_t x_ax1_2 = 0; x_ax1_2 < 32; ++x_ax1_2) {
              b_C[((((x_i_0 * 384) + (x_ax0_2 * 64)) + (x_j_0 * 32)) + x_ax1_2)] = b_C_local[((x_ax0_2 * 32) + x_ax1_2)];
            }
          }
        }
      }
    }
  }
}
const char tg_matmul_signature[] = "tilegraph-kernel-1 float32[1850] float32[3200] float32[2368]";

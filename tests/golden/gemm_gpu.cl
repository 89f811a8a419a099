typedef char int8_t;
typedef uchar uint8_t;
typedef int int32_t;
typedef uint uint32_t;
typedef long int64_t;
typedef ulong uint64_t;
#define INT64_C(x) ((long)(x))
#define expf exp
#define logf log
#define sqrtf sqrt
#define tanhf tanh
#define erff erf
#define floorf floor
#define ceilf ceil
#define sinf sin
#define cosf cos
#define tanf tan
#define asinf asin
#define acosf acos
#define atanf atan
#define sinhf sinh
#define coshf cosh
#define asinhf asinh
#define acoshf acosh
#define atanhf atanh
#define rintf rint
#define fmodf fmod
#define copysignf copysign
#define fabsf fabs
#define powf pow
#define llabs abs
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

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
static inline int8_t tgh_max_int8_t(int8_t a, int8_t b) { return a > b ? a : b; }
static inline int8_t tgh_min_int8_t(int8_t a, int8_t b) { return a < b ? a : b; }
static inline uint8_t tgh_max_uint8_t(uint8_t a, uint8_t b) { return a > b ? a : b; }
static inline uint8_t tgh_min_uint8_t(uint8_t a, uint8_t b) { return a < b ? a : b; }
static inline int32_t tgh_max_int32_t(int32_t a, int32_t b) { return a > b ? a : b; }
static inline int32_t tgh_min_int32_t(int32_t a, int32_t b) { return a < b ? a : b; }
static inline int64_t tgh_max_int64_t(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t tgh_min_int64_t(int64_t a, int64_t b) { return a < b ? a : b; }
static inline float tgh_sigmoid_float(float x) { return (float)1 / ((float)1 + expf(-x)); }
static inline float tgh_abs_float(float x) { return fabsf(x); }
static inline float tgh_max_float(float a, float b) { return (a > b || a != a) ? a : b; }
static inline float tgh_min_float(float a, float b) { return (a < b || a != a) ? a : b; }

__kernel void __attribute__((reqd_work_group_size(8, 1, 1))) tg_matmul_k0(__global float* restrict b_a, __global float* restrict b_b, __global float* restrict b_matmul) {
  __local float b_shared[48];
  __local float b_a_shared[12];
  {
    const int32_t x_i_0_j_0_fused = ((int32_t)get_group_id(0));
    {
      const int32_t x_i_2_j_2_fused = ((int32_t)get_local_id(0));
      {
        float b_matmul_local[1];
        if ((((((x_i_2_j_2_fused < 2) && (tgh_floordiv_int32_t(x_i_0_j_0_fused, 4) >= 0)) && (tgh_floordiv_int32_t(x_i_0_j_0_fused, 4) < 64)) && (tgh_floormod_int32_t(x_i_2_j_2_fused, 2) >= 0)) && (tgh_floormod_int32_t(x_i_2_j_2_fused, 2) < 48))) {
          b_a_shared[tgh_floormod_int32_t(x_i_2_j_2_fused, 2)] = b_a[((tgh_floordiv_int32_t(x_i_0_j_0_fused, 4) * 48) + tgh_floormod_int32_t(x_i_2_j_2_fused, 2))];
        }
        if (((((((x_i_2_j_2_fused * 4) < 16) && (tgh_floormod_int32_t(tgh_floordiv_int32_t((x_i_2_j_2_fused * 4), 8), 2) >= 0)) && (tgh_floormod_int32_t(tgh_floordiv_int32_t((x_i_2_j_2_fused * 4), 8), 2) < 48)) && (((tgh_floormod_int32_t(x_i_0_j_0_fused, 4) * 8) + tgh_floormod_int32_t((x_i_2_j_2_fused * 4), 8)) >= 0)) && (((tgh_floormod_int32_t(x_i_0_j_0_fused, 4) * 8) + tgh_floormod_int32_t((x_i_2_j_2_fused * 4), 8)) < 32))) {
          vstore4(vload4(0, &b_b[(((tgh_floormod_int32_t(tgh_floordiv_int32_t(x_i_2_j_2_fused, 2), 2) * 32) + (tgh_floormod_int32_t(x_i_0_j_0_fused, 4) * 8)) + (tgh_floormod_int32_t(x_i_2_j_2_fused, 2) * 4))]), 0, &b_shared[((tgh_floormod_int32_t(tgh_floordiv_int32_t(x_i_2_j_2_fused, 2), 2) * 12) + (tgh_floormod_int32_t(x_i_2_j_2_fused, 2) * 4))]);
        }
        barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
        for (int32_t x_k_0 = 0; x_k_0 < 24; ++x_k_0) {
          {
            float b_k_0_stage[5];
            if ((((x_k_0 + 1) < 24) && (((((x_i_2_j_2_fused < 2) && (tgh_floordiv_int32_t(x_i_0_j_0_fused, 4) >= 0)) && (tgh_floordiv_int32_t(x_i_0_j_0_fused, 4) < 64)) && ((((x_k_0 + 1) * 2) + tgh_floormod_int32_t(x_i_2_j_2_fused, 2)) >= 0)) && ((((x_k_0 + 1) * 2) + tgh_floormod_int32_t(x_i_2_j_2_fused, 2)) < 48)))) {
              b_k_0_stage[0] = b_a[(((tgh_floordiv_int32_t(x_i_0_j_0_fused, 4) * 48) + ((x_k_0 + 1) * 2)) + tgh_floormod_int32_t(x_i_2_j_2_fused, 2))];
            }
            if ((((x_k_0 + 1) < 24) && ((((((x_i_2_j_2_fused * 4) < 16) && ((((x_k_0 + 1) * 2) + tgh_floormod_int32_t(tgh_floordiv_int32_t((x_i_2_j_2_fused * 4), 8), 2)) >= 0)) && ((((x_k_0 + 1) * 2) + tgh_floormod_int32_t(tgh_floordiv_int32_t((x_i_2_j_2_fused * 4), 8), 2)) < 48)) && (((tgh_floormod_int32_t(x_i_0_j_0_fused, 4) * 8) + tgh_floormod_int32_t((x_i_2_j_2_fused * 4), 8)) >= 0)) && (((tgh_floormod_int32_t(x_i_0_j_0_fused, 4) * 8) + tgh_floormod_int32_t((x_i_2_j_2_fused * 4), 8)) < 32)))) {
              vstore4(vload4(0, &b_b[(((((x_k_0 + 1) * 64) + (tgh_floormod_int32_t(tgh_floordiv_int32_t(x_i_2_j_2_fused, 2), 2) * 32)) + (tgh_floormod_int32_t(x_i_0_j_0_fused, 4) * 8)) + (tgh_floormod_int32_t(x_i_2_j_2_fused, 2) * 4))]), 0, &b_k_0_stage[1]);
            }
            for (int32_t x_k_1 = 0; x_k_1 < 2; ++x_k_1) {
              if ((((x_k_0 * 2) + x_k_1) == 0)) {
                b_matmul_local[0] = 0x0.0p+0f;
              }
              b_matmul_local[0] = (b_matmul_local[0] + (b_a_shared[(x_k_1 + (tgh_floormod_int32_t(x_k_0, 2) * 6))] * b_shared[(((x_k_1 * 12) + x_i_2_j_2_fused) + (tgh_floormod_int32_t(x_k_0, 2) * 24))]));
            }
            if ((((x_k_0 + 1) < 24) && (((((x_i_2_j_2_fused < 2) && (tgh_floordiv_int32_t(x_i_0_j_0_fused, 4) >= 0)) && (tgh_floordiv_int32_t(x_i_0_j_0_fused, 4) < 64)) && ((((x_k_0 + 1) * 2) + tgh_floormod_int32_t(x_i_2_j_2_fused, 2)) >= 0)) && ((((x_k_0 + 1) * 2) + tgh_floormod_int32_t(x_i_2_j_2_fused, 2)) < 48)))) {
              b_a_shared[(tgh_floormod_int32_t(x_i_2_j_2_fused, 2) + (tgh_floormod_int32_t((x_k_0 + 1), 2) * 6))] = b_k_0_stage[0];
            }
            if ((((x_k_0 + 1) < 24) && ((((((x_i_2_j_2_fused * 4) < 16) && ((((x_k_0 + 1) * 2) + tgh_floormod_int32_t(tgh_floordiv_int32_t((x_i_2_j_2_fused * 4), 8), 2)) >= 0)) && ((((x_k_0 + 1) * 2) + tgh_floormod_int32_t(tgh_floordiv_int32_t((x_i_2_j_2_fused * 4), 8), 2)) < 48)) && (((tgh_floormod_int32_t(x_i_0_j_0_fused, 4) * 8) + tgh_floormod_int32_t((x_i_2_j_2_fused * 4), 8)) >= 0)) && (((tgh_floormod_int32_t(x_i_0_j_0_fused, 4) * 8) + tgh_floormod_int32_t((x_i_2_j_2_fused * 4), 8)) < 32)))) {
              vstore4(vload4(0, &b_k_0_stage[1]), 0, &b_shared[(((tgh_floormod_int32_t(tgh_floordiv_int32_t(x_i_2_j_2_fused, 2), 2) * 12) + (tgh_floormod_int32_t(x_i_2_j_2_fused, 2) * 4)) + (tgh_floormod_int32_t((x_k_0 + 1), 2) * 24))]);
            }
            barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
          }
        }
        b_matmul[(((tgh_floordiv_int32_t(x_i_0_j_0_fused, 4) * 32) + (tgh_floormod_int32_t(x_i_0_j_0_fused, 4) * 8)) + x_i_2_j_2_fused)] = b_matmul_local[0];
      }
    }
  }
}

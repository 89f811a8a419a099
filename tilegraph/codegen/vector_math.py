"""SIMD math for the C printer: exp, log, tanh, sigmoid, erf, sqrt, ... on GCC vector types.

    vector_math_helpers({("exp", 16), ("tanh", 8)})   -> C text: tgh_exp_v16sf, tgh_exp_v8sf, tgh_tanh_v8sf

GCC does not vectorise libm calls without -ffast-math, whose inf/NaN shortcuts we refuse, so each
vectorised intrinsic gets a helper emitted once per vector type used, with a helper's dependencies
first. Accuracy and special values (inf, NaN, -0.0, denormals) are tested against numpy in
tests/codegen/test_vector_math.py.
"""

from __future__ import annotations

import math

import numpy as np

from tilegraph.codegen.writer import CodeWriter

# Each is C text over the tokens VF (float vector type), VI (the int32
# vector of the same lanes) and LANES; constants are float32 values printed as exact hex floats.


def _f32(x: float) -> str:
    value = float(np.float32(x))
    return f"({value.hex()}f)" if value < 0 else f"{value.hex()}f"


def _horner(var: str, coefficients: tuple[float, ...]) -> str:
    """c0 + var*(c1 + var*(...)) for coefficients c0, c1, ... (lowest degree first)."""
    out = _f32(coefficients[-1])
    for c in reversed(coefficients[:-1]):
        out = f"({out} * {var} + {_f32(c)})"
    return out


_LN2_HI = 0.693359375           # 9 significant bits: n * _LN2_HI is exact for |n| < 2^15
_LN2_LO = -2.12194440e-4        # ln 2 - _LN2_HI
_EXP_TAYLOR = tuple(1.0 / math.factorial(k) for k in range(8))            # e^r, |r| <= ln2/2
_LOG_ATANH = tuple(2.0 / (2 * k + 3) for k in range(5))                   # 2/3, 2/5, ..., 2/11
_TANH_TAYLOR = (-1 / 3, 2 / 15, -17 / 315, 62 / 2835)                     # x^3, x^5, x^7, x^9
# erf(x) = x * P(x^2) on [0, 1] (relative error 4e-8); erfc(x) = exp(-x^2) * Q(1/x) on [1, 4]
# (relative error 7e-8). Weighted least-squares fits to scipy.special.erf in float64.
_ERF_SMALL = (1.12837911, -0.37612325, 0.112801775, -0.0267112777, 0.00491753453, -0.000563142123)
_ERFC_LARGE = (0.000253192527, 0.559314251, 0.040169809, -0.464704007, 0.481020749, -0.219180465,
               0.00411911961, 0.0379572958, -0.0113664176)

_SIGN = "(-2147483647 - 1)"
_ABS = "static inline VF tgh_abs_VF(VF x) { return (VF)((VI)x & 0x7fffffff); }"
_ABS_INT = "static inline VI tgh_abs_VI(VI x) { VI s = x >> 31; return (x ^ s) - s; }"
# Element loops over one vector: GCC turns them into vsqrtps/vrndscaleps (-fno-math-errno is in
# the default flags; without it they stay correct, as libm calls).
_PER_LANE = ("static inline VF tgh_NAME_VF(VF x) "
             "{ VF r; for (int k = 0; k < LANES; ++k) r[k] = __builtin_NAMEf(x[k]); return r; }")
_RSQRT = "static inline VF tgh_rsqrt_VF(VF x) { return 1.0f / tgh_sqrt_VF(x); }"

# exp: x = n*ln2 + r (Cody-Waite), e^r by its degree-7 Taylor polynomial, times 2^n built from
# exponent bits in two halves so that results down to the denormals round once. Clamping to
# [-104, 89] turns the overflow into inf and the underflow into 0 through that arithmetic;
# comparisons are false for NaN, which passes through unchanged.
_EXP = f"""static inline VF tgh_exp_VF(VF x) {{
  const VF shifter = tgh_splat_VF(0x1.8p+23f);
  VF xc = tgh_blend_VF(x < -104.0f, tgh_splat_VF(-104.0f), x);
  xc = tgh_blend_VF(xc > 89.0f, tgh_splat_VF(89.0f), xc);
  VF t = xc * {_f32(1 / math.log(2))} + shifter;
  VF n = t - shifter;
  VI ni = (VI)t - 0x4b400000;
  VF r = xc - n * {_f32(_LN2_HI)};
  r = r - n * {_f32(_LN2_LO)};
  VF p = {_horner("r", _EXP_TAYLOR)};
  VI n1 = ni >> 1;
  VI n2 = ni - n1;
  return p * (VF)((n1 + 127) << 23) * (VF)((n2 + 127) << 23);
}}"""

# log: x = m * 2^e with m in [sqrt(1/2), sqrt(2)) (denormals scaled by 2^23 first);
# log m = 2 atanh(s), s = (m-1)/(m+1), |s| < 0.172, by its odd series to s^11.
_LOG = f"""static inline VF tgh_log_VF(VF x) {{
  VI tiny = x < 0x1p-126f;
  VI bits = (VI)tgh_blend_VF(tiny, x * 0x1p+23f, x);
  VI e = ((bits >> 23) & 0xff) - 127 - (tiny & 23);
  VF m = (VF)((bits & 0x007fffff) | 0x3f800000);
  VI big = m > {_f32(math.sqrt(2))};
  m = tgh_blend_VF(big, m * 0.5f, m);
  e = e - big;
  VF f = m - 1.0f;
  VF s = f / (f + 2.0f);
  VF s2 = s * s;
  VF log_m = s * 2.0f + s * (s2 * {_horner("s2", _LOG_ATANH)});
  VF ef = __builtin_convertvector(e, VF);
  VF r = ef * {_f32(_LN2_HI)} + (log_m + ef * {_f32(_LN2_LO)});
  r = tgh_blend_VF(x == 0.0f, tgh_splat_VF(-INFINITY), r);
  r = tgh_blend_VF(x < 0.0f, tgh_splat_VF(NAN), r);
  r = tgh_blend_VF(x == INFINITY, x, r);
  return tgh_blend_VF(x != x, x, r);
}}"""

# tanh: odd, so computed on |x| with the sign put back; (e-1)/(e+1) with e = exp(2|x|) cancels
# near 0, where the Taylor series to x^9 is used instead; beyond 9 it is 1 in float32.
_TANH = f"""static inline VF tgh_tanh_VF(VF x) {{
  VI sign = (VI)x & {_SIGN};
  VF ax = (VF)((VI)x & 0x7fffffff);
  VF e = tgh_exp_VF(tgh_blend_VF(ax > 9.0f, tgh_splat_VF(9.0f), ax) * 2.0f);
  VF r = (e - 1.0f) / (e + 1.0f);
  VF x2 = ax * ax;
  VF small = ax + ax * (x2 * {_horner("x2", _TANH_TAYLOR)});
  r = tgh_blend_VF(ax < 0.25f, small, r);
  r = tgh_blend_VF(ax > 9.0f, tgh_splat_VF(1.0f), r);
  return (VF)((VI)r | sign);
}}"""

# sigmoid: with e = exp(-|x|) (never overflows), 1/(1+e) for x >= 0 and e/(1+e) below.
_SIGMOID = """static inline VF tgh_sigmoid_VF(VF x) {
  VF e = tgh_exp_VF(-(VF)((VI)x & 0x7fffffff));
  VF s = 1.0f / (1.0f + e);
  return tgh_blend_VF(x >= 0.0f, s, e * s);
}"""

# erf: odd; x*P(x^2) below 1, 1 - exp(-x^2)*Q(1/x) up to 4, 1 beyond (erf(4) rounds to 1).
_ERF = f"""static inline VF tgh_erf_VF(VF x) {{
  VI sign = (VI)x & {_SIGN};
  VF ax = (VF)((VI)x & 0x7fffffff);
  VF x2 = ax * ax;
  VF small = ax * {_horner("x2", _ERF_SMALL)};
  VF t = 1.0f / ax;
  VF large = 1.0f - tgh_exp_VF(-x2) * {_horner("t", _ERFC_LARGE)};
  VF r = tgh_blend_VF(ax < 1.0f, small, large);
  r = tgh_blend_VF(ax >= 4.0f, tgh_splat_VF(1.0f), r);
  r = tgh_blend_VF(x != x, x, r);
  return (VF)((VI)r | sign);
}}"""

# Lane by lane through the scalar builtin (intrinsic -> C function): rare in hot loops.
_PER_LANE_MATH = {name: _PER_LANE.replace("tgh_NAME", f"tgh_{name}").replace("NAME", c_name)
                  for name, c_name in (("sin", "sin"), ("cos", "cos"), ("tan", "tan"), ("asin", "asin"),
                                       ("acos", "acos"), ("atan", "atan"), ("sinh", "sinh"), ("cosh", "cosh"),
                                       ("asinh", "asinh"), ("acosh", "acosh"), ("atanh", "atanh"), ("round", "rint"))}
# In emission order: a helper comes after those it calls.
_VECTOR_MATH_TEXT = {
    "abs": _ABS, "sqrt": _PER_LANE.replace("NAME", "sqrt"), "floor": _PER_LANE.replace("NAME", "floor"),
    "ceil": _PER_LANE.replace("NAME", "ceil"), "rsqrt": _RSQRT, "exp": _EXP, "log": _LOG,
    "tanh": _TANH, "sigmoid": _SIGMOID, "erf": _ERF, **_PER_LANE_MATH,
}
_VECTOR_MATH_NEEDS = {"rsqrt": ("sqrt",), "tanh": ("exp",), "sigmoid": ("exp",), "erf": ("exp",)}
VECTOR_MATH = tuple(_VECTOR_MATH_TEXT)


def vector_math_helpers(used: set[tuple[str, int]]) -> str:
    """The SIMD helpers for the (intrinsic, lanes) pairs in `used` and those they call. Integer
    abs (`tgh_abs_v8si`) comes with float abs, for the int32 vectors of the same lanes."""
    wanted = set(used)
    for name, lanes in used:
        wanted.update((need, lanes) for need in _VECTOR_MATH_NEEDS.get(name, ()))
    if not wanted:
        return ""
    w = CodeWriter()
    for lanes in sorted({lanes for _, lanes in wanted}):
        vf, vi = f"v{lanes}sf", f"v{lanes}si"
        for name, text in _VECTOR_MATH_TEXT.items():
            if (name, lanes) not in wanted:
                continue
            texts = (text, _ABS_INT) if name == "abs" else (text,)
            for t in texts:
                body = t.replace("VF", vf).replace("VI", vi).replace("LANES", str(lanes))
                for line in body.split("\n"):
                    w.raw(line)
    return w.text()


__all__ = ["VECTOR_MATH", "vector_math_helpers"]

"""C printer for lowered loop IR: GCC vector extensions for SIMD, OpenMP pragmas for parallel loops
(a kernel library links codegen/thread_pool_abi.py's shim, which runs them on tilegraph's pool).

    src = codegen_c(lower(func, target))
    src.code     the translation unit
    src.entry    the kernel's symbol

The kernel's ABI: `void <entry>(<ctype>* restrict <p0>, ..., int32_t num_threads)`, one pointer
per Func param in order, then the thread count for `#pragma omp parallel for`.

    for i in range(8) parallel:           #pragma omp parallel for num_threads(num_threads)
      C[ramp(i*16, 1, 16)] = ...    ->    for (int32_t x_i = 0; x_i < 8; ++x_i) {
                                            *(v16sf_u*)(b_C + (x_i * 16)) = ...;
                                          }

Math calls on vectors call SIMD helpers emitted once per vector type used (`tgh_exp_v16sf`, ...);
GCC does not vectorise libm without -ffast-math, whose inf/NaN shortcuts we refuse. Vector
selects blend with an int32 lane mask, vector casts use `__builtin_convertvector`:

    Y[ramp(b, 1, 16)] = select(X[ramp(b, 1, 16)] > broadcast(0.0f, 16), .., exp(X[ramp(b, 1, 16)]))
    ->  *(v16sf_u*)(b_Y + b) = tgh_blend_v16sf((X16 > tgh_splat_v16sf(0.0f)), .., tgh_exp_v16sf(X16));

This module only prints: lowering (check_printable) has already refused what it cannot print.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from tilegraph import dtype as dt
from tilegraph.codegen import amx, int8
from tilegraph.codegen import bfloat16 as bf16
from tilegraph.codegen.names import NameTable
from tilegraph.codegen.vector_math import VECTOR_MATH, vector_math_helpers
from tilegraph.codegen.writer import CodeWriter
from tilegraph.dtype import DType
from tilegraph.errors import LoweringError
from tilegraph.loop.ir import (
    Allocate,
    AllReduce,
    Barrier,
    Buffer,
    BufferStore,
    For,
    Func,
    IfThenElse,
    Prefetch,
    Seq,
    Stmt,
    TileProduct,
)
from tilegraph.loop.visit import stmt_children, walk_stmts
from tilegraph.lower.passes.common import lanes_of
from tilegraph.lower.passes.dot_groups import grouped_layout
from tilegraph.lower.passes.pin_operand_vectors import OPERAND_SCOPE
from tilegraph.te.arith import affine, int_const
from tilegraph.te.dims import reads_dims
from tilegraph.te.expr import BinOp, Broadcast, BufferLoad, Call, Cast, Cmp, Const, Expr, Not, Ramp, Select, Var
from tilegraph.te.visit import walk

C_TYPES = {
    "float32": "float", "float64": "double", "float16": "tg_half", "int8": "int8_t", "uint8": "uint8_t",
    "int16": "int16_t", "uint16": "uint16_t", "int32": "int32_t", "uint32": "uint32_t", "int64": "int64_t",
    "uint64": "uint64_t", "bool": "uint8_t", "bfloat16": "float",  # a bfloat16 value (codegen/bfloat16.py)
}
# C computes operands narrower than int in int: the IR's arithmetic on them wraps at every operation
NARROW_INTS = ("int8_t", "uint8_t", "int16_t", "uint16_t")
# integer types beside int32_t/int64_t, with max/min (and, unsigned, floordiv/floormod) helpers
OTHER_INTS = ("int8_t", "uint8_t", "int16_t", "uint16_t", "uint32_t", "uint64_t")
_VECTOR_SUFFIX = {"float32": "sf", "int32": "si"}
_VALUE_SUFFIX = {**_VECTOR_SUFFIX, "bfloat16": "sf"}  # bfloat16 lanes are held in float vectors
_VECTOR_ELEMENT = {"float32": "float", "int32": "int32_t"}
_VECTOR_WIDTHS = (4, 8, 16)
_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "and": "&&", "or": "||", "bitand": "&", "bitor": "|",
          "bitxor": "^", "shl": "<<", "shr": ">>"}
_WRAPPING_OPS = ("add", "sub", "mul", "floordiv", "floormod", "shl", "bitxor", "bitor", "bitand")
_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_MATH = {"exp": "exp", "log": "log", "sqrt": "sqrt", "tanh": "tanh", "erf": "erf", "floor": "floor", "ceil": "ceil",
         **{f: f for f in ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh")},
         "round": "rint"}  # rint: to nearest, ties to even, in the default rounding mode
UNROLL_HINT = 16


@dataclass(frozen=True)
class CSource:
    code: str
    entry: str


def ctype(d: DType) -> str:
    if d.lanes > 1:
        return vector_type(d.scalar, d.lanes)
    try:
        return C_TYPES[d.name]
    except KeyError:
        raise LoweringError(f"dtype {d} has no C spelling") from None


def vector_type(elem: DType, lanes: int) -> str:
    return f"v{lanes}{_VALUE_SUFFIX[elem.name]}"


def storage_ctype(d: DType) -> str:
    """The C type of a buffer's elements (a bfloat16 buffer holds uint16_t bits)."""
    return bf16.STORAGE if d.name == "bfloat16" and d.lanes == 1 else ctype(d)


def c_const(c: Const) -> str:
    """The exact C literal of a constant (hex floats; INFINITY/NAN by name)."""
    d = c.dtype
    if d.kind == "bool":
        return "1" if c.value else "0"
    if d.is_float:
        narrow = d.bits <= 32  # float16/bfloat16 constants are float literals of their value (exact)
        value = dt.round_to(c.value, d.scalar)
        suffix = "f" if narrow else ""
        if math.isnan(value):
            return "NAN" if narrow else "((double)NAN)"
        if math.isinf(value):
            return ("INFINITY" if value > 0 else "(-INFINITY)") if narrow else \
                ("((double)INFINITY)" if value > 0 else "(-(double)INFINITY)")
        text = value.hex() + suffix
        return f"({text})" if value < 0 or text.startswith("-") else text
    value = int(c.value)
    if d.name == "int64":
        return f"INT64_C({value})"
    if d.name in ("uint32", "uint64"):
        return f"(({ctype(d)})UINT64_C({value}))"
    if d.name == "int32":
        if value == -(2 ** 31):
            return "(-2147483647 - 1)"
        return f"({value})" if value < 0 else str(value)
    return f"(({ctype(d)}){value})"


def division_helpers(qualifier: str, float_types: tuple[str, ...]) -> list[str]:
    """C definitions of floordiv/floormod, the IR's meaning of `//` and `%` (see te/expr.py):
    floor semantics as in Python and numpy; `x // 0 == x % 0 == 0`; `INT_MIN // -1 == INT_MIN`
    (two's-complement wrap) and `INT_MIN % -1 == 0`. The checks keep any input from trapping
    (SIGFPE); with a constant positive divisor, as in index arithmetic, the compiler folds them
    away. Float: `floor(a / b)` and `a - floor(a / b) * b`, as the interpreter computes them."""
    lines = []
    for t, u in (("int32_t", "uint32_t"), ("int64_t", "uint64_t")):
        lines.append(f"{qualifier} {t} tgh_floordiv_{t}({t} a, {t} b) {{ if (b == 0) return 0; "
                     f"if (b == -1) return ({t})(({u})0 - ({u})a); "
                     f"{t} q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; }}")
        lines.append(f"{qualifier} {t} tgh_floormod_{t}({t} a, {t} b) {{ if (b == 0 || b == -1) return 0; "
                     f"{t} r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }}")
    for t in ("uint32_t", "uint64_t"):  # unsigned: floor is truncation
        lines.append(f"{qualifier} {t} tgh_floordiv_{t}({t} a, {t} b) {{ return b == 0 ? 0 : a / b; }}")
        lines.append(f"{qualifier} {t} tgh_floormod_{t}({t} a, {t} b) {{ return b == 0 ? 0 : a % b; }}")
    for t in float_types:  # floormod: numpy's mod (fmod, moved to the divisor's sign; a zero keeps b's sign)
        f = "f" if t == "float" else ""
        lines.append(f"{qualifier} {t} tgh_floordiv_{t}({t} a, {t} b) {{ return floor{f}(a / b); }}")
        lines.append(f"{qualifier} {t} tgh_floormod_{t}({t} a, {t} b) {{ {t} r = fmod{f}(a, b); "
                     f"if (r != 0) {{ if ((r < 0) != (b < 0)) r += b; }} else r = copysign{f}(({t})0, b); return r; }}")
    return lines


def _prelude() -> str:
    w = CodeWriter()
    for inc in ("math.h", "stdint.h", "stdlib.h"):
        w.raw(f"#include <{inc}>")
    w.line()
    for lanes in _VECTOR_WIDTHS:
        for name, suffix in _VECTOR_SUFFIX.items():
            elem = _VECTOR_ELEMENT[name]
            t = f"v{lanes}{suffix}"
            w.line(f"typedef {elem} {t} __attribute__((vector_size({lanes * 4})));")
            w.line(f"typedef {elem} {t}_u __attribute__((vector_size({lanes * 4}), aligned(4)));")
    w.line()
    w.line("static inline void* tgh_alloc(size_t n) { return aligned_alloc(64, (n + 63) / 64 * 64); }")
    # float16 storage: GCC's _Float16 (x86-64 and AArch64); arithmetic runs in float, rounded on store
    w.line("typedef _Float16 tg_half;")
    for line in division_helpers("static inline", ("float", "double")):
        w.line(line)
    w.line("static inline tg_half tgh_floordiv_tg_half(tg_half a, tg_half b) { return floorf((float)a / (float)b); }")
    w.line("static inline tg_half tgh_floormod_tg_half(tg_half a, tg_half b) "
           "{ return tgh_floormod_float((float)a, (float)b); }")
    w.line("static inline tg_half tgh_sigmoid_tg_half(tg_half x) { return 1.0f / (1.0f + expf(-(float)x)); }")
    w.line("static inline tg_half tgh_abs_tg_half(tg_half x) { return fabsf((float)x); }")
    w.line("static inline tg_half tgh_max_tg_half(tg_half a, tg_half b) { return (a > b || a != a) ? a : b; }")
    w.line("static inline tg_half tgh_min_tg_half(tg_half a, tg_half b) { return (a < b || a != a) ? a : b; }")
    for t, f in (("float", "f"), ("double", "")):
        w.line(f"static inline {t} tgh_sigmoid_{t}({t} x) {{ return ({t})1 / (({t})1 + exp{f}(-x)); }}")
    # abs by clearing the sign bit: GCC 12 folds `0.0f - fabsf(x)` and `-fabsf(x) + 0.0f` to
    # `-fabsf(x)`, which is -0.0 where IEEE (and the interpreter) give +0.0 for x == 0
    for t, u, sign in (("float", "uint32_t", "0x7fffffffu"), ("double", "uint64_t", "0x7fffffffffffffffull")):
        w.line(f"static inline {t} tgh_abs_{t}({t} x) {{ union {{ {t} f; {u} u; }} v = {{x}}; v.u &= {sign}; "
               f"return v.f; }}")
    for t in ("float", "double"):
        w.line(f"static inline {t} tgh_max_{t}({t} a, {t} b) {{ return (a > b || a != a) ? a : b; }}")
        w.line(f"static inline {t} tgh_min_{t}({t} a, {t} b) {{ return (a < b || a != a) ? a : b; }}")
    for t in (*OTHER_INTS, "int32_t", "int64_t"):
        w.line(f"static inline {t} tgh_max_{t}({t} a, {t} b) {{ return a > b ? a : b; }}")
        w.line(f"static inline {t} tgh_min_{t}({t} a, {t} b) {{ return a < b ? a : b; }}")
    for lanes in _VECTOR_WIDTHS:
        for name, suffix in _VECTOR_SUFFIX.items():
            elem = _VECTOR_ELEMENT[name]
            t, mask = f"v{lanes}{suffix}", f"v{lanes}si"
            splat = ", ".join(["x"] * lanes)
            w.line(f"static inline {t} tgh_splat_{t}({elem} x) {{ return ({t}){{{splat}}}; }}")
            w.line(f"static inline {t} tgh_blend_{t}({mask} m, {t} a, {t} b) "
                   f"{{ return ({t})((m & ({mask})a) | (~m & ({mask})b)); }}")
            for op, cmp in (("max", ">"), ("min", "<")):
                nan = " | (a != a)" if name == "float32" else ""
                w.line(f"static inline {t} tgh_{op}_{t}({t} a, {t} b) {{ {mask} m = (a {cmp} b){nan}; "
                       f"return ({t})((m & ({mask})a) | (~m & ({mask})b)); }}")
    return w.text()


INT32_MAX = 2**31 - 1

# An empty asm that claims a vector register for a value (and says it may change it), so the C
# compiler keeps it there instead of folding each use into an instruction as a memory operand
# (lower/passes/pin_operand_vectors.py says why). The constraint is the ISA's vector register
# class; elsewhere the pin is nothing.
PIN_MACRO = """#if defined(__AVX512F__)
#define TGH_PIN(x) __asm__("" : "+v"(x))
#elif defined(__x86_64__) || defined(__i386__)
#define TGH_PIN(x) __asm__("" : "+x"(x))
#elif defined(__aarch64__)
#define TGH_PIN(x) __asm__("" : "+w"(x))
#else
#define TGH_PIN(x) ((void)0)
#endif
"""


def _needs_wide_index(func: Func) -> bool:
    """Whether some buffer has more elements, or some loop more iterations, than int32 counts."""
    buffers = [*func.params, *(s.buffer for s in walk_stmts(func.body) if isinstance(s, Allocate))]
    return (any(math.prod(b.shape) > INT32_MAX for b in buffers)
            or any(s.extent > INT32_MAX for s in walk_stmts(func.body) if isinstance(s, For)))


class _Printer:
    def __init__(self, func: Func):
        self.func = func
        self.names = NameTable()
        self.w = CodeWriter()
        self.parallel_depth = 0
        self.vector_math: set[tuple[str, int]] = set()  # (intrinsic, lanes) helpers the code calls
        self.bfloat16_lanes: set[int] | None = None  # vector widths of bfloat16 helpers used; None: no bfloat16
        self.bfloat16_dot: set[str] = set()  # B's layouts ("rows", "pairs") of the bf16 dot steps called
        self.int8_loads: set[tuple[str, int]] = set()  # (uint8 | int8, lanes) widening loads used (codegen/int8.py)
        self.int8_dot: set[tuple[int, str]] = set()  # (lanes, B's layout) of the u8s8 dot steps called
        self.tile_products = 0  # TileProducts printed (codegen/amx.py): their prelude, and unique names
        # their tile configurations (codegen/amx.py), and the one every product uses, loaded per task
        self.tile_configs = list(dict.fromkeys(amx.config_text(s) for s in walk_stmts(func.body)
                                               if isinstance(s, TileProduct)))
        self.shared_tile_config = len(self.tile_configs) == 1
        self.pins = False  # whether an operand register is pinned (TGH_PIN, lower/passes/pin_operand_vectors.py)
        # int32 index arithmetic unless a buffer or loop is too large for it: then every int32
        # variable is declared int64_t and C's promotions carry the 64 bits through each index.
        self.index_type = "int64_t" if _needs_wide_index(func) else "int32_t"

    def int_type(self, d: DType) -> str:
        """The C type of a scalar integer expression or variable (int32 widens with index_type)."""
        t = ctype(d)
        return self.index_type if t == "int32_t" else t

    # ------------------------------------------------------------------ names
    def buf(self, b: Buffer) -> str:
        return self.names.get("buffer", b.name)

    def var(self, v: Var) -> str:
        return self.names.get("var", v.name)

    def register(self, b: Buffer, slot: int) -> str:
        return self.names.get("register", f"{b.name}_{slot}")

    # ------------------------------------------------------------------ expressions
    def uses_bfloat16(self, lanes: int) -> str:
        """Note that the bfloat16 helpers of `lanes` are needed; returns their suffix."""
        if self.bfloat16_lanes is None:
            self.bfloat16_lanes = set()
        if lanes > 1:
            self.bfloat16_lanes.add(lanes)
            return f"_v{lanes}sf"
        return ""

    def expr(self, e: Expr) -> str:
        text = self._expr(e)
        if e.dtype.name == "bfloat16" and isinstance(e, (BinOp, Cast, Call)):
            # computed in float: rounded back to bfloat16 after every operation, as the interpreter does
            return f"tgh_round_bf16{self.uses_bfloat16(lanes_of(e))}({text})"
        return text

    def _expr(self, e: Expr) -> str:
        if isinstance(e, Var):
            return self.var(e)
        if isinstance(e, Const):
            return c_const(e)
        if isinstance(e, BufferLoad):
            return self.load(e)
        if isinstance(e, Broadcast):
            return f"tgh_splat_{vector_type(e.value.dtype.scalar, e.lanes)}({self.expr(e.value)})"
        if isinstance(e, BinOp):
            return self.binop(e)
        if isinstance(e, Cmp):
            return f"({self.expr(e.a)} {_CMP[e.op]} {self.expr(e.b)})"
        if isinstance(e, Not):
            return f"(~{self.expr(e.a)})" if lanes_of(e) > 1 else f"(!{self.expr(e.a)})"
        if isinstance(e, Select):
            if lanes_of(e.cond) > 1:
                vt = vector_type(e.dtype.scalar, lanes_of(e))
                return f"tgh_blend_{vt}({self.expr(e.cond)}, {self.expr(e.true_value)}, {self.expr(e.false_value)})"
            return f"({self.expr(e.cond)} ? {self.expr(e.true_value)} : {self.expr(e.false_value)})"
        if isinstance(e, Cast):
            if lanes_of(e) > 1 and isinstance(e.value, BufferLoad) and e.value.buffer.dtype.name in int8.LOADS:
                return self.widening_load(e)
            if lanes_of(e) > 1:
                return f"__builtin_convertvector({self.expr(e.value)}, {vector_type(e.dtype.scalar, lanes_of(e))})"
            if e.dtype.kind == "bool":
                return f"({self.expr(e.value)} != 0)"
            return f"(({ctype(e.dtype)}){self.expr(e.value)})"
        if isinstance(e, Call):
            return self.call(e)
        raise LoweringError(f"the C printer cannot print {type(e).__name__} (lowering should have refused it)")

    def binop(self, e: BinOp) -> str:
        a, b = self.expr(e.a), self.expr(e.b)
        lanes = lanes_of(e)
        if e.op in ("and", "or") and lanes > 1:  # lane masks: -1 / 0 per lane
            return f"({a} {'&' if e.op == 'and' else '|'} {b})"
        t = vector_type(e.dtype.scalar, lanes) if lanes > 1 else ctype(e.dtype.scalar)
        if e.op == "div" and not e.dtype.is_float:
            raise LoweringError(f"'/' on {e.dtype} has no meaning in the IR (use '//', floor division)")
        if t in NARROW_INTS and e.op in _WRAPPING_OPS:
            # C computes 8- and 16-bit operands in int; the IR's arithmetic on them wraps at every operation.
            inner = f"tgh_{e.op}_int32_t({a}, {b})" if e.op.startswith("floor") else f"({a} {_INFIX[e.op]} {b})"
            return f"(({t}){inner})"
        if e.op in _INFIX:
            return f"({a} {_INFIX[e.op]} {b})"
        if e.op in ("max", "min", "floordiv", "floormod"):
            return f"tgh_{e.op}_{self.int_type(e.dtype) if t == 'int32_t' else t}({a}, {b})"
        if e.op == "pow":
            f = "powf" if e.dtype.scalar in (dt.float32, dt.bfloat16) else "pow"
            return f"(({t}){f}({a}, {b}))"
        raise LoweringError(f"the C printer has no spelling for the operator {e.op!r}")

    def call(self, e: Call) -> str:
        if e.name == "bf16_dot2":
            return self.bf16_dot2(e)
        if e.name == "u8s8_dot4":
            return self.u8s8_dot4(e)
        x = self.expr(e.args[0])
        d = e.dtype.scalar
        lanes = lanes_of(e)
        if lanes > 1:
            if e.name not in VECTOR_MATH or d not in (dt.float32, dt.bfloat16, dt.int32) or \
                    (d == dt.int32 and e.name != "abs"):
                raise LoweringError(f"the C printer has no vector spelling for {e.name} of {d}")
            self.vector_math.add((e.name, lanes))
            return f"tgh_{e.name}_{vector_type(d, lanes)}({x})"
        if not d.is_float:
            if e.name == "abs":
                return f"llabs({x})" if d.name == "int64" else f"abs({x})"
            raise LoweringError(f"{e.name} of an integer has no C spelling")
        f = "f" if d.bits <= 32 else ""  # float16 computes through the float functions
        one = "1.0f" if d.bits <= 32 else "1.0"
        if e.name in _MATH:
            return f"{_MATH[e.name]}{f}({x})"
        if e.name == "abs":
            return f"tgh_abs_{ctype(d)}({x})"
        if e.name == "rsqrt":
            return f"({one} / sqrt{f}({x}))"
        if e.name == "sigmoid":
            return f"tgh_sigmoid_{ctype(d)}({x})"
        raise LoweringError(f"the C printer has no spelling for the intrinsic {e.name!r}")

    def load(self, e: BufferLoad) -> str:
        b = e.buffer
        (idx,) = e.indices
        if b.dtype.lanes > 1:
            return self.register(b, _const_slot(idx, b))
        if b.dtype.name == "bfloat16":
            return self.load_bfloat16(b, idx)
        if isinstance(idx, Ramp):
            vt = vector_type(b.dtype, idx.lanes)
            if idx.stride == 1:
                return f"(*({vt}_u*)({self.buf(b)} + {self.expr(idx.base)}))"
            tmp = self.names.fresh("temp", "base")
            lanes = ", ".join(f"{self.buf(b)}[{tmp} + {k * idx.stride}]" for k in range(idx.lanes))
            return f"({{ {self.index_type} {tmp} = {self.expr(idx.base)}; ({vt}){{{lanes}}}; }})"
        return f"{self.buf(b)}[{self.expr(idx)}]"

    def bf16_dot2(self, e: Call) -> str:
        """acc + a0*b0 + a1*b1 (lower/passes/pair_bf16_products.py): a0, a1 as bits, b0, b1 as addresses."""
        acc, a0, a1, b0, b1 = e.args
        if not all(isinstance(x, BufferLoad) for x in (a0, a1, b0, b1)) or lanes_of(e) != 16:
            raise LoweringError("bf16_dot2 takes a 16-lane accumulator and four bfloat16 loads")
        stride = grouped_layout((b0, b1), 2)  # type: ignore[arg-type]
        if stride is None:
            raise LoweringError("bf16_dot2 reads B as rows or pairs (lower/passes/dot_groups.py grouped_layout)")
        self.uses_bfloat16(16)
        self.bfloat16_dot.add("rows" if stride == 1 else "pairs")
        bits = [f"{self.buf(x.buffer)}[{self.expr(x.indices[0])}]" for x in (a0, a1)]  # type: ignore[attr-defined]
        rows = [f"{self.buf(x.buffer)} + {self.expr(x.indices[0].base)}" for x in (b0, b1)]  # type: ignore[attr-defined]
        if stride == 2:
            return f"tgh_bf16_dot2p_v16sf({self.expr(acc)}, {bits[0]}, {bits[1]}, {rows[0]})"
        return f"tgh_bf16_dot2_v16sf({self.expr(acc)}, {bits[0]}, {bits[1]}, {rows[0]}, {rows[1]})"

    def widening_load(self, e: Cast) -> str:
        """Cast(int32 or float32 lanes, 8-bit integers at ramp(base, 1, lanes)): one widening load."""
        load = e.value
        (idx,) = load.indices  # type: ignore[attr-defined]
        lanes = lanes_of(e)
        if not isinstance(idx, Ramp) or lanes not in _VECTOR_WIDTHS or e.dtype.scalar not in (dt.int32, dt.float32):
            raise LoweringError(f"the C printer widens 8-bit integers from ramp loads into int32 or float32 "
                                f"vectors of 4, 8 or 16 lanes, got {e.dtype} of {idx}")
        if idx.stride != 1:  # a gather, each byte widened
            tmp = self.names.fresh("temp", "base")
            scalar = "int32_t" if e.dtype.scalar == dt.int32 else "float"
            values = ", ".join(f"({scalar}){self.buf(load.buffer)}[{tmp} + {k * idx.stride}]"  # type: ignore[attr-defined]
                               for k in range(lanes))
            vt = vector_type(e.dtype.scalar, lanes)
            return f"({{ {self.index_type} {tmp} = {self.expr(idx.base)}; ({vt}){{{values}}}; }})"
        name = load.buffer.dtype.name  # type: ignore[attr-defined]
        self.int8_loads.add((name, lanes))
        text = f"tgh_{int8.LOADS[name][0]}_load_v{lanes}si({self.buf(load.buffer)} + {self.expr(idx.base)})"  # type: ignore[attr-defined]
        return text if e.dtype.scalar == dt.int32 else f"__builtin_convertvector({text}, v{lanes}sf)"

    def u8s8_dot4(self, e: Call) -> str:
        """acc + a0*b0 + .. + a3*b3 (lower/passes/group_int8_products.py): A's four consecutive
        bytes by the first one's address, B's four rows by theirs."""
        acc, a, b = e.args[0], e.args[1:5], e.args[5:]
        lanes = lanes_of(e)
        if not all(isinstance(x, BufferLoad) for x in (*a, *b)) or lanes not in (8, 16) or len(b) != 4:
            raise LoweringError("u8s8_dot4 takes an 8- or 16-lane accumulator, four uint8 loads and four int8 row loads")
        stride = grouped_layout(b, 4)  # type: ignore[arg-type]
        if stride is None:
            raise LoweringError("u8s8_dot4 reads B as rows, quads or pairs (lower/passes/dot_groups.py grouped_layout)")
        layout = {1: "rows", 2: "pairs", 4: "quads"}[stride]
        self.int8_dot.add((lanes, layout))
        first = f"{self.buf(a[0].buffer)} + {self.expr(a[0].indices[0])}"  # type: ignore[attr-defined]
        starts = {"rows": b, "quads": b[:1], "pairs": b[::2]}[layout]
        rows = ", ".join(f"{self.buf(x.buffer)} + {self.expr(x.indices[0].base)}" for x in starts)  # type: ignore[attr-defined]
        return f"tgh_u8s8_{int8.LAYOUTS[layout]}_v{lanes}si({self.expr(acc)}, {first}, {rows})"

    def load_bfloat16(self, b: Buffer, idx: Expr) -> str:
        if not isinstance(idx, Ramp):
            self.uses_bfloat16(1)
            return f"tgh_bf16_value({self.buf(b)}[{self.expr(idx)}])"
        if idx.stride == 1:
            return f"tgh_bf16_load{self.uses_bfloat16(idx.lanes)}({self.buf(b)} + {self.expr(idx.base)})"
        self.uses_bfloat16(1)
        tmp = self.names.fresh("temp", "base")
        lanes = ", ".join(f"tgh_bf16_value({self.buf(b)}[{tmp} + {k * idx.stride}])" for k in range(idx.lanes))
        return f"({{ {self.index_type} {tmp} = {self.expr(idx.base)}; ({vector_type(b.dtype, idx.lanes)}){{{lanes}}}; }})"

    # ------------------------------------------------------------------ statements
    def stmt(self, s: Stmt) -> None:
        if isinstance(s, Seq):
            for x in s.stmts:
                self.stmt(x)
        elif isinstance(s, For):
            self.loop(s)
        elif isinstance(s, IfThenElse):
            with self.w.block(f"if ({self.expr(s.cond)})"):
                self.stmt(s.then_body)
            if s.else_body is not None:
                with self.w.block("else"):
                    self.stmt(s.else_body)
        elif isinstance(s, BufferStore):
            self.store(s)
        elif isinstance(s, Allocate):
            with self.w.block(""):
                self.declare(s.buffer)
                self.stmt(s.body)
                self.release(s.buffer)
        elif isinstance(s, TileProduct):
            self.tile_product(s)
        elif isinstance(s, Prefetch):
            self.prefetch(s)
        elif isinstance(s, (Barrier, AllReduce)):
            raise LoweringError(f"a {type(s).__name__} cannot be printed as C (lowering should have refused it)")
        else:
            raise LoweringError(f"the C printer cannot print {type(s).__name__} (lowering should have refused it)")

    def prefetch(self, s: Prefetch) -> None:
        """Each of the lines from &buffer[index] (a hint: GCC's builtin issues prefetcht0/t1/t2/nta)."""
        start = f"(const char*)({self.buf(s.buffer)} + {self.expr(s.index)})"
        for line in range(s.lines):
            self.w.line(f"__builtin_prefetch({start}{f' + {64 * line}' if line else ''}, 0, {s.locality});")

    def tile_product(self, s: TileProduct) -> None:
        """A matrix unit's product (AMX tiles: codegen/amx.py), as one C block."""
        buffers = (s.acc, s.a, s.b)
        config = None if self.shared_tile_config else self.tile_configs.index(amx.config_text(s))
        lines = amx.tile_product_lines(
            s, {b.name: self.buf(b) for b in buffers}, {b.name: storage_ctype(b.dtype) for b in buffers},
            (self.expr(s.acc_at), self.expr(s.a_at), self.expr(s.b_at)), self.index_type, self.tile_products, config)
        self.tile_products += 1
        for line in lines:
            self.w.line(line)

    def loop(self, s: For) -> None:
        parallel = s.kind == "parallel" and self.parallel_depth == 0
        if parallel:
            self.w.raw("#pragma omp parallel for num_threads(num_threads)")
        elif s.kind == "vectorized":
            self.w.raw("#pragma GCC ivdep")
        elif s.kind == "unrolled":
            self.w.raw(f"#pragma GCC unroll {UNROLL_HINT}")
        v = self.var(s.var)
        live = self._live_extent(s) if parallel else None
        bound = str(s.extent) if live is None else f"tgh_min_{self.int_type(s.var.dtype)}({s.extent}, {live})"
        self.parallel_depth += parallel
        with self.w.block(f"for ({self.int_type(s.var.dtype)} {v} = 0; {v} < {bound}; ++{v})"):
            tiles = parallel and self.shared_tile_config and any(isinstance(x, TileProduct) for x in walk_stmts(s.body))
            if tiles:  # each task's thread: the products below take the configuration as it is
                self.w.line(amx.enter_tiles(0, "tgh_task_tiles"))
            self.stmt(s.body)
            if tiles:
                self.w.line(amx.leave_tiles(0, "tgh_task_tiles"))
        self.parallel_depth -= parallel

    def _live_extent(self, s: For) -> str | None:
        """The iterations of a parallel loop that can run, where its body is one `if` whose guard
        bounds the loop's index by the run-time dims (lower/passes/skip_past_dims.py: `v*k + c < N`,
        or `(v // q)*k + c < N` of a fused loop): the loop runs to that bound, so the threads share
        the live iterations (a batch of 1 of 8 had run on one thread: the static shares gave all of
        it to the first).
        The iterations left out are the ones whose guard is false: no meaning changes."""
        if not isinstance(s.body, IfThenElse) or s.body.else_body is not None:
            return None
        stack = [s.body.cond]
        while stack:
            c = stack.pop()
            if isinstance(c, BinOp) and c.op == "and":
                stack += [c.a, c.b]
                continue
            if not (isinstance(c, Cmp) and c.op == "lt" and reads_dims(c.b) and not reads_dims(c.a)) \
                    or any(x == s.var for x in walk(c.b)):  # the bound must not move with the loop
                continue
            terms, constant = affine(c.a)
            if len(terms) != 1:
                continue
            (atom, k), = terms.items()
            q = 1
            if isinstance(atom, BinOp) and atom.op == "floordiv" and atom.a == s.var and (int_const(atom.b) or 0) > 0:
                atom, q = s.var, int_const(atom.b)  # v // q: a fused loop's outer index
            if atom != s.var or k <= 0:
                continue
            # v // q * k + constant < N  <=>  v < q * ceil((N - constant) / k)
            live = f"(({self.expr(c.b)}) - {constant} + {k - 1}) / {k}" if k > 1 or constant else f"({self.expr(c.b)})"
            return live if q == 1 else f"({live}) * {q}"
        return None

    def store(self, s: BufferStore) -> None:
        b = s.buffer
        (idx,) = s.indices
        if b.dtype.name in int8.LOADS and isinstance(idx, Ramp):  # int32 lanes, each stored as its low byte
            self.int8_loads.add((b.dtype.name, idx.lanes))
            lanes = self.expr(s.value.value)  # type: ignore[attr-defined]
            self.w.line(f"tgh_{int8.LOADS[b.dtype.name][0]}_store_v{idx.lanes}si({self.buf(b)} + {self.expr(idx.base)}, "
                        f"{lanes});")
            return
        if b.dtype.name == "bfloat16" and isinstance(s.value, Cast) and s.value.dtype.name == "bfloat16":
            value = self._expr(s.value)  # the store narrows to bits, which rounds: no rounding before it
        else:
            value = self.expr(s.value)
        if b.dtype.lanes > 1:
            reg = self.register(b, _const_slot(idx, b))
            self.w.line(f"{reg} = {value};")
            if b.scope == OPERAND_SCOPE:
                self.pins = True
                self.w.line(f"TGH_PIN({reg});")
        elif b.dtype.name == "bfloat16" and isinstance(idx, Ramp):
            self.w.line(f"tgh_bf16_store{self.uses_bfloat16(idx.lanes)}({self.buf(b)} + {self.expr(idx.base)}, {value});")
        elif b.dtype.name == "bfloat16":
            self.uses_bfloat16(1)
            self.w.line(f"{self.buf(b)}[{self.expr(idx)}] = tgh_bf16_bits({value});")
        elif isinstance(idx, Ramp):
            vt = vector_type(b.dtype, idx.lanes)
            self.w.line(f"*({vt}_u*)({self.buf(b)} + {self.expr(idx.base)}) = {value};")
        else:
            self.w.line(f"{self.buf(b)}[{self.expr(idx)}] = {value};")

    def declare(self, b: Buffer) -> None:
        if b.dtype.lanes > 1:
            regs = ", ".join(self.register(b, k) for k in range(b.size))
            self.w.line(f"{ctype(b.dtype)} {regs};")
        elif b.scope == "global":
            t = storage_ctype(b.dtype)
            self.w.line(f"{t}* restrict {self.buf(b)} = ({t}*)tgh_alloc({b.size} * sizeof({t}));")
        else:
            self.w.line(f"{storage_ctype(b.dtype)} {self.buf(b)}[{b.size}] __attribute__((aligned(64)));")

    def release(self, b: Buffer) -> None:
        if b.dtype.lanes == 1 and b.scope == "global":
            self.w.line(f"free({self.buf(b)});")

    # ------------------------------------------------------------------ function
    def function(self) -> str:
        f = self.func
        entry = self.names.get("func", f.name)
        params = [f"{storage_ctype(b.dtype)}* restrict {self.buf(b)}" for b in f.params]
        params.append("int32_t num_threads")
        allocated_inside = {s.buffer.name for s in walk_stmts(f.body) if isinstance(s, Allocate)}
        top = [b for b in f.allocs if b.name not in allocated_inside]
        with self.w.block(f"void {entry}({', '.join(params)})"):
            self.w.line("if (num_threads < 1) num_threads = 1;")
            tiles = self.shared_tile_config and _tile_product_outside_parallel(f.body)
            if tiles:  # the calling thread runs the products outside the tasks
                self.w.line(amx.enter_tiles(0, "tgh_call_tiles"))
            for b in top:
                self.declare(b)
            self.stmt(f.body)
            for b in top:
                self.release(b)
            if tiles:
                self.w.line(amx.leave_tiles(0, "tgh_call_tiles"))
        return entry


CFamilyPrinter = _Printer  # the base the GPU printers (codegen/gpu_dialect.py) extend


def _tile_product_outside_parallel(s: Stmt) -> bool:
    if isinstance(s, TileProduct):
        return True
    if isinstance(s, For) and s.kind == "parallel":
        return False
    return any(_tile_product_outside_parallel(k) for k in stmt_children(s))


def _const_slot(idx: Expr, b: Buffer) -> int:
    if not isinstance(idx, Const):
        raise LoweringError(f"register buffer {b.name} indexed by a non-constant (promote_registers should not allow it)")
    return int(idx.value)


def kernel_signature(params: Sequence[Buffer]) -> str:
    """What a kernel library says it computes: its parameters' dtypes and element counts, in order
    (inputs then outputs; lowering flattens shapes, so counts are what the code indexes). Each C
    library exports it as `<entry>_signature`; loading a library checks it against the buffers it
    is called with (runtime/kernel.py), so a library of another kernel, or a saved model's edited
    shapes, is refused before anything runs."""
    return "tilegraph-kernel-1 " + " ".join(f"{b.dtype.name}[{math.prod(b.shape)}]" for b in params)


def codegen_c(func: Func) -> CSource:
    """Print a lowered Func (see tilegraph.lower.lower) as one C translation unit."""
    printer = _Printer(func)
    entry = printer.function()
    signature = f'const char {entry}_signature[] = "{kernel_signature(func.params)}";\n'
    helpers = vector_math_helpers(printer.vector_math)
    if printer.bfloat16_lanes is not None:
        helpers += bf16.bfloat16_helpers(printer.bfloat16_lanes, dot=printer.bfloat16_dot)
    if printer.int8_loads or printer.int8_dot:
        helpers += int8.int8_helpers(printer.int8_loads, printer.int8_dot)
    if printer.pins:
        helpers += PIN_MACRO
    if printer.tile_products:
        helpers += amx.PRELUDE + "\n" + amx.config_definitions(printer.tile_configs)
    return CSource(_prelude() + helpers + "\n" + printer.w.text() + signature, entry)


__all__ = ["CFamilyPrinter", "CSource", "VECTOR_MATH", "codegen_c", "c_const", "ctype", "kernel_signature",
           "vector_math_helpers"]

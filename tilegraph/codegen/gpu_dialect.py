"""The one table of CUDA C / OpenCL C differences, and the GPU printer both dialects share.

    src = print_gpu_program(program, CUDA)       # program: lower.gpu GpuProgram
    src.code, src.kernels                         # kernel entry names in launch order

Thread and block loops become index builtins, guarded where the loop is smaller than its block
dimension; shared buffers are declared once at the top of the kernel; a Barrier is the dialect's
block barrier. Everything else is the C printer's (codegen/c.py), with math spelled per dialect.

    for tx in range(64) threadIdx.x:        {  const int32_t x_tx = (int32_t)threadIdx.x;      (CUDA)
      C[tx] = A[tx] * 2.0f           ->        b_C[x_tx] = (b_A[x_tx] * 0x1p+1f);  }
                                            {  const int32_t x_tx = (int32_t)get_local_id(0); ... (OpenCL)
"""

from __future__ import annotations

from dataclasses import dataclass

from tilegraph.codegen.bfloat16 import bfloat16_helpers
from tilegraph.codegen.c import CFamilyPrinter, ctype, division_helpers, storage_ctype
from tilegraph.codegen.writer import CodeWriter
from tilegraph.errors import LoweringError
from tilegraph.loop.ir import Allocate, AllReduce, Barrier, Buffer, BufferStore, For, Prefetch, Stmt
from tilegraph.loop.visit import walk_stmts
from tilegraph.lower.gpu.common import AXES, BLOCK_KINDS, THREAD_IDX_KINDS
from tilegraph.lower.gpu.split_host_device import DeviceKernel, GpuProgram
from tilegraph.te.expr import BufferLoad, Ramp


@dataclass(frozen=True)
class Dialect:
    name: str
    kernel_qualifier: str            # before the return type of a kernel
    function_qualifier: str          # helper functions
    global_pointer: str              # a kernel parameter: {t} element type, {name} identifier
    shared_decl: str                 # a shared array declaration: {t}, {name}, {size}
    block_index: str                 # {axis}: 0/1/2 (OpenCL) or x/y/z (CUDA)
    thread_index: str
    barrier: str
    unroll_pragma: str
    vector_type: str                 # {t}{lanes}: float4 in both dialects
    prelude: str                     # includes / typedefs / math spellings
    launch_bounds: str               # per-kernel attribute: {threads}, {bx}, {by}, {bz}
    uses_axis_letters: bool
    shuffle_xor: str | None = None   # {mask}, {value}, {lane_mask}, {width}; None: lowering replaces AllReduce
    vector_copy: str = ""            # a 4-lane aligned copy: {v} vector type, {dst}/{src} element addresses
    local_align: str = ""            # before a per-thread array declaration


_CUDA_PRELUDE = """#include <stdint.h>
#include <math.h>
"""

# OpenCL C has overloaded math (exp, not expf) and no <stdint.h>.
_OPENCL_PRELUDE = """typedef char int8_t;
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
"""

CUDA = Dialect(
    name="cuda",
    kernel_qualifier='extern "C" __global__',
    function_qualifier="static __device__ __forceinline__",
    global_pointer="{t}* __restrict__ {name}",
    shared_decl="__shared__ __align__(16) {t} {name}[{size}];",
    block_index="blockIdx.{axis}",
    thread_index="threadIdx.{axis}",
    barrier="__syncthreads();",
    unroll_pragma="#pragma unroll",
    vector_type="{t}{lanes}",
    prelude=_CUDA_PRELUDE,
    launch_bounds="__launch_bounds__({threads})",
    uses_axis_letters=True,
    shuffle_xor="__shfl_xor_sync({mask}, {value}, {lane_mask}, {width})",
    vector_copy="*({v}*)({dst}) = *(const {v}*)({src});",
    local_align="__align__(16) ",
)

OPENCL = Dialect(
    name="opencl",
    kernel_qualifier="__kernel",
    function_qualifier="static inline",
    global_pointer="__global {t}* restrict {name}",
    shared_decl="__local {t} {name}[{size}];",
    block_index="get_group_id({axis})",
    thread_index="get_local_id({axis})",
    barrier="barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);",
    unroll_pragma="#pragma unroll",
    vector_type="{t}{lanes}",
    prelude=_OPENCL_PRELUDE,
    launch_bounds="__attribute__((reqd_work_group_size({bx}, {by}, {bz})))",
    uses_axis_letters=False,
    vector_copy="vstore4(vload4(0, {src}), 0, {dst});",
)

DIALECTS = {"cuda": CUDA, "opencl": OPENCL}


def helpers(d: Dialect) -> str:
    """floordiv/floormod/max/min/sigmoid/abs helpers the C printer's expressions call."""
    q = d.function_qualifier
    w = CodeWriter()
    ints = ("int8_t", "uint8_t", "int32_t", "int64_t")
    floats = [("float", "f")] + ([("double", "")] if d is CUDA else [])
    for line in division_helpers(q, tuple(t for t, _ in floats)):
        w.line(line)
    for t in ints:
        w.line(f"{q} {t} tgh_max_{t}({t} a, {t} b) {{ return a > b ? a : b; }}")
        w.line(f"{q} {t} tgh_min_{t}({t} a, {t} b) {{ return a < b ? a : b; }}")
    for t, f in floats:
        w.line(f"{q} {t} tgh_sigmoid_{t}({t} x) {{ return ({t})1 / (({t})1 + exp{f}(-x)); }}")
        w.line(f"{q} {t} tgh_abs_{t}({t} x) {{ return fabs{f}(x); }}")
        w.line(f"{q} {t} tgh_max_{t}({t} a, {t} b) {{ return (a > b || a != a) ? a : b; }}")
        w.line(f"{q} {t} tgh_min_{t}({t} a, {t} b) {{ return (a < b || a != a) ? a : b; }}")
    return w.text()


class GpuPrinter(CFamilyPrinter):
    """Prints one DeviceKernel in a dialect."""

    def __init__(self, kernel: DeviceKernel, dialect: Dialect):
        super().__init__(kernel.func)
        self.kernel = kernel
        self.dialect = dialect

    def _index(self, kind: str) -> str:
        axis = kind[-1]
        spelled = axis if self.dialect.uses_axis_letters else str(AXES.index(axis))
        template = self.dialect.block_index if kind in BLOCK_KINDS else self.dialect.thread_index
        return f"((int32_t){template.format(axis=spelled)})"

    def loop(self, s: For) -> None:
        if s.kind in BLOCK_KINDS or s.kind in THREAD_IDX_KINDS:
            v = self.var(s.var)
            dims = self.kernel.grid if s.kind in BLOCK_KINDS else self.kernel.block
            full = dims[AXES.index(s.kind[-1])]
            with self.w.block(""):
                self.w.line(f"const int32_t {v} = {self._index(s.kind)};")
                if s.extent < full:
                    with self.w.block(f"if ({v} < {s.extent})"):
                        self.stmt(s.body)
                else:
                    self.stmt(s.body)
            return
        if s.kind not in ("serial", "unrolled"):
            raise LoweringError(f"loop {s.var.name} of kind {s.kind} cannot be printed for a GPU "
                                "(lowering should have refused it)")
        if s.kind == "unrolled":
            self.w.raw(self.dialect.unroll_pragma)
        v = self.var(s.var)
        with self.w.block(f"for ({self.int_type(s.var.dtype)} {v} = 0; {v} < {s.extent}; ++{v})"):
            self.stmt(s.body)

    def all_reduce(self, s: AllReduce) -> None:
        """The xor butterfly AllReduce defines, one warp shuffle per step and element."""
        if s.width == 1:
            return
        if self.dialect.shuffle_xor is None:
            raise LoweringError(f"{self.dialect.name} has no warp shuffles: lowering should have replaced "
                                f"allreduce({s.buffer.name})")
        if s.buffer.dtype.name == "bfloat16":
            raise LoweringError(f"allreduce({s.buffer.name}): a cross-thread reduction in bfloat16 is not supported "
                                "(accumulate in float32)")
        threads = self.kernel.threads
        mask = "0xffffffffu" if threads >= 32 else f"{(1 << threads) - 1:#x}u"
        t, name = ctype(s.buffer.dtype), self.buf(s.buffer)
        m = self.names.fresh("temp", "lane_mask")
        with self.w.block(f"for (int32_t {m} = {s.width // 2}; {m} > 0; {m} >>= 1)"):
            for i in range(s.buffer.size):
                other = self.dialect.shuffle_xor.format(mask=mask, value=f"{name}[{i}]", lane_mask=m, width=s.width)
                combined = (f"{name}[{i}] + {other}" if s.combiner == "sum" else f"{name}[{i}] * {other}"
                            if s.combiner == "prod" else f"tgh_{s.combiner}_{t}({name}[{i}], {other})")
                self.w.line(f"{name}[{i}] = {combined};")

    def vector_copy(self, s: BufferStore) -> None:
        """dst[ramp(i, 1, 4)] = src[ramp(j, 1, 4)]: one aligned 4-lane load and store (vectorize_copies)."""
        dst, src = s.indices[0], s.value.indices[0]  # type: ignore[attr-defined]
        if not (isinstance(dst, Ramp) and isinstance(src, Ramp) and dst.stride == src.stride == 1
                and dst.lanes == src.lanes == 4 and isinstance(s.value, BufferLoad)):
            raise LoweringError(f"store to {s.buffer.name}: only 4-lane aligned copies are printed for a GPU")
        v = {"float": "float4", "int32_t": "int4"}[ctype(s.buffer.dtype)]
        self.w.line(self.dialect.vector_copy.format(
            v=v, dst=f"&{self.buf(s.buffer)}[{self.expr(dst.base)}]", src=f"&{self.buf(s.value.buffer)}[{self.expr(src.base)}]"))

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, BufferStore) and s.indices and isinstance(s.indices[0], Ramp):
            self.vector_copy(s)
        elif isinstance(s, Barrier):
            self.w.line(self.dialect.barrier)
        elif isinstance(s, Prefetch):
            return  # a CPU cache hint: a GPU kernel has no use for it
        elif isinstance(s, AllReduce):
            self.all_reduce(s)
        elif isinstance(s, Allocate) and s.buffer.scope == "shared":
            self.stmt(s.body)  # declared at the top of the kernel
        elif isinstance(s, Allocate):
            with self.w.block(""):
                # aligned for the 16-byte vector copies vectorize_copies/double_buffer make
                self.w.line(f"{self.dialect.local_align}{storage_ctype(s.buffer.dtype)} {self.buf(s.buffer)}[{s.buffer.size}];")
                self.stmt(s.body)
        else:
            super().stmt(s)

    def kernel_source(self) -> str:
        k, d = self.kernel, self.dialect
        entry = self.names.get("func", k.name)
        params = [d.global_pointer.format(t=storage_ctype(b.dtype), name=self.buf(b)) for b in k.func.params]
        bx, by, bz = k.block
        bounds = d.launch_bounds.format(threads=k.threads, bx=bx, by=by, bz=bz)
        with self.w.block(f"{d.kernel_qualifier} void {bounds} {entry}({', '.join(params)})"):
            shared: dict[str, Buffer] = {}
            for x in walk_stmts(k.func.body):
                if isinstance(x, Allocate) and x.buffer.scope == "shared":
                    shared.setdefault(x.buffer.name, x.buffer)
            for b in shared.values():
                self.w.line(d.shared_decl.format(t=storage_ctype(b.dtype), name=self.buf(b), size=b.size))
            self.stmt(k.func.body)
        self.entry = entry
        return self.w.text()


@dataclass(frozen=True)
class GpuSource:
    code: str
    kernels: tuple[str, ...]           # entry names, launch order
    program: GpuProgram


def print_kernels(program: GpuProgram, dialect: Dialect) -> tuple[str, tuple[str, ...]]:
    """The prelude, helpers and every kernel of `program`; returns (code, entry names)."""
    parts = [dialect.prelude, helpers(dialect)]
    entries = []
    bfloat16 = False
    for k in program.kernels:
        printer = GpuPrinter(k, dialect)
        parts.append(printer.kernel_source())
        entries.append(printer.entry)
        bfloat16 = bfloat16 or printer.bfloat16_lanes is not None
    if bfloat16:  # scalar only: the GPU printers vectorise nothing but 32-bit copies
        typedef = "typedef ushort uint16_t;\n" if dialect is OPENCL else ""
        parts.insert(2, typedef + bfloat16_helpers(set(), dialect.function_qualifier))
    return "\n".join(parts), tuple(entries)


def kernel_param_names(program: GpuProgram) -> list[list[str]]:
    """Per kernel, the buffer names of its parameters in order."""
    return [[b.name for b in k.func.params] for k in program.kernels]


def check_dialect(name: str) -> Dialect:
    try:
        return DIALECTS[name]
    except KeyError:
        raise ValueError(f"unknown GPU dialect {name!r}; known: {', '.join(DIALECTS)}") from None


__all__ = ["CUDA", "OPENCL", "DIALECTS", "Dialect", "GpuPrinter", "GpuSource", "print_kernels", "helpers"]

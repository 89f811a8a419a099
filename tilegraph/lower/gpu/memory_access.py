"""memory_access: how the first warp of a kernel touches memory, access by access (an analysis;
it changes nothing). Global accesses are judged by coalescing: the 32-byte sectors one warp-wide
access touches against the fewest its bytes need. Shared accesses by bank conflicts: the most
distinct 4-byte words one bank must serve, over the phases the access needs anyway (a warp's
float4 access takes 4), so 1 = conflict-free; a word read by many lanes is a broadcast and costs
nothing extra.

    for report in analyze(kernel):            # kernel: a DeviceKernel of lower_gpu's GpuProgram
        report.buffer, report.scope, report.kind, report.sectors, report.ideal, report.coalesced
        report.conflict_ways                      # shared only

    b[k * 64 + tx]          -> 4 sectors of 32 B for 32 lanes x 4 B: coalesced
    a[tx * 48 + k]          -> 32 sectors: uncoalesced (each lane its own sector)
    s[tx * 2]  (shared)     -> 2-way bank conflict;  s[tx * 33 // 32 ...] padded rows: 1

The warp is threads 0..31 in the device's order (threadIdx.x fastest); every other loop variable
and block index takes 0, so the answer describes the steady state of typical iterations. Lanes
whose index cannot be evaluated to a constant make the access `None`-strided and uncoalesced.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tilegraph.loop.ir import BufferStore, For, Func, Stmt
from tilegraph.loop.visit import stmt_children, stmt_exprs
from tilegraph.lower.gpu.common import AXES, THREAD_IDX_KINDS
from tilegraph.te.expr import BinOp, BufferLoad, Const, Expr, Ramp, Var
from tilegraph.te.printer import expr_str
from tilegraph.te.simplify import simplify
from tilegraph.te.visit import free_vars, substitute, walk

SECTOR_BYTES = 32
BANKS = 32
BANK_BYTES = 4


@dataclass(frozen=True)
class AccessReport:
    buffer: str
    scope: str                 # "global" | "shared"
    kind: str                  # "load" | "store"
    index: str                 # the index expression, for messages
    lane_stride: int | None    # elements between neighbouring lanes (None: not one constant)
    sectors: int               # 32-byte sectors the warp touches (global)
    ideal: int                 # the fewest sectors its bytes could take
    conflict_ways: int         # shared: times one bank is asked more than the access's phases need (1: conflict-free)

    @property
    def coalesced(self) -> bool:
        return self.sectors <= self.ideal

    @property
    def conflict_free(self) -> bool:
        return self.conflict_ways <= 1


def analyze(kernel: object, warp_size: int = 32) -> list[AccessReport]:
    """Every global and shared access of `kernel` (a DeviceKernel, or a Func whose body holds the
    thread loops), as its first warp executes it."""
    func: Func = getattr(kernel, "func", kernel)  # type: ignore[assignment]
    block = getattr(kernel, "block", None)
    out: list[AccessReport] = []
    _visit(func.body, [], block, warp_size, out)
    return out


def _visit(s: Stmt, threads: list[For], block: tuple[int, int, int] | None, warp: int, out: list[AccessReport]) -> None:
    if isinstance(s, For) and s.kind in THREAD_IDX_KINDS:
        threads = [*threads, s]
    exprs = stmt_exprs(s)
    if isinstance(s, BufferStore) and s.buffer.scope in ("global", "shared"):
        out.append(report_access(s.buffer, "store", s.indices, threads, block, warp))
    for e in exprs:
        for x in walk(e):
            if isinstance(x, BufferLoad) and x.buffer.scope in ("global", "shared"):
                out.append(report_access(x.buffer, "load", x.indices, threads, block, warp))
    for k in stmt_children(s):
        _visit(k, threads, block, warp, out)


def report_access(buf, kind: str, indices: tuple[Expr, ...], threads: list[For], block, warp: int) -> AccessReport:  # noqa: ANN001
    """One access (a flattened index) as the first warp of `threads` executes it, other variables at 0."""
    index = indices[0] if len(indices) == 1 else None
    width = index.lanes if isinstance(index, Ramp) else 1
    nbytes = buf.dtype.bits // 8
    addresses = _lane_addresses(index, threads, block, warp) if index is not None else None
    text = expr_str(index) if index is not None else ", ".join(expr_str(i) for i in indices)
    if addresses is None:
        return AccessReport(buf.name, buf.scope, kind, text, None, warp, 1, warp)
    elements = sorted({a + k for a in addresses for k in range(width)})
    steps = {b - a for a, b in zip(addresses, addresses[1:])}
    stride = steps.pop() if len(steps) == 1 else None
    sectors = len({(e * nbytes) // SECTOR_BYTES for e in elements})
    ideal = max(1, math.ceil(len(elements) * nbytes / SECTOR_BYTES))
    ways = 1
    if buf.scope == "shared":
        words = {(e * nbytes) // BANK_BYTES for e in elements}
        per_bank: dict[int, int] = {}
        for w in words:
            per_bank[w % BANKS] = per_bank.get(w % BANKS, 0) + 1
        # a warp's 128-bit access is served in 4 phases anyway: count only what exceeds the phases its
        # words need (a conflict-free float4 access puts 4 words on every bank)
        phases = -(-len(words) // BANKS)
        ways = -(-max(per_bank.values()) // phases)
    return AccessReport(buf.name, buf.scope, kind, text, stride, sectors, ideal, ways)


def _lane_addresses(index: Expr, threads: list[For], block, warp: int) -> list[int] | None:  # noqa: ANN001
    """The element index of lanes 0..warp-1 (x fastest), other variables at 0."""
    base = index.base if isinstance(index, Ramp) else index
    dims = {lp.kind: lp.extent for lp in threads}
    if block is not None:
        dims = {f"threadIdx.{a}": block[i] for i, a in enumerate(AXES)}
    ex, ey = dims.get("threadIdx.x", 1), dims.get("threadIdx.y", 1)
    by_kind = {lp.kind: lp.var for lp in threads}
    lanes = min(warp, math.prod(dims.get(f"threadIdx.{a}", 1) for a in AXES))
    zero = {v: Const(0) for v in free_vars(base) if not any(v == t for t in by_kind.values())}
    out = []
    for lane in range(lanes):
        coords = {"threadIdx.x": lane % ex, "threadIdx.y": (lane // ex) % ey, "threadIdx.z": lane // (ex * ey)}
        env = {v.name: 0 for v in zero}
        env.update({var.name: coords[kind] for kind, var in by_kind.items()})
        value = _int_value(base, env)
        if value is None:  # an operator the integer evaluator does not know: simplify says
            point: dict[Var, Expr] = dict(zero)
            for kind, var in by_kind.items():
                point[var] = Const(coords[kind])
            folded = simplify(substitute(base, point))
            if not isinstance(folded, Const):
                return None
            value = int(folded.value)
        out.append(value)
    return out


_INT_OPS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
            "floordiv": lambda a, b: a // b, "floormod": lambda a, b: a % b, "max": max, "min": min}


def _int_value(e: Expr, env: dict[str, int]) -> int | None:
    """The integer value of an index expression with every variable given (te's floordiv/floormod
    are Python's floor semantics); None for anything else (then simplify decides)."""
    if isinstance(e, Const):
        return int(e.value) if isinstance(e.value, (int, bool)) else None
    if isinstance(e, Var):
        return env.get(e.name)
    if isinstance(e, BinOp) and e.op in _INT_OPS:
        a, b = _int_value(e.a, env), _int_value(e.b, env)
        if a is None or b is None or (e.op in ("floordiv", "floormod") and b == 0):
            return None
        return int(_INT_OPS[e.op](a, b))
    return None


def summary(reports: list[AccessReport]) -> str:
    """One line per access: buffer, kind, sectors/ideal or bank ways."""
    lines = []
    for r in reports:
        if r.scope == "global":
            state = "coalesced" if r.coalesced else f"UNCOALESCED ({r.sectors} sectors, {r.ideal} needed)"
        else:
            state = "conflict-free" if r.conflict_free else f"{r.conflict_ways}-way bank conflict"
        lines.append(f"{r.scope:6} {r.kind:5} {r.buffer}[{r.index}]: stride {r.lane_stride}, {state}")
    return "\n".join(lines)


__all__ = ["AccessReport", "analyze", "report_access", "summary"]

"""pin_operand_vectors: a vector load that several register updates of one straight-line run read
is loaded once into an operand register, which the C printer pins there.

    acc[0] = acc[0] + broadcast(a[i]) * b[ramp(k*96, 1, 8)]        opnd[0] = b[ramp(k*96, 1, 8)]
    acc[1] = acc[1] + broadcast(a[i + 768]) * b[ramp(k*96, 1, 8)]  ==>  acc[0] = acc[0] + broadcast(a[i]) * opnd[0]
                                                                      acc[1] = acc[1] + broadcast(a[i + 768]) * opnd[0]

Why: the micro-kernel's B vectors are meant to be loaded once per reduction step and kept in
registers (Gensor's model counts them so: `operand_vectors`). gcc instead folds every use into the
FMA as a memory operand, so a 4 x 24 AVX2 tile issued 12 vector loads a step instead of 3 (16 with
the broadcasts, for 12 FMAs: load-port bound). Keeping them apart in the IR is not enough, since
the C compiler sees the same values either way; the printer follows each store to an operand
register (scope OPERAND_SCOPE) with an empty asm that claims the register, so the value must live
there. Measured on a Zen 3 core (AVX2, BERT's 128x768 . 768x3072 GEMM, Gensor's constructed
schedule, alternating runs): 46-50 -> 54-61 GFLOP/s on one thread, 87-89 -> 107-109 on two.

Only where it cannot cost registers it does not have: a run of stores to register buffers (the
unrolled micro-kernel), float32 contiguous vector loads read by at least two of them, and only when
the run's accumulators plus the operands live at once plus one broadcast fit the target's vector
registers (a tile that already spills keeps gcc's choice), and never a load under a Select (a
padding guard may be what keeps it in bounds). The loaded buffers are not written in
the run (its stores all go to registers), so reading once is what reading at each use read.
"""

from __future__ import annotations

from dataclasses import replace

from tilegraph import dtype as dt
from tilegraph.loop.edit import rewrite_loads, rewrite_stmt
from tilegraph.loop.ir import Allocate, Buffer, BufferStore, Func, Seq, Stmt
from tilegraph.loop.names import fresh_name
from tilegraph.loop.visit import walk_stmts
from tilegraph.microarch import VECTOR_REGISTERS
from tilegraph.te.expr import BufferLoad, Const, Expr, Ramp, Select
from tilegraph.te.visit import children, preorder

OPERAND_SCOPE = "operand"  # a register buffer the C printer pins (codegen/c.py)
MIN_USES = 2


def run(func: Func, target: object) -> Func:
    if getattr(target, "kind", "cpu") != "cpu":
        return func
    registers = VECTOR_REGISTERS.get(getattr(target, "isa", "generic"), 16)
    lanes = target.lanes(dt.float32) if hasattr(target, "lanes") else 0
    if lanes < 2:
        return func
    taken = {b.name for b in (*func.params, *func.allocs)}
    taken |= {s.buffer.name for s in walk_stmts(func.body) if isinstance(s, Allocate)}

    def on_stmt(s: Stmt) -> Stmt | None:
        if isinstance(s, Seq):
            return _pin_runs(s, registers, lanes, taken)
        return None

    return replace(func, body=rewrite_stmt(func.body, on_stmt))


def _is_register_update(s: Stmt) -> bool:
    return isinstance(s, BufferStore) and s.buffer.dtype.lanes > 1


def _operand_loads(s: BufferStore, lanes: int) -> list[BufferLoad]:
    """Contiguous float32 loads of the target's vector width (a register of its vector class) that
    the store always performs: none under a Select, whose guard may be what keeps it in bounds."""
    return [x for x in preorder(s.value, _unconditional_children) if isinstance(x, BufferLoad)
            and x.buffer.dtype == dt.float32 and len(x.indices) == 1 and isinstance(x.indices[0], Ramp)
            and x.indices[0].stride == 1 and x.indices[0].lanes == lanes]


def _unconditional_children(e: Expr) -> tuple[Expr, ...]:
    return () if isinstance(e, Select) else children(e)


def _pin_runs(s: Seq, registers: int, lanes: int, taken: set[str]) -> Stmt:
    out: list[Stmt] = []
    run_: list[BufferStore] = []
    for x in s.stmts:
        if _is_register_update(x):
            run_.append(x)  # type: ignore[arg-type]
            continue
        out.extend(_pin(run_, registers, lanes, taken))
        run_ = []
        out.append(x)
    out.extend(_pin(run_, registers, lanes, taken))
    if len(out) == len(s.stmts) and all(a is b for a, b in zip(out, s.stmts)):
        return s
    return Seq(tuple(out))


def _pin(stores: list[BufferStore], registers: int, lanes: int, taken: set[str]) -> list[Stmt]:
    uses: dict[BufferLoad, list[int]] = {}
    for n, s in enumerate(stores):
        for load in dict.fromkeys(_operand_loads(s, lanes)):
            uses.setdefault(load, []).append(n)
    shared = [load for load, at in uses.items() if len(at) >= MIN_USES]
    if not shared:
        return list(stores)
    accumulators = len({(s.buffer.name, s.indices) for s in stores})
    if accumulators + _most_live(shared, uses, len(stores)) + 1 > registers:
        return list(stores)
    name = fresh_name("opnd", taken)
    taken.add(name)
    opnd = Buffer(name, (len(shared),), dt.float32.with_lanes(lanes), OPERAND_SCOPE)
    slot = {load: k for k, load in enumerate(shared)}
    first: dict[int, list[BufferLoad]] = {}
    for load in shared:
        first.setdefault(uses[load][0], []).append(load)

    loaded: set[BufferLoad] = set()  # operands already in their registers (a store before it reads memory)

    def on_load(x: BufferLoad) -> Expr | None:
        return BufferLoad(opnd, (Const(slot[x]),)) if x in loaded else None

    body: list[Stmt] = []
    for n, s in enumerate(stores):
        for load in first.get(n, ()):
            body.append(BufferStore(opnd, (Const(slot[load]),), load))
            loaded.add(load)
        body.append(BufferStore(s.buffer, s.indices, rewrite_loads(s.value, on_load)))
    return [Allocate(opnd, Seq(tuple(body)))]


def _most_live(shared: list[BufferLoad], uses: dict[BufferLoad, list[int]], n_stores: int) -> int:
    """The most operands held at once: each from its first use to its last (one sweep, since a
    fully unrolled body can have thousands of stores)."""
    delta = [0] * (n_stores + 1)
    for load in shared:
        delta[uses[load][0]] += 1
        delta[uses[load][-1] + 1] -= 1
    most = held = 0
    for d in delta:
        held += d
        most = max(most, held)
    return most

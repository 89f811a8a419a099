"""AMX in C: a TileProduct (loop/ir.py) as tile loads, tdpbf16ps / tdpbusd and tile stores.

    tile_product(acc[0, ld 32] += A[a0, ld 256, rows 16@0, 16@4096] . B[b0, ld 64, groups of 2],
                 32 x 32 x 32, steps 8(a+32, b+1024))
->
    static const tgh_tile_config tgh_tiles_0 = {1, 0, {0}, {64, 64, 64, 64, 64, 64, 64, 64}, {16, ...}};
    ...
    {
      tgh_enter_tiles(&tgh_tiles_0, &saved);               (or once where the parallel task starts)
      _tile_loadd(0, b_acc + 0, 128); ...                  accumulators 0-3: (row tile, column tile)
                                                           (_tile_zero where the product is `zero`)
      for (int64_t s0 = 0; s0 < 8; ++s0) {
        const uint16_t* ta = b_A + a0 + s0 * 32; const uint16_t* tb = b_B + b0 + s0 * 1024;
        _tile_loadd(4, ta + 0, 512); _tile_loadd(5, ta + 4096, 512);      a's row tiles
        _tile_loadd(6, tb + 0, 128); _tile_loadd(7, tb + 32, 128);        b's column tiles
        _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7);
      }
      _tile_stored(0, b_acc + 0, 128); ...
      tgh_leave_tiles(&tgh_tiles_0, &saved);
    }

A tile register's shape comes from a configuration (palette 1: rows and bytes per row of each of
the 8 tiles) that a thread must load before using them (ldtilecfg). `tgh_enter_tiles` keeps the
thread's current one (sttilecfg) and loads ours where it differs; `tgh_leave_tiles` puts the kept
one back, or releases the tile state if there was none: other libraries' kernels in the process
may keep their configuration loaded between calls (ONNX Runtime's MLAS loads it once per thread
and its next int8 GEMM died with SIGILL on ours). A kernel whose products share one configuration
enters once per parallel task (and once around the products outside every parallel loop), else
around each product (~5% of a 32 x 32 x 768 product). Linux hands a process the tile registers'
state only when asked (arch_prctl ARCH_REQ_XCOMP_PERM), which the first use in each library does;
target.has_matrix_tiles has checked that this machine grants it.
"""

from __future__ import annotations

from tilegraph.errors import LoweringError
from tilegraph.loop.ir import TileProduct

TILE_ROWS = 16
DOT = {"float32": "_tile_dpbf16ps", "int32": "_tile_dpbusd"}

PRELUDE = """#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
typedef struct { uint8_t palette, start_row, reserved[14]; uint16_t colsb[16]; uint8_t rows[16]; }
  __attribute__((aligned(64))) tgh_tile_config;
static int tgh_tiles_granted;
static inline void tgh_enter_tiles(const tgh_tile_config* config, tgh_tile_config* saved) {
  if (__builtin_expect(!__atomic_load_n(&tgh_tiles_granted, __ATOMIC_RELAXED), 0)) {
    syscall(SYS_arch_prctl, 0x1023, 18);  /* ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA */
    __atomic_store_n(&tgh_tiles_granted, 1, __ATOMIC_RELAXED);
  }
  _tile_storeconfig(saved);
  if (__builtin_memcmp(saved, config, 64)) _tile_loadconfig(config);
}
static inline void tgh_leave_tiles(const tgh_tile_config* config, const tgh_tile_config* saved) {
  if (saved->palette == 0) _tile_release();
  else if (__builtin_memcmp(saved, config, 64)) _tile_loadconfig(saved);
}"""


def tile_layout(s: TileProduct) -> tuple[list[tuple[int, int]], list[int], tuple[int, ...], int]:
    """(row tiles as (rows, a offset), columns per column tile, a's register per row tile, a's
    registers): the accumulators are tiles 0 .. R*C-1 (row tile r, column tile c at r*C + c), then
    a's registers (lower/passes/use_matrix_tiles.a_registers: one per row tile where they fit),
    then b's C tiles."""
    from tilegraph.lower.passes.use_matrix_tiles import a_registers

    cols = [min(TILE_ROWS, s.cols - c) for c in range(0, s.cols, TILE_ROWS)]
    rows = tuple(r for r, _ in s.a_tiles)
    registers = a_registers(rows, len(cols))
    if registers is None:
        raise LoweringError(f"a tile product of {len(rows)} row tiles by {len(cols)} column tiles does not fit 8 tiles")
    return list(s.a_tiles), cols, registers, max(registers) + 1


def config(s: TileProduct, element_bytes: int) -> tuple[list[int], list[int]]:
    """(bytes per row, rows) of the 8 tile registers: accumulators hold 4-byte sums, a's tiles a
    step's depth of elements per row, b's tiles a step's K groups as rows of group x columns."""
    rows_of, cols, registers, n_a = tile_layout(s)
    colsb, rows = [0] * 8, [0] * 8
    t = 0
    for r, _ in rows_of:
        for c in cols:
            colsb[t], rows[t] = 4 * c, r
            t += 1
    for (r, _), register in zip(rows_of, registers):
        colsb[t + register], rows[t + register] = s.depth * element_bytes, r
    t += n_a
    for c in cols:
        colsb[t], rows[t] = c * s.group * element_bytes, s.depth // s.group
        t += 1
    return colsb, rows


def config_text(s: TileProduct) -> str:
    """The C initializer of `s`'s tile configuration (palette 1, bytes per row, rows)."""
    colsb, rows = config(s, s.a.dtype.bits // 8)
    return f"{{1, 0, {{0}}, {{{', '.join(map(str, colsb))}}}, {{{', '.join(map(str, rows))}}}}}"


def config_definitions(configs: list[str]) -> str:
    """File-scope definitions of the configurations a kernel's tile products use, in order."""
    return "".join(f"static const tgh_tile_config tgh_tiles_{n} = {text};\n" for n, text in enumerate(configs))


def enter_tiles(config: int, saved: str) -> str:
    """Statements making `config` (its index in config_definitions) the thread's configuration,
    the thread's own kept in a new variable `saved`."""
    return f"tgh_tile_config {saved}; tgh_enter_tiles(&tgh_tiles_{config}, &{saved});"


def leave_tiles(config: int, saved: str) -> str:
    """The statement giving the thread back its configuration kept by enter_tiles in `saved`."""
    return f"tgh_leave_tiles(&tgh_tiles_{config}, &{saved});"


def tile_product_lines(s: TileProduct, names: dict[str, str], types: dict[str, str], origins: tuple[str, str, str],
                       index_type: str, serial: int, config: int | None) -> list[str]:
    """C statements (one block) computing `s`; `names` and `types` map its buffers' names to their
    C identifiers and element types, `origins` are the printed acc_at, a_at, b_at, `serial` makes
    the block's own names unique, `config` is the index of its configuration to load first (None:
    the thread already has it, loaded where the kernel's parallel task starts)."""
    element_bytes = s.a.dtype.bits // 8
    rows_of, cols, registers, n_a = tile_layout(s)
    acc, a, b = names[s.acc.name], names[s.a.name], names[s.b.name]
    acc_at, a_at, b_at = origins
    nr, nc = len(rows_of), len(cols)
    first_a, first_b = nr * nc, nr * nc + n_a
    out = ["{"]
    if config is not None:
        out.append(f"  {enter_tiles(config, f'tgh_saved_{serial}')}")
    out.append(f"  {types[s.acc.name]}* const tgh_acc_{serial} = {acc} + ({acc_at});")
    acc_tiles = []
    first_row = 0
    for r, (nrows, _) in enumerate(rows_of):
        first_col = 0
        for c in range(nc):
            acc_tiles.append((r * nc + c, f"tgh_acc_{serial} + {first_row * s.acc_ld + first_col}"))
            first_col += cols[c]
        first_row += nrows
    for t, at in acc_tiles:
        out.append(f"  _tile_zero({t});" if s.zero else f"  _tile_loadd({t}, {at}, {4 * s.acc_ld});")
    depth = len(s.steps)
    a_step = " + ".join([f"tgh_s{serial}_{i} * {sa}" for i, (_, sa, _) in enumerate(s.steps)]) or "0"
    b_step = " + ".join([f"tgh_s{serial}_{i} * {sb}" for i, (_, _, sb) in enumerate(s.steps)]) or "0"
    indent = "  "
    for i, (extent, _, _) in enumerate(s.steps):
        out.append(f"{indent}for ({index_type} tgh_s{serial}_{i} = 0; tgh_s{serial}_{i} < {extent}; ++tgh_s{serial}_{i}) {{")
        indent += "  "
    out.append(f"{indent}const {types[s.a.name]}* tgh_a_{serial} = {a} + ({a_at}) + {a_step};")
    out.append(f"{indent}const {types[s.b.name]}* tgh_b_{serial} = {b} + ({b_at}) + {b_step};")
    for c in range(nc):
        out.append(f"{indent}_tile_loadd({first_b + c}, tgh_b_{serial} + {c * TILE_ROWS * s.group}, "
                   f"{s.b_ld * element_bytes});")
    dot = DOT[s.acc.dtype.name]
    # each row tile of a loaded, then its products; a register several row tiles share is loaded
    # again after the products of the one before have read it
    for r, ((_, offset), register) in enumerate(zip(rows_of, registers)):
        out.append(f"{indent}_tile_loadd({first_a + register}, tgh_a_{serial} + {offset}, {s.a_ld * element_bytes});")
        for c in range(nc):
            out.append(f"{indent}{dot}({r * nc + c}, {first_a + register}, {first_b + c});")
    for _ in range(depth):
        indent = indent[:-2]
        out.append(f"{indent}}}")
    for t, at in acc_tiles:
        out.append(f"  _tile_stored({t}, {at}, {4 * s.acc_ld});")
    if config is not None:
        out.append(f"  {leave_tiles(config, f'tgh_saved_{serial}')}")
    out.append("}")
    return out


__all__ = ["PRELUDE", "config", "config_definitions", "config_text", "enter_tiles", "leave_tiles", "tile_layout",
           "tile_product_lines"]

"""Winograd's minimal filtering F(m x m, 3 x 3) for channels-last 3x3 convolutions of stride 1.

A 3x3 convolution (cross-correlation, as in every DL framework) computes each m x m output tile
from an (m + 2) x (m + 2) input tile d. With alpha = m + 2 and the matrices of `matrices(m)`:

    U = G g Gᵀ          (alpha x alpha per input/output channel pair; computed once from the weights)
    V = Bᵀ d B          (alpha x alpha per tile and input channel)           winograd_input_nhwc
    M[p] = V[p] @ U[p]  for each of the alpha² points p: a batched GEMM      (graph matmul)
    Y = Aᵀ M A          (m x m per tile and output channel)                  winograd_output_nhwc

so the products per output fall from 9 * C to alpha² * C / m² (F(4x4): 36/16, 4x fewer; F(2x2):
16/4, 2.25x fewer), paid for with the two transforms (a few additions per element) and transformed
weights alpha²/9 times the size of the original ones (Lavin & Gray 2016).

    V = winograd_input_nhwc(x (N, H, W, C), m=4, pads=(1, 1, 1, 1), out_hw=(OH, OW))
                                                         -> (alpha, alpha, N * TH * TW, C)
    Y = winograd_output_nhwc(M (alpha, alpha, N * TH * TW, K), m=4, n=N, out_hw=(OH, OW))
                                                         -> (N, OH, OW, K)

TH = ceil(OH / m), TW = ceil(OW / m); tile t = (n * TH + th) * TW + tw. Reads outside the padded
input are zeros; output tiles past (OH, OW) are computed and never stored. Each transformed value
is written as the sum of its nonzero terms only (the matrices are sparse, entries small powers of
two or exact), selected by the point (a, b) at run time or folded away where a schedule unrolls it.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from tilegraph import te
from tilegraph.ops._common import check_float, check_tensor, leading_extent, operator, pad, stage
from tilegraph.te.arith import affine
from tilegraph.te.dims import canonical
from tilegraph.te.expr import Expr
from tilegraph.te.printer import expr_str
from tilegraph.te.tensor import Tensor

TILE_SIZES = (2, 4)

_F = Fraction
# (Aᵀ, G, Bᵀ) for F(m, 3), interpolation points 0, ±1 (F(2)), 0, ±1, ±2, ∞ (F(4)); exact fractions.
_MATRICES: dict[int, tuple[list[list[Fraction]], list[list[Fraction]], list[list[Fraction]]]] = {
    2: ([[_F(1), _F(1), _F(1), _F(0)], [_F(0), _F(1), _F(-1), _F(-1)]],
        [[_F(1), _F(0), _F(0)], [_F(1, 2), _F(1, 2), _F(1, 2)], [_F(1, 2), _F(-1, 2), _F(1, 2)], [_F(0), _F(0), _F(1)]],
        [[_F(1), _F(0), _F(-1), _F(0)], [_F(0), _F(1), _F(1), _F(0)], [_F(0), _F(-1), _F(1), _F(0)],
         [_F(0), _F(1), _F(0), _F(-1)]]),
    4: ([[_F(v) for v in row] for row in ((1, 1, 1, 1, 1, 0), (0, 1, -1, 2, -2, 0), (0, 1, 1, 4, 4, 0),
                                           (0, 1, -1, 8, -8, 1))],
        [[_F(1, 4), _F(0), _F(0)], [_F(-1, 6), _F(-1, 6), _F(-1, 6)], [_F(-1, 6), _F(1, 6), _F(-1, 6)],
         [_F(1, 24), _F(1, 12), _F(1, 6)], [_F(1, 24), _F(-1, 12), _F(1, 6)], [_F(0), _F(0), _F(1)]],
        [[_F(v) for v in row] for row in ((4, 0, -5, 0, 1, 0), (0, -4, -4, 1, 1, 0), (0, 4, -4, -1, 1, 0),
                                           (0, -2, -1, 2, 1, 0), (0, 2, -1, -2, 1, 0), (0, 4, 0, -5, 0, 1))]),
}


def _check_m(m: int) -> int:
    if m not in TILE_SIZES:
        raise ValueError(f"argument m must be one of {TILE_SIZES} (output tile m x m), got {m!r}")
    return m


def matrices(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Aᵀ (m, alpha), G (alpha, 3), Bᵀ (alpha, alpha)) of F(m x m, 3 x 3) as float64 arrays."""
    return tuple(np.array([[float(v) for v in row] for row in mat]) for mat in _MATRICES[_check_m(m)])  # type: ignore[return-value]


def tiles(out_hw: Sequence[int], m: int) -> tuple[int, int]:
    """(TH, TW): the m x m output tiles covering an (OH, OW) output."""
    return -(-out_hw[0] // m), -(-out_hw[1] // m)


def transform_weights(w: np.ndarray, m: int) -> np.ndarray:
    """HWIO weights (3, 3, C, K) -> U (alpha, alpha, C, K) = G g Gᵀ, computed in float64."""
    if w.ndim != 4 or w.shape[:2] != (3, 3):
        raise ValueError(f"argument w must be HWIO weights of a 3x3 convolution, got shape {w.shape}")
    _, g, _ = matrices(m)
    return np.einsum("ai,ijck,bj->abck", g, np.asarray(w, dtype=np.float64), g)


def _weighted_sum(terms: list[tuple[Fraction, Expr]], dtype: str) -> Expr:
    """Σ coefficient * value over the nonzero terms, ±1 as additions and subtractions."""
    total: Expr | None = None
    for coefficient, value in terms:
        magnitude = abs(coefficient)
        term = value if magnitude == 1 else value * te.const(float(magnitude), dtype)
        if total is None:
            total = -term if coefficient < 0 else term
        else:
            total = total - term if coefficient < 0 else total + term
    return total if total is not None else te.const(0.0, dtype)


def _by_point(a: Expr, b: Expr, leaf: list[list[Expr]]) -> Expr:
    """leaf[a][b] chosen by the run-time point (a, b): a chain of selects, last case unguarded."""

    def chain(index: Expr, cases: list[Expr]) -> Expr:
        out = cases[-1]
        for k in range(len(cases) - 2, -1, -1):
            out = te.select(index.eq(k), cases[k], out)
        return out

    return chain(a, [chain(b, row) for row in leaf])


@operator("winograd_input_nhwc")
def winograd_input_nhwc(x: Tensor, m: int = 4, pads: Sequence[int] = (1, 1, 1, 1),
                        out_hw: Sequence[int] | None = None, name: str = "winograd_input") -> Tensor:
    """V[a, b, t, c] = (Bᵀ d B)[a, b] for tile t's input window d of channel c (zeros outside x).

    pads = (top, left, bottom, right) of the 3x3 convolution; out_hw its output (OH, OW), by default
    what the pads give."""
    check_tensor(x, "x", 4)
    check_float(x, "x")
    _check_m(m)
    (_, h, w, c), n = x.shape, leading_extent(x)
    top, left, bottom, right = (int(p) for p in pads)
    oh, ow = (h + top + bottom - 2, w + left + right - 2) if out_hw is None else (int(v) for v in out_hw)
    if oh <= 0 or ow <= 0:
        raise ValueError(f"winograd_input_nhwc: a 3x3 window does not fit x {x.shape} padded by {tuple(pads)}")
    th, tw = tiles((oh, ow), m)
    alpha = m + 2
    bt = _MATRICES[m][2]

    # every tile's window inside one zero-bordered copy: the transform then reads without guards
    after = (0, max(0, th * m + 2 - h - top), max(0, tw * m + 2 - w - left), 0)
    padded = pad(x, (0, top, left, 0), after, 0.0, name=f"{name}_pad")

    def body(a: Expr, b: Expr, t: Expr, ch: Expr) -> Expr:
        image, row, col = t // (th * tw), (t // tw) % th, t % tw
        leaf = [[_weighted_sum([(bt[ra][i] * bt[rb][j], padded[image, row * m + i, col * m + j, ch])
                                for i in range(alpha) for j in range(alpha) if bt[ra][i] and bt[rb][j]], x.dtype)
                 for rb in range(alpha)] for ra in range(alpha)]
        return _by_point(a, b, leaf)

    return stage((alpha, alpha, n * th * tw, c), body, name=name, axis_names=("a", "b", "t", "c"))


@operator("winograd_output_nhwc")
def winograd_output_nhwc(mm: Tensor, m: int = 4, n: int = 1, out_hw: Sequence[int] = (1, 1),
                         name: str = "winograd_output") -> Tensor:
    """Y[img, y, z, k] = (Aᵀ M A)[y % m, z % m] of tile (img, y // m, z // m), output channel k."""
    check_tensor(mm, "mm", 4)
    check_float(mm, "mm")
    _check_m(m)
    alpha = m + 2
    oh, ow = (int(v) for v in out_hw)
    th, tw = tiles((oh, ow), m)
    if mm.shape[:3] != (alpha, alpha, n * th * tw):
        raise ValueError(f"winograd_output_nhwc: mm must have shape ({alpha}, {alpha}, {n * th * tw}, K) for "
                         f"F({m}x{m}) over n={n} images of {oh}x{ow}, got {mm.shape}")
    images = _images(mm.extents[2], th * tw)
    at = _MATRICES[m][0]

    def body(img: Expr, y: Expr, z: Expr, k: Expr) -> Expr:
        t = (img * th + y // m) * tw + z // m
        leaf = [[_weighted_sum([(at[i][a] * at[j][b], mm[a, b, t, k]) for a in range(alpha) for b in range(alpha)
                                if at[i][a] and at[j][b]], mm.dtype)
                 for j in range(m)] for i in range(m)]
        return _by_point(y % m, z % m, leaf)

    return stage((images, oh, ow, mm.shape[3]), body, name=name, axis_names=("n", "h", "w", "k"))


def _images(tiles_extent: int | Expr, per_image: int) -> int | Expr:
    """The images of a tile axis of `tiles_extent` (`batch * per_image` where the batch is a
    run-time extent: that batch)."""
    if isinstance(tiles_extent, int):
        return tiles_extent // per_image
    terms, constant = affine(tiles_extent)
    if constant or len(terms) != 1 or next(iter(terms.values())) % per_image:
        raise ValueError(f"winograd_output_nhwc: a tile axis of run-time extent {expr_str(tiles_extent)} is not "
                         f"a batch of {per_image} tiles")
    (batch, coefficient), = terms.items()
    return canonical(batch * (coefficient // per_image)) if coefficient != per_image else batch

"""Schedule primitives, one per file. Each is `fn(func, **inputs) -> (new_func, output_names)`.

This table is the registry a trace replays through; add a primitive here and as a method of
`Schedule`.
"""

from tilegraph.schedule.primitives.annotate import bind, parallel, unroll, vectorize
from tilegraph.schedule.primitives.cache_read import cache_read
from tilegraph.schedule.primitives.cache_write import cache_write
from tilegraph.schedule.primitives.compute_at import compute_at
from tilegraph.schedule.primitives.compute_inline import compute_inline
from tilegraph.schedule.primitives.decompose_reduction import decompose_reduction
from tilegraph.schedule.primitives.fuse import fuse
from tilegraph.schedule.primitives.reorder import reorder
from tilegraph.schedule.primitives.reverse_compute_at import reverse_compute_at
from tilegraph.schedule.primitives.rfactor import rfactor
from tilegraph.schedule.primitives.split import split
from tilegraph.schedule.primitives.storage_pad import storage_pad

PRIMITIVES = {
    "split": split,
    "reorder": reorder,
    "fuse": fuse,
    "parallel": parallel,
    "vectorize": vectorize,
    "unroll": unroll,
    "bind": bind,
    "cache_read": cache_read,
    "cache_write": cache_write,
    "compute_at": compute_at,
    "reverse_compute_at": reverse_compute_at,
    "compute_inline": compute_inline,
    "storage_pad": storage_pad,
    "decompose_reduction": decompose_reduction,
    "rfactor": rfactor,
}

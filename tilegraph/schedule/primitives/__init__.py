"""Schedule primitives, one per file. Each is `fn(func, **inputs) -> (new_func, output_names)`.

This table is the registry a trace replays through; add a primitive here and as a method of
`Schedule`.
"""

from tilegraph.schedule.primitives.annotate import bind, parallel, unroll, vectorize
from tilegraph.schedule.primitives.fuse import fuse
from tilegraph.schedule.primitives.reorder import reorder
from tilegraph.schedule.primitives.split import split

PRIMITIVES = {
    "split": split,
    "reorder": reorder,
    "fuse": fuse,
    "parallel": parallel,
    "vectorize": vectorize,
    "unroll": unroll,
    "bind": bind,
}

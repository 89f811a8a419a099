"""A native dispatcher: one entry point, with a kernel's ABI, that calls the kernel of the bucket
holding a run-time dim's value (te/dims.py; runtime/buckets.py).

    void tgd_call(void* a0, ..., void* a{n-1}, int32_t num_threads) {
      int32_t v = ((const int32_t*)a{dims})[{index}];         /* the dims input */
      bucket = the first whose upper bound >= v (a binary search)
      tgd_fn[bucket](a0, ..., a{n-1}, num_threads);
    }

Since it has the ABI of every kernel (pointers, then the thread count), whatever calls kernels
natively (a model's step runner) calls a bucketed one the same way, no Python in between. The
buckets' entry points are set once after loading (`tgd_set`); the source names the libraries and
entries it will hold, so two dispatchers share a built library (and its table) only when they
dispatch to the same kernels.
"""

from __future__ import annotations

import ctypes
import hashlib
from collections.abc import Sequence
from typing import Any


def dispatcher_source(arity: int, dims_position: int, dim_index: int, uppers: Sequence[int], token: str,
                      maps: Sequence[Sequence[int]] | None = None) -> str:
    """The C source of a dispatcher over kernels of `arity` array parameters; with `maps`, the
    dispatcher takes `arity` parameters and bucket i's kernel gets parameters maps[i] (each
    bucket its own prepacked weights: graph/prepack.py)."""
    params = ", ".join(f"void* a{i}" for i in range(arity))
    args = ", ".join(f"a{i}" for i in range(arity))
    kernel_arity = arity if maps is None else len(maps[0])
    prototype = ", ".join(["void*"] * kernel_arity + ["int32_t"])
    count = len(uppers)
    if maps is None:
        call = f"  tgd_fn[lo]({args}, num_threads);"
    else:
        cases = "".join(f"    case {i}: tgd_fn[{i}]({', '.join(f'a{j}' for j in m)}, num_threads); break;\n"
                        for i, m in enumerate(maps))
        call = f"  switch (lo) {{\n{cases}  }}"
    return f"""/* tilegraph bucket dispatcher {token} */
#include <stdint.h>
typedef void (*tgd_kernel)({prototype});
static tgd_kernel tgd_fn[{count}];
static const int32_t tgd_upper[{count}] = {{{", ".join(str(int(u)) for u in uppers)}}};
int32_t tgd_set(int32_t i, void* f) {{
  if (i < 0 || i >= {count}) return 0;
  tgd_fn[i] = (tgd_kernel)f;
  return 1;
}}
void tgd_call({params}, int32_t num_threads) {{
  int32_t v = ((const int32_t*)a{dims_position})[{dim_index}];
  int32_t lo = 0, hi = {count - 1};
  while (lo < hi) {{
    int32_t mid = (lo + hi) / 2;
    if (v <= tgd_upper[mid]) hi = mid; else lo = mid + 1;
  }}
{call}
}}
"""


def native_dispatcher(kernels: Sequence[Any], dims_position: int, dim_index: int, uppers: Sequence[int],
                      arity: int | None = None, maps: Sequence[Sequence[int]] | None = None) -> Any:
    """The loaded `tgd_call` dispatching to `kernels` (runtime.kernel.Kernel, one per bucket, whose
    upper bounds are `uppers`, ascending), its entries set; `arity` and `maps` as dispatcher_source's
    (default: every kernel's own parameters). Callers check the arguments first (a value past the
    last upper bound runs the last bucket's kernel, which clamps it)."""
    from tilegraph.build.compile import compile_c

    arity = arity if arity is not None else len(kernels[0].inputs) + len(kernels[0].outputs)
    identity = "\n".join(f"{k.lib_path.resolve()}:{k.entry}" for k in kernels) + f"\n{maps}"
    token = hashlib.sha256(identity.encode()).hexdigest()[:16]
    source = dispatcher_source(arity, dims_position, dim_index, uppers, token, maps)
    library = ctypes.CDLL(str(compile_c(source, kernels[0].target, name="dispatch")))
    for i, kernel in enumerate(kernels):
        address = ctypes.cast(kernel._function, ctypes.c_void_p).value
        if library.tgd_set(ctypes.c_int32(i), ctypes.c_void_p(address)) != 1:
            raise RuntimeError(f"dispatcher: bucket {i} was refused")
    function = library.tgd_call
    function.argtypes = [ctypes.c_void_p] * arity + [ctypes.c_int32]
    function.restype = None
    function._tg_library = library  # kept alive with the function
    return function


__all__ = ["dispatcher_source", "native_dispatcher"]

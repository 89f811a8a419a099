"""The C side of tilegraph's thread pool: how a kernel's `omp parallel for` reaches the pool.

GCC turns each `#pragma omp parallel for num_threads(n)` into a call GOMP_parallel(fn, data, n, 0),
the loop's body outlined into `fn`, which takes its share of the iterations from
omp_get_thread_num() and omp_get_num_threads() (the static schedule). libgomp runs `fn` once on
each of n threads and waits at a barrier for all of them: on a machine whose cores other
processes keep busy, a descheduled sibling stalls every kernel for its time slice.

Every kernel library links a small object (`shim_source()`, compiled once per compiler and
flags: build/compile.py, `compile_c(..., thread_pool=True)`) that defines those three functions,
hidden, so the library's own calls bind to them and never to libgomp's. They hand the shares to
the process's pool (runtime/thread_pool.py) as tasks, a few per thread (the pool's setting),
which any pool thread claims, the calling one included: a thread that is not running claims
nothing, and the caller does its share.

    GCC's call                                  with the shim
    GOMP_parallel(fn, data, 2, 0)          ->   tg_pool->parallel(tg_run_task, {fn, data}, 2)
      libgomp: fn on threads 0, 1, barrier        the pool: tg_run_task(job, i, 8) runs fn as thread i of 8

A library is told its pool once it is loaded (`tg_install_pool(&api)`, runtime/kernel.py); until
then, or where none could be built, the shim calls libgomp (which the library is linked against),
so a library run anywhere else (an emulated run's harness, another program) computes the same.
Every task count gives the same results: each iteration runs exactly once, whichever thread runs it.
"""

from __future__ import annotations

POOL_ABI_VERSION = 1

POOL_API_TYPEDEF = """typedef struct {
  unsigned version;
  void (*parallel)(void (*task)(void* job, unsigned index, unsigned count), void* job, unsigned threads);
} tg_pool_api;"""


def shim_source() -> str:
    """The C unit linked into every kernel library (a separate object, so a kernel's source stays
    plain OpenMP C and compiling it costs nothing more: printed into each unit, the shim made
    every gcc call about 15 ms slower)."""
    return f"""/* tilegraph's thread pool (codegen/thread_pool_abi.py): GCC's GOMP_parallel calls land here */
#include <dlfcn.h>
{POOL_API_TYPEDEF}
typedef struct {{ void (*fn)(void*); void* data; }} tg_job;
static const tg_pool_api* volatile tg_pool;
static __thread unsigned tg_task_index, tg_task_count = 1;
__attribute__((visibility("default"))) int tg_install_pool(const tg_pool_api* api) {{
  if (api != 0 && api->version != {POOL_ABI_VERSION}) return 0;
  tg_pool = api;
  return 1;
}}
static void tg_run_task(void* job, unsigned index, unsigned count) {{
  const tg_job* j = (const tg_job*)job;
  unsigned saved_index = tg_task_index, saved_count = tg_task_count;
  tg_task_index = index;
  tg_task_count = count;
  j->fn(j->data);
  tg_task_index = saved_index;
  tg_task_count = saved_count;
}}
typedef void (*tg_gomp_parallel_fn)(void (*)(void*), void*, unsigned, unsigned);
static tg_gomp_parallel_fn tg_gomp_parallel;
static int (*tg_gomp_thread_num)(void);
static int (*tg_gomp_num_threads)(void);
static void tg_gomp_task(void* job) {{
  tg_run_task(job, (unsigned)tg_gomp_thread_num(), (unsigned)tg_gomp_num_threads());
}}
static int tg_find_libgomp(void) {{  /* callers may race here: each finds the same three */
  if (__atomic_load_n(&tg_gomp_parallel, __ATOMIC_ACQUIRE) == 0) {{
    void* gomp = dlopen("libgomp.so.1", RTLD_LAZY);
    if (gomp == 0) return 0;
    tg_gomp_thread_num = (int (*)(void))dlsym(gomp, "omp_get_thread_num");
    tg_gomp_num_threads = (int (*)(void))dlsym(gomp, "omp_get_num_threads");
    if (tg_gomp_thread_num == 0 || tg_gomp_num_threads == 0) return 0;
    __atomic_store_n(&tg_gomp_parallel, (tg_gomp_parallel_fn)dlsym(gomp, "GOMP_parallel"), __ATOMIC_RELEASE);
  }}
  return tg_gomp_parallel != 0;
}}
__attribute__((visibility("hidden"))) void GOMP_parallel(void (*fn)(void*), void* data, unsigned threads,
                                                         unsigned flags) {{
  tg_job job = {{fn, data}};
  const tg_pool_api* pool = tg_pool;  /* read once: another thread may install or remove it */
  if (threads > 1 && pool != 0) {{
    pool->parallel(tg_run_task, &job, threads);
  }} else if (threads > 1 && tg_find_libgomp()) {{
    tg_gomp_parallel(tg_gomp_task, &job, threads, flags);
  }} else {{
    tg_run_task(&job, 0, 1);
  }}
}}
__attribute__((visibility("hidden"))) int omp_get_thread_num(void) {{ return (int)tg_task_index; }}
__attribute__((visibility("hidden"))) int omp_get_num_threads(void) {{ return (int)tg_task_count; }}
"""


__all__ = ["POOL_ABI_VERSION", "POOL_API_TYPEDEF", "shim_source"]

"""The process's thread pool for CPU kernels: persistent threads, shares claimed, the caller working too.

    install_pool(library)      tell a loaded kernel library to run its parallel loops on the pool
    pool_api()                 the pool's tg_pool_api (built once per machine), or None

A kernel's parallel loop arrives as tasks (codegen/thread_pool_abi.py: its static schedule's shares,
tasks_per_thread per thread). The calling thread publishes them and claims them one at a time
beside the pool's threads, then waits for the ones others took:

    libgomp                                   the pool
    share i runs on thread i, barrier         any running thread claims the next share
    a descheduled sibling: the kernel waits   a descheduled thread claims nothing: the caller runs it

On a quiet machine both use every thread; with the cores partly busy, a kernel waits only for a
share a thread has started, never for a thread to wake. The threads are created on first use
(no start-up per call) and spin briefly for the next kernel before sleeping on a futex.

A call made while another call is in the pool (two Python threads calling kernels) runs its tasks
itself, in order: never two callers' tasks interleaved on one thread. `TILEGRAPH_THREAD_POOL=off`
leaves libraries on libgomp (the comparison in benchmarks/busy.py). Where the pool cannot be built
(no compiler beside a saved model) libraries stay on libgomp: the results are the same.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
from typing import Any

from tilegraph.codegen.thread_pool_abi import POOL_ABI_VERSION, POOL_API_TYPEDEF

log = logging.getLogger("tilegraph.runtime.thread_pool")

POOL_ENV = "TILEGRAPH_THREAD_POOL"  # "off": kernels run their parallel loops on libgomp
MAX_WORKERS = 255
# The pool's settings, exported by its library (configure_pool changes them in a running process)
SETTINGS = {
    "tasks_per_thread": 4,  # shares of a parallel loop per thread: what a caller may take over from a late one
    "spin": 1 << 14,  # pause instructions a worker spins for the next kernel (about 0.1-0.5 ms)
    "busy_percent": 75,  # a spinning worker run less of its time awake than this: the cores are taken
    "backoff_ms": 50,  # how long a worker then sleeps between kernels before looking again (doubling)
}
WINDOW_MS = 5  # a spinning worker's time awake over which it measures its share of the CPU
MAX_BACKOFF_MS = 1000


def pool_source() -> str:
    """The pool's C source: tg_pool_api_v<N>, a tg_pool_api whose `parallel` runs a kernel's tasks,
    and its settings as exported globals tg_pool_<name> (their defaults: SETTINGS)."""
    settings = "\n".join(f"volatile unsigned tg_pool_{name} = {value}u;" for name, value in SETTINGS.items())
    return f"""#define _GNU_SOURCE
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

{POOL_API_TYPEDEF}
typedef void (*tg_task_fn)(void*, unsigned, unsigned);
{settings}

/* One call's tasks at a time, as one range of shares per thread: slot 0 is the caller, slot i + 1
   worker i. A thread runs its own range first, in order (a quiet machine partitions each loop as
   libgomp's static schedule does, so a thread reads what it wrote in the kernel before), then
   takes what is left of the others'. A range's counter holds (generation << 32 | next << 16 |
   end): a thread runs share `next` only by advancing a counter of the generation it saw published,
   so a thread that read an older call's job never runs a share with it, and a job's fields, written
   before the generation is published (release) and read after (acquire), cannot change while a
   share of it is unclaimed. */
static pthread_mutex_t call_lock = PTHREAD_MUTEX_INITIALIZER;
typedef struct {{ _Atomic uint64_t counter; char pad[56]; }} tg_range;
static tg_range ranges[{MAX_WORKERS + 1}];
static _Atomic uint32_t wake;  /* the current generation, the word sleeping workers wait on */
static _Atomic unsigned done;   /* shares of the current generation finished */
static _Atomic int sleepers;
static _Atomic(tg_task_fn) job_task;
static _Atomic(void*) job_arg;
static _Atomic unsigned job_per_thread, job_threads;
static unsigned workers;

static inline void tg_pause(void) {{
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}}

static void run_tasks(uint32_t generation, unsigned slot) {{
  tg_task_fn task = atomic_load_explicit(&job_task, memory_order_relaxed);
  void* arg = atomic_load_explicit(&job_arg, memory_order_relaxed);
  unsigned per_thread = atomic_load_explicit(&job_per_thread, memory_order_relaxed);
  unsigned threads = atomic_load_explicit(&job_threads, memory_order_relaxed);
  for (unsigned k = 0; k < threads; ++k) {{
    unsigned owner = (slot + k) % threads;
    _Atomic uint64_t* counter = &ranges[owner].counter;
    uint64_t c = atomic_load_explicit(counter, memory_order_acquire);
    while ((uint32_t)(c >> 32) == generation && ((c >> 16) & 0xffffu) < (c & 0xffffu)) {{
      if (atomic_compare_exchange_weak_explicit(counter, &c, c + (1u << 16), memory_order_acq_rel,
                                                memory_order_acquire)) {{
        task(arg, owner * per_thread + (unsigned)((c >> 16) & 0xffffu), threads * per_thread);
        atomic_fetch_add_explicit(&done, 1, memory_order_release);
        c = atomic_load_explicit(counter, memory_order_acquire);
      }}
    }}
    if ((uint32_t)(c >> 32) != generation) return;  /* a newer call: this one is finished */
  }}
}}

static uint64_t clock_ns(clockid_t clock) {{
  struct timespec t;
  clock_gettime(clock, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}}

/* A worker spins for the next kernel only while it gets a core of its own. On a machine whose
   cores other processes keep busy, a spinning worker is always runnable: it takes turns from them
   and from the caller, and loses the scheduler's credit for sleeping, so it runs late when the
   caller has shares for it (mobilenet_v2 beside one spinning process: 5.8 ms spinning, 3.0 ms
   sleeping at once; quiet: 1.8 ms spinning, 2.3-4.0 ms sleeping: a sleeper wakes slowly). So a
   spinning worker measures, over windows of WINDOW_MS of its time awake, the share of it the CPU
   ran it; below busy_percent, it sleeps at once between kernels for the next `backoff` ms, then
   spins one window again to look, doubling `backoff` while the machine stays busy. Preemption
   counts would not do: a quiet virtual machine preempts a thread a few times a second. */
static void* worker_main(void* arg) {{
  unsigned index = (unsigned)(uintptr_t)arg;  /* worker i helps calls of more than i + 1 threads */
  uint32_t seen = atomic_load(&wake);
  uint64_t backoff_ns = (uint64_t)tg_pool_backoff_ms * 1000000u, sleep_until = 0, asleep_ns = 0;
  uint64_t window_wall = clock_ns(CLOCK_MONOTONIC), window_cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  int sleeping = 0;
  for (;;) {{
    unsigned spins = 0, spin_limit = sleeping ? 0u : tg_pool_spin;
    while (atomic_load_explicit(&wake, memory_order_acquire) == seen) {{
      if (spins < spin_limit) {{
        ++spins;
        tg_pause();
      }} else {{
        uint64_t before = sleeping ? 0 : clock_ns(CLOCK_MONOTONIC);
        atomic_fetch_add(&sleepers, 1);
        syscall(SYS_futex, &wake, FUTEX_WAIT_PRIVATE, seen, 0, 0, 0);
        atomic_fetch_sub(&sleepers, 1);
        if (!sleeping) asleep_ns += clock_ns(CLOCK_MONOTONIC) - before;
      }}
    }}
    uint64_t now = clock_ns(CLOCK_MONOTONIC);
    if (sleeping) {{
      if (now >= sleep_until) {{  /* look again: one window spinning */
        sleeping = 0;
        window_wall = now, window_cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID), asleep_ns = 0;
      }}
    }} else if (now - window_wall >= {WINDOW_MS}u * 1000000u) {{
      uint64_t cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);
      uint64_t awake = now - window_wall > asleep_ns ? now - window_wall - asleep_ns : 1;
      if ((cpu - window_cpu) * 100u < awake * tg_pool_busy_percent) {{
        sleeping = 1;
        sleep_until = now + backoff_ns;
        if (backoff_ns < {MAX_BACKOFF_MS}u * 1000000ull) backoff_ns *= 2;
      }} else {{
        backoff_ns = (uint64_t)tg_pool_backoff_ms * 1000000u;
      }}
      window_wall = now, window_cpu = cpu, asleep_ns = 0;
    }}
    seen = atomic_load_explicit(&wake, memory_order_acquire);
    if (index + 1 < atomic_load_explicit(&job_threads, memory_order_relaxed)) run_tasks(seen, index + 1);
  }}
  return 0;
}}

static void after_fork_in_child(void) {{
  /* the child has only the forking thread: its pool starts empty */
  workers = 0;
  atomic_store(&sleepers, 0);
  pthread_mutex_init(&call_lock, 0);
}}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static void init_once(void) {{ pthread_atfork(0, 0, after_fork_in_child); }}

static void ensure_workers(unsigned wanted) {{
  if (wanted > {MAX_WORKERS}u) wanted = {MAX_WORKERS}u;
  while (workers < wanted) {{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t thread;
    int failed = pthread_create(&thread, &attr, worker_main, (void*)(uintptr_t)workers);
    pthread_attr_destroy(&attr);
    if (failed) return;  /* fewer threads: the caller claims what they would have */
    ++workers;
  }}
}}

static void tg_pool_parallel(tg_task_fn task, void* arg, unsigned threads) {{
  unsigned per_thread = tg_pool_tasks_per_thread ? tg_pool_tasks_per_thread : 1u;
  if (per_thread > 0xffffu) per_thread = 0xffffu;
  if (threads > {MAX_WORKERS + 1}u) threads = {MAX_WORKERS + 1}u;
  unsigned tasks = threads * per_thread;
  if (threads <= 1 || pthread_mutex_trylock(&call_lock) != 0) {{
    task(arg, 0, 1);  /* the whole loop as one share, on this thread */
    return;
  }}
  pthread_once(&once, init_once);
  ensure_workers(threads - 1);
  atomic_store_explicit(&job_task, task, memory_order_relaxed);
  atomic_store_explicit(&job_arg, arg, memory_order_relaxed);
  atomic_store_explicit(&job_per_thread, per_thread, memory_order_relaxed);
  atomic_store_explicit(&job_threads, threads, memory_order_relaxed);
  atomic_store_explicit(&done, 0, memory_order_relaxed);
  uint32_t generation = atomic_load(&wake) + 1;
  for (unsigned t = 0; t < threads; ++t)
    atomic_store_explicit(&ranges[t].counter, ((uint64_t)generation << 32) | per_thread, memory_order_relaxed);
  atomic_store(&wake, generation);  /* publishes the job and the ranges (sequentially consistent) */
  if (atomic_load(&sleepers) > 0) syscall(SYS_futex, &wake, FUTEX_WAKE_PRIVATE, INT_MAX, 0, 0, 0);
  run_tasks(generation, 0);
  for (unsigned spins = 0; atomic_load_explicit(&done, memory_order_acquire) < tasks; ++spins) {{
    if (spins < 4096u) tg_pause(); else sched_yield();  /* a task another thread started */
  }}
  pthread_mutex_unlock(&call_lock);
}}

const tg_pool_api tg_pool_api_v{POOL_ABI_VERSION} = {{{POOL_ABI_VERSION}, tg_pool_parallel}};
"""


_lock = threading.Lock()
_api: Any = None  # the loaded tg_pool_api's address (an int), False once it could not be built
_keep: list[ctypes.CDLL] = []  # the pool's library stays loaded as long as the process
_installers: list[Any] = []  # every loaded library's tg_install_pool, for set_pool_enabled
_enabled: bool | None = None  # set_pool_enabled's choice; None: TILEGRAPH_THREAD_POOL decides


def pool_api() -> int | None:
    """The address of the process's tg_pool_api, building the pool's library once per machine
    (build cache); None where it is off or cannot be built (kernels then stay on libgomp)."""
    global _api
    if not pool_enabled():
        return None
    with _lock:
        if _api is None:  # a forked child keeps the library; the pool empties itself there (atfork)
            try:
                from tilegraph.build.compile import compile_c
                from tilegraph.target import as_target

                library = ctypes.CDLL(str(compile_c(pool_source(), as_target("cpu"), name="thread_pool")))
                _api = ctypes.addressof(ctypes.c_char.in_dll(library, f"tg_pool_api_v{POOL_ABI_VERSION}"))
                _keep.append(library)
            except Exception as e:  # no compiler here: libgomp runs the kernels, as without the pool
                log.info("the thread pool could not be built (%s); kernels use libgomp", e)
                _api = False
        return _api or None


def configure_pool(**settings: int) -> dict[str, int]:
    """Change the running pool's settings (names of SETTINGS); returns them all as they now are
    ({} where the pool is off or could not be built). Nothing changes when one is refused."""
    unknown = set(settings) - set(SETTINGS)
    if unknown:
        raise ValueError(f"unknown thread pool setting(s) {sorted(unknown)}; known: {sorted(SETTINGS)}")
    for name, value in settings.items():
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**32:
            raise ValueError(f"thread pool setting {name} must be an int from 0 to 2**32 - 1, got {value!r}")
    if pool_api() is None:
        return {}
    library = _keep[0]
    for name, value in settings.items():
        ctypes.c_uint.in_dll(library, f"tg_pool_{name}").value = value
    return {name: ctypes.c_uint.in_dll(library, f"tg_pool_{name}").value for name in SETTINGS}


def pool_enabled() -> bool:
    """Whether kernels run their parallel loops on the pool: set_pool_enabled's choice, else
    TILEGRAPH_THREAD_POOL (anything but "off" / "0" / "false" / "libgomp": on)."""
    if _enabled is not None:
        return _enabled
    return os.environ.get(POOL_ENV, "").strip().lower() not in ("off", "0", "false", "libgomp")


def install_pool(library: ctypes.CDLL) -> bool:
    """Point a loaded kernel library's parallel loops at the pool; False where it has no shim (not
    built as a kernel: compile_c's thread_pool=False), the pool is off or could not be built."""
    try:
        install = library.tg_install_pool
    except AttributeError:
        return False
    install.restype = ctypes.c_int
    install.argtypes = [ctypes.c_void_p]
    with _lock:
        _installers.append(install)
    api = pool_api()
    return api is not None and bool(install(api))


def set_pool_enabled(enabled: bool) -> None:
    """Run every loaded and later loaded library's parallel loops on the pool (True) or on libgomp
    (False): the same libraries, so the two can be timed in alternation (benchmarks/busy.py)."""
    global _enabled
    _enabled = bool(enabled)
    api = pool_api() if enabled else None
    with _lock:
        for install in _installers:
            install(api)


__all__ = ["MAX_WORKERS", "POOL_ENV", "install_pool", "pool_api", "pool_enabled", "pool_source", "configure_pool",
           "set_pool_enabled"]

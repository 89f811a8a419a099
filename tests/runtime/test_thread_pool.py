"""The thread pool: every share of a parallel loop runs exactly once, on the pool, on libgomp or on
the caller alone, from several Python threads at once and in a forked child."""

import ctypes
import multiprocessing
import threading

import numpy as np
import pytest

from tilegraph.build.compile import compile_c
from tilegraph.runtime import thread_pool
from tilegraph.runtime.kernel import load_library
from tilegraph.target import as_target

pytestmark = pytest.mark.needs_cc

# A parallel loop as the C printer writes one, counting how often each iteration runs and
# recording how many shares (omp_get_num_threads) the loop was cut into.
COUNTING_KERNEL = """#include <stdint.h>
int omp_get_num_threads(void);
void count(int32_t* restrict hits, int32_t* restrict shares, int32_t n, int32_t num_threads) {
#pragma omp parallel for num_threads(num_threads)
  for (int32_t i = 0; i < n; ++i) {
    __atomic_fetch_add(&hits[i], 1, __ATOMIC_RELAXED);
    shares[i] = omp_get_num_threads();
  }
}
"""


@pytest.fixture(scope="module")
def count_fn():
    library = load_library(compile_c(COUNTING_KERNEL, as_target("cpu"), name="pool_count", thread_pool=True))
    fn = library.count
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32]
    return fn


@pytest.fixture(autouse=True)
def pool_on_afterwards():
    yield
    thread_pool.set_pool_enabled(True)
    thread_pool._enabled = None  # back to TILEGRAPH_THREAD_POOL


def _run(fn, n: int, threads: int, calls: int = 1) -> tuple[np.ndarray, np.ndarray]:
    hits, shares = np.zeros(max(n, 1), np.int32), np.full(max(n, 1), -1, np.int32)
    for _ in range(calls):
        fn(hits.ctypes.data, shares.ctypes.data, n, threads)
    return hits[:n], shares[:n]


@pytest.mark.parametrize("n", [1, 7, 64, 1001])
@pytest.mark.parametrize("threads", [1, 2, 3, 5])
def test_every_iteration_runs_once_per_call_on_the_pool(count_fn, n, threads):
    assert thread_pool.pool_api() is not None
    hits, shares = _run(count_fn, n, threads, calls=50)
    np.testing.assert_array_equal(hits, 50)
    per_thread = thread_pool.configure_pool()["tasks_per_thread"]
    assert set(shares.tolist()) == {threads * per_thread if threads > 1 else 1}


@pytest.mark.parametrize("threads", [2, 3])
def test_libgomp_runs_the_same_library_when_the_pool_is_off(count_fn, threads):
    thread_pool.set_pool_enabled(False)
    hits, shares = _run(count_fn, 101, threads, calls=20)
    np.testing.assert_array_equal(hits, 20)
    assert set(shares.tolist()) <= set(range(1, threads + 1))  # libgomp's team, one share per thread
    thread_pool.set_pool_enabled(True)
    hits, shares = _run(count_fn, 101, threads)
    np.testing.assert_array_equal(hits, 1)
    assert set(shares.tolist()) == {threads * thread_pool.configure_pool()["tasks_per_thread"]}


def test_calls_from_several_python_threads_at_once_each_run_every_iteration(count_fn):
    """One caller at a time uses the pool; the others run their loops themselves."""
    results, errors = {}, []

    def caller(k: int) -> None:
        try:
            results[k] = _run(count_fn, 257 + k, 2 + k % 3, calls=200)[0]
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    callers = [threading.Thread(target=caller, args=(k,)) for k in range(4)]
    for t in callers:
        t.start()
    for t in callers:
        t.join(timeout=120)
    assert not errors and len(results) == 4
    for hits in results.values():
        np.testing.assert_array_equal(hits, 200)


def test_thread_counts_and_share_counts_may_change_between_calls(count_fn):
    """Consecutive calls of other sizes: a thread that saw an older call never runs its shares
    against a newer one's (the generation in each range's counter)."""
    for k in range(300):
        thread_pool.configure_pool(tasks_per_thread=1 + k % 5)
        n, threads = 1 + (k * 37) % 200, 2 + k % 4
        hits, _ = _run(count_fn, n, threads)
        np.testing.assert_array_equal(hits, 1, err_msg=f"call {k}: n={n}, threads={threads}")
    thread_pool.configure_pool(tasks_per_thread=thread_pool.SETTINGS["tasks_per_thread"])


def _child_runs(queue) -> None:
    library = load_library(compile_c(COUNTING_KERNEL, as_target("cpu"), name="pool_count", thread_pool=True))
    fn = library.count
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32]
    hits, _ = _run(fn, 99, 2, calls=10)
    queue.put(hits.tolist())


def test_a_forked_child_starts_an_empty_pool_of_its_own(count_fn):
    _run(count_fn, 99, 2, calls=10)  # the parent's workers exist
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child_runs, args=(queue,))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0, "the child hung or crashed running a kernel on the pool"
    assert queue.get(timeout=5) == [10] * 99


def test_kernels_link_the_shim_and_other_libraries_do_not():
    import tilegraph as tg
    from tilegraph import workloads

    kernel = tg.build(workloads.from_spec("softmax:4,33"))
    assert kernel.lib_path.is_file()
    assert hasattr(load_library(kernel.lib_path), "tg_install_pool")
    plain = load_library(compile_c(COUNTING_KERNEL, as_target("cpu"), name="pool_count"))
    assert not hasattr(plain, "tg_install_pool") and not thread_pool.install_pool(plain)


def test_pool_settings_are_checked():
    with pytest.raises(ValueError, match="unknown thread pool setting"):
        thread_pool.configure_pool(threads=3)
    before = thread_pool.configure_pool()
    with pytest.raises(ValueError, match="an int from 0 to"):
        thread_pool.configure_pool(spin=before["spin"] + 1, tasks_per_thread=-1)
    assert thread_pool.configure_pool() == before  # nothing applied when one setting is refused
    assert set(thread_pool.configure_pool()) == set(thread_pool.SETTINGS)


def test_the_environment_turns_the_pool_off(monkeypatch):
    thread_pool._enabled = None
    for value, enabled in (("off", False), ("0", False), ("libgomp", False), ("", True), ("on", True)):
        monkeypatch.setenv(thread_pool.POOL_ENV, value)
        assert thread_pool.pool_enabled() is enabled

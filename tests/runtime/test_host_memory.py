"""Host memory for kernels (runtime/host_memory.py): cache-line aligned arrays, and weights and
arenas in huge-page regions (whether the OS backs them with huge pages is its choice: never asserted)."""

import mmap

import numpy as np

from tilegraph.runtime.host_memory import CACHE_LINE, HUGE_PAGE, aligned_bytes, huge_page_bytes, in_huge_pages


def test_aligned_bytes_start_on_a_line_and_are_zero():
    for n in (1, 63, 4097):
        b = aligned_bytes(n)
        assert b.ctypes.data % CACHE_LINE == 0 and b.nbytes == n and not b.any()


def test_a_huge_page_region_is_zeroed_writable_and_starts_on_a_huge_page_where_large():
    big = huge_page_bytes(3 * HUGE_PAGE + 5)
    assert big.nbytes == 3 * HUGE_PAGE + 5 and not big.any()
    # where the OS takes the advice at all, the region starts on a huge page (else only on a line)
    assert big.ctypes.data % (HUGE_PAGE if hasattr(mmap, "MADV_HUGEPAGE") else CACHE_LINE) == 0
    big[-1] = 7  # the whole length is usable
    small = huge_page_bytes(1000)  # below a huge page: an ordinary aligned allocation
    assert small.nbytes == 1000 and small.ctypes.data % CACHE_LINE == 0


def test_large_arrays_move_into_one_region_with_their_values_small_ones_stay():
    rng = np.random.default_rng(0)
    arrays = {"w1": rng.standard_normal((768, 1024)).astype(np.float32),
              "w2": rng.integers(0, 9, (600, 999)).astype(np.int64),
              "b": np.arange(7, dtype=np.float32)}
    moved = in_huge_pages(arrays)
    assert moved["b"] is arrays["b"]
    for name in ("w1", "w2"):
        m = moved[name]
        assert m is not arrays[name] and m.dtype == arrays[name].dtype and m.shape == arrays[name].shape
        np.testing.assert_array_equal(m, arrays[name])
        assert m.flags.c_contiguous and not m.flags.writeable and m.ctypes.data % CACHE_LINE == 0
    assert in_huge_pages({"b": arrays["b"]}) == {"b": arrays["b"]}

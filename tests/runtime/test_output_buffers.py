"""Output memory lent again only once nothing lent reaches it (runtime/output_buffers.py)."""

import gc

import numpy as np

from tilegraph.runtime.host_memory import CACHE_LINE
from tilegraph.runtime.output_buffers import OutputBuffers


def test_memory_is_lent_again_only_after_the_array_and_every_view_of_it_are_gone():
    buffers = OutputBuffers(4 * 6 * 8 + 64)
    first = buffers.lend((6, 8), np.float32, offset=64)
    address = first.ctypes.data
    assert (address - 64) % CACHE_LINE == 0 and first.shape == (6, 8) and first.flags.writeable
    first[...] = 1.0
    view = first[2:, ::2].reshape(-1)  # a view of a view: still keeps `first` alive
    del first
    gc.collect()
    second = buffers.lend((6, 8), np.float32, offset=64)
    assert second.ctypes.data != address  # `view` still reads the first region
    second[...] = 2.0
    assert (view == 1.0).all()
    del view
    gc.collect()
    third = buffers.lend((6, 8), np.float32, offset=64)
    assert third.ctypes.data == address and buffers.regions == 2


def test_beyond_keep_live_results_each_gets_memory_of_its_own():
    buffers = OutputBuffers(40, keep=2)
    held = [buffers.lend((10,), np.float32) for _ in range(5)]
    for i, array in enumerate(held):
        array[...] = i
    assert len({a.ctypes.data for a in held}) == 5 and buffers.regions == 2
    assert [int(a[0]) for a in held] == [0, 1, 2, 3, 4]


def test_a_lent_array_keeps_its_memory_after_the_buffers_are_gone():
    buffers = OutputBuffers(4 * 1000)
    array = buffers.lend((1000,), np.float32)
    array[...] = np.arange(1000)
    del buffers
    gc.collect()
    np.testing.assert_array_equal(array, np.arange(1000, dtype=np.float32))

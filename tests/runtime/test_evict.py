"""runtime/evict.py: flushing given arrays' cache lines. Eviction never changes a value; where the
helper does not build (another architecture) there is no evictor and callers flush every cache."""

import importlib
import platform

import numpy as np
import pytest

from tilegraph.runtime import evict

pytestmark = pytest.mark.needs_cc


def test_evicting_arrays_leaves_their_values_and_can_repeat():
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(n).astype(np.float32) for n in (1, 17, 4099, 300_000)]
    arrays.append(np.arange(12, dtype=np.int8)[3:])  # starts off a cache line
    arrays.append(np.zeros(0, np.float32))            # nothing to flush
    copies = [a.copy() for a in arrays]
    evictor = evict.array_evictor(arrays)
    if platform.machine() in ("x86_64", "AMD64", "aarch64", "arm64"):
        assert evictor is not None
    if evictor is None:
        pytest.skip(f"no eviction helper on {platform.machine()}")
    for _ in range(3):
        evictor()
    for a, c in zip(arrays, copies):
        np.testing.assert_array_equal(a, c)


def test_no_arrays_gives_an_evictor_that_does_nothing():
    evictor = evict.array_evictor([])
    if evictor is not None:
        evictor()


def test_a_helper_that_fails_to_build_means_no_evictor(monkeypatch):
    monkeypatch.setattr(evict, "_function", None)

    def broken(*args, **kwargs):
        raise RuntimeError("no compiler")

    monkeypatch.setattr(importlib.import_module("tilegraph.build.compile"), "compile_c", broken)
    assert evict.array_evictor([np.ones(4)]) is None
    monkeypatch.setattr(evict, "_function", None)  # the next test builds it again

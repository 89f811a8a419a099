"""aarch64 kernels, cross-compiled and run under qemu: default schedules and Gensor's candidates
of GEMM, conv and softmax with odd shapes match float64 numpy; timing is refused (short tunings,
checked here and never timed: tests/tune/test_checked_only.py)."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import dtype as dt
from tilegraph import workloads
from tilegraph.loop.ir import Buffer
from tilegraph.runtime.backends import backend_for
from tilegraph.runtime.emulated import EmulatedKernel, harness
from tilegraph.target import host_arch
from tilegraph.testing import random_inputs, reference_outputs
from tilegraph.tune.hardware import hardware_model
from tilegraph.tune.strategy.base import TuneContext
from tilegraph.tune.strategy.gensor import GensorStrategy

pytestmark = pytest.mark.skipif(host_arch() != "x86_64", reason="these tests emulate aarch64 from an x86-64 host")
ARM = tg.Target("cpu", arch="aarch64", num_cores=2)
SPECS = ["matmul:37,29,23", "conv2d_nhwc:1,9,7,3,5,3,2,1", "softmax:5,33"]


def _check(kernel, wl, seed=0):
    inputs = random_inputs(wl, seed=seed)
    got = kernel(*inputs)
    (want,) = reference_outputs(wl, inputs)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_foreign_architecture_gets_the_emulated_backend_and_a_cross_compiler():
    assert backend_for(ARM).kind == "cpu-emulated"
    assert not backend_for(ARM).timeable and backend_for(tg.Target("cpu")).kind == "cpu"
    assert ARM.isa == "neon" and ARM.vector_bits == 128 and "aarch64" in ARM.cc
    assert hardware_model(ARM, measure=False).vector_registers == 32


def test_the_harness_reads_and_writes_every_argument():
    params = (Buffer("A", (3, 5), dt.float32), Buffer("B", (7,), dt.int8))
    text = harness("tg_k", params)
    assert "tg_k(p0, p1, threads);" in text and ", 60, 0)" in text and ", 7, 1)" in text and "argc != 4" in text


@pytest.mark.needs_qemu
@pytest.mark.parametrize("spec", SPECS)
def test_default_schedules_match_numpy_under_qemu(spec, tmp_path, monkeypatch):
    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path))
    wl = workloads.from_spec(spec)
    kernel = tg.build(wl, ARM)
    assert isinstance(kernel, EmulatedKernel) and "tg_" in kernel.entry
    _check(kernel, wl)


@pytest.mark.needs_qemu
@pytest.mark.parametrize("spec", ["matmul:37,29,23", "softmax:5,33"])
def test_gensor_candidates_for_aarch64_match_numpy_under_qemu(spec, tmp_path, monkeypatch):
    """The search's programs for a 32-register, 128-bit NEON target (no timing: their correctness)."""
    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path))
    wl = workloads.from_spec(spec)
    candidates = GensorStrategy(top_k=2, measure_hardware=False).propose(TuneContext(wl, ARM, seed=0, db=None), 2)
    assert candidates
    for n, cand in enumerate(candidates):
        _check(tg.build(tg.Schedule.replay(wl, cand.trace_json), ARM), wl, seed=n)


@pytest.mark.needs_qemu
def test_timing_and_tuning_are_refused_and_bad_arguments_are_caught(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path))
    wl = workloads.from_spec("softmax:5,33")
    kernel = tg.build(wl, ARM)
    x = np.zeros((5, 33), np.float32)
    with pytest.raises(tg.TilegraphError, match="timings mean nothing"):
        kernel.time(x)
    with pytest.raises(tg.TilegraphError, match="time them on an aarch64 machine"):
        tg.runtime.backends.require_runnable(ARM, timed=True)
    with pytest.raises(TypeError, match="float64"):
        kernel(np.zeros((5, 33)))
    with pytest.raises(ValueError, match="shape"):
        kernel(np.zeros((33, 5), np.float32))


@pytest.mark.needs_qemu
def test_pinned_operand_registers_compile_and_compute_on_aarch64(tmp_path, monkeypatch):
    """The operand pin's NEON form (an asm claiming a `w` register) builds and keeps the product."""
    from tests.lower.passes.test_pin_operand_vectors import _register_tiled_matmul

    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path))
    sch = _register_tiled_matmul(3, 2, 9, ARM.lanes("float32"))
    kernel = tg.build(sch, ARM)
    assert "TGH_PIN(" in kernel.source
    _check(kernel, sch.workload)

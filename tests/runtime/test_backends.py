"""runtime/backends.py: one backend per target kind; a target that cannot run here is refused
with one clear line."""

import pytest

import tilegraph as tg
from tilegraph.runtime import backends
from tilegraph.runtime.launch import KernelProtocol
from tilegraph.target import Target


def test_every_target_kind_has_a_backend():
    from tilegraph.target import KINDS

    assert set(backends.BACKENDS) == {*KINDS, "cpu-emulated"}
    assert {k for k, b in backends.BACKENDS.items() if b.is_gpu} == {"cuda", "opencl"}
    assert [k for k, b in backends.BACKENDS.items() if not b.timeable] == ["cpu-emulated"]


def test_an_unknown_kind_is_a_clear_error():
    with pytest.raises(ValueError, match="no backend for target kind 'tpu'; registered: cpu, cpu-emulated, cuda, opencl"):
        backends.backend_for("tpu")


def test_a_registered_backend_serves_tg_build(monkeypatch, rng):
    """What adding a target kind amounts to: a registration whose build returns a kernel."""
    cpu = backends.backend_for("cpu")
    built = []

    def build(sch, target):
        built.append(sch)
        return cpu.build(sch, target)

    monkeypatch.setitem(backends.BACKENDS, "cpu", backends.Backend("cpu", build, cpu.default_schedule,
                                                                   cpu.unavailable, cpu.loader))
    a = tg.te.placeholder((5,), name="A")
    wl = tg.Workload([a], [tg.te.compute((5,), lambda i: a[i] + 1.0, name="B")])
    kernel = tg.build(wl, "cpu -isa=avx2")
    assert built and isinstance(kernel, KernelProtocol)
    x = rng.standard_normal(5).astype("float32")
    assert (kernel(x) == x + 1).all()


def test_cpu_is_always_runnable():
    backends.require_runnable(Target("cpu"))


def test_cuda_without_a_visible_gpu_is_refused(monkeypatch):
    monkeypatch.setattr(backends, "gpu_visible", lambda: False)
    with pytest.raises(tg.TilegraphError, match="no NVIDIA GPU found"):
        backends.require_runnable(Target("cuda"))


def test_opencl_without_a_device_is_refused(monkeypatch):
    import tilegraph.runtime.opencl as opencl

    monkeypatch.setattr(opencl, "available", lambda: False)
    with pytest.raises(tg.TilegraphError, match="no OpenCL device"):
        backends.require_runnable(Target("opencl"))

"""runtime/devices.py: a target whose kernels cannot run here is refused with one clear line."""

import pytest

import tilegraph as tg
from tilegraph.runtime import devices
from tilegraph.target import Target


def test_cpu_is_always_runnable():
    devices.require_runnable(Target("cpu"))


def test_cuda_without_a_visible_gpu_is_refused(monkeypatch):
    monkeypatch.setattr(devices, "gpu_visible", lambda: False)
    with pytest.raises(tg.TilegraphError, match="no NVIDIA GPU found"):
        devices.require_runnable(Target("cuda"))


def test_opencl_without_a_device_is_refused(monkeypatch):
    import tilegraph.runtime.opencl as opencl

    monkeypatch.setattr(opencl, "available", lambda: False)
    with pytest.raises(tg.TilegraphError, match="no OpenCL device"):
        devices.require_runnable(Target("opencl"))

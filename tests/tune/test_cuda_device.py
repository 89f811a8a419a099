"""The CUDA device query behind the GPU hardware model (issue 18, part 3): its source compiles with
nvcc, its attributes give an H100's published peaks, and without a GPU the spec table is used."""

import shutil

import pytest

import tilegraph as tg
from tilegraph.tune.cuda_device import ATTRIBUTES, hardware_from_attributes, query_cuda_attributes, query_source
from tilegraph.tune.hardware_gpu import gpu_hardware

H100_SXM = {"multiprocessors": 132, "warp_size": 32, "max_threads_per_block": 1024, "max_threads_per_sm": 2048,
            "shared_memory_per_block": 49152, "shared_memory_per_sm": 233472, "registers_per_sm": 65536,
            "clock_khz": 1980000, "memory_clock_khz": 2619000, "memory_bus_bits": 5120, "l2_bytes": 52428800,
            "cc_major": 9, "cc_minor": 0}


def test_attributes_give_the_published_peaks():
    hw = hardware_from_attributes("NVIDIA H100 80GB HBM3", H100_SXM)
    assert hw["num_sms"] == 132 and hw["shared_memory_per_sm"] == 233472
    assert hw["peak_flops"] == pytest.approx(66.9e12, rel=0.01)        # 132 SMs x 128 lanes x 2 x 1.98 GHz
    assert hw["dram_bandwidth"] == pytest.approx(3.35e12, rel=0.01)    # 5120-bit HBM3 at 2.619 GHz DDR


def test_every_attribute_is_asked_for():
    source = query_source()
    assert all(f"{attr}, dev" in source and f'\\"{key}\\"' in source for key, attr in ATTRIBUTES.items())


@pytest.mark.needs_nvcc
def test_query_source_compiles_with_nvcc():
    from tilegraph.build.compile import check_cuda_syntax

    check_cuda_syntax(query_source(), tg.Target("cuda", device_name="NVIDIA H100", compute_capability="9.0",
                                                cc=shutil.which("nvcc") or "nvcc"))


def test_without_a_gpu_the_spec_table_is_used(monkeypatch):
    from tilegraph import target as target_module

    monkeypatch.setattr(target_module, "_query_nvidia_smi", lambda: None)
    query_cuda_attributes.cache_clear()
    target = tg.Target("cuda", device_name="NVIDIA H100 80GB HBM3", cc_version="x")
    assert query_cuda_attributes(target) is None
    hw = gpu_hardware(target)
    assert hw.num_sms == 132 and hw.peak_flops == 67e12

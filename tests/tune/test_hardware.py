import pytest

from tilegraph.tune import hardware
from tilegraph.tune.hardware import HardwareModel, hardware_model


def test_nominal_model_has_sane_facts():
    hw = hardware_model(measure=False)
    assert hw.cores >= 1 and hw.simd_lanes_fp32 in (4, 8, 16)
    assert hw.vector_registers == (32 if hw.isa == "avx512" else 16)
    assert hw.l1d_bytes < hw.l2_bytes <= hw.l3_bytes
    assert hw.min_accumulators == hw.fma_latency_cycles * hw.fma_units
    assert hw.peak_flops(hw.cores) >= hw.peak_flops(1) > 0
    with pytest.raises(ValueError, match="level"):
        hw.bandwidth("l4")


def test_json_roundtrip():
    hw = hardware_model(measure=False)
    assert HardwareModel.from_json(hw.to_json()) == hw


@pytest.mark.needs_cc
def test_measurement_is_cached_under_the_fingerprint(tmp_path, monkeypatch):
    monkeypatch.setattr(hardware, "_cache_dir", lambda: tmp_path)
    hw = hardware_model(measure=True)
    assert hw.measured and hw.peak_flops_1t > 1e9
    assert all(hw.bandwidth_bytes[level] > 1e8 for level in hardware.MEMORY_LEVELS)
    assert (tmp_path / "hardware" / f"{hw.fingerprint}.json").exists()
    assert hardware_model(measure=True) == hw  # read back, not measured again

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


@pytest.mark.needs_cc
@pytest.mark.skipif(__import__("platform").machine() not in ("x86_64", "AMD64"), reason="x86 assembly")
@pytest.mark.parametrize("isa, flags, registers, vector_bytes", [
    ("avx2", ("-mavx2", "-mfma"), 16, 32),
    ("avx512", ("-mavx512f", "-mavx512vl", "-mfma"), 32, 64),
])
def test_fma_probe_keeps_every_chain_in_registers(tmp_path, isa, flags, registers, vector_bytes):
    """The peak probe used 16 chains everywhere: on AVX2's 16 registers (plus two operands) they
    spilled and the measured peak read half of what kernels reach. The chain count now fits the
    register file, and the compiled probe has no stack traffic (checked on the assembly)."""
    import re
    import subprocess

    from tilegraph.tune.hardware import bench_source, fma_chains

    chains = fma_chains(registers)
    assert 8 <= chains and chains + 3 <= registers
    src, asm = tmp_path / "probe.c", tmp_path / "probe.s"
    src.write_text(bench_source(chains))
    subprocess.run(["gcc", "-O2", *flags, "-fno-inline", f"-DVBYTES={vector_bytes}", "-S", str(src), "-o", str(asm)],
                   check=True)
    text = asm.read_text()
    start = text.index("fma_chain")
    body = text[start:text.index(".size", start)]
    assert body.count("vfmadd") >= chains
    assert not re.search(r"\((%rsp|%rbp)\)", body), f"{isa}: the FMA chains spill to the stack"


def test_fma_facts_come_from_the_microarchitecture():
    """FMA units and latency are the core's (microarch.py), per vector width: a Zen 4 issues one
    full-width FMA per cycle at AVX-512 and two at AVX2; nothing is inferred from a clock."""
    from tilegraph.target import Target

    zen4_512 = hardware_model(Target("cpu", isa="avx512", uarch="zen4"), measure=False)
    zen4_256 = hardware_model(Target("cpu", isa="avx2", uarch="zen4"), measure=False)
    haswell = hardware_model(Target("cpu", isa="avx2", uarch="haswell"), measure=False)
    assert (zen4_512.fma_units, zen4_256.fma_units, haswell.fma_units) == (1, 2, 2)
    assert (zen4_512.vector_registers, zen4_256.vector_registers) == (32, 16)
    assert haswell.fma_latency_cycles == 5 and haswell.min_accumulators == 10
    assert zen4_512.nominal_peak_flops_1t == zen4_512.peak_flops_1t == pytest.approx(3.5e9 * 1 * 16 * 2)


def test_a_peak_far_from_the_nominal_one_warns():
    """The AVX2 probe that spilled measured a third of the machine's peak; such a measurement now
    names the problem instead of silently steering the search."""
    import dataclasses

    from tilegraph.target import Target

    nominal = hardware_model(Target("cpu", isa="avx2", uarch="zen3"), measure=False)
    assert nominal.peak_warning == ""  # nothing measured, nothing to doubt
    spilled = dataclasses.replace(nominal, measured=True, peak_flops_1t=nominal.nominal_peak_flops_1t / 3)
    assert "0.33x the nominal 112 GFLOP/s of a zen3 core with 2 FMA unit(s)" in spilled.peak_warning
    assert "--remeasure" in spilled.peak_warning
    fine = dataclasses.replace(nominal, measured=True, peak_flops_1t=nominal.nominal_peak_flops_1t * 1.2)
    assert fine.peak_warning == ""
    unknown = dataclasses.replace(spilled, uarch="generic-x86")
    assert unknown.peak_warning == ""  # an unknown core's nominal clock is a guess: no warning on it


@pytest.mark.needs_cc
def test_measuring_warns_when_the_peak_is_implausible(tmp_path, monkeypatch):
    monkeypatch.setattr(hardware, "_cache_dir", lambda: tmp_path)
    from tilegraph.target import Target, host_arch

    named = {"x86_64": "haswell", "aarch64": "neoverse-n1"}.get(host_arch())
    if named is None:
        pytest.skip("no named core for this architecture")
    monkeypatch.setattr(hardware, "PEAK_SANITY", (1e6, 1e7))  # no real machine is this fast
    with pytest.warns(RuntimeWarning, match="measured fp32 peak"):
        hw = hardware_model(Target("cpu", uarch=named), measure=True)
    assert hw.measured and hw.peak_warning


def test_an_all_core_peak_that_does_not_scale_is_measured_again(monkeypatch):
    """A process busy on one core during the all-core samples halved them all; the cached value
    then misled Gensor's model and every % of peak. Measured again until the cores scale."""
    calls = {"all": 0}

    class FakeBench:
        def bench_fma(self, iters, threads, sink):
            if threads == 1:
                return 100e9
            calls["all"] += 1
            return 105e9 if calls["all"] <= 9 else 198e9  # disturbed for the first 9 samples

        def bench_read(self, data, n, reps, threads, sink):
            return 50e9

    monkeypatch.setattr(hardware, "_compile_bench", lambda *a, **k: FakeBench())
    monkeypatch.setattr(hardware, "ALL_CORE_RETRY_PAUSE_S", 0.0)
    nominal = hardware_model(measure=False)
    two_cores = HardwareModel(**{**nominal.__dict__, "cores": 2})
    hw = hardware._measure(two_cores)
    assert hw.peak_flops_all == 198e9 and calls["all"] == 1 + 6 + 3  # warm-up, the first six, one retry of three

    calls["all"] = -1000  # never scales (an SMT pair): a bounded number of tries, the best kept
    hw = hardware._measure(two_cores)
    assert hw.peak_flops_all == 105e9 and calls["all"] == -1000 + 1 + 6 + hardware.ALL_CORE_RETRIES * 3


def test_the_bandwidth_probes_read_buffers_that_start_on_a_cache_line(monkeypatch):
    """numpy starts a buffer on 16 bytes: an AVX-512 load of one that did not start on 64 split two
    lines, and the same machine cached L1 and L2 at half their bandwidth or not, by the luck of one
    allocation (Gensor's picks followed: BERT-base untuned 171 ms against 96)."""
    offsets = []

    class FakeBench:
        def bench_fma(self, iters, threads, sink):
            return 100e9 * threads

        def bench_read(self, data, n, reps, threads, sink):
            offsets.append(data % 64)
            return 50e9

    monkeypatch.setattr(hardware, "_compile_bench", lambda *a, **k: FakeBench())
    nominal = hardware_model(measure=False)
    small = HardwareModel(**{**nominal.__dict__, "l3_bytes": 4 << 20})  # the DRAM probe: 64 MiB
    hardware._measure(small)
    assert len(offsets) == 4 * 4 and set(offsets) == {0}  # a first touch and three timed reads per level

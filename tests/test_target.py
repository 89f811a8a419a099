import os

import pytest

from tilegraph import dtype as dt
from tilegraph.target import HOST_ISA_ENV, KINDS, Target, _caches_from_sysfs, _count_cpus, _parse_size, as_target, host_supports


def _cpuinfo_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith(("flags", "Features")):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def test_detection_matches_this_machine():
    target = Target()
    flags = _cpuinfo_flags()
    assert target.kind == "cpu"
    assert target.num_cores == len(os.sched_getaffinity(0))
    forced = os.environ.get(HOST_ISA_ENV)
    if forced:  # the host is run as a narrower one: explicit ISA flags, never -march=native
        assert target.isa == forced and "-march=native" not in target.cflags
    elif "avx512f" in flags:
        assert (target.isa, target.vector_bits) == ("avx512", 512)
    elif {"avx2", "fma"} <= flags:
        assert (target.isa, target.vector_bits) == ("avx2", 256)
    assert target.l1d_bytes > 0 and target.l2_bytes >= target.l1d_bytes and target.l3_bytes > 0
    assert target.cpu_model and target.compiler_version
    assert "-ffast-math" not in target.cflags
    assert {"-O3", "-fopenmp", "-shared", "-fPIC"} <= set(target.cflags)
    assert host_supports(target)


@pytest.mark.skipif("avx512f" not in _cpuinfo_flags() or os.environ.get(HOST_ISA_ENV, "avx512") != "avx512",
                    reason="needs an AVX-512 machine, not run as a narrower one")
def test_avx512_machine_gets_native_flags_and_16_float_lanes():
    target = Target()
    assert target.isa == "avx512" and target.fma
    assert "-march=native" in target.cflags
    assert target.lanes(dt.float32) == 16 and target.lanes("float64") == 8 and target.lanes(dt.int8) == 64


def test_from_string_overrides_and_derived_fields():
    target = Target.from_string("cpu -isa=avx2 -cores=2")
    assert (target.isa, target.num_cores, target.vector_bits, target.fma) == ("avx2", 2, 256, True)
    if Target().isa != "avx2":
        assert "-mavx2" in target.cflags and "-march=native" not in target.cflags
    assert target.lanes(dt.float32) == 8


@pytest.mark.parametrize("spec", ["cpu", "cpu -isa=avx2 -cores=2", "cpu -isa=generic -l3=1048576 -fma=false",
                                  "cuda", "cuda -device='NVIDIA A100-SXM4-40GB'", "opencl -sms=4"])
def test_str_round_trips(spec):
    target = Target.from_string(spec)
    assert Target.from_string(str(target)) == target
    assert str(Target.from_string(str(target))) == str(target)


def test_cflags_with_spaces_round_trip():
    target = Target(cflags=("-O2", "-DNAME=a b", "-shared"))
    again = Target.from_string(str(target))
    assert again.cflags == ("-O2", "-DNAME=a b", "-shared")


def test_fingerprint_stable_and_sensitive():
    first, second = Target(), Target()
    assert first.fingerprint == second.fingerprint and hash(first) == hash(second)
    assert first.fingerprint.startswith(f"cpu-{first.isa}-{first.num_cores}c-")
    fewer_cores = [{"num_cores": first.num_cores - 1}] if first.num_cores > 1 else []  # more than the host is refused
    for override in (*fewer_cores, {"isa": "generic"}, {"cpu_model": "other cpu"},
                     {"cc_version": "gcc 99"}, {"l2_bytes": first.l2_bytes * 2}):
        assert Target(**override).fingerprint != first.fingerprint, override


def test_fingerprint_covers_codegen_version(monkeypatch):
    import tilegraph.target
    from tilegraph.version import CODEGEN_VERSION

    before = Target().fingerprint
    monkeypatch.setattr(tilegraph.target, "CODEGEN_VERSION", f"{CODEGEN_VERSION}-next")
    assert Target().fingerprint != before


def test_unknown_kind_lists_valid_kinds():
    with pytest.raises(ValueError, match="cpu, cuda, opencl"):
        Target("tpu")
    with pytest.raises(ValueError, match="valid kinds"):
        Target.from_string("fpga -cores=2")
    assert KINDS == ("cpu", "cuda", "opencl")


@pytest.mark.parametrize("spec, message", [
    ("cpu -isa=sse9", "unknown cpu isa"),
    ("cpu -cores=0", "num_cores must be a positive integer"),
    ("cpu -cores=two", "num_cores must be an integer"),
    ("cpu -bogus=1", "unknown target option 'bogus'"),
    ("cpu cores=2", "expected -key=value"),
    ("cpu -fma=maybe", "true or false"),
    ("", "empty target string"),
])
def test_bad_strings_raise_value_error(spec, message):
    with pytest.raises(ValueError, match=message):
        Target.from_string(spec)


def test_bad_overrides():
    with pytest.raises(TypeError):
        Target(nonsense=1)
    with pytest.raises(TypeError, match="cflags"):
        Target(cflags="-O3 -shared")
    assert Target(cflags=["-O1"]).cflags == ("-O1",)


def test_gpu_targets_fill_from_spec_table():
    cuda = Target("cuda", device_name="NVIDIA A100-SXM4-40GB", compute_capability=None)
    assert cuda.num_sms == 108 and cuda.warp_size == 32 and cuda.max_threads_per_block == 1024
    assert cuda.lanes(dt.float32) == 4
    opencl = Target("opencl")
    assert opencl.shared_memory_bytes > 0 and opencl.cflags is None


def test_as_target():
    assert as_target(None) == Target()
    assert as_target("cpu -cores=1").num_cores == 1
    target = Target()
    assert as_target(target) is target
    with pytest.raises(TypeError, match="target must be"):
        as_target(3)


def test_host_supports_rejects_foreign_arch():
    assert not host_supports(Target(arch="riscv64", isa="generic", cflags=()))


def test_cache_topology_parsing(tmp_path):
    assert _parse_size("32K") == 32 << 10 and _parse_size("32768K") == 32 << 20 and _parse_size("2M") == 2 << 20
    assert _count_cpus("0-1") == 2 and _count_cpus("0,2,4-7") == 6 and _count_cpus("3") == 1
    for index, (level, kind, size, shared) in enumerate([(1, "Data", "48K", "0"), (1, "Instruction", "32K", "0"),
                                                         (2, "Unified", "2048K", "0-1"),
                                                         (3, "Unified", "64M", "0-7")]):
        folder = tmp_path / f"index{index}"
        folder.mkdir()
        for name, value in (("level", level), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
            (folder / name).write_text(f"{value}\n")
    assert _caches_from_sysfs(str(tmp_path)) == {"l1d_bytes": 48 << 10, "l2_bytes": 1 << 20, "l3_bytes": 8 << 20}
    assert _caches_from_sysfs(str(tmp_path / "missing")) == {}


def test_the_host_isa_can_be_narrowed_but_not_widened(monkeypatch):
    """TILEGRAPH_HOST_ISA=avx2 runs an AVX-512 machine as an AVX2 one (how the suite is checked
    for AVX2 hosts); asking for more than the machine has is refused."""
    from tilegraph import target as target_module

    monkeypatch.delenv(HOST_ISA_ENV, raising=False)
    target_module._detect_cpu.cache_clear()
    try:
        detected = target_module._detect_cpu()["isa"]  # what the machine really has
        target_module._detect_cpu.cache_clear()
        monkeypatch.setenv(HOST_ISA_ENV, "generic")
        t = Target()
        assert t.isa == "generic" and t.vector_bits == 128 and "-march=native" not in t.cflags
        target_module._detect_cpu.cache_clear()
        monkeypatch.setenv(HOST_ISA_ENV, "avx512" if detected != "avx512" else "sve")
        with pytest.raises(ValueError, match=HOST_ISA_ENV):
            Target()
    finally:
        target_module._detect_cpu.cache_clear()  # monkeypatch restores the variable after the test


def test_making_a_target_runs_no_compiler(monkeypatch):
    import subprocess

    import tilegraph.target as target_module

    target_module.compiler_version.cache_clear()
    calls = []
    real_run = subprocess.run
    monkeypatch.setattr(subprocess, "run", lambda cmd, *a, **k: calls.append(cmd) or real_run(cmd, *a, **k))
    t = Target("cpu", isa="avx2")
    assert calls == [] and t.cc_version is None
    assert t.compiler_version and t.fingerprint and len(calls) == 1, "asked once, when the fingerprint needs it"
    assert Target("cpu", isa="avx2", cc_version="gcc 99").compiler_version == "gcc 99"


def test_gpu_fingerprints_name_the_device_driver_and_toolkit():
    """Two GPUs, drivers or toolkits never share tuning records (issue 18, part 6)."""
    for kind, toolkit in (("cuda", "cc_version"), ("opencl", "cc_version")):
        base = Target(kind, device_name="Device A", driver_version="550.1", cc_version="toolkit 1")
        assert base.driver_version == "550.1" and base.device_name == "Device A"
        others = [Target(kind, device_name="Device B", driver_version="550.1", cc_version="toolkit 1"),
                  Target(kind, device_name="Device A", driver_version="560.2", cc_version="toolkit 1"),
                  Target(kind, device_name="Device A", driver_version="550.1", **{toolkit: "toolkit 2"})]
        prints = {base.fingerprint, *(t.fingerprint for t in others)}
        assert len(prints) == 4, kind
        assert Target.from_string(str(base)) == base


def test_nvidia_smi_answer_is_parsed_with_the_driver():
    from tilegraph.target import parse_nvidia_smi

    assert parse_nvidia_smi("NVIDIA H100 80GB HBM3, 9.0, 550.54.15\nNVIDIA H100, 9.0, 550.54.15\n") == (
        "NVIDIA H100 80GB HBM3", "9.0", "550.54.15")
    assert parse_nvidia_smi("NVIDIA, Inc. Weird, Name, 8.0, 535.1") == ("NVIDIA, Inc. Weird, Name", "8.0", "535.1")
    assert parse_nvidia_smi("") is None
    assert parse_nvidia_smi("No devices were found") is None


def test_cuda_target_takes_name_and_driver_from_nvidia_smi(monkeypatch):
    from tilegraph import target as target_module

    monkeypatch.setattr(target_module, "_query_nvidia_smi", lambda: ("NVIDIA H100 80GB HBM3", "9.0", "550.54.15"))
    t = Target("cuda", cc_version="Cuda compilation tools, release 12.4")
    assert (t.device_name, t.driver_version, t.compute_capability, t.num_sms) == (
        "NVIDIA H100 80GB HBM3", "550.54.15", "9.0", 132)
    # a device named by the user is not the detected one: its driver is unknown, not borrowed
    other = Target("cuda", device_name="NVIDIA A100-SXM4-40GB", cc_version="x")
    assert other.driver_version == "unknown"


def test_opencl_target_describes_the_runtime_device():
    pytest.importorskip("pyopencl")
    from tilegraph.runtime.opencl import available, device_limits

    if not available():
        pytest.skip("no OpenCL device")
    t = Target("opencl")
    assert t.device_name == device_limits()["device_name"].strip()
    assert t.driver_version not in (None, "", "unknown") and t.cc_version not in (None, "", "unknown")
    assert t.device_name in str(t)


def test_cpu_fingerprints_did_not_change_when_driver_version_was_added():
    """Records measured before the field existed keep matching: a None driver_version stays out."""
    import hashlib
    import json
    from dataclasses import fields

    from tilegraph.version import CODEGEN_VERSION

    t = Target.from_string("cpu -isa=avx2 -cores=1 -cc-version=gcc-12")
    described = {f.name: getattr(t, f.name) for f in fields(t) if f.name != "driver_version"}
    described["cc"] = os.path.basename(t.cc) if t.cc else t.cc
    described["cc_version"] = t.compiler_version
    described["codegen_version"] = CODEGEN_VERSION
    digest = hashlib.sha256(json.dumps(described, sort_keys=True, default=list).encode()).hexdigest()
    assert t.fingerprint == f"cpu-avx2-1c-{digest[:16]}"

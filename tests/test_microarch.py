import pytest

from tilegraph.microarch import GENERIC, MICROARCHS, VECTOR_REGISTERS, identify, microarch
from tilegraph.target import Target

AVX512 = {"avx2", "fma", "avx512f"}
AVX2 = {"avx2", "fma"}


@pytest.mark.parametrize("vendor, family, model, flags, expected", [
    ("AuthenticAMD", 23, 0x01, AVX2, "zen1"),
    ("AuthenticAMD", 23, 0x31, AVX2, "zen2"),
    ("AuthenticAMD", 25, 0x01, AVX2, "zen3"),
    ("AuthenticAMD", 25, 0x11, AVX512, "zen4"),
    ("AuthenticAMD", 26, 0x02, AVX512, "zen5"),
    ("GenuineIntel", 6, 63, AVX2, "haswell"),
    ("GenuineIntel", 6, 158, AVX2, "skylake"),
    ("GenuineIntel", 6, 85, AVX512, "skylake-x"),
    ("GenuineIntel", 6, 106, AVX512 | {"avx512ifma"}, "icelake-server"),
    ("GenuineIntel", 6, 143, AVX512 | {"amx_tile"}, "sapphirerapids"),
    ("GenuineIntel", 6, 151, AVX2, "alderlake"),
    # a VM reporting a client model number while passing AMX through (seen on cloud KVM hosts)
    ("GenuineIntel", 6, 167, AVX512 | {"amx_tile", "avx512_fp16"}, "sapphirerapids"),
    # an unknown model: the flags decide the class
    ("GenuineIntel", 6, 250, AVX512 | {"avx512ifma"}, "icelake-server"),
    ("GenuineIntel", 6, 250, AVX2, "haswell"),
    ("SomeVendor", 1, 1, set(), "generic-x86"),
])
def test_identify_x86(vendor, family, model, flags, expected):
    assert identify(vendor, family, model, flags) == expected


def test_identify_arm_by_implementer_and_part():
    assert identify("", None, None, set(), "aarch64", (0x41, 0xD0C)) == "neoverse-n1"
    assert identify("", None, None, set(), "aarch64", (0x41, 0xD40)) == "neoverse-v1"
    assert identify("", None, None, set(), "aarch64", (0x61, 0x022)) == "apple-m1"
    assert identify("", None, None, set(), "aarch64", (0x41, 0x999)) == "generic-arm"
    assert identify("", None, None, set(), "aarch64", None) == "generic-arm"


def test_fma_units_depend_on_the_vector_width():
    """Zen 4 runs a 512-bit FMA as two halves: one full-width unit at AVX-512, two at AVX2. The
    hardware model used to infer this from the measured peak at an assumed clock."""
    zen4 = MICROARCHS["zen4"]
    assert (zen4.fma_units(512), zen4.fma_units(256), zen4.fma_units(128)) == (1, 2, 2)
    assert MICROARCHS["sapphirerapids"].fma_units(512) == 2
    assert MICROARCHS["zen3"].fma_units(512) == 2  # widest listed width at or below 512
    assert zen4.nominal_peak_flops(512) == zen4.nominal_peak_flops(256)  # same FLOP/s either way
    assert MICROARCHS["neoverse-v1"].nominal_peak_flops(128, cores=2) == pytest.approx(2 * 2.6e9 * 4 * 4 * 2)


def test_table_is_consistent():
    for name, m in MICROARCHS.items():
        assert m.name == name and m.arch in ("x86_64", "aarch64")
        assert 3 <= m.fma_latency <= 8 and 1.0 < m.ghz < 6.0 and m.l1d_kib < m.l2_kib
        assert all(units >= 1 for _, units in m.fma_per_cycle)
    assert set(GENERIC.values()) <= set(MICROARCHS)
    assert VECTOR_REGISTERS == {"avx512": 32, "avx2": 16, "neon": 32, "generic": 16}
    with pytest.raises(ValueError, match="unknown microarchitecture 'zen9'.*zen3"):
        microarch("zen9")


def test_target_names_a_microarchitecture():
    arm = Target("cpu", arch="aarch64", uarch="neoverse-n1")
    assert (arm.l1d_bytes, arm.l2_bytes) == (64 << 10, 1 << 20)  # a foreign core's caches from its entry
    assert Target.from_string(str(arm)) == arm
    assert Target("cpu", arch="aarch64").uarch == "generic-arm"
    assert Target("cpu", uarch="zen3").fingerprint != Target("cpu", uarch="zen4").fingerprint
    assert Target("cpu").uarch in MICROARCHS  # the host's, whatever it is
    with pytest.raises(ValueError, match="aarch64 microarchitecture 'zen3'"):
        Target("cpu", arch="aarch64", uarch="zen3")
    with pytest.raises(ValueError, match="unknown x86_64 microarchitecture 'zen9'.*zen4"):
        Target.from_string("cpu -uarch=zen9")

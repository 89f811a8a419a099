"""Per-microarchitecture facts of CPUs: FMA units and latency, vector registers, clock, caches.

    >>> m = MICROARCHS["zen4"]
    >>> m.fma_units(512), m.fma_units(256)   # Zen 4 splits a 512-bit FMA into two 256-bit halves
    (1, 2)
    >>> identify("AuthenticAMD", 25, 0x61, {"avx512f", "avx2", "fma"})
    'zen4'

The hardware model (tune/hardware.py) reads these facts instead of deriving FMA units from an
assumed clock: a measured peak is then checked against the nominal one (`nominal_peak_flops`),
and a machine far from it (busy, throttled, misdetected) gets a warning rather than a silently
wrong model. The Target detects the host's microarchitecture once (`identify`, from
/proc/cpuinfo's vendor, family, model and flags, or an ARM core's implementer and part number);
`Target("cpu", uarch="neoverse-n1")` names one for another machine. Figures are public
per-core numbers (vendors' optimisation manuals, uops.info, chips-and-cheese measurements); the
clock is a typical sustained all-core clock for vector code, so nominal peaks are estimates, and
the measured peak is what the performance model uses.
"""

from __future__ import annotations

from dataclasses import dataclass

# Architectural SIMD registers of each ISA: what a register tile may hold, whatever the core.
VECTOR_REGISTERS = {"avx512": 32, "avx2": 16, "neon": 32, "generic": 16}


@dataclass(frozen=True)
class Microarch:
    """Facts about one CPU core design."""

    name: str
    arch: str  # x86_64 | aarch64
    fma_per_cycle: tuple[tuple[int, int], ...]  # (vector bits, full-width FMAs issued per cycle)
    fma_latency: int  # cycles
    ghz: float  # typical sustained clock under vector load, all cores busy
    l1d_kib: int  # per core
    l2_kib: int  # per core (a cluster's shared L2 divided among its cores)
    note: str = ""

    def fma_units(self, vector_bits: int) -> int:
        """Full-width FMAs per cycle at a vector width (the widest listed width at or below it)."""
        fitting = [units for bits, units in self.fma_per_cycle if bits <= vector_bits]
        return fitting[-1] if fitting else self.fma_per_cycle[0][1]

    def nominal_peak_flops(self, vector_bits: int, cores: int = 1) -> float:
        """fp32 FLOP/s of `cores` cores issuing every FMA unit each cycle at the nominal clock."""
        lanes = max(1, vector_bits // 32)
        return self.ghz * 1e9 * self.fma_units(vector_bits) * lanes * 2 * max(1, cores)


def _m(name: str, arch: str, fma: dict[int, int], latency: int, ghz: float, l1d: int, l2: int, note: str = "") -> Microarch:
    return Microarch(name, arch, tuple(sorted(fma.items())), latency, ghz, l1d, l2, note)


MICROARCHS: dict[str, Microarch] = {m.name: m for m in (
    # Intel
    _m("haswell", "x86_64", {128: 2, 256: 2}, 5, 3.0, 32, 256, "also Broadwell"),
    _m("skylake", "x86_64", {128: 2, 256: 2}, 4, 3.5, 32, 256, "client Skylake, Kaby/Coffee/Comet Lake"),
    _m("skylake-x", "x86_64", {128: 2, 256: 2, 512: 2}, 4, 2.8, 32, 1024,
       "also Cascade/Cooper Lake; some Xeon Silver and Gold 5xxx parts have one 512-bit FMA unit"),
    _m("icelake-client", "x86_64", {128: 2, 256: 2, 512: 1}, 4, 3.8, 48, 512, "also Tiger Lake, Rocket Lake"),
    _m("icelake-server", "x86_64", {128: 2, 256: 2, 512: 2}, 4, 2.9, 48, 1280),
    _m("sapphirerapids", "x86_64", {128: 2, 256: 2, 512: 2}, 4, 3.0, 48, 2048, "also Emerald and Granite Rapids"),
    _m("alderlake", "x86_64", {128: 2, 256: 2}, 4, 4.0, 48, 1280, "P-cores; also Raptor Lake (AVX-512 fused off)"),
    # AMD
    _m("zen1", "x86_64", {128: 2, 256: 1}, 5, 3.2, 32, 512, "also Zen+: two 128-bit FMA pipes"),
    _m("zen2", "x86_64", {128: 2, 256: 2}, 5, 3.3, 32, 512),
    _m("zen3", "x86_64", {128: 2, 256: 2}, 4, 3.5, 32, 512),
    _m("zen4", "x86_64", {128: 2, 256: 2, 512: 1}, 4, 3.5, 32, 1024, "a 512-bit FMA runs as two 256-bit halves"),
    _m("zen5", "x86_64", {128: 2, 256: 2, 512: 2}, 4, 3.7, 48, 1024, "full 512-bit datapath (desktop, server)"),
    # Arm
    _m("cortex-a72", "aarch64", {128: 1}, 7, 1.8, 32, 256, "Raspberry Pi 4"),
    _m("cortex-a76", "aarch64", {128: 2}, 4, 2.4, 64, 512, "Raspberry Pi 5"),
    _m("neoverse-n1", "aarch64", {128: 2}, 4, 3.0, 64, 1024, "AWS Graviton2, Ampere Altra"),
    _m("neoverse-n2", "aarch64", {128: 2}, 4, 3.0, 64, 1024),
    _m("neoverse-v1", "aarch64", {128: 4}, 4, 2.6, 64, 1024, "AWS Graviton3 (2 x 256-bit SVE = 4 x 128-bit NEON)"),
    _m("neoverse-v2", "aarch64", {128: 4}, 4, 3.1, 64, 1024, "AWS Graviton4, NVIDIA Grace"),
    _m("apple-m1", "aarch64", {128: 4}, 4, 3.2, 128, 3072, "also M2 (Firestorm/Avalanche cores, Asahi Linux)"),
    # Unknown cores: conservative facts by ISA only.
    _m("generic-x86", "x86_64", {128: 2, 256: 2, 512: 1}, 4, 2.5, 32, 1024,
       "an x86-64 core not in this table: two FMA pipes as on every AVX2 core since Haswell, one at 512 bits"),
    _m("generic-arm", "aarch64", {128: 2}, 4, 2.5, 64, 1024, "an aarch64 core not in this table"),
)}

GENERIC = {"x86_64": "generic-x86", "aarch64": "generic-arm"}

_INTEL_FAMILY6 = {
    **dict.fromkeys((60, 63, 69, 70, 61, 71, 79, 86), "haswell"),
    **dict.fromkeys((78, 94, 142, 158, 165, 166), "skylake"),
    85: "skylake-x",
    **dict.fromkeys((125, 126, 140, 141, 167), "icelake-client"),
    **dict.fromkeys((106, 108), "icelake-server"),
    **dict.fromkeys((143, 207, 173, 174), "sapphirerapids"),
    **dict.fromkeys((151, 154, 183, 186, 191), "alderlake"),
}
_ARM_PARTS = {  # (implementer, part) from /proc/cpuinfo
    (0x41, 0xD08): "cortex-a72", (0x41, 0xD0B): "cortex-a76", (0x41, 0xD0C): "neoverse-n1",
    (0x41, 0xD49): "neoverse-n2", (0x41, 0xD40): "neoverse-v1", (0x41, 0xD4F): "neoverse-v2",
}


def identify(vendor: str, family: int | None, model: int | None, flags: set[str] | frozenset[str],
             arch: str = "x86_64", arm_part: tuple[int, int] | None = None) -> str:
    """The microarchitecture name of a core (a key of MICROARCHS; generic-* when unknown).

    Feature flags decide where they are unambiguous, because virtual machines often report a
    family and model that do not match the features they pass through (AMX means Sapphire Rapids
    or later whatever the model number says; AVX-512 on AMD family 25 means Zen 4)."""
    if arch == "aarch64":
        if arm_part is not None and arm_part[0] == 0x61:
            return "apple-m1"
        return _ARM_PARTS.get(arm_part, "generic-arm") if arm_part else "generic-arm"
    if arch != "x86_64":
        return GENERIC.get(arch, "generic-x86")
    if vendor == "GenuineIntel":
        if {"amx_tile", "avx512f"} <= flags or "avx512_fp16" in flags:
            return "sapphirerapids"
        name = _INTEL_FAMILY6.get(model) if family == 6 and model is not None else None
        if name is None and "avx512f" in flags:
            return "icelake-server" if "avx512ifma" in flags else "skylake-x"
        if name is not None and "avx512f" in flags and name in ("haswell", "skylake", "alderlake"):
            return "skylake-x"  # a model number the flags contradict: trust the flags
        return name or ("haswell" if "avx2" in flags else "generic-x86")
    if vendor in ("AuthenticAMD", "HygonGenuine"):
        if family == 23:
            return "zen1" if (model or 0) < 0x30 else "zen2"
        if family == 25:
            return "zen4" if "avx512f" in flags else "zen3"
        if family is not None and family >= 26:
            return "zen5"
    return "generic-x86"


def microarch(name: str) -> Microarch:
    """The facts of a named microarchitecture; a clear error lists the known names."""
    try:
        return MICROARCHS[name]
    except KeyError:
        raise ValueError(f"unknown microarchitecture {name!r}; known: {', '.join(sorted(MICROARCHS))}") from None


__all__ = ["GENERIC", "MICROARCHS", "Microarch", "VECTOR_REGISTERS", "identify", "microarch"]

"""What a kernel is compiled for: `Target("cpu" | "cuda" | "opencl", **overrides)`.

Every field left out is detected on this machine (CPU: /proc/cpuinfo, /sys cache topology; a cuda
target asks nvidia-smi, once per process) or taken from a spec table (GPUs); an override wins over
detection and the fields derived from it follow (an overridden `isa` sets `vector_bits`, `fma` and
explicit `-m` flags). Making a Target runs no compiler: `compiler_version` asks the compiler when a
fingerprint or a build first needs it.

    >>> t = Target.from_string("cpu -isa=avx2 -cores=2")
    >>> t.isa, t.vector_bits, t.num_cores, "-mavx2" in t.cflags
    ('avx2', 256, 2, True)
    >>> Target.from_string(str(t)) == t          # str() spells every field, so it round-trips
    True

`target.fingerprint` keys the tuning database: equal on one machine, different when anything
that changes generated code or its speed (model, ISA, cores, caches, compiler, flags) changes.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, fields
from typing import Any

from tilegraph.dtype import DType, as_dtype
from tilegraph.gpu_specs import GENERIC_NAME, gpu_spec
from tilegraph.microarch import GENERIC, MICROARCHS, identify
from tilegraph.version import CODEGEN_VERSION

KINDS = ("cpu", "cuda", "opencl")
CPU_ISAS = ("avx512", "avx2", "neon", "generic")
ISA_VECTOR_BITS = {"avx512": 512, "avx2": 256, "neon": 128, "generic": 128}
CC_ENV = "TILEGRAPH_CC"
CROSS_COMPILERS = {"aarch64": "aarch64-linux-gnu-gcc", "x86_64": "x86_64-linux-gnu-gcc"}  # for a foreign arch
HOST_ISA_ENV = "TILEGRAPH_HOST_ISA"
ISA_ORDER = {"x86_64": ("generic", "avx2", "avx512"), "aarch64": ("generic", "neon")}  # each runs the ones before

# -ffast-math is deliberately absent: it lets the compiler assume no inf/NaN, which breaks
# max/min reductions and NaN propagation. Contraction to FMA and errno-free math are safe.
COMMON_CFLAGS = ("-O3", "-std=gnu11", "-ffp-contract=fast", "-fno-math-errno", "-fno-trapping-math",
                 "-fopenmp", "-fPIC", "-shared")
CROSS_ISA_CFLAGS = {
    ("x86_64", "avx512"): ("-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl", "-mavx2", "-mfma", "-mf16c",
                           "-mprefer-vector-width=512"),
    ("x86_64", "avx2"): ("-mavx2", "-mfma", "-mf16c"),
    ("x86_64", "generic"): ("-march=x86-64",),
    ("aarch64", "neon"): ("-march=armv8-a+simd",),
    ("aarch64", "generic"): ("-march=armv8-a",),
}

# Short spellings accepted by from_string and used by __str__.
ALIASES = {
    "cores": "num_cores", "model": "cpu_model", "l1d": "l1d_bytes", "l2": "l2_bytes", "l3": "l3_bytes",
    "vector-bits": "vector_bits", "cc-version": "cc_version", "device": "device_name", "driver": "driver_version",
    "sm": "compute_capability", "sms": "num_sms", "smem": "shared_memory_bytes",
    "max-threads": "max_threads_per_block", "warp": "warp_size",
}
_SHORT_NAMES = {field_name: alias for alias, field_name in ALIASES.items()}


@dataclass(frozen=True)
class Target:
    """A compilation target. Fields left as None are detected (CPU) or looked up (GPU); fields
    that do not apply to the kind stay None. Frozen and hashable."""

    kind: str = "cpu"
    arch: str | None = None
    isa: str | None = None
    vector_bits: int | None = None
    fma: bool | None = None
    num_cores: int | None = None
    l1d_bytes: int | None = None
    l2_bytes: int | None = None
    l3_bytes: int | None = None
    cpu_model: str | None = None
    uarch: str | None = None
    cc: str | None = None
    cc_version: str | None = None
    cflags: tuple[str, ...] | None = None
    device_name: str | None = None
    driver_version: str | None = None
    compute_capability: str | None = None
    num_sms: int | None = None
    shared_memory_bytes: int | None = None
    max_threads_per_block: int | None = None
    warp_size: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown target kind {self.kind!r}; valid kinds: {', '.join(KINDS)}")
        if self.cflags is not None and not isinstance(self.cflags, tuple):
            if isinstance(self.cflags, str):
                raise TypeError("Target cflags must be a sequence of flags, not a string; use shlex.split")
            object.__setattr__(self, "cflags", tuple(self.cflags))
        filled = {"cpu": _fill_cpu, "cuda": _fill_cuda, "opencl": _fill_opencl}[self.kind](self)
        for name, value in filled.items():
            object.__setattr__(self, name, value)
        _validate(self)

    # ---- helpers -------------------------------------------------------------------------
    def lanes(self, dtype: DType | str) -> int:
        """How many scalars of `dtype` one native vector register holds."""
        return max(1, self.vector_bits // as_dtype(dtype).scalar.bits)

    @property
    def compiler_version(self) -> str:
        """`cc_version` when given, else the compiler's own answer (`<cc> --version`, run once per
        process and compiler, and only when a fingerprint or a build needs it; "" without one)."""
        if self.cc_version is not None:
            return self.cc_version
        if not self.cc:
            return ""
        return _nvcc_version(self.cc) if self.kind == "cuda" else compiler_version(self.cc)

    @property
    def fingerprint(self) -> str:
        """A stable key for the tuning database: `<kind>-<isa>-<cores>c-<hash>`; the hash covers
        every field (the compiler by name and version, not path) and the codegen version."""
        described = {f.name: getattr(self, f.name) for f in fields(self)}
        described["cc"] = os.path.basename(self.cc) if self.cc else self.cc
        described["cc_version"] = self.compiler_version
        described["codegen_version"] = CODEGEN_VERSION
        if described["driver_version"] is None:  # a field added later: CPU fingerprints (and their records) stay
            del described["driver_version"]
        digest = hashlib.sha256(json.dumps(described, sort_keys=True, default=list).encode()).hexdigest()
        cores = self.num_cores if self.num_cores is not None else self.num_sms
        return f"{self.kind}-{self.isa or self.compute_capability or 'any'}-{cores}c-{digest[:16]}"

    @classmethod
    def from_string(cls, spec: str) -> Target:
        """Parse `"cpu -isa=avx2 -cores=2"`: the kind, then `-key=value` options (field names or
        the short aliases in ALIASES)."""
        if not isinstance(spec, str):
            raise TypeError(f"Target.from_string expects a str, got {type(spec).__name__}")
        tokens = shlex.split(spec)
        if not tokens:
            raise ValueError(f"empty target string; valid kinds: {', '.join(KINDS)}")
        kind, options = tokens[0], tokens[1:]
        field_types = {f.name: f.type for f in fields(cls)}
        overrides: dict[str, Any] = {}
        for token in options:
            if not token.startswith("-") or "=" not in token:
                raise ValueError(f"bad target option {token!r} in {spec!r}; expected -key=value")
            key, value = token.lstrip("-").split("=", 1)
            name = ALIASES.get(key, key.replace("-", "_"))
            if name not in field_types or name == "kind":
                valid = sorted(set(field_types) - {"kind"} | set(ALIASES))
                raise ValueError(f"unknown target option {key!r} in {spec!r}; valid options: {', '.join(valid)}")
            overrides[name] = _parse_value(name, field_types[name], value, spec)
        return cls(kind, **overrides)

    def __str__(self) -> str:
        parts = [self.kind]
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "kind" or value is None:
                continue
            if isinstance(value, tuple):
                text = shlex.join(value)
            elif isinstance(value, bool):
                text = "true" if value else "false"
            else:
                text = str(value)
            parts.append(shlex.quote(f"-{_SHORT_NAMES.get(f.name, f.name)}={text}"))
        return " ".join(parts)


def as_target(value: Target | str | None) -> Target:
    """Accept what users pass as `target=`: a Target, a string like "cpu -cores=4", or None (cpu)."""
    if value is None:
        return Target()
    if isinstance(value, Target):
        return value
    if isinstance(value, str):
        return Target.from_string(value)
    raise TypeError(f"target must be a Target or a str such as 'cpu', got {type(value).__name__}")


def host_arch() -> str:
    """This machine's architecture ("x86_64", "aarch64", ...)."""
    return str(_detect_cpu()["arch"])


def host_supports(target: Target) -> bool:
    """Whether code built for `target` (a CPU target) can run on this machine."""
    if target.kind != "cpu":
        return True
    host = _detect_cpu()
    if target.arch != host["arch"]:
        return False
    wanted = {"avx512": {"avx512f"}, "avx2": {"avx2"}, "neon": set(), "generic": set()}[target.isa]
    if target.fma and target.arch == "x86_64":
        wanted = wanted | {"fma"}
    return wanted <= host["flags"]


def has_bf16_dot(target: object) -> bool:
    """Whether code for `target` may use AVX512_BF16's vdpbf16ps: an x86 AVX-512 CPU target whose
    flags name the extension, or that compiles for this machine (-march=native) when this machine
    has it. TILEGRAPH_HOST_ISA=avx2 makes the host target AVX2, so it never does."""
    if not isinstance(target, Target) or target.kind != "cpu" or target.arch != "x86_64" or target.isa != "avx512":
        return False
    flags = target.cflags or ()
    return "-mavx512bf16" in flags or ("-march=native" in flags and "avx512_bf16" in _detect_cpu()["flags"])


def has_int8_dot(target: object) -> bool:
    """Whether code for `target` may use AVX512_VNNI's vpdpbusd (uint8 x int8 products, four per
    int32 lane): an x86 AVX-512 CPU target whose flags name the extension, or that compiles for this
    machine (-march=native) when this machine has it. TILEGRAPH_HOST_ISA=avx2 turns it off."""
    if not isinstance(target, Target) or target.kind != "cpu" or target.arch != "x86_64" or target.isa != "avx512":
        return False
    flags = target.cflags or ()
    return "-mavx512vnni" in flags or ("-march=native" in flags and "avx512_vnni" in _detect_cpu()["flags"])


def int8_dot_lanes(target: object) -> int:
    """The int32 lanes of the uint8 x int8 dot-product step code for `target` may use: 16 with
    AVX512_VNNI (vpdpbusd on a zmm register), 8 on an x86 AVX2 target (the same sum, exact, from
    vpmaddwd on 16-bit pairs: codegen/int8.py), else 0 (no step: int32 multiply-adds; so on an
    AVX-512 CPU without VNNI, whose int32 vectors have 16 lanes)."""
    if has_int8_dot(target):
        return 16
    if isinstance(target, Target) and target.kind == "cpu" and target.arch == "x86_64" and target.isa == "avx2":
        return 8
    return 0


MATRIX_TILE_FLAGS = {"bfloat16": ("amx_bf16", "-mamx-bf16"), "int8": ("amx_int8", "-mamx-int8")}


def has_matrix_tiles(target: object, dtype: str) -> bool:
    """Whether code for `target` may run products of `dtype` ("bfloat16", or "int8" for uint8 x
    int8) on the CPU's matrix unit: AMX tiles (tdpbf16ps, tdpbusd; lower/passes/use_matrix_tiles.py).
    An x86 AVX-512 target whose flags name the extension (-mamx-tile and -mamx-bf16 / -mamx-int8),
    or that compiles for this machine (-march=native) when this machine has it and Linux lets the
    process use its tile registers (arch_prctl ARCH_REQ_XCOMP_PERM, asked once here; a kernel
    library asks again in its own process). TILEGRAPH_HOST_ISA=avx2 turns it off."""
    if dtype not in MATRIX_TILE_FLAGS or not isinstance(target, Target) or target.kind != "cpu" \
            or target.arch != "x86_64" or target.isa != "avx512":
        return False
    cpu_flag, cflag = MATRIX_TILE_FLAGS[dtype]
    flags = target.cflags or ()
    if cflag in flags and "-mamx-tile" in flags:
        return True
    return "-march=native" in flags and {cpu_flag, "amx_tile"} <= _detect_cpu()["flags"] and _tile_data_permitted()


ARCH_REQ_XCOMP_PERM = 0x1023  # Linux's arch_prctl asking for an xsave feature's state
XFEATURE_XTILEDATA = 18       # AMX's tile registers
SYS_ARCH_PRCTL = 158          # x86-64's syscall number


@functools.cache
def _tile_data_permitted() -> bool:
    """Whether Linux lets this process use AMX's tile registers (granted from then on)."""
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).syscall(SYS_ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0
    except (OSError, AttributeError):
        return False


def dot_group(target: object, dtype: str) -> int:
    """How many consecutive reduction elements of a `dtype` operand one dot-product step of code for
    `target` reads per lane, and so how a packed copy of it groups them (EtirState.dot_group): 4 for
    int8 with AVX512_VNNI (vpdpbusd's quads), 2 for int8 on AVX2 (vpmaddwd's pairs: codegen/int8.py)
    and for bfloat16 with AVX512_BF16 (vdpbf16ps's pairs); 0 where no step reads it."""
    if dtype == "int8":
        return 4 if has_int8_dot(target) else (2 if int8_dot_lanes(target) == 8 else 0)
    if dtype == "bfloat16":
        return 2 if has_bf16_dot(target) else 0
    return 0


# ---- parsing -------------------------------------------------------------------------------
def _parse_value(name: str, annotation: str, text: str, spec: str) -> Any:
    annotation = str(annotation)
    if annotation.startswith("tuple"):
        return tuple(shlex.split(text))
    if annotation.startswith("bool"):
        lowered = text.lower()
        if lowered not in ("true", "false", "1", "0", "yes", "no"):
            raise ValueError(f"target option {name} must be true or false, got {text!r} in {spec!r}")
        return lowered in ("true", "1", "yes")
    if annotation.startswith("int"):
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"target option {name} must be an integer, got {text!r} in {spec!r}") from None
    return text


def _validate(target: Target) -> None:
    if target.kind == "cpu" and target.isa not in CPU_ISAS:
        raise ValueError(f"unknown cpu isa {target.isa!r}; valid: {', '.join(CPU_ISAS)}")
    for name in ("vector_bits", "num_cores", "l1d_bytes", "l2_bytes", "l3_bytes", "num_sms",
                 "shared_memory_bytes", "max_threads_per_block", "warp_size"):
        value = getattr(target, name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise ValueError(f"Target {name} must be a positive integer, got {value!r}")
    if target.kind == "cpu" and target.uarch is not None:
        known = MICROARCHS.get(target.uarch)
        if known is None or known.arch != target.arch:
            valid = sorted(name for name, m in MICROARCHS.items() if m.arch == target.arch)
            raise ValueError(f"unknown {target.arch} microarchitecture {target.uarch!r}; valid: {', '.join(valid)}")
    if target.kind != "cpu" or target.num_cores is None:
        return
    host = _detect_cpu()
    if target.arch in (None, host["arch"]) and target.num_cores > host["num_cores"]:
        # kernels run, and peaks are measured, with this many threads on this machine
        raise ValueError(f"Target cores={target.num_cores} exceeds the {host['num_cores']} cores this process may "
                         f"use here")


# ---- CPU -----------------------------------------------------------------------------------
def _fill_cpu(t: Target) -> dict[str, Any]:
    host = _detect_cpu()
    arch = _pick(t.arch, host["arch"])
    isa = _pick(t.isa, host["isa"] if arch == host["arch"] else ("neon" if arch == "aarch64" else "generic"))
    native = arch == host["arch"] and isa == host["isa"] and not host["isa_forced"]
    if t.fma is not None:
        fma = t.fma
    elif native:
        fma = host["fma"]
    else:
        fma = isa != "generic"
    on_host = arch == host["arch"]
    uarch = _pick(t.uarch, host["uarch"] if on_host else GENERIC.get(arch))
    facts = MICROARCHS.get(uarch or "")  # caches of a foreign core come from its table entry
    foreign_l1, foreign_l2 = ((facts.l1d_kib << 10, facts.l2_kib << 10) if facts else (32 << 10, 1 << 20))
    if on_host:
        cc = t.cc or os.environ.get(CC_ENV) or shutil.which("gcc") or "gcc"
    else:  # a cross compiler; its kernels run under an emulator (runtime/emulated.py)
        cross = CROSS_COMPILERS.get(arch, f"{arch}-linux-gnu-gcc")
        cc = t.cc or shutil.which(cross) or cross
    return {
        "arch": arch,
        "isa": isa,
        "vector_bits": _pick(t.vector_bits, ISA_VECTOR_BITS.get(isa, 128)),
        "fma": fma,
        "num_cores": _pick(t.num_cores, host["num_cores"]),
        "l1d_bytes": _pick(t.l1d_bytes, host["l1d_bytes"] if on_host else foreign_l1),
        "l2_bytes": _pick(t.l2_bytes, host["l2_bytes"] if on_host else foreign_l2),
        "l3_bytes": _pick(t.l3_bytes, host["l3_bytes"] if on_host else 2 << 20),
        "cpu_model": t.cpu_model if t.cpu_model is not None else (host["cpu_model"] if on_host else arch),
        "uarch": uarch,
        "cc": cc,
        "cc_version": t.cc_version,  # asked of the compiler only when needed: Target.compiler_version
        "cflags": t.cflags if t.cflags is not None else _default_cflags(arch, isa, native),
    }


def _pick(value: Any, default: Any) -> Any:
    """An override wins even when falsy (so -cores=0 reaches validation instead of detection)."""
    return default if value is None else value


def _default_cflags(arch: str, isa: str, native: bool) -> tuple[str, ...]:
    if native:
        isa_flags: tuple[str, ...] = ("-march=native",)
        if isa == "avx512":
            # gcc tunes many AVX-512 parts to 256-bit auto-vectorisation; our kernels size for 512.
            isa_flags += ("-mprefer-vector-width=512",)
    else:
        isa_flags = CROSS_ISA_CFLAGS.get((arch, isa), ())
    return COMMON_CFLAGS[:1] + isa_flags + COMMON_CFLAGS[1:]


@functools.lru_cache(maxsize=1)
def _detect_cpu() -> dict[str, Any]:
    arch = _normalise_arch(platform.machine())
    info = _read_cpuinfo()
    flags = set(info.get("flags", info.get("Features", "")).split())
    if arch == "x86_64" and "avx512f" in flags:
        isa = "avx512"
    elif arch == "x86_64" and {"avx2", "fma"} <= flags:
        isa = "avx2"
    elif arch == "aarch64":
        isa = "neon"
    else:
        isa = "generic"
    forced = os.environ.get(HOST_ISA_ENV)
    if forced:
        isa = _forced_isa(arch, isa, forced)
    num_cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    caches = _detect_caches()
    return {
        "arch": arch,
        "isa": isa,
        "isa_forced": bool(forced),
        "flags": frozenset(flags),
        "fma": "fma" in flags or arch == "aarch64",
        "num_cores": num_cores,
        "cpu_model": info.get("model name") or info.get("Hardware") or platform.processor() or arch,
        "uarch": identify(info.get("vendor_id", ""), _int(info.get("cpu family")), _int(info.get("model")), flags,
                          arch, _arm_part(info)),
        **caches,
    }


def _int(text: str | None) -> int | None:
    """A /proc/cpuinfo number (decimal, or 0x-prefixed hex as ARM cores print them)."""
    try:
        return int(text, 0) if text else None
    except ValueError:
        return None


def _arm_part(info: dict[str, str]) -> tuple[int, int] | None:
    implementer, part = _int(info.get("CPU implementer")), _int(info.get("CPU part"))
    return (implementer, part) if implementer is not None and part is not None else None


def _forced_isa(arch: str, detected: str, forced: str) -> str:
    """TILEGRAPH_HOST_ISA narrows what this host is taken to support (an AVX-512 machine run as
    an AVX2 one: the default Target, its flags and every test then see AVX2). It cannot widen."""
    order = ISA_ORDER.get(arch, ())
    runnable = order[: order.index(detected) + 1] if detected in order else (detected,)
    if forced not in runnable:
        raise ValueError(f"{HOST_ISA_ENV}={forced!r}: this {arch} host runs {', '.join(runnable)}")
    return forced


def _normalise_arch(machine: str) -> str:
    machine = machine.lower()
    return {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def _read_cpuinfo() -> dict[str, str]:
    """The first value of each key in /proc/cpuinfo (processor 0 describes them all)."""
    info: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                key, sep, value = line.partition(":")
                if sep:
                    info.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return info


_CACHE_DEFAULTS = {"l1d_bytes": 32 << 10, "l2_bytes": 1 << 20, "l3_bytes": 2 << 20}
_SYSCONF_NAMES = {"l1d_bytes": "SC_LEVEL1_DCACHE_SIZE", "l2_bytes": "SC_LEVEL2_CACHE_SIZE",
                  "l3_bytes": "SC_LEVEL3_CACHE_SIZE"}


def _detect_caches() -> dict[str, int]:
    """Per-core cache bytes: a cache shared by k CPUs counts size / k for each of them."""
    found = _caches_from_sysfs()
    for name, sysconf_name in _SYSCONF_NAMES.items():
        if name not in found:
            try:
                value = os.sysconf(sysconf_name)
            except (ValueError, OSError, AttributeError):
                value = 0
            found[name] = value if value and value > 0 else _CACHE_DEFAULTS[name]
    return found


def _caches_from_sysfs(root: str = "/sys/devices/system/cpu/cpu0/cache") -> dict[str, int]:
    found: dict[str, int] = {}
    try:
        entries = sorted(e for e in os.listdir(root) if e.startswith("index"))
    except OSError:
        return found
    for entry in entries:
        try:
            level = int(_read_text(f"{root}/{entry}/level"))
            kind = _read_text(f"{root}/{entry}/type")
            size = _parse_size(_read_text(f"{root}/{entry}/size"))
            sharing = _count_cpus(_read_text(f"{root}/{entry}/shared_cpu_list"))
        except (OSError, ValueError):
            continue
        name = {(1, "Data"): "l1d_bytes", (2, "Unified"): "l2_bytes", (3, "Unified"): "l3_bytes"}.get((level, kind))
        if name and size > 0:
            found[name] = max(1, size // max(1, sharing))
    return found


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read().strip()


def _parse_size(text: str) -> int:
    match = re.fullmatch(r"(\d+)\s*([KMG]?)i?B?", text.strip(), flags=re.IGNORECASE)
    if not match:
        raise ValueError(f"unreadable cache size {text!r}")
    return int(match.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[match.group(2).upper()]


def _count_cpus(cpu_list: str) -> int:
    count = 0
    for part in cpu_list.split(","):
        part = part.strip()
        if not part:
            continue
        low, _, high = part.partition("-")
        count += int(high or low) - int(low) + 1
    return count


@functools.lru_cache(maxsize=16)
def compiler_version(cc: str) -> str:
    """The first line of `<cc> --version`, or "" when the compiler cannot be run."""
    try:
        result = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    lines = (result.stdout or result.stderr).strip().splitlines()
    return lines[0].strip() if result.returncode == 0 and lines else ""


# ---- GPUs ----------------------------------------------------------------------------------
def _fill_cuda(t: Target) -> dict[str, Any]:
    detected = _query_nvidia_smi()
    name = _pick(t.device_name, detected[0] if detected else GENERIC_NAME)
    # the detected driver only describes the detected device: a named other device keeps "unknown"
    own_device = detected is not None and t.device_name in (None, detected[0])
    spec = gpu_spec(name)
    table_cc, table_sms, table_l2 = spec.compute_capability, spec.num_sms, spec.l2_bytes
    capability = _pick(t.compute_capability, (detected[1] if detected else None) or table_cc)
    cc = t.cc or shutil.which("nvcc") or "nvcc"
    sm = capability.replace(".", "")
    return {
        "isa": _pick(t.isa, f"sm_{sm}"),
        "vector_bits": _pick(t.vector_bits, 128),
        "fma": True if t.fma is None else t.fma,
        "l2_bytes": _pick(t.l2_bytes, table_l2),
        "device_name": name,
        "driver_version": _pick(t.driver_version, detected[2] if own_device else "unknown"),
        "compute_capability": capability,
        "num_sms": _pick(t.num_sms, table_sms),
        "shared_memory_bytes": _pick(t.shared_memory_bytes, 48 << 10),
        "max_threads_per_block": _pick(t.max_threads_per_block, 1024),
        "warp_size": _pick(t.warp_size, 32),
        "cc": cc,
        "cc_version": t.cc_version,
        "cflags": t.cflags if t.cflags is not None else ("-O3", f"-arch=sm_{sm}", "--shared", "-Xcompiler", "-fPIC"),
    }


def gpu_visible() -> bool:
    """Whether nvidia-smi sees an NVIDIA GPU."""
    return _query_nvidia_smi() is not None


@functools.lru_cache(maxsize=1)
def _query_nvidia_smi() -> tuple[str, str, str] | None:
    """(name, compute capability, driver version) of the first visible GPU, or None without one."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        result = subprocess.run([smi, "--query-gpu=name,compute_cap,driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_nvidia_smi(result.stdout) if result.returncode == 0 else None


def parse_nvidia_smi(text: str) -> tuple[str, str, str] | None:
    """The first line of `nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader`."""
    first = text.strip().splitlines()[:1]
    parts = [part.strip() for part in first[0].rsplit(",", 2)] if first else []
    if len(parts) != 3 or not all(parts):
        return None
    name, capability, driver = parts
    return name, capability, driver


@functools.lru_cache(maxsize=4)
def _nvcc_version(nvcc: str) -> str:
    """The release line of `nvcc --version` (its first line is a banner)."""
    try:
        result = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    lines = [line for line in result.stdout.splitlines() if "release" in line]
    return lines[0].strip() if lines else ""


def _fill_opencl(t: Target) -> dict[str, Any]:
    # OpenCL compiles at run time on the device: the device's name, driver and platform (whose
    # compiler builds the kernels) are detected for the fingerprint; the limits stay conservative
    # portable values (the hardware model asks the device for its own, tune/hardware_gpu.py).
    detected = query_opencl_device()
    own_device = detected is not None and t.device_name in (None, detected[0])
    return {
        "isa": _pick(t.isa, "generic"),
        "vector_bits": _pick(t.vector_bits, 128),
        "fma": True if t.fma is None else t.fma,
        "device_name": _pick(t.device_name, detected[0] if detected else "generic"),
        "driver_version": _pick(t.driver_version, detected[1] if own_device else "unknown"),
        "cc_version": _pick(t.cc_version, detected[2] if own_device else "unknown"),
        "num_sms": _pick(t.num_sms, 16),
        "shared_memory_bytes": _pick(t.shared_memory_bytes, 32 << 10),
        "max_threads_per_block": _pick(t.max_threads_per_block, 256),
        "warp_size": _pick(t.warp_size, 32),
    }


OPENCL_DEVICE_ENV = "TILEGRAPH_OPENCL_DEVICE"


def opencl_device_wanted() -> str:
    """The lower-cased name fragment that picks the OpenCL device ($TILEGRAPH_OPENCL_DEVICE; "" = first)."""
    return os.environ.get(OPENCL_DEVICE_ENV, "").lower()


def query_opencl_device() -> tuple[str, str, str] | None:
    """(device name, driver version, platform name and version) of the OpenCL device the runtime
    uses (the first, or the first whose name contains $TILEGRAPH_OPENCL_DEVICE); None without
    pyopencl or a device."""
    return _query_opencl(opencl_device_wanted())


@functools.lru_cache(maxsize=4)
def _query_opencl(wanted: str) -> tuple[str, str, str] | None:
    try:
        import pyopencl as cl

        for platform in cl.get_platforms():
            for device in platform.get_devices():
                if not wanted or wanted in device.name.lower():
                    return (str(device.name).strip(), str(device.driver_version).strip(),
                            f"{platform.name.strip()} {platform.version.strip()}")
    except Exception:  # noqa: BLE001 (no pyopencl, no ICD loader, no platform: no device to describe)
        return None
    return None

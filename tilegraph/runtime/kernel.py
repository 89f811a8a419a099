"""Kernel: a compiled shared library called through ctypes, with every argument checked first.

The C ABI of an entry point, pointers for inputs then outputs, then the thread count:

    void entry(const float* A, const float* B, float* C, int32_t num_threads);

    kernel = Kernel(lib_path, "tg_add", inputs=[A, B], outputs=[C], source=c_code, target=Target())
    c = kernel(a, b)                      # allocates C with np.empty and returns it
    kernel(a, b, out=c, num_threads=2)    # writes into c
    kernel.time(a, b)                     # TimingResult (seconds per call), runtime/launch.py

A kernel with run-time dims (te/dims.py) takes their values as its last input, an int32 array
(`te.dims.dims_array`), checked against their ranges.

Nothing reaches native code unless the argument count, types, dtypes (never cast), shapes,
C-contiguity, alignment and writeability match and no output overlaps another argument.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tilegraph.build.cache import sha256_file
from tilegraph.codegen.c import kernel_signature
from tilegraph.config import cache_dir
from tilegraph.loop.ir import Buffer
from tilegraph.runtime import threads
from tilegraph.runtime.launch import KernelBase
from tilegraph.runtime.thread_pool import install_pool
from tilegraph.target import Target, host_supports
from tilegraph.te.dims import Dim, check_values

_by_content: dict[str, ctypes.CDLL] = {}  # sha256 of a library's bytes -> the loaded library
_by_path: dict[str, str] = {}  # resolved path -> the sha256 of what was loaded from it
_libraries_lock = threading.Lock()


class LibraryMismatch(ValueError):
    """A library's bytes differ from what its manifest recorded, or it does not describe the kernel."""


def load_library(path: Path | str, sha256: str | None = None) -> ctypes.CDLL:
    """The library whose bytes are at `path`, loaded once per content and kept (never unloaded).

    Libraries are identified by their content, not their path: the dynamic loader hands back the
    object it already loaded for a path even after the file was replaced (a model saved again into
    its directory), so a path seen before with other bytes, and any library given a `sha256` (a
    saved model's, checked first: LibraryMismatch), is loaded from a private copy named by its
    hash, written from the very bytes that were checked."""
    path = Path(path)
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if sha256 is not None and digest != sha256:
        raise LibraryMismatch(f"{path}: its sha256 is {digest[:16]}..., the manifest recorded {sha256[:16]}...: "
                              "the file was changed or damaged after saving")
    key = str(path.resolve())
    with _libraries_lock:
        library = _by_content.get(digest)
        if library is None:
            seen = _by_path.get(key)
            if sha256 is None and seen in (None, digest):
                library = ctypes.CDLL(key)
            else:
                library = ctypes.CDLL(str(_private_copy(data, digest)))
            install_pool(library)
            _by_content[digest] = library
        _by_path[key] = digest
        return library


def _private_copy(data: bytes, digest: str) -> Path:
    """The library's bytes at cache_dir()/libraries/<sha256>.so (written once, atomically)."""
    folder = cache_dir() / "libraries"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{digest}.so"
    if not target.is_file() or sha256_file(target) != digest:
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".so.tmp")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, target)
    return target


def library_signature(library: ctypes.CDLL, entry: str) -> str | None:
    """The `<entry>_signature` string a C kernel library exports (codegen/c.py), or None."""
    try:
        symbol = ctypes.c_char.in_dll(library, f"{entry}_signature")
    except ValueError:
        return None
    return ctypes.string_at(ctypes.addressof(symbol)).decode("ascii", "replace")


class _CpuLaunch:
    """The arguments of one call, checked once: each run is one ctypes call into the library."""

    def __init__(self, kernel: Kernel, function: Any, arguments: list[int], inputs: tuple[np.ndarray, ...],
                 outputs: tuple[np.ndarray, ...]):
        self.kernel, self.function, self.arguments, self.outs = kernel, function, arguments, outputs
        self.ins = inputs  # `arguments` holds their addresses: the launch keeps the arrays alive

    def run(self) -> None:
        self.function(*self.arguments)
        self.kernel.last_num_threads = self.arguments[-1]

    def outputs(self) -> list[np.ndarray]:
        return list(self.outs)


class Kernel(KernelBase):
    """A callable native kernel; see the module docstring."""

    def __init__(self, lib_path: Path | str, entry: str, inputs: Sequence[Buffer], outputs: Sequence[Buffer],
                 source: str, target: Target, lowered: Any = None, sha256: str | None = None,
                 dims: Sequence[Dim] = (), dims_limit: dict[str, int] | None = None):
        self.lib_path = Path(lib_path)
        self.dims = tuple(dims)  # run-time dims (te/dims.py): their values, the last input, are checked
        self.dims_limit = dict(dims_limit or {})  # a bucket's upper bounds (Workload.at), where below the dims' own
        self.entry = entry
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.source = source
        self.target = target
        self.lowered = lowered
        self.last_num_threads: int | None = None
        if not self.outputs:
            raise ValueError(f"kernel {entry!r} needs at least one output buffer")
        for buffer in (*self.inputs, *self.outputs):
            if not isinstance(buffer, Buffer):
                raise TypeError(f"kernel {entry!r}: parameters must be loop.ir.Buffer, got {type(buffer).__name__}")
            if buffer.padding and any(buffer.padding):
                raise ValueError(f"kernel {entry!r}: parameter {buffer.name!r} has padding; only internal buffers may")
        if target.kind != "cpu":
            raise ValueError(f"Kernel runs cpu libraries; got a {target.kind!r} target")
        if not host_supports(target):
            raise ValueError(f"kernel {entry!r} was built for {target.arch}/{target.isa}, which this machine cannot run")
        # per argument, the numpy dtypes that hold its type (bfloat16: ml_dtypes' or its uint16 bits)
        self._numpy_dtypes = tuple((b.dtype.array_numpy, b.dtype.numpy) for b in (*self.inputs, *self.outputs))
        library = load_library(self.lib_path, sha256)
        signature = library_signature(library, entry)
        expected = kernel_signature((*self.inputs, *self.outputs))
        # A hand-written library may carry no signature; every library tilegraph prints does, and
        # one loaded from a saved model (sha256 given) must.
        if (signature is not None or sha256 is not None) and signature != expected:
            found = "no signature" if signature is None else f"{signature!r}"
            raise LibraryMismatch(f"{self.lib_path}: {entry!r} is not the kernel asked for: it says {found}, "
                                  f"the buffers given are {expected!r}")
        try:
            function = getattr(library, entry)
        except AttributeError:
            raise ValueError(f"{self.lib_path} exports no function named {entry!r}") from None
        function.argtypes = [ctypes.c_void_p] * (len(self.inputs) + len(self.outputs)) + [ctypes.c_int32]
        function.restype = None
        self._function = function

    def __repr__(self) -> str:
        params = ", ".join(f"{b.name}: {b.dtype}{list(b.shape)}" for b in (*self.inputs, *self.outputs))
        return f"Kernel({self.entry}({params}), target={self.target.kind}/{self.target.isa})"

    def __call__(self, *inputs: np.ndarray, out: np.ndarray | Sequence[np.ndarray] | None = None,
                 num_threads: int | None = None) -> np.ndarray | tuple[np.ndarray, ...]:
        """The protocol's call without a Launch object in between: on a kernel of a few
        microseconds, benchmarks calling it in a loop see every allocation."""
        arguments, outputs, thread_count = self._prepare(inputs, out, num_threads)
        self._function(*arguments)
        self.last_num_threads = thread_count
        return outputs[0] if len(outputs) == 1 else outputs

    def bind(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray],
             num_threads: int | None = None) -> _CpuLaunch:
        arguments, outs, _ = self._prepare(tuple(inputs), tuple(outputs), num_threads)
        return _CpuLaunch(self, self._function, arguments, tuple(inputs), outs)

    # ---- argument checking ---------------------------------------------------------------
    def _prepare(self, inputs: Sequence[Any], out: Any, num_threads: int | None, check_dims: bool = True
                 ) -> tuple[list[int], tuple[np.ndarray, ...], int]:
        """(pointer arguments, outputs, threads) after checking every array; `check_dims` False: the
        dims array's values are not checked (a dispatcher checks them against the whole range)."""
        if len(inputs) != len(self.inputs):
            names = ", ".join(b.name for b in self.inputs)
            raise TypeError(f"kernel {self.entry!r} takes {len(self.inputs)} input arrays ({names}), got {len(inputs)}")
        for position, (array, buffer) in enumerate(zip(inputs, self.inputs)):
            self._check_array(array, buffer, position, "input")
        if self.dims and check_dims:  # the kernel clamps them into range; a caller out of range hears it here
            values = {d.name: int(v) for d, v in zip(self.dims, inputs[-1])}
            check_values(self.dims, values)
            for name, limit in self.dims_limit.items():
                if values[name] > limit:
                    raise ValueError(f"dim {name!r} = {values[name]} is above {limit}, the upper bound of this "
                                     "kernel's bucket")
        outputs = self._outputs(out)
        for position, (array, buffer) in enumerate(zip(outputs, self.outputs)):
            self._check_array(array, buffer, position, "output")
            if not array.flags.writeable:
                raise ValueError(f"output {buffer.name!r} is read-only; pass a writeable array")
        self._check_no_overlap(inputs, outputs)
        thread_count = self._thread_count(num_threads)
        pointers = [array.ctypes.data for array in (*inputs, *outputs)]
        return [*pointers, thread_count], outputs, thread_count

    def _outputs(self, out: Any) -> tuple[np.ndarray, ...]:
        return tuple(self.output_arrays(out))

    def _check_array(self, array: Any, buffer: Buffer, position: int, role: str) -> None:
        label = f"{role} {position} ({buffer.name!r})"
        if not isinstance(array, np.ndarray):
            raise TypeError(f"{label} must be a numpy.ndarray, got {type(array).__name__}")
        accepted = self._numpy_dtypes[position if role == "input" else len(self.inputs) + position]
        if array.dtype not in accepted:
            expected_dtype = accepted[0]
            raise TypeError(f"{label} has dtype {array.dtype}, expected {expected_dtype} (tilegraph does not cast; "
                            f"use .astype({str(expected_dtype)!r}))")
        if array.shape != tuple(buffer.shape):
            raise ValueError(f"{label} has shape {array.shape}, expected {tuple(buffer.shape)}")
        if not array.flags.c_contiguous:
            raise ValueError(f"{label} is not C-contiguous; pass np.ascontiguousarray(...)")
        if not array.flags.aligned:
            raise ValueError(f"{label} is not aligned to its dtype; pass a copy (np.array(..., copy=True))")

    def _check_no_overlap(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        # Every array is C-contiguous here, so overlapping address ranges are exactly shared memory.
        for index, output in enumerate(outputs):
            name = self.outputs[index].name
            for array, buffer in zip(inputs, self.inputs):
                if np.may_share_memory(output, array):
                    raise ValueError(f"output {name!r} overlaps input {buffer.name!r}; pass a separate array")
            for other_index in range(index):
                if np.may_share_memory(output, outputs[other_index]):
                    raise ValueError(f"output {name!r} overlaps output {self.outputs[other_index].name!r}; "
                                     "pass separate arrays")

    def _thread_count(self, num_threads: int | None) -> int:
        if num_threads is not None:
            return threads.check_num_threads(num_threads)
        configured = threads.configured_num_threads()
        return configured if configured is not None else self.target.num_cores

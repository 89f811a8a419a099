"""Scalar data types: one table, shared by the IR, the printers and the runtime."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from tilegraph.hashing import hash_once


@hash_once
@dataclass(frozen=True)
class DType:
    """A scalar type. `lanes` > 1 is a vector of that scalar (used after vector lowering)."""

    name: str
    bits: int
    kind: str  # "float" | "int" | "uint" | "bool"
    lanes: int = 1

    @property
    def itemsize(self) -> int:
        return max(1, self.bits // 8)

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "uint")

    @property
    def numpy(self) -> np.dtype:
        """The numpy dtype that stores this type (bfloat16 is stored as its uint16 bits)."""
        return np.dtype(_NUMPY_NAMES[self.name])

    @property
    def array_numpy(self) -> np.dtype:
        """The numpy dtype of arrays of this type at the API: ml_dtypes' bfloat16 where ml_dtypes is
        installed (its bits are the storage), else the storage dtype."""
        return _bfloat16_arrays() if self.name == "bfloat16" else self.numpy

    def holds(self, array_dtype: np.dtype) -> bool:
        """Whether arrays of numpy dtype `array_dtype` hold this type (bfloat16: also as its uint16 bits)."""
        return array_dtype == self.numpy or array_dtype == self.array_numpy

    @property
    def value_numpy(self) -> np.dtype:
        """The numpy dtype its values are computed in: bfloat16 values are float32 numbers that
        bfloat16 represents exactly (every operation on them rounds back, see round_bfloat16)."""
        return np.dtype(np.float32) if self.name == "bfloat16" else self.numpy

    def with_lanes(self, lanes: int) -> DType:
        return DType(self.name, self.bits, self.kind, lanes)

    @property
    def scalar(self) -> DType:
        return DType(self.name, self.bits, self.kind, 1)

    def __str__(self) -> str:
        return self.name if self.lanes == 1 else f"{self.name}x{self.lanes}"


float32 = DType("float32", 32, "float")
float64 = DType("float64", 64, "float")
float16 = DType("float16", 16, "float")
bfloat16 = DType("bfloat16", 16, "float")
int8 = DType("int8", 8, "int")
uint8 = DType("uint8", 8, "uint")
int16 = DType("int16", 16, "int")
uint16 = DType("uint16", 16, "uint")
uint32 = DType("uint32", 32, "uint")
uint64 = DType("uint64", 64, "uint")
int32 = DType("int32", 32, "int")
int64 = DType("int64", 64, "int")
bool_ = DType("bool", 8, "bool")

_ALL = {d.name: d for d in (float32, float64, float16, bfloat16, int8, uint8, int16, uint16, int32, uint32, int64,
                            uint64, bool_)}
DTYPE_NAMES: tuple[str, ...] = tuple(_ALL)  # every dtype tilegraph knows, by name
_NUMPY_NAMES = {
    "float32": "float32",
    "float64": "float64",
    "float16": "float16",
    "bfloat16": "uint16",
    "int8": "int8",
    "uint8": "uint8",
    "int16": "int16",
    "uint16": "uint16",
    "uint32": "uint32",
    "uint64": "uint64",
    "int32": "int32",
    "int64": "int64",
    "bool": "bool",
}


@functools.lru_cache(maxsize=1)
def _bfloat16_arrays() -> np.dtype:
    try:
        import ml_dtypes
    except ImportError:
        return np.dtype(np.uint16)
    return np.dtype(ml_dtypes.bfloat16)


def wrap_int(value: int, dtype: DType) -> int:
    """A Python int wrapped into an integer dtype's range (two's complement), as fixed-width
    arithmetic computes it; the one definition the interpreter and the simplifier share."""
    if dtype.kind == "bool":
        return int(bool(value))
    if dtype.kind == "uint":
        return value % (1 << dtype.bits)
    half = 1 << (dtype.bits - 1)
    return (value + half) % (1 << dtype.bits) - half


def bfloat16_bits(x: np.ndarray | float) -> np.ndarray:
    """float32 values as bfloat16 bits (uint16): round to nearest, ties to even; a NaN becomes
    the quiet NaN 0x7FC0 with its sign (as ml_dtypes converts); subnormals are kept, not flushed. The
    one definition the interpreter, the printers and the graph passes share:

        0x3F800000 (1.0)  -> 0x3F80      0x3F808000 (1 + 2**-8, a tie) -> 0x3F80 (even)
        0x3F818000        -> 0x3F82      0x7F7FFFFF (max float32)      -> 0x7F80 (inf)
    """
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    return np.where(nan, ((u >> 16) & 0x8000) | 0x7FC0, rounded).astype(np.uint16)


def bfloat16_values(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bits (uint16) as the float32 numbers they are (exact: the bits are the top half)."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def round_bfloat16(x: np.ndarray | float) -> np.ndarray:
    """float32 values rounded to the nearest bfloat16 number, kept as float32."""
    return bfloat16_values(bfloat16_bits(x))


def round_to(value: float, dtype: DType) -> float:
    """A Python float rounded to a float dtype's precision (how constants of that dtype mean)."""
    if dtype.name == "bfloat16":
        return float(round_bfloat16(np.float32(value)))
    return float(dtype.numpy.type(value))


def as_dtype(value: str | DType | np.dtype | type) -> DType:
    """Normalise a user-supplied dtype ('float32', np.float32, DType) to a DType."""
    if isinstance(value, DType):
        return value
    if value is None:  # np.dtype(None) would silently mean float64
        raise TypeError(f"a dtype is required; expected one of {sorted(_ALL)}")
    try:
        name = value if isinstance(value, str) else np.dtype(value).name
    except TypeError:
        raise TypeError(f"unsupported dtype {str(value)[:40]!r}; expected one of {sorted(_ALL)}") from None
    if name not in _ALL:
        raise TypeError(f"unsupported dtype {value!r}; expected one of {sorted(_ALL)}")
    return _ALL[name]


def poisoned(shape: tuple[int, ...], dtype: np.dtype | str) -> np.ndarray:
    """An array no correct kernel leaves as it is: NaN for floats, the most negative value for
    signed and the largest for unsigned integers, True for bools. Outputs start poisoned wherever
    a result is checked (the interpreter, the tuner's runner, kernels called without out=)."""
    if str(dtype) == "bfloat16":  # ml_dtypes' type (storage is uint16, whose poison is a NaN too)
        return np.full(shape, np.nan, np.float32).astype(bfloat16.array_numpy)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return np.full(shape, np.nan, dt)
    if dt.kind == "b":
        return np.ones(shape, dt)
    info = np.iinfo(dt)
    return np.full(shape, info.min if dt.kind == "i" else info.max, dt)

"""dtype.py: the dtype table, two's-complement wrapping and output poisoning."""

import numpy as np
import pytest

from tilegraph import dtype as dt


def test_as_dtype_accepts_names_numpy_dtypes_and_types_but_not_none():
    assert dt.as_dtype("float32") is dt.float32 or dt.as_dtype("float32") == dt.float32
    assert dt.as_dtype(np.float32) == dt.float32 and dt.as_dtype(np.dtype("int8")) == dt.int8
    with pytest.raises((TypeError, ValueError)):
        dt.as_dtype(None)
    with pytest.raises((TypeError, ValueError)):
        dt.as_dtype("complex64")


def test_dtype_facts_and_vector_lanes():
    assert dt.float32.itemsize == 4 and dt.float32.is_float and not dt.float32.is_int
    v = dt.float32.with_lanes(8)
    assert v.lanes == 8 and v.scalar == dt.float32 and dt.int8.numpy == np.dtype("int8")


@pytest.mark.parametrize("value, dtype, wrapped", [(128, dt.int8, -128), (-129, dt.int8, 127), (256, dt.uint8, 0),
                                                   (2**31, dt.int32, -(2**31)), (5, dt.int32, 5)])
def test_wrap_int(value, dtype, wrapped):
    assert dt.wrap_int(value, dtype) == wrapped


def test_poisoned_outputs_are_values_no_correct_kernel_leaves():
    assert np.isnan(dt.poisoned((2,), "float32")).all()
    assert (dt.poisoned((2,), "int32") == np.iinfo(np.int32).min).all()
    assert (dt.poisoned((2,), "uint8") == 255).all(), "unsigned: the largest value (0 is a common result)"
    assert dt.poisoned((2, 3), np.bool_).all() and dt.poisoned((2, 3), "float64").shape == (2, 3)


def test_bfloat16_rounding_matches_ml_dtypes_on_every_kind_of_float():
    """Round to nearest even, NaN quiet with its sign, subnormals kept, overflow to inf: the bits
    ml_dtypes gives, on random bit patterns and on the edge cases (ties both ways, max float32)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(0)
    edges = np.array([0x3F808000, 0x3F818000, 0x3F807FFF, 0x7F7FFFFF, 0xFF7FFFFF, 0x00008000, 0x00018000,
                      0x007FFFFF, 0x80000001, 0x7F800000, 0xFF800000, 0x7F800001, 0xFFC00000, 0x7FBFFFFF,
                      0, 0x80000000], np.uint32)
    bits = np.concatenate([edges, rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)])
    x = bits.view(np.float32)
    with np.errstate(invalid="ignore"):
        want = x.astype(ml_dtypes.bfloat16).view(np.uint16)
    np.testing.assert_array_equal(dt.bfloat16_bits(x), want)
    assert dt.bfloat16_bits(np.float32(1 + 2**-8)) == 0x3F80  # a tie goes to the even neighbour
    back = dt.bfloat16_values(want)
    finite = np.isfinite(back)
    np.testing.assert_array_equal(back[finite], want.view(ml_dtypes.bfloat16)[finite].astype(np.float32))
    np.testing.assert_array_equal(dt.round_bfloat16(back), back)  # bfloat16 numbers round to themselves


def test_bfloat16_is_stored_as_bits_and_computed_in_float32():
    assert dt.bfloat16.numpy == np.uint16 and dt.bfloat16.value_numpy == np.float32
    assert dt.bfloat16.holds(np.dtype(np.uint16)) and not dt.bfloat16.holds(np.dtype(np.float32))
    assert dt.round_to(1 + 2**-9, dt.bfloat16) == 1.0 and dt.round_to(0.1, dt.float32) == float(np.float32(0.1))

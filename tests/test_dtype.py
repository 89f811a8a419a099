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

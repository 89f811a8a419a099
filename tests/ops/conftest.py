import numpy as np
import pytest

import tilegraph as tg
from tilegraph.testing import random_inputs, reference_outputs


def run_and_compare(inputs, outputs, rtol=1e-4, atol=1e-5, seed=0):
    """Interpret the workload inputs -> outputs on random data and compare with the float64 reference."""
    outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    wl = tg.Workload(inputs, outputs)
    arrays = random_inputs(wl, seed)
    expected = reference_outputs(wl, arrays)
    got = tg.interpret(wl, *arrays)
    got = [got] if isinstance(got, np.ndarray) else list(got)
    assert len(got) == len(expected)
    for g, e, t in zip(got, expected, wl.outputs):
        assert g.shape == t.shape == e.shape
        assert not np.isnan(g).any(), f"{t.name}: NaN in the interpreted output"
        np.testing.assert_allclose(g.astype(np.float64), e, rtol=rtol, atol=atol, err_msg=t.name)
    return wl


@pytest.fixture
def check():
    return run_and_compare

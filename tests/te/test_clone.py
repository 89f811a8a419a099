"""with_unique_names: composed DAGs whose tensors share names become valid workloads."""

import numpy as np
import pytest

from tilegraph import Workload, ops, te
from tilegraph.loop.interpret import interpret
from tilegraph.te.clone import with_unique_names

RNG = np.random.default_rng(4)


def test_unique_names_make_a_composed_dag_a_workload():
    x = te.placeholder((3, 4), "float32", name="x")
    twice = ops.add(ops.add(x, x), x)  # two tensors named "add"
    with pytest.raises(Exception, match="share the name"):
        Workload([x], [twice])
    (renamed,) = with_unique_names([twice], names={id(twice): "out"})
    wl = Workload([x], [renamed])
    assert renamed.name == "out" and len({t.name for t in wl.tensors}) == len(wl.tensors)
    a = RNG.standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_allclose(interpret(wl, a), 3 * a, rtol=1e-6)

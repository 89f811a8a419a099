import pytest

import tilegraph as tg
from tilegraph import te
from tilegraph.tune.hardware import hardware_model


def matmul_workload(m: int, n: int, k: int) -> tg.Workload:
    a = te.placeholder((m, k), name="A")
    b = te.placeholder((k, n), name="B")
    r = te.reduce_axis(k, "k")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return tg.Workload([a, b], [c])


@pytest.fixture
def hw():
    return hardware_model(measure=False)

"""Every search strategy tunes the cuda target on a real NVIDIA GPU and returns a checked kernel
(the same tests run on OpenCL through PoCL in test_opencl_tuning.py)."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.runtime.cuda import CudaKernel
from tilegraph.target import Target
from tilegraph.testing import random_inputs, reference_outputs
from tilegraph.tune.database import open_database
from tilegraph.tune.measure import MeasurePolicy
from tilegraph.workloads import from_spec

pytestmark = [pytest.mark.needs_gpu, pytest.mark.needs_nvcc]

FAST = MeasurePolicy(min_time_s=0.005, min_repeats=3, warmup=1, timeout_s=30.0)


@pytest.mark.timeout(240)  # a stuck candidate fails the test with a traceback instead of stalling the session
@pytest.mark.parametrize("strategy,trials", [("gensor", 4), ("auto", 10), ("evolutionary", 6), ("tlm", 4)])
@pytest.mark.parametrize("spec", ["matmul:72,40,56", "softmax:33,70"])
def test_every_strategy_tunes_cuda_with_checked_kernels(tune_dirs, strategy, trials, spec):
    if strategy == "tlm":
        pytest.importorskip("torch")
    wl = from_spec(spec)
    db = open_database(str(tune_dirs / f"{strategy}.db"))
    result = tg.tune(wl, target="cuda", strategy=strategy, trials=trials, db=db, progress=False, policy=FAST,
                     build_workers=2)  # many tests at once under xdist: nvcc processes must not swamp the cores
    assert isinstance(result.kernel, CudaKernel)
    assert result.measured == trials
    inputs = random_inputs(wl, 7)
    (ref,) = reference_outputs(wl, inputs)
    np.testing.assert_allclose(result.kernel(*inputs), ref, rtol=1e-4, atol=1e-5)
    records = db.records(wl.key, Target("cuda").fingerprint)
    assert len(records) == trials  # a candidate may fail (too many registers, say): recorded, never returned

"""RollerStrategy: the baseline's tree construction on CPU targets; GPU targets are refused clearly."""

import pytest

import tilegraph as tg


def test_roller_refuses_a_gpu_target_with_a_pointer_to_the_strategies_that_plan_for_it():
    from tilegraph.target import Target
    from tilegraph.tune.strategy.base import TuneContext
    from tilegraph.tune.strategy.roller import RollerStrategy

    wl = tg.workloads.from_spec("matmul:16,16,16")
    ctx = TuneContext(wl, Target("opencl"), seed=0, db=None)
    with pytest.raises(tg.TilegraphError, match="roller' plans CPU tile trees only; for a opencl target use 'gensor'"):
        RollerStrategy(measure_hardware=False).propose(ctx, 4)

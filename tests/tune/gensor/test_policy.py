"""gensor/policy.py: the search setup and Roller's tree construction on it."""

from tests.tune.gensor.conftest import matmul_workload
from tilegraph.target import Target
from tilegraph.tune.gensor.policy import SearchSetup, roller_construct, scale_out
from tilegraph.tune.gensor.state import parallel_tasks
from tilegraph.tune.gensor.transitions import feasible
from tilegraph.tune.hardware import hardware_model


def _setup(m=256, n=256, k=128, cores=2):
    return SearchSetup.create(matmul_workload(m, n, k), hardware_model(Target("cpu", isa="avx2", num_cores=cores),
                                                                       measure=False))


def test_roller_constructs_distinct_feasible_states_best_predicted_first():
    setup = _setup()
    states = roller_construct(setup, k=4)
    assert 1 <= len(states) <= 4 and len(set(states)) == len(states)
    assert all(feasible(setup.space, setup.hw, s, setup.minimal) is None for s in states)
    predicted = [setup.model.predict(s) for s in states]
    assert predicted == sorted(predicted)
    assert all(setup.model.predict(s) <= setup.model.predict(setup.minimal) for s in states)


def test_scale_out_gives_every_core_work():
    setup = _setup(cores=2)
    state = scale_out(setup, setup.minimal)
    assert parallel_tasks(setup.space, state) >= 2 and state.parallel >= 1

import numpy as np
import pytest

from tilegraph.tune.gensor.markov import MarkovConfig, random_walks, stationary, total_variation
from tilegraph.tune.gensor.policy import SearchSetup, roller_construct

from .conftest import matmul_workload


def test_probabilities_are_a_distribution_with_stop(hw):
    setup = SearchSetup.create(matmul_workload(64, 48, 40), hw)
    p = setup.graph.probabilities(setup.minimal)
    assert len(p) == len(setup.graph.edges(setup.minimal)) + 1
    assert np.isclose(p.sum(), 1.0) and (p >= 0).all()


def test_greedier_walks_prefer_faster_moves(hw):
    cold = SearchSetup.create(matmul_workload(64, 48, 40), hw, MarkovConfig(beta=0.0, reuse_lambda=0.0))
    hot = SearchSetup.create(matmul_workload(64, 48, 40), hw, MarkovConfig(beta=8.0, reuse_lambda=0.0))
    assert np.allclose(cold.graph.probabilities(cold.minimal), 1 / (len(cold.graph.edges(cold.minimal)) + 1))
    edges = hot.graph.edges(hot.minimal)
    fastest = min(range(len(edges)), key=lambda i: hot.model.predict(edges[i].target))
    assert int(np.argmax(hot.graph.probabilities(hot.minimal))) == fastest


def test_sampler_visits_approach_the_stationary_distribution(hw):
    config = MarkovConfig(beta=1.0, max_depth=None, seed=3)
    setup = SearchSetup.create(matmul_workload(4, 16, 2), hw, config)
    pi = stationary(setup.graph, [setup.minimal])
    assert np.isclose(sum(pi.values()), 1.0)
    walk = random_walks(setup.graph, [setup.minimal], max_walks=15_000, ignore_time=True)
    assert total_variation(walk.frequencies(), pi) < 0.05
    short = random_walks(setup.graph, [setup.minimal], max_walks=5, ignore_time=True)
    assert total_variation(short.frequencies(), pi) > total_variation(walk.frequencies(), pi)


def test_walks_are_deterministic_under_a_seed(hw):
    runs = []
    for _ in range(2):
        setup = SearchSetup.create(matmul_workload(64, 48, 40), hw, MarkovConfig(seed=7))
        seeds = [setup.minimal, *roller_construct(setup, 4)]
        runs.append(random_walks(setup.graph, seeds, max_walks=60, ignore_time=True))
    assert runs[0].visits == runs[1].visits and runs[0].log == runs[1].log
    other = SearchSetup.create(matmul_workload(64, 48, 40), hw, MarkovConfig(seed=8))
    assert random_walks(other.graph, [other.minimal], max_walks=60, ignore_time=True).log != runs[0].log


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="beta"):
        MarkovConfig(beta=-1)
    with pytest.raises(ValueError, match="restart"):
        MarkovConfig(restart=1.0)


def test_polish_descends_to_a_state_the_model_prefers(hw):
    from tilegraph.tune.gensor.markov import polish

    setup = SearchSetup.create(matmul_workload(64, 64, 64), hw, MarkovConfig())
    visited = polish(setup.graph, [setup.minimal], max_steps=500)
    assert visited[0] == setup.minimal and len(visited) > 1
    predicted = [setup.model.predict(s) for s in visited]
    assert predicted == sorted(predicted, reverse=True)  # every step is a strict improvement
    last = visited[-1]
    assert all(setup.model.predict(e.target) >= predicted[-1] for e in setup.graph.edges(last))

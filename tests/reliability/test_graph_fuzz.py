"""The graph-level differential fuzz (tests/reliability/graph_fuzz.py): random small ONNX models,
tilegraph (greedy and BLP, fused and unfused) against ONNX Runtime, NaN and infinities included.
The default run checks 300 cases; the slow run TILEGRAPH_GRAPH_FUZZ_CASES (default 5,000) more:

    python -m pytest -m slow tests/reliability/test_graph_fuzz.py -p no:cacheprovider
    python -m tests.reliability.graph_fuzz --cases 5000 --report fuzz.json   # the same, with a report
"""

import os

import pytest

from tests.reliability.graph_fuzz import run_cases

pytestmark = pytest.mark.needs_cc
pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
CHUNK = 50
SLOW_CASES = int(os.environ.get("TILEGRAPH_GRAPH_FUZZ_CASES", "5000"))


def _check(numbers):
    report = run_cases(numbers)
    assert not report["failures"], report["failures"][:5]
    assert report["counts"].get("match", 0) >= 0.8 * len(numbers), report["counts"]  # the fuzz compares, not refuses


# the first chunk in the default run, all 300 cases in CI's extended run (the README)
@pytest.mark.parametrize("first", [pytest.param(f, marks=[pytest.mark.extended] if f else []) for f in range(0, 300, CHUNK)])
def test_random_graphs_match_onnxruntime(first):
    _check(range(first, first + CHUNK))


@pytest.mark.slow
def test_random_graphs_match_onnxruntime_long():
    _check(range(100_000, 100_000 + SLOW_CASES))  # cases the default run never sees

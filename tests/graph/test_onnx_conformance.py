"""ONNX's own backend node cases (onnx.backend.test.case), every one through tilegraph: none may
crash or give a wrong answer, and every case in onnx_conformance_passing.txt must pass (a ratchet:
refresh it with `python -m benchmarks.onnx_conformance --write-passing` when more pass). The count
is printed at the end of the run (tests/conftest.py). The cases are `extended`: CI runs them, the
default run leaves them out (README)."""

import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnx.backend.test.case.node")

from benchmarks.onnx_conformance import PASSING_FILE, cases, run_case  # noqa: E402

CASES = cases()
MUST_PASS = {line.split()[0] for line in PASSING_FILE.read_text().splitlines()} if PASSING_FILE.exists() else set()
OUTCOMES: dict[str, object] = {}  # name -> Outcome, for the end-of-run count


def test_the_must_pass_list_names_real_cases():
    assert MUST_PASS, f"{PASSING_FILE} is missing or empty"
    unknown = set(MUST_PASS) - {c.name for c in CASES}
    assert len(unknown) <= len(MUST_PASS) // 20, f"not cases of onnx {onnx.__version__}: {sorted(unknown)[:10]}"


@pytest.mark.extended
@pytest.mark.needs_cc
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_backend_case(case):
    outcome = run_case(case)
    OUTCOMES[case.name] = outcome
    assert outcome.status not in ("crash", "wrong"), f"{outcome.status}: {outcome.detail}"
    if case.name in MUST_PASS:
        assert outcome.status == "pass", f"passed before, now {outcome.status}: {outcome.detail}"


def test_docs_list_the_operators_from_the_converter_table():
    from pathlib import Path

    from benchmarks.onnx_conformance import operator_table

    docs = (Path(__file__).resolve().parents[2] / "docs" / "graph.md").read_text()
    assert operator_table() in docs, "docs/graph.md's operator table is stale: paste `python -m " \
                                     "benchmarks.onnx_conformance --operator-table` over it"

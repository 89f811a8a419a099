"""One measurer: the only code in the package that times or checks a tilegraph kernel to choose
between kernels is the tuner's runner (tune/runner.py), reached through TuneSession.

The timing loop (runtime/timer.py: measure, tune/measure.py: time_runs) and the output comparison
(tune/measure.py: compare_outputs) are the pieces a second measurer would be built from; this
test lists every module that calls them. Timing something other than a candidate is allowed and
named here: a peer's operator or model for a report (graph/race.py, graph/tuning/vendor.py), the
`tilegraph bench` command, and Kernel.time() itself (runtime/launch.py).
"""

import ast
from pathlib import Path

import tilegraph

PACKAGE = Path(tilegraph.__file__).parent
PRIMITIVES = {"measure", "time_runs", "compare_outputs"}
CHOOSERS = {"tilegraph/tune/runner.py"}  # the one measurer's worker: times and checks candidates
REPORTERS = {
    "tilegraph/runtime/timer.py",       # the timing loop itself
    "tilegraph/runtime/__init__.py",    # re-exports it
    "tilegraph/runtime/launch.py",      # Kernel.time(): the user's timing API
    "tilegraph/tune/measure.py",        # time_runs and compare_outputs are defined here
    "tilegraph/graph/race.py",          # peers raced against a compiled model, for a report
    "tilegraph/graph/tuning/vendor.py",  # the vendor library's time of a task's operator, for a report
    "tilegraph/cli/bench.py",           # `tilegraph bench`: a benchmark, not a choice
}


def _callers() -> dict[str, set[str]]:
    """Module path -> the measuring primitives it imports from tilegraph (by name)."""
    found: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        names = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tilegraph"):
                if node.module in ("tilegraph.runtime.timer", "tilegraph.tune.measure", "tilegraph.runtime"):
                    names |= {a.name for a in node.names} & PRIMITIVES
            elif isinstance(node, ast.FunctionDef) and node.name in PRIMITIVES:
                names.add(node.name)  # where it is defined
        if names:
            found[str(path.relative_to(PACKAGE.parent))] = names
    return found


def test_only_the_runner_measures_candidates():
    callers = _callers()
    unexpected = sorted(set(callers) - CHOOSERS - REPORTERS)
    assert not unexpected, (f"{unexpected} import a timing or checking primitive: measure kernels through "
                            "tune/session.py's TuneSession (tune_slice, measure_kernel, check), or name the "
                            "module here if it times a peer for a report")
    assert CHOOSERS <= set(callers)


def test_the_orchestration_has_no_cost_cache_of_its_own():
    """Orchestration costs are database records (graph/fusion/measure.py), not a file of their own."""
    assert not (PACKAGE / "graph" / "fusion" / "costs.py").exists()
    text = (PACKAGE / "graph" / "fusion" / "measure.py").read_text()
    assert "TuneSession" in text and "json" not in text

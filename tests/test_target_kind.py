"""No search strategy, lowering pass or graph module branches on `target.kind`, and none takes an
untyped target or database below the public entry points. What differs between
targets is asked of the backend registry (runtime/backends.py: `backend_for(target).is_gpu`,
`.timeable`, `.loader`, `.build`, `.default_schedule`), so a new target is one registration, not a
hunt through the tree. Naming the kind in a message is fine; comparing it is a branch.

Below the runtime (schedule/, lower/gpu/, codegen/) the kind of a loop or a target is the data
those layers are about, and the registry is not importable there (tests/test_layers.py).
"""

import ast
from pathlib import Path

import tilegraph

PACKAGE = Path(tilegraph.__file__).parent
PINNED = ("tune/strategy", "graph", "lower/passes")


def _target_kind_comparisons(source: str, name: str) -> list[str]:
    tree = ast.parse(source, filename=name)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        for operand in (node.left, *node.comparators):
            if isinstance(operand, ast.Attribute) and operand.attr == "kind":
                owner = ast.unparse(operand.value)
                if "target" in owner or "tgt" in owner:
                    found.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_strategies_passes_and_the_graph_level_ask_the_backend_registry():
    found = [hit for folder in PINNED for path in sorted((PACKAGE / folder).rglob("*.py"))
             for hit in _target_kind_comparisons(path.read_text(), str(path.relative_to(PACKAGE.parent)))]
    assert not found, "branch through runtime/backends.py's backend_for(target) instead:\n" + "\n".join(found)


def test_the_scan_sees_a_comparison_and_not_a_message():
    source = "def f(ctx):\n    if ctx.target.kind != 'cpu':\n        raise ValueError(f'{ctx.target.kind}')\n"
    assert _target_kind_comparisons(source, "probe.py") == ["probe.py:2: ctx.target.kind != 'cpu'"]


# The public entry points take what users pass (a target string, a database path) and resolve it
# once; everything below them is typed.
ENTRY_POINTS = {"compile_model", "load_model"}


def _untyped_boundaries(source: str, name: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source, filename=name)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name not in ENTRY_POINTS:
            for arg in (*node.args.args, *node.args.kwonlyargs):
                if arg.arg in ("target", "tgt", "db") and arg.annotation is not None \
                        and ast.unparse(arg.annotation) == "Any":
                    found.append(f"{name}:{node.lineno}: {node.name}({arg.arg}: Any)")
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                and node.target.id in ("target", "db") and ast.unparse(node.annotation) == "Any":
            found.append(f"{name}:{node.lineno}: {node.target.id}: Any")
    return found


def test_targets_and_databases_are_typed_below_the_entry_points():
    found = [hit for folder in ("tune/strategy", "graph/fusion", "graph/tuning")
             for path in sorted((PACKAGE / folder).rglob("*.py"))
             for hit in _untyped_boundaries(path.read_text(), str(path.relative_to(PACKAGE.parent)))]
    for module in ("graph/kernels.py", "graph/compile.py"):
        path = PACKAGE / module
        found += _untyped_boundaries(path.read_text(), str(path.relative_to(PACKAGE.parent)))
    assert not found, "type these as Target / Database (resolved at the entry point):\n" + "\n".join(found)

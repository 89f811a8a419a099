"""Imports point down the data flow: every module imports only from its own layer or lower ones.

    dtype/errors/config/gpu_specs/hashing/microarch/stages/target/version -> te -> loop
    -> schedule, ops, testing, workloads -> lower -> codegen -> build -> runtime -> driver -> tune -> graph -> tlm -> cli

Lazy imports inside functions count too: an upward import is a misplaced helper, whatever its form.
`tilegraph/__init__.py` (the public API) sits above everything.
"""

import ast
from pathlib import Path

import pytest

import tilegraph

LAYERS = [
    ("dtype", "errors", "config", "gpu_specs", "hashing", "microarch", "stages", "target", "version"),
    ("te",),
    ("loop",),
    ("schedule", "ops", "testing", "workloads"),
    ("lower",),
    ("codegen",),
    ("build",),
    ("runtime",),
    ("driver",),
    ("tune",),
    ("graph",),
    ("tlm",),
    ("cli",),
]
RANK = {name: n for n, names in enumerate(LAYERS) for name in names}
TOP = len(LAYERS)
PACKAGE = Path(tilegraph.__file__).parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _rank(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1:
        return TOP
    if parts[1] not in RANK:
        raise AssertionError(f"{module}: tilegraph.{parts[1]} has no layer; add it to LAYERS and docs/architecture.md")
    return RANK[parts[1]]


def _imports(path: Path, module: str | None = None) -> list[tuple[int, str]]:
    module = module or _module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            if base == "tilegraph":  # `from tilegraph import te` imports the module tilegraph.te
                out += [(node.lineno, f"tilegraph.{a.name}") for a in node.names]
            else:
                out.append((node.lineno, base))
    return [(line, m) for line, m in out if m == "tilegraph" or m.startswith("tilegraph.")]


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" or p.parent != PACKAGE)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down_the_data_flow(path):
    own = _rank(_module_name(path))
    upward = [f"line {line}: {m} (layer {_rank(m)})" for line, m in _imports(path) if _rank(m) > own]
    assert not upward, f"{_module_name(path)} (layer {own}) imports upward: {upward}"


def test_the_layering_check_sees_lazy_and_relative_upward_imports(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from .. import driver\n\ndef f():\n    from tilegraph.tune import tune\n")
    found = [m for _, m in _imports(probe, module="tilegraph.te.probe")]
    assert found == ["tilegraph.driver", "tilegraph.tune"]
    assert all(_rank(m) > _rank("tilegraph.te.probe") for m in found)

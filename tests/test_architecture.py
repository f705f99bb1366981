"""The import graph of the packages: no cycles, and no import that runs back up a layer.

Every ``import`` and ``from ... import`` in ``tensorq``, ``rl`` and ``analysis``
counts, those inside functions included (a lazy import is still a dependency),
except those under ``if TYPE_CHECKING:``, which name types for the type
checker and never run.
`LAYERS` is the architecture of ``docs/architecture.md``, lowest first: a module
may import from its own layer and the layers below it, never from a layer above.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("tensorq", "rl", "analysis")

#: Layers, lowest first; a module belongs to the longest prefix that names it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("tensorq",),
    ("rl.validation", "rl.seeding", "rl.jit"),
    ("rl.envs",),
    ("rl.problems",),
    ("rl.agents",),
    ("rl.loop",),
    ("rl.runs",),
    ("rl.experiments",),
    ("rl", "rl.train", "rl.evaluate", "rl.sweep", "rl.reproduce"),
    ("analysis",),
)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            found[module_name(path)] = path
    return found


def imports(path: Path, known: set[str]) -> set[str]:
    """Return the project modules that the file at ``path`` imports, anywhere in it."""
    targets = set()
    tree = ast.parse(path.read_text(), str(path))
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING")
        for inner in ast.walk(node)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
            names = [n for n in names if n in known] or [node.module]
            if len(names) > 1 and node.module in names:
                names.remove(node.module)  # `from pkg import module`: the module, not pkg
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name:
                targets.add(name)
    return targets


def graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: imports(path, known) - {name} for name, path in found.items()}


def layer(module: str) -> int:
    best, index = -1, None
    for i, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, index = len(prefix), i
    assert index is not None, f"{module} is in no layer of LAYERS"
    return index


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Return the strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_the_import_graph_has_no_cycles() -> None:
    assert cycles(graph()) == []


def test_no_import_runs_back_up_a_layer() -> None:
    upward = [
        f"{source} -> {target}"
        for source, targets in sorted(graph().items())
        for target in sorted(targets)
        if layer(target) > layer(source)
    ]
    assert upward == []


def test_the_checks_see_a_cycle_and_an_upward_import() -> None:
    edges = {"rl.loop.a": {"rl.runs.b"}, "rl.runs.b": {"rl.loop.a"}}
    assert cycles(edges) == [["rl.loop.a", "rl.runs.b"]]
    assert layer("rl.runs.b") > layer("rl.loop.a")


#: The wings of ``rl.agents``: each imports the shared modules at the root of
#: ``rl.agents`` and itself, never another wing, and the root imports no wing
#: except by name (the registry's module strings and the package's lazy exports).
WINGS = ("rl.agents.tensor", "rl.agents.deep", "rl.agents.tables")


def wing(module: str) -> str | None:
    return next((w for w in WINGS if module == w or module.startswith(w + ".")), None)


def test_no_wing_of_the_agents_imports_another() -> None:
    crossing = [
        f"{source} -> {target}"
        for source, targets in sorted(graph().items())
        if wing(source)
        for target in sorted(targets)
        if wing(target) and wing(target) != wing(source)
    ]
    assert crossing == []


def test_the_shared_agent_modules_import_no_wing() -> None:
    shared = [
        f"{source} -> {target}"
        for source, targets in sorted(graph().items())
        if source.startswith("rl.agents") and not wing(source) and source != "rl.agents"
        for target in sorted(targets)
        if wing(target)
    ]
    assert shared == []


@pytest.mark.parametrize(
    "package,most",
    [
        ("rl", 9),
        ("rl.problems", 12),
        ("rl.loop", 12),
        ("rl.runs", 12),
        ("rl.agents", 12),
        ("rl.agents.tensor", 14),
        ("rl.agents.deep", 12),
        ("rl.agents.tables", 12),
    ],
)
def test_packages_stay_small(package: str, most: int) -> None:
    """About eight modules at the root of ``rl``, a dozen at most in a subpackage."""
    root = ROOT / package.replace(".", "/")
    assert len([p for p in root.glob("*.py") if p.name != "__init__.py"]) <= most

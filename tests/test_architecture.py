"""The import graph of src/tether (docs/architecture.md): layers import only downward, no two
files import each other through any chain, and the front doors never import one another.

Every ``import`` counts, including those inside functions (they run later, but they still tie the
two files together); only those under ``if TYPE_CHECKING:`` are left out, since they never run.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# Bottom to top. A module belongs to the layer of its longest listed prefix; it may import its own
# layer and those below. Keep this table and the one in docs/architecture.md the same.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "foundation",
        (
            "tether",  # the package itself: its names load lazily, so importing it loads nothing
            "tether._lazy",
            "tether._lru",
            "tether._secrets",
            "tether.cancel",
            "tether.config",
            "tether.errors",
            "tether.events",
            "tether.fileio",
            "tether.messages",
            "tether.processes",
            "tether.status",
            "tether.tokens",
            "tether.usage",
        ),
    ),
    (
        "records",
        (
            "tether.postgres.db",
            "tether.server.events",
            "tether.server.store",
            "tether.sessions",
            "tether.telemetry",
            "tether.tracing",
        ),
    ),
    ("providers", ("tether.providers",)),
    ("harness", ("tether.harness", "tether.tools.base")),
    ("tools", ("tether.tools",)),
    (
        "features",
        (
            "tether.connectors",
            "tether.guardrails",
            "tether.knowledge",
            "tether.memory",
            "tether.postgres",
            "tether.skills",
        ),
    ),
    ("assembly", ("tether.assembly", "tether.stores")),
    ("test doubles", ("tether.testing",)),
    ("hosting", ("tether.dispatch.engine", "tether.dispatch.jobs", "tether.dispatch.remote", "tether.server.runs")),
    ("doors", ("tether.cli", "tether.connectors.serve", "tether.dispatch", "tether.server")),
    ("entry", ("tether.__main__",)),
]

# The front doors. None imports another, except the command line, which is how every door starts:
# `tether serve`, `tether worker` and `tether mcp serve` import their door's entry module.
DOORS = {
    "cli": ("tether.cli",),
    "server": (
        "tether.server.__init__",
        "tether.server.app",
        "tether.server.agents",
        "tether.server.guard",
        "tether.server.widgets",
    ),
    "worker": ("tether.dispatch.__init__", "tether.dispatch.worker"),
    "mcp serve": ("tether.connectors.serve",),
}
CLI_STARTS = {"tether.server.app", "tether.dispatch.worker", "tether.connectors.serve"}

# The harness's own cycle (agent -> subagent -> loop -> agent, model_call <-> compaction) was broken by
# handing the loop's run_stream down to tools (ToolContext.run_agent) and by tether.harness.accounting.
KNOWN_CYCLES: set[frozenset[str]] = set()  # none: a cycle anywhere is a failure


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted((SRC / "tether").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = modules()


def _type_checking_only(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return skipped


def _imported(module: str, path: Path) -> Iterator[str]:
    """The tether modules ``module`` imports: ``from a import b`` is a.b when that is a module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = _type_checking_only(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name.startswith("tether") and name != module:
                yield name


GRAPH = {m: sorted(set(_imported(m, p))) for m, p in MODULES.items()}


def layer_of(module: str) -> int:
    best, index = "", -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            below = module.startswith(prefix + ".") and prefix != "tether"  # the package is itself only
            if (module == prefix or below) and len(prefix) > len(best):
                best, index = prefix, i
    assert index >= 0, f"{module} is in no layer: add it to LAYERS (and to docs/architecture.md)"
    return index


def door_of(module: str) -> str | None:
    for door, prefixes in DOORS.items():
        for prefix in prefixes:
            plain = prefix.removesuffix(".__init__")
            if module == plain if prefix.endswith(".__init__") else module == prefix or module.startswith(prefix + "."):
                return door
    return None


def cycles() -> list[set[str]]:
    """The strongly connected parts of the graph with more than one file (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in GRAPH:
        if root in index:
            continue
        work = [(root, iter(GRAPH[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(GRAPH[nxt])))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    part = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        part.add(member)
                        if member == node:
                            break
                    if len(part) > 1:
                        found.append(part)
    return found


def test_every_module_has_a_layer() -> None:
    for module in MODULES:
        layer_of(module)


def test_imports_only_run_downward() -> None:
    upward = [
        f"{m} ({LAYERS[layer_of(m)][0]}) imports {t} ({LAYERS[layer_of(t)][0]})"
        for m, targets in GRAPH.items()
        for t in targets
        if layer_of(t) > layer_of(m)
    ]
    assert upward == []


def test_no_file_imports_itself_through_others() -> None:
    found = [sorted(c) for c in cycles() if not any(c <= known for known in KNOWN_CYCLES)]
    assert found == []


def test_front_doors_never_import_each_other() -> None:
    crossings = []
    for module, targets in GRAPH.items():
        door = door_of(module)
        for target in targets:
            other = door_of(target)
            if door is None or other is None or other == door:
                continue
            if door == "cli" and target in CLI_STARTS:
                continue  # `tether serve`, `tether worker`, `tether mcp serve`: the command starts the door
            crossings.append(f"{module} ({door}) imports {target} ({other})")
    assert crossings == []


def test_the_harness_knows_no_feature_by_import() -> None:
    features = ("tether.guardrails", "tether.memory", "tether.knowledge", "tether.skills", "tether.connectors")
    leaks = [
        f"{m} imports {t}"
        for m, targets in GRAPH.items()
        if m.startswith("tether.harness")
        for t in targets
        if t.startswith(features)
    ]
    assert leaks == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from tether.harness import loop\n", ["tether.harness.loop"]),
        ("def f():\n    from tether.cli.run import drive\n", ["tether.cli.run"]),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from tether.cli import run\n", []),
        ("import tether.config\n", ["tether.config"]),
    ],
)
def test_the_parser_sees_every_import_that_runs(source: str, expected: list[str], tmp_path: Path) -> None:
    path = tmp_path / "probe.py"
    path.write_text(source)
    assert sorted(set(_imported("tether.probe", path))) == expected


def test_the_command_line_parser_loads_no_settings_schema_and_no_assembly() -> None:
    """`tether --help` stays fast: pydantic, the config schema and the assembly load when a command
    runs, not when the parser is built (STYLE.md, habit 9)."""
    import subprocess
    import sys

    probe = (
        "import sys; from tether.cli import build_parser; build_parser(); "
        "print(sorted(m for m in ('pydantic', 'tether.config', 'tether.assembly') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"

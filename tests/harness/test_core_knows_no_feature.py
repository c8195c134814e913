"""The harness (``src/tether/harness``) knows no feature by name (DESIGN.md, "Layers"): features
plug in as tools, extensions and middleware, and keep their state in ``RunState.ext``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import tether.harness

FEATURES = ("guardrails", "memory", "knowledge", "skills", "connectors")
CORE = Path(tether.harness.__file__).parent
# A feature's name anywhere in the text (code, identifiers, strings, comments, docstrings):
# guardrail_held, Guardrails, memory, knowledge, skill, connectors... but not ``memoryview``.
NAMED = re.compile(r"(?<![a-z])(guardrail|memory(?!view)|knowledge|skill|connector)", re.IGNORECASE)


def core_files() -> list[Path]:
    files = sorted(CORE.glob("*.py"))
    assert len(files) > 10  # the scan sees the core, not an empty folder
    return files


def test_the_core_imports_no_feature_package() -> None:
    found = []
    for path in core_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            found += [f"{path.name}: {n}" for n in names if n.split(".")[:2] in [["tether", f] for f in FEATURES]]
    assert found == []


def test_the_core_names_no_feature_in_any_string_or_comment() -> None:
    found = [
        f"{path.name}:{n}: {line.strip()}"
        for path in core_files()
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if NAMED.search(line)
    ]
    assert found == []


def test_the_scan_would_see_a_feature_named() -> None:
    """The pattern finds what the tests above must not find (a scan that finds nothing proves nothing)."""
    for text in (
        "from tether.guardrails import x",
        "# the memory extension",
        '"skills"',
        "Connectors",
        "guardrail_held",
    ):
        assert NAMED.search(text)
    assert not NAMED.search("view = memoryview(data)")

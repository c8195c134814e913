"""Write docs/api.md, the API reference, from the public names' docstrings and signatures.

    python tools/api_reference.py          # writes docs/api.md
    python tools/api_reference.py --check  # exit 1 when docs/api.md is not what it would write

Only the standard library (``inspect``): each package's ``__all__``, in its order; for a class,
its signature and the public methods it defines; for a function, its signature; each with its
docstring as written. ``tests/test_api_reference.py`` fails when the committed page is stale.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
import typing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "api.md"
PACKAGES = (
    "tether",
    "tether.messages",
    "tether.events",
    "tether.errors",
    "tether.tools",
    "tether.tools.files",
    "tether.harness.loop_guard",
    "tether.harness.retry",
    "tether.tracing",
    "tether.sessions",
    "tether.memory",
    "tether.knowledge",
    "tether.guardrails",
    "tether.skills",
    "tether.connectors",
    "tether.telemetry",
    "tether.server",
    "tether.testing",
)
HEAD = """\
# API reference

Generated from the docstrings by `python tools/api_reference.py` (a test fails when this page is
not what the code says). Each section is one package's public names (its `__all__`), in its
order; the guides in this folder show them at work.

"""


def _signature(obj: Any) -> str:
    try:
        text = str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "(...)"
    return re.sub(r" at 0x[0-9a-f]+", "", text)  # a default's address changes every run


def _annotation(field: Any, written: str | None = None) -> str:
    hint = field.annotation
    hint = getattr(hint, "__forward_arg__", hint)  # a field naming a type defined after its model
    if written is not None and "FieldInfo(" in str(hint):  # the same field, once the model was built
        hint = written
    text = hint if isinstance(hint, str) else getattr(hint, "__name__", None) or str(hint)
    return re.sub(r"\b(?:tether|typing|pydantic)\.[\w.]*\.(\w+)", r"\1", str(text)).replace("typing.", "")


def _doc(obj: Any) -> str:
    if inspect.isclass(obj):  # its own docstring: a class without one does not read as its base's
        own = vars(obj).get("__doc__")
        return inspect.cleandoc(own).strip() if isinstance(own, str) else ""
    doc = inspect.getdoc(obj) or ""
    return doc.strip()


def _own_methods(cls: type) -> list[tuple[str, Any]]:
    out = []
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        func = value.__func__ if isinstance(value, classmethod | staticmethod) else value
        if inspect.isfunction(func) and func.__doc__ and func.__module__.startswith("tether"):
            out.append((name, func))
    return out


def _is_tool(obj: Any) -> bool:
    return hasattr(obj, "input_schema") and hasattr(obj, "execute") and not inspect.isclass(obj)


def _tool_entry(module: str, name: str, tool: Any) -> list[str]:
    """A ready-made tool: what the model is offered (its arguments, how it may run, its description)."""
    args = ", ".join(f"`{a}`" for a in tool.input_schema.get("properties", {})) or "none"
    how = "read-only" if tool.read_only else "needs approval" if tool.needs_approval else "writes"
    first = tool.description.split("\n\n")[0]
    return [f"### `{name}`", "", f"A tool in `{module}` ({how}; arguments: {args}).", "", first, ""]


def _entry(module: str, name: str, obj: Any) -> list[str]:
    if _is_tool(obj):
        return _tool_entry(module, name, obj)
    if isinstance(obj, tuple) and obj and all(_is_tool(t) for t in obj):  # FILE_TOOLS: which tools it holds
        names = ", ".join(f"`{t.name}`" for t in obj)
        return [f"### `{name}`", "", f"A tuple of tools in `{module}`: {names}.", ""]
    if hasattr(obj, "__metadata__"):  # a type alias (Annotated): what it stands for, not typing's docstring
        origin = re.sub(r"\b(?:tether|typing)\.[\w.]*\.(\w+)", r"\1", str(obj.__origin__))
        return [f"### `{name}`", "", f"A type in `{module}`: `{origin}`.", ""]
    if typing.get_origin(obj) is typing.Literal:  # RunStatus: its values, not Literal's call signature
        values = ", ".join(f"`{v!r}`" for v in typing.get_args(obj))
        return [f"### `{name}`", "", f"A type in `{module}`: one of {values}.", ""]
    if inspect.isclass(obj):
        # A pydantic model's signature depends on what was imported before: its fields say it instead.
        plain = issubclass(obj, BaseException) or hasattr(obj, "model_fields")
        lines = [f"### `{name}{'' if plain else _signature(obj)}`", ""]
        lines += [f"*class* in `{obj.__module__}`", ""]
        if _doc(obj):
            lines += [_doc(obj), ""]
        fields = getattr(obj, "model_fields", None)  # a pydantic model: its fields are its signature
        if isinstance(fields, dict) and fields:
            written = {n: a for k in reversed(obj.__mro__) for n, a in vars(k).get("__annotations__", {}).items()}
            lines += [
                "Fields: " + ", ".join(f"`{n}: {_annotation(f, written.get(n))}`" for n, f in fields.items()),
                "",
            ]
        for method, func in _own_methods(obj):
            lines += [f"- **`{method}{_signature(func)}`**: {' '.join(_doc(func).split())}"]
        return lines + ([""] if _own_methods(obj) else [])
    if callable(obj):
        return [f"### `{name}{_signature(obj)}`", "", *([_doc(obj), ""] if _doc(obj) else [])]
    return [f"### `{name}`", "", f"`{type(obj).__name__}` in `{module}`", ""]


def render() -> str:
    lines = [HEAD.rstrip("\n"), ""]
    for module in PACKAGES:
        mod = importlib.import_module(module)
        lines += [f"## `{module}`", ""]
        summary = (_doc(mod).split("\n\n") or [""])[0]
        if summary:
            lines += [summary, ""]
        for name in getattr(mod, "__all__", ()):
            lines += _entry(module, name, getattr(mod, name))
    text = "\n".join(lines).rstrip() + "\n"
    # Every fenced block of a docstring is shown, not run (tests/test_docs.py runs python blocks).
    return re.sub(r"^```(python|bash|toml|json)?$", "```text", text, flags=re.M)


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if PAGE.read_text(encoding="utf-8") != text:
            print(f"{PAGE} is stale: run python tools/api_reference.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""What tether accepts of an MCP server's tool definitions, and how it checks arguments against them.

A server's tool is outside tether's control, so its definition is bounded before the model sees it
(:func:`admit`): a description past ``max_description_chars`` is trimmed and says so; a schema past
``max_schema_chars`` is refused; so is a schema with a ``$ref`` that is not local (``#/...``): a
remote or ``file:`` reference would make tether fetch a URL or read a file while it checks the
model's arguments. Tools past the server's ``max_tools_chars`` in all are refused, and so are those
that require MCP Tasks. Each refusal is a reason ``tether mcp list`` shows.

:func:`validate` checks arguments with references resolved only inside the schema (a registry that
retrieves nothing), without the schema's regular expressions (a hostile ``pattern`` could hold the
event loop in backtracking; the server checks its own patterns), and turns a schema that cannot be
used into a tool error the model reads, never a failed run.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["Admission", "Limits", "admit", "foreign_refs", "schema_words", "validate"]

DEFAULT_DESCRIPTION_CHARS = 4_000
DEFAULT_SCHEMA_CHARS = 20_000
DEFAULT_TOOLS_CHARS = 200_000
_REF_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")
_UNCHECKED = ("pattern", "patternProperties")  # regular expressions from outside: the server's to check
_NAMED = ("properties", "$defs", "definitions", "dependentSchemas")  # maps of a name to a schema
_VALUES = ("const", "enum", "default", "examples")  # data, not schemas


@dataclass(frozen=True)
class Limits:
    description_chars: int = DEFAULT_DESCRIPTION_CHARS
    schema_chars: int = DEFAULT_SCHEMA_CHARS
    tools_chars: int = DEFAULT_TOOLS_CHARS


@dataclass(frozen=True)
class Admission:
    """A tool's description as the model will read it, and why it is refused (None: admitted)."""

    description: str
    size: int  # characters of description and schema, counted against the server's total
    refused: str | None = None
    trimmed: str | None = None  # what was cut, in words


def admit(description: str, schema: dict[str, Any], limits: Limits, task_support: str | None) -> Admission:
    """The one tool's verdict (the server's total is counted by the caller)."""
    schema_text = json.dumps(schema, ensure_ascii=False)
    trimmed = None
    if len(description) > limits.description_chars:
        trimmed = f"description trimmed from {len(description):,} to {limits.description_chars:,} characters"
        description = description[: limits.description_chars] + " [description trimmed]"
    size = len(description) + len(schema_text)
    if task_support == "required":
        refused = "it requires MCP Tasks (taskSupport: required), which tether does not support yet"
        return Admission(description, size, refused)
    if len(schema_text) > limits.schema_chars:
        refused = (
            f"its input schema has {len(schema_text):,} characters, more than max_schema_chars "
            f"({limits.schema_chars:,})"
        )
        return Admission(description, size, refused)
    foreign = next(foreign_refs(schema), None)
    if foreign is not None:
        refused = (
            f"its input schema refers to {foreign[:100]!r}: only references inside the schema (#/...) are "
            "followed, never a URL or a file"
        )
        return Admission(description, size, refused)
    return Admission(description, size, None, trimmed)


def schema_words(node: Any, depth: int = 0) -> Iterator[str]:
    """What a schema says to the model in words, besides the tool's description: the names of its
    properties and every string among their descriptions, titles, comments and values (``enum``,
    ``default``...), at any depth. The memory scan reads them with the description (issue 26): a
    parameter's description is where tool poisoning usually hides."""
    if depth > 200:
        return
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("description", "title", "$comment", *_VALUES):
                yield from _strings(value, depth + 1)
            elif key in _NAMED and isinstance(value, dict):
                yield from (str(name) for name in value)
                yield from (word for child in value.values() for word in schema_words(child, depth + 1))
            else:
                yield from schema_words(value, depth + 1)
    elif isinstance(node, list):
        for item in node:
            yield from schema_words(item, depth + 1)


def _strings(value: Any, depth: int) -> Iterator[str]:
    if depth > 200:
        return
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, inner in value.items():
            yield str(key)
            yield from _strings(inner, depth + 1)
    elif isinstance(value, list):
        for inner in value:
            yield from _strings(inner, depth + 1)


def foreign_refs(node: Any, depth: int = 0) -> Iterator[str]:
    """Every reference in ``node`` that does not point inside the schema itself."""
    if depth > 200:
        yield "(a schema nested more than 200 levels deep)"
        return
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _REF_KEYS and (not isinstance(value, str) or not value.startswith("#")):
                yield str(value)
            else:
                yield from foreign_refs(value, depth + 1)
    elif isinstance(node, list):
        for item in node:
            yield from foreign_refs(item, depth + 1)


def validate(tool_name: str, schema: dict[str, Any], value: dict[str, Any]) -> list[str]:
    """What is wrong with ``value`` (at most five problems, in words); [] when nothing is."""
    from referencing.exceptions import Unresolvable

    try:
        validator = _validator(json.dumps(schema, sort_keys=True))
        errors = sorted(validator.iter_errors(value), key=lambda e: list(e.path))
    except (Unresolvable, RecursionError, ValueError, TypeError, LookupError) as exc:
        return [
            f"the input schema of {tool_name} cannot be used to check arguments ({type(exc).__name__}: "
            f"{str(exc)[:200]}); this is the server's fault, so try another tool or tell the user"
        ]
    return [f"{'/'.join(str(p) for p in e.path) or '(top level)'}: {e.message}" for e in errors[:5]]


@functools.lru_cache(maxsize=256)
def _validator(schema_json: str) -> Any:
    import jsonschema  # type: ignore[import-untyped]
    from referencing import Registry

    def refuse(uri: str) -> Any:
        from referencing.exceptions import NoSuchResource

        raise NoSuchResource(ref=uri)  # type: ignore[call-arg]  # nothing outside the schema is ever fetched or read

    schema = _without_patterns(json.loads(schema_json))
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, registry=Registry(retrieve=refuse))  # type: ignore[call-arg]


def _without_patterns(node: Any) -> Any:
    """The schema without its regular expressions (keywords only: a property named ``pattern`` stays)."""
    if isinstance(node, list):
        return [_without_patterns(v) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _UNCHECKED:
            continue
        if key in _VALUES:
            out[key] = value
        elif key in _NAMED and isinstance(value, dict):
            out[key] = {name: _without_patterns(v) for name, v in value.items()}
        else:
            out[key] = _without_patterns(value)
    return out

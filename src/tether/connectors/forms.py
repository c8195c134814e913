"""An MCP server's form (the flat JSON Schema object of an elicitation) as the page's form, and the
values a person typed into it as the schema's types. Used by ``tether serve`` to show a question a
run stopped for and to check the answer before the run goes on; at a terminal, :func:`read_answer`
reads the person's answer to a question until it is no longer wanted."""

from __future__ import annotations

import contextlib
import select
import threading
from collections.abc import Mapping
from typing import IO, Any

__all__ = ["drop_typed_ahead", "form_values", "read_answer", "schema_form"]


def schema_form(schema: Mapping[str, Any], *, title: str = "", submit: str = "Send") -> dict[str, Any]:
    """The page's form for a flat JSON Schema object (an MCP server's elicitation): a choice for an
    ``enum`` (or ``oneOf`` of ``const``), a number, a checkbox, else text; a list is typed with
    commas between its items. Each field says whether it is ``required``; ``value`` is the
    schema's ``default``."""
    required = set(schema.get("required") or [])
    fields = []
    for name, prop in (schema.get("properties") or {}).items():
        prop = prop if isinstance(prop, Mapping) else {}
        label = str(prop.get("title") or name)
        if prop.get("description"):
            label += f" ({prop['description']})"
        kind = prop.get("type")
        many = kind == "array" and isinstance(prop.get("items"), Mapping)
        choices = _choices(prop["items"] if many else prop)
        field: dict[str, Any]
        if choices:
            field = {"type": "select", "options": list(choices), "multiple": many or None}
            if any(label != value for value, label in choices.items()):
                field["option_labels"] = choices
        elif kind in ("number", "integer"):
            field = {"type": "number", "step": 1 if kind == "integer" else None}
            field |= {k: prop[src] for k, src in (("min", "minimum"), ("max", "maximum")) if src in prop}
        elif kind == "boolean":
            field = {"type": "checkbox"}
        else:
            field = {"type": "text", "input": _INPUTS.get(str(prop.get("format")))}
        field |= {"name": str(name), "label": label, "required": name in required}
        if "default" in prop:
            default = prop["default"]
            field["value"] = ", ".join(map(str, default)) if isinstance(default, list) and not choices else default
        fields.append({k: v for k, v in field.items() if v is not None})
    return {"kind": "form", "title": title, "submit": submit, "fields": fields}


_INPUTS = {"email": "email", "uri": "url", "date": "date", "date-time": "datetime-local"}  # the browser's checks


def _choices(prop: Mapping[str, Any]) -> dict[str, str]:
    """The values offered (each with its title): an ``enum``, or ``oneOf``/``anyOf`` of ``const``."""
    if prop.get("enum"):
        names = prop.get("enumNames") or []
        return {str(v): str(names[i]) if i < len(names) else str(v) for i, v in enumerate(prop["enum"])}
    consts = [o for o in prop.get("oneOf") or prop.get("anyOf") or [] if isinstance(o, Mapping) and "const" in o]
    return {str(o["const"]): str(o.get("title") or o["const"]) for o in consts}


def form_values(schema: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    """What a person typed into :func:`schema_form`'s form, as the schema's types: numbers from
    their text, a list from its comma-separated items; an empty optional field is left out."""
    props = schema.get("properties") or {}
    out: dict[str, Any] = {}
    for name, value in values.items():
        kind = (props.get(name) or {}).get("type")
        if value is None or value == "":
            continue
        if isinstance(value, str) and kind in ("number", "integer"):
            with contextlib.suppress(ValueError):  # if not a number, the schema's check says so
                value = int(value) if kind == "integer" else float(value)
        elif isinstance(value, str) and kind == "array":
            value = [item.strip() for item in value.split(",") if item.strip()]
        out[name] = value
    return out


def drop_typed_ahead(stream: IO[str] | None) -> None:
    """Throw away what was typed at the terminal ``stream`` before a question is on screen (the next
    chat message typed while the reply streamed, a key pressed early): only a line typed after the
    person has read the question answers it, as sudo's password prompt does. Not a terminal: nothing."""
    try:
        if stream is None or not stream.isatty():
            return
        import termios

        termios.tcflush(stream.fileno(), termios.TCIFLUSH)
    except (ImportError, OSError, ValueError, AttributeError):  # no termios (Windows), or no real terminal
        pass


def read_answer(stream: IO[str], stopped: threading.Event) -> str | None:
    """A line the person types at ``stream`` (a terminal), without its end; None at end of input,
    or once ``stopped`` is set (the question was withdrawn: a Stop). Nothing is read until a whole
    line is there, so a line typed after the question was withdrawn is left to whoever asks next
    (the chat's prompt), never taken as the answer to a question no longer on screen."""
    try:
        fd: int | None = stream.fileno()
    except (AttributeError, OSError, ValueError):  # no descriptor to wait on: read as is
        fd = None
    while fd is not None and not stopped.is_set():
        try:
            ready, _, _ = select.select([fd], [], [], 0.1)  # the tick at which a Stop is heard
        except (OSError, ValueError):
            break
        if ready:
            break
    if stopped.is_set():
        return None
    line = stream.readline()
    return line.rstrip("\n") if line else None

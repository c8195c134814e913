"""Widgets: a tool's result can offer a person a form or call-to-action buttons instead of plain
text. The page renders them with no script per tool: a button's label, or the submitted form's
values (``Label: value; ...``), become the user's next message. The model reads the result's
text, which says what was shown.

A form's fields keep what the session already chose: the server fills each field's ``value``
from the values of earlier submissions, else the tool's ``default``.

``spec_form`` and :class:`Configurator` follow the reference's product configurator: a form built
from a manufacturer's specification list (a field with a unit is a number, one with options a
choice), and one button per series whose label asks to configure it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tether.tools.base import FunctionTool, ToolResult

__all__ = ["Configurator", "buttons", "checkbox", "form", "number", "select", "spec_form", "text"]

_TYPES = ("select", "number", "text", "checkbox")


def select(name: str, label: str, options: Sequence[str], default: str | None = None) -> dict[str, Any]:
    if not options:
        raise ValueError(f"select field {name!r} needs options")
    opts = [str(o) for o in options]
    return {
        "name": name,
        "label": label,
        "type": "select",
        "options": opts,
        "default": default if default in opts else opts[0],
    }


def number(
    name: str,
    label: str,
    *,
    default: float | None = None,
    min: float | None = None,
    max: float | None = None,
    unit: str | None = None,
) -> dict[str, Any]:
    field: dict[str, Any] = {"name": name, "label": label, "type": "number", "default": default}
    field |= {k: v for k, v in (("min", min), ("max", max), ("unit", unit)) if v is not None}
    return field


def text(name: str, label: str, default: str = "") -> dict[str, Any]:
    return {"name": name, "label": label, "type": "text", "default": default}


def checkbox(name: str, label: str, default: bool = False) -> dict[str, Any]:
    return {"name": name, "label": label, "type": "checkbox", "default": default}


def form(
    fields: Sequence[Mapping[str, Any]], *, title: str = "", submit: str = "Continue", note: str | None = None
) -> ToolResult:
    """A form as a tool's result; ``note`` is what the model reads (by default, the fields)."""
    checked = []
    seen: set[str] = set()
    for f in fields:
        name, kind = f.get("name"), f.get("type")
        if not isinstance(name, str) or not name or name in seen:
            raise ValueError(f"every form field needs a unique name (got {name!r})")
        if kind not in _TYPES:
            raise ValueError(f"field {name!r} has type {kind!r}; one of {', '.join(_TYPES)}")
        seen.add(name)
        checked.append(dict(f))
    widget = {"kind": "form", "title": title, "submit": submit, "fields": checked}
    said = note or (
        f"Showed the user a form{f' ({title})' if title else ''} with fields "
        f"{', '.join(str(f.get('label') or f['name']) for f in checked)}. Their answers arrive as their "
        "next message (Label: value; ...)."
    )
    return ToolResult(said, widget=widget)


def buttons(labels: Sequence[str], *, title: str = "", note: str | None = None) -> ToolResult:
    """Call-to-action buttons; the label of the one clicked becomes the user's next message."""
    labels = [str(label) for label in labels if str(label).strip()]
    if not labels:
        raise ValueError("buttons need at least one label")
    widget = {"kind": "buttons", "title": title, "buttons": [{"label": label} for label in labels]}
    said = note or f"Showed the user buttons: {'; '.join(labels)}. A click arrives as their next message."
    return ToolResult(said, widget=widget)


def spec_form(spec_list: Sequence[Mapping[str, Any]], *, title: str = "", submit: str = "Continue") -> ToolResult:
    """A form from a specification list: ``{"code", "name", "options"}`` gives a choice,
    ``{"code", "name", "unit", "min", "max", "default"}`` a number."""
    fields = []
    for spec in spec_list:
        code, label = str(spec["code"]), str(spec.get("name") or spec["code"])
        if spec.get("unit"):
            fields.append(
                number(
                    code,
                    f"{label} ({spec['unit']})",
                    default=spec.get("default"),
                    min=spec.get("min"),
                    max=spec.get("max"),
                    unit=str(spec["unit"]),
                )
            )
        else:
            fields.append(select(code, label, spec.get("options") or [], spec.get("default")))
    return form(fields, title=title, submit=submit)


class Configurator:
    """A ``configure`` tool over a catalogue of series, each with its specification list.

    Called without a series it offers one button per series ("I want to configure the LB
    series."); with one, the form of its specifications, which keeps the session's choices."""

    def __init__(self, catalogue: Mapping[str, Sequence[Mapping[str, Any]]], *, name: str = "configure") -> None:
        self.catalogue = {str(k): list(v) for k, v in catalogue.items()}
        self.name = name

    def __call__(self, series: str = "") -> ToolResult:
        series = series.strip().upper()
        if not series:
            return buttons(
                [f"I want to configure the {code} series." for code in self.catalogue], title="Which series?"
            )
        specs = self.catalogue.get(series)
        if specs is None:
            return ToolResult(
                f"There is no series {series!r}; the series are {', '.join(self.catalogue)}.", is_error=True
            )
        return spec_form(specs, title=f"Configure the {series} series", submit="Use these options")

    def tool(self) -> FunctionTool:
        def configure(series: str = "") -> ToolResult:
            return self(series)

        # Not read-only: a read-only call repeated with the same arguments answers from the first
        # result, and the user who asks for the form again should see it again.
        return FunctionTool(
            configure,
            name=self.name,
            idempotent=True,
            inline=True,
            description=(
                "Show the user the product configurator. Without a series: buttons to pick one. With a series "
                f"({', '.join(self.catalogue)}): a form of its specifications, prefilled with what the user chose "
                "before. The user's choices arrive as their next message."
            ),
        )

"""Structured output: the final answer validated into ``Agent.output_type``.

``output_type`` is a pydantic model class (or any type pydantic validates: a dataclass, a
``TypedDict``) or a JSON Schema dict; either way the schema sent has an object at its root. A type
whose schema is not an object (``int``, ``list[str]``, a union of models) is asked for as
``{"response": ...}`` and unwrapped, as the OpenAI Agents SDK and Pydantic AI ask for it. Every model call
carries the schema (:class:`~tether.providers.base.OutputSchema`) and each wire asks for it in its
own way (Chat Completions: the native ``response_format``; Messages: a ``final_answer`` tool whose
call the wire turns back into the reply's text), so the loop sees one thing on every wire: a final
answer whose text should be a JSON object that matches.

When it does not, the run writes what was wrong into the transcript as a user message (law 4) and
asks again, up to ``Agent.output_retries`` times; then it ends ``failed``, saying what failed. Each
retry is an ordinary model call (turns, cost, budget). The corrections are counted from the
transcript (law 2), so a resumed run knows how many it has sent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tether.errors import ConfigError
from tether.harness.agent import Agent, Stop
from tether.harness.context import RunContext
from tether.harness.state import CORRECTION  # the first words of a correction: how the transcript tells them
from tether.messages import AssistantMessage, Message, UserMessage
from tether.providers.base import ANSWER_TOOL, STOPPED_BY_PROVIDER, OutputSchema

__all__ = [
    "CORRECTION",
    "InvalidOutput",
    "OutputSpec",
    "check_answer",
    "check_output_config",
    "corrections",
    "final_data",
    "output_spec",
    "request_schema",
    "spec_for",
]

_MAX_PROBLEMS = 10
_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(.*)\n\s*```$", re.S)


class InvalidOutput(Exception):
    """An answer that does not match: ``problems`` say what is wrong, one line each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class OutputSpec:
    """An output type made ready: the schema the request carries and how to validate into it."""

    output_type: Any
    request: OutputSchema
    adapter: Any = None  # a pydantic TypeAdapter, for a type
    validator: Any = None  # a jsonschema validator, for a JSON Schema dict
    wrapped: bool = False  # asked for as {"response": value}: the value is the answer

    def parse(self, text: str) -> Any:
        """The answer validated into the output type; :class:`InvalidOutput` when it does not fit."""
        value = _json(text)
        if self.validator is not None:
            errors = sorted(self.validator.iter_errors(value), key=lambda e: [str(p) for p in e.absolute_path])
            if errors:
                raise InvalidOutput([_schema_problem(e) for e in errors[:_MAX_PROBLEMS]])
            return value
        from pydantic import ValidationError

        if self.wrapped and not isinstance(value, dict):
            raise InvalidOutput(['the answer must be a JSON object whose one key, "response", holds the value'])
        try:
            answer = self.adapter.validate_python(value)
            return answer.response if self.wrapped else answer
        except ValidationError as exc:
            raise InvalidOutput([_pydantic_problem(e) for e in exc.errors(include_url=False)[:_MAX_PROBLEMS]]) from None


_SPECS: dict[int, OutputSpec] = {}  # by id(output_type); the spec holds the object, so the id stays its own


def output_spec(agent: Agent) -> OutputSpec | None:
    """The agent's output type made ready (once per output type), or None without one. A type or
    schema that cannot serve is a :class:`ConfigError`."""
    return None if agent.output_type is None else spec_for(agent.output_type)


def spec_for(output_type: Any) -> OutputSpec:
    """``output_type`` made ready (once per object); :class:`ConfigError` when it cannot serve."""
    spec = _SPECS.get(id(output_type))
    if spec is None or spec.output_type is not output_type:
        spec = _make_spec(output_type)
        if len(_SPECS) > 256:
            _SPECS.clear()
        _SPECS[id(output_type)] = spec
    return spec


def check_output_config(agent: Agent, tool_names: Iterable[str]) -> None:
    """Refuse, before the run starts, an output type that cannot serve (:class:`ConfigError`)."""
    if output_spec(agent) is None:
        return
    if agent.output_retries < 0:
        raise ConfigError(f"output_retries must be 0 or more, not {agent.output_retries}")
    if ANSWER_TOOL in tool_names:
        raise ConfigError(
            f"a tool is named {ANSWER_TOOL!r}: with an output_type that name is reserved for the "
            "final answer on wires without a native JSON-schema reply; rename the tool"
        )


def _make_spec(output_type: Any) -> OutputSpec:
    if isinstance(output_type, dict):
        from jsonschema import SchemaError, validators  # type: ignore[import-untyped]

        cls = validators.validator_for(output_type)
        try:
            cls.check_schema(output_type)
        except SchemaError as exc:
            raise ConfigError(f"the output schema is not a valid JSON Schema: {exc.message}") from None
        schema, adapter, validator, wrapped = _object_root(output_type), None, cls(output_type), False
        name, description = schema.get("title") or "output", schema.get("description") or ""
    else:
        from pydantic import PydanticUserError, TypeAdapter

        try:
            adapter = TypeAdapter(output_type)
            schema = _object_root(adapter.json_schema())
        except (PydanticUserError, TypeError) as exc:  # PydanticSchemaGenerationError is one
            raise ConfigError(
                f"output_type {output_type!r} is neither a JSON Schema dict nor a type pydantic can validate: {exc}"
            ) from None
        validator, wrapped = None, schema.get("type") != "object"
        name = getattr(output_type, "__name__", None) or schema.get("title") or "output"
        description = schema.get("description") or ""
        if wrapped:  # both wires need an object at the root
            adapter = _wrapper(output_type)
            schema = adapter.json_schema()
    if schema.get("type") != "object":  # a JSON Schema dict's (a type's is wrapped above)
        raise ConfigError(
            'the output schema must describe a JSON object ("type": "object"); to get a list '
            "or a single value, make it a property of an object (or give output_type as a type, "
            'such as list[str], which is asked for as {"response": ...})'
        )
    safe = re.sub(r"[^a-zA-Z0-9_-]", "_", str(name))[:64] or "output"
    return OutputSpec(output_type, OutputSchema(safe, schema, str(description)), adapter, validator, wrapped)


def _wrapper(output_type: Any) -> Any:
    """A TypeAdapter of ``{"response": output_type}``, no other key allowed."""
    from pydantic import ConfigDict, TypeAdapter, create_model

    model = create_model("Answer", __config__=ConfigDict(extra="forbid"), response=(output_type, ...))
    return TypeAdapter(model)


# What may stand beside a root ``$ref`` that is replaced by what it points to: words, not rules.
_ROOT_NOTES = frozenset({"$ref", "$defs", "definitions", "$schema", "$id", "$comment", "title", "description"})


def _object_root(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` whose root is a local reference (pydantic's for a model that refers to itself:
    ``{"$defs": {"Node": {...}}, "$ref": "#/$defs/Node"}``) with the definition it points to at
    the root, the definitions kept for the references inside it: the same schema, with the
    object at its root that both wires need (strict mode and a tool's input schema take no root
    reference). Any other schema is returned as it is."""
    out, seen = schema, set()
    while isinstance(out.get("$ref"), str) and out["$ref"] not in seen and not set(out) - _ROOT_NOTES:
        seen.add(out["$ref"])
        kind, _, key = out["$ref"].removeprefix("#/").partition("/")
        defs = schema.get(kind) if kind in ("$defs", "definitions") else None
        target = defs.get(key.replace("~1", "/").replace("~0", "~")) if isinstance(defs, dict) else None
        if not isinstance(target, dict):
            break
        out = {**target, **{k: v for k, v in out.items() if k != "$ref"}}
    return out


def request_schema(agent: Agent) -> OutputSchema | None:
    """What a model request carries for the agent's output type (None without one)."""
    spec = output_spec(agent)
    return spec.request if spec is not None else None


def check_answer(rc: RunContext, last: AssistantMessage) -> Stop | None:
    """Validate the final answer ``last``. A match completes the run; a mismatch writes a
    correction into the transcript and returns None (ask again), or, with the retries spent, fails."""
    agent, messages = rc.agent, rc.state.messages
    spec = output_spec(agent)
    assert spec is not None
    stopped = STOPPED_BY_PROVIDER.get(last.finish_reason or "")
    if stopped:  # asked again, it is stopped again (and paid for again)
        words = last.text.strip() or "(no words)"
        return Stop("failed", f"{stopped}, which was to match the output schema {spec.request.name}: {words}")
    try:
        spec.parse(last.text)
    except InvalidOutput as exc:
        problems = exc.problems + (
            ["the reply was cut at the output token limit (max_tokens): make the answer shorter"]
            if last.finish_reason == "length"
            else []
        )
        sent = corrections(messages)
        if sent >= agent.output_retries:
            tried = f" after {sent} correction{'s' if sent != 1 else ''}" if sent else ""
            return Stop(
                "failed",
                f"the final answer did not match the output schema {spec.request.name}{tried}: " + "; ".join(problems),
            )
        messages.append(UserMessage.text(correction_text(spec.request.name, problems)))
        rc.persist(durable=False)  # made durable with the next request, like a tool's result
        return None
    return Stop("completed", f"the model answered; the answer matches the output schema {spec.request.name}")


def correction_text(name: str, problems: list[str]) -> str:
    """What the model reads about an answer that did not match: what was wrong, and what to do."""
    lines = "\n".join(f"- {p}" for p in problems)
    return (
        f"{CORRECTION} ({name}):\n{lines}\n"
        "Give the corrected answer now: one JSON object that matches the schema, with nothing else."
    )


def corrections(messages: Sequence[Message]) -> int:
    """Corrections sent since the person's latest message (a compaction summary is not one)."""
    sent = 0
    for m in reversed(messages):
        if isinstance(m, UserMessage) and m.summary_turns is None:
            if not m.content or not getattr(m.content[0], "text", "").startswith(CORRECTION):
                break
            sent += 1
    return sent


def final_data(agent: Agent, messages: Sequence[Message]) -> Any:
    """The last final answer validated into the output type, or None when there is none that fits."""
    spec = output_spec(agent)
    last = messages[-1] if messages else None
    if spec is None or not isinstance(last, AssistantMessage) or last.tool_calls:
        return None
    try:
        return spec.parse(last.text)
    except InvalidOutput:
        return None


def _json(text: str) -> Any:
    body = text.strip()
    fenced = _FENCE.match(body)  # a model asked for JSON in words may still wrap it in a code fence
    if fenced:
        body = fenced.group(1).strip()
    if not body:
        raise InvalidOutput(["the answer is empty: it must be a JSON object"])
    try:
        return json.loads(body)
    except RecursionError:  # hostile output: an answer nested thousands of levels deep
        raise InvalidOutput(["the answer is nested too deeply to read: send one flat JSON object"]) from None
    except ValueError as exc:
        around = _text_around_object(body)
        if around is not None:
            raise InvalidOutput([f"the answer has {around}: send the JSON object alone"]) from None
        where = f" at line {exc.lineno} column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
        detail = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise InvalidOutput([f"the answer is not valid JSON: {detail}{where}"]) from None


def _text_around_object(body: str) -> str | None:
    """What stands around a whole JSON object inside ``body`` ("Here is the answer:", a code fence
    with a sentence after it), in words; None when no object starting at its first brace parses.
    JSON's own complaint about such an answer ("Expecting value at line 1 column 1") does not say
    that the object itself was fine."""
    start = body.find("{")
    try:
        value, end = json.JSONDecoder().raw_decode(body, start) if start >= 0 else (None, 0)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    sides = [
        f"{side} it ({_short(repr(text), 40)})"
        for side, text in (("before", body[:start]), ("after", body[end:].strip()))
        if text
    ]
    return "text around its JSON object: " + " and ".join(sides)


def _where(path: Any) -> str:
    parts = [str(p) for p in path]
    return ".".join(parts) if parts else "(the answer)"


def _pydantic_problem(error: Any) -> str:
    where = _where(error.get("loc") or ())
    if error.get("type") == "missing":
        return _short(f"{where}: {error.get('msg', 'Field required')}", 4 * _QUOTE)
    return _short(f"{where}: {error.get('msg', 'invalid')} (got {_short(repr(error.get('input')))})", 4 * _QUOTE)


def _schema_problem(error: Any) -> str:
    """jsonschema's message, with the value it quotes cut as pydantic's are: a huge wrong value
    must not make the correction (and the next prompt, and the run's reason) as huge."""
    quoted = repr(error.instance)
    message = error.message.replace(quoted, _short(quoted)) if len(quoted) > _QUOTE else error.message
    return _short(f"{_where(error.absolute_path)}: {message}", 4 * _QUOTE)


_QUOTE = 80  # characters of a wrong value quoted back to the model


def _short(text: str, limit: int = _QUOTE) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."

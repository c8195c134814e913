"""How runs and transcripts read on a terminal: the summary line, costs, tokens, and transcripts
with their decisions in words (``tether show``, ``tether sessions show``)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether.config import Settings
    from tether.messages import Message
    from tether.status import Interruption, RunResult
    from tether.usage import Usage

__all__ = ["args_json", "cost_text", "price_known", "resume_hint", "summary_lines", "tokens_text", "transcript_lines"]

# A shortened body keeps this many lines (tool results) or these many characters (anything).
_TOOL_LINES = 12
_TEXT_LINES = 40
_CHARS = 2000


def price_known(model: str | None, settings: Settings) -> bool:
    from tether.usage import lookup_price

    return model is not None and lookup_price(model, settings.prices) is not None


def cost_text(
    cost: float | None,
    model: str | None,
    settings: Settings,
    *,
    unpriced: Sequence[str] = (),
    short: bool = False,
    spent: bool = True,
) -> str:
    """``$0.001234``; or, when a model that answered has no price, says so and where to add one:
    a cost of 0.0 for a model without a price is not free, nothing could be counted.

    ``unpriced`` names the models the run found without a price; without it (older runs) the
    run's model is looked up here. ``spent=False`` (see :func:`spent_any`): nothing was paid."""
    if not spent:
        return f"${0:.6f}"
    missing = list(unpriced)
    if not missing and not cost and model is not None and not price_known(model, settings):
        missing = [model]  # a run from before unpriced_models was recorded
    if cost is not None and not missing:
        return f"${cost:.6f}"
    if short:
        return "unknown"
    counted = f"at least ${cost:.6f}; " if cost else ""
    name = missing[0] if missing else "this model"
    return (
        f'{counted}cost unknown (no price for {", ".join(missing) or name}; add one under [models."{name}"] '
        "in config.toml)"
    )


def spent_any(usage: Usage, cost_unknown_usd: float, cost: float | None) -> bool:
    """Whether a run may have paid anything: no token read or written and no request lost means
    nothing was, priced or not (a model name the server refused, say); only a model that answered
    without a price has an unknown cost."""
    return bool(usage.total_tokens or cost_unknown_usd or cost)


def tokens_text(usage: Usage) -> str:
    if usage.estimated:
        return f"~{usage.total_tokens:,} (estimated)"
    return f"{usage.total_tokens:,}"


def summary_lines(result: RunResult, model: str | None, settings: Settings) -> list[str]:
    """What a person reads when a run stops: the exit, its reason, the numbers, and what to do next."""
    cost: float | None = result.cost_usd
    reason = f" {result.reason}" if result.reason else ""
    spent = spent_any(result.usage, result.cost_unknown_usd, cost)
    shown_cost = cost_text(cost, model, settings, unpriced=result.unpriced_models, spent=spent)
    lines = [
        f"[{result.status}]{reason} | turns {result.turns} | tokens {tokens_text(result.usage)} | "
        f"{shown_cost} | {result.run_id}"
    ]
    meant = _model_meant(model, settings) if result.status == "failed" and not spent else None
    if meant:
        lines.append(f"   did you mean {meant}? (`tether models` lists the models tether knows)")
    if result.cost_unknown_usd:
        lines.append(f"   plus up to ${result.cost_unknown_usd:.6f} for requests lost when a process died")
    if result.empty_answer:  # the reason above says so (tether.status.EMPTY_ANSWER)
        lines.append(f"   `tether show {result.run_id}` prints what the model returned")
    lines.extend(f"   {line}" for line in held_lines(result.interruption))
    hint = resume_hint(result.run_id, result.status, result.interruption, result.reason)
    if hint:
        lines.append(f"   {hint}")
    if getattr(result.interruption, "still_running", False):
        lines.append("   (its command is still running: add --wait to wait for it, or --kill to stop it)")
    return lines


def _model_meant(model: str | None, settings: Settings) -> str | None:
    """The catalogue's model a failed run's unknown ``model`` most likely misspells, if one is close."""
    import difflib

    from tether.usage import CATALOG

    if model is None or price_known(model, settings):
        return None
    near = difflib.get_close_matches(model, [m for m in CATALOG if "/" in m], n=1, cutoff=0.85)
    return near[0] if near else None


def held_lines(interruption: Interruption | None) -> list[str]:
    """An answer held for a person's approval, for them to read before they decide (each line safe
    to print once through :func:`shown`); a cut one says how long it is. A sub-agent's question is
    its child's."""
    while getattr(interruption, "type", None) == "subagent":
        interruption = getattr(interruption, "child", None)
    held = getattr(interruption, "held", None)
    if held is None:
        return []
    first, *rest = held.splitlines() or [""]
    lines = [f"the answer held for you to approve: {first}", *(f"  {line}" for line in rest)]
    whole = getattr(interruption, "held_chars", 0)
    if whole > len(held):
        lines.append(f"(its first {len(held):,} of {whole:,} characters; approving delivers all of it)")
    return lines


def resume_hint(run_id: str, status: str, interruption: Interruption | None, reason: str | None = None) -> str | None:
    if status == "interrupted" and interruption is not None and interruption.type == "cancelled":
        return f"tether resume {run_id}   to continue where it stopped"
    if status == "interrupted":
        return f"tether resume {run_id} --approve   |   tether resume {run_id} --reject REASON"
    if status == "max_turns_exceeded":
        return f"tether resume {run_id} --max-turns N   to allow N more turns"
    from tether.status import TOKEN_LIMIT

    if status == "budget_exceeded" and (reason or "").startswith(TOKEN_LIMIT):
        return f"tether resume {run_id} --max-run-tokens N   with a larger total token limit (max_run_tokens)"
    if status == "budget_exceeded":
        return f"tether resume {run_id} --max-budget USD   with a larger total budget"
    return None


# --- transcripts ------------------------------------------------------------------------------

_DECISIONS = {
    "ok": "ok",
    "error": "error (the model was told what went wrong)",
    "cached": "answered from the read-only cache",
    "rejected": "declined by a person (the model was told)",
    "interrupted": "interrupted: no result was recorded, its outcome is unknown",
}


# Beside C0: DEL, C1, the characters that reorder text, and halves of surrogate pairs standing alone.
_UNSHOWN = r"\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_CONTROL = re.compile(rf"[\x00-\x08\x0a-\x1f{_UNSHOWN}]")


# The same, but line breaks are kept: for a streamed answer, whose lines are not split first.
_CONTROL_IN_LINES = re.compile(rf"[\x00-\x08\x0b-\x1f{_UNSHOWN}]")


def _escape(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}" if ord(match.group()) < 0x100 else f"\\u{ord(match.group()):04x}"


def shown(text: object, *, keep_newlines: bool = False) -> str:
    """``text`` safe to print on a terminal: each control character written as an escape (``\\x1b``),
    and so is each character that reorders text (``\\u202e``), which could make a file name read
    as another, and each half of a surrogate pair standing alone (``\\ud83d``: half an emoji from a
    model or an error, which no terminal encoding can write). ``keep_newlines`` leaves line breaks
    as they are (a streamed answer)."""
    return (_CONTROL_IN_LINES if keep_newlines else _CONTROL).sub(_escape, str(text))


_RAW_IN_JSON = re.compile(r"[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def json_shown(text: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``) safe to print: JSON escapes the C0
    controls itself; DEL, C1 (U+009B is a terminal's CSI) and the characters that reorder text it
    leaves raw. They are valid only inside strings, so each is written as its ``\\u`` escape."""
    return _RAW_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


# Characters no one sees or that change how the text around them reads, as the page's cards escape
# them (server/static/app.js, HIDDEN_CHARS): soft hyphen, blank fillers, zero-width characters,
# variation selectors, and tags (U+E0000…), which carry text no one sees (a message hidden in a
# memo, for the next model that reads it).
_HIDDEN = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2069\u3164\ufe00-\ufe0f\ufeff\uffa0\U000e0000-\U000e0fff]"
)


def args_json(value: Any) -> str:
    """A call's arguments as JSON a person decides on: each character that cannot be seen or that
    reorders text written as its JSON escape (the tool gets what the escapes say), so the call a
    person allows never reads differently from what the tool gets."""
    return _HIDDEN.sub(_json_escape, json.dumps(value, ensure_ascii=False))


def _json_escape(match: re.Match[str]) -> str:
    return json.dumps(match.group())[1:-1]  # "\\u200b"; beyond U+FFFF, its two halves


def transcript_lines(messages: Sequence[Message], *, full: bool = False, full_hint: str = "--full") -> Iterator[str]:
    """The transcript with role labels, tool calls with their arguments, results with what tether
    decided about them, and long bodies shortened (``full`` keeps them whole). Each line is safe to
    print (:func:`shown`): a tool's result is text from outside (a web page, a file), and an escape
    in it could set the terminal's title, write its clipboard or hide lines."""
    for line in _transcript_lines(messages, full=full, full_hint=full_hint):
        yield shown(line)


def _transcript_lines(messages: Sequence[Message], *, full: bool, full_hint: str) -> Iterator[str]:
    from tether.messages import (
        AssistantMessage,
        ReasoningPart,
        TextPart,
        ToolMessage,
        withheld_arguments,
        withheld_text,
    )

    withheld = withheld_arguments(messages)  # a call a guardrail refused: its arguments are the model's alone
    for number, m in enumerate(messages, start=1):
        if isinstance(m, AssistantMessage):
            model = f" ({m.model})" if m.model else ""
            yield f"#{number} assistant{model}"
            for part in m.content:
                if isinstance(part, ReasoningPart):
                    yield from _body("(reasoning) " + (part.text or "[redacted]"), _TEXT_LINES, full, full_hint)
                elif isinstance(part, TextPart) and part.text:
                    yield from _body(part.text, _TEXT_LINES, full, full_hint)
            for call in m.tool_calls:
                why = withheld.get(number - 1, {}).get(call.id)
                args = _arguments(call.arguments) if why is None else withheld_text(why)
                yield f"    -> {call.name} {args}   [call {call.id}]"
            if not m.content:
                yield "    (empty answer)"
        elif isinstance(m, ToolMessage):
            decision = _DECISIONS.get(m.status, m.status)
            if m.cached_from:
                decision += f" (repeats call {m.cached_from})"
            yield f"#{number} tool {m.name} [call {m.call_id}]: {decision}"
            yield from _parts(m.content, _TOOL_LINES, full, full_hint)
        else:
            label = f"summary of {m.summary_turns} earlier turns (compaction)" if m.summary_turns else "user"
            yield f"#{number} {label}"
            yield from _parts(m.content, _TEXT_LINES, full, full_hint)


def _parts(parts: Sequence[Any], lines: int, full: bool, full_hint: str) -> Iterator[str]:
    from tether.messages import ImagePart

    for part in parts:
        if isinstance(part, ImagePart):
            yield f"    [image {part.media_type}]"
        else:
            yield from _body(part.text, lines, full, full_hint)


def _arguments(arguments: str) -> str:
    try:
        return args_json(json.loads(arguments))
    except ValueError:
        return f"{_HIDDEN.sub(_json_escape, arguments)}   (not valid JSON)"


def _body(text: str, max_lines: int, full: bool, full_hint: str) -> Iterator[str]:
    lines = text.splitlines() or [""]
    if full:
        yield from (f"    {line}" for line in lines)
        return
    kept: list[str] = []
    size, clipped = 0, False
    for line in lines[:max_lines]:
        if size + len(line) > _CHARS:
            if not kept:  # one very long line: keep its start
                kept.append(line[:_CHARS] + " …")
                clipped = True
            break
        kept.append(line)
        size += len(line) + 1
    yield from (f"    {line}" for line in kept)
    hidden = len(lines) - len(kept)
    if hidden or clipped:
        what = f"{hidden} more lines" if hidden else f"{len(lines[0]) - _CHARS:,} more characters"
        yield f"    … ({what} not shown; {full_hint} prints everything)"

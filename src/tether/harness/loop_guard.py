"""Loop detection: a model that keeps calling a tool with the same, or nearly the same, arguments.

A prompt that says "do not loop" states an intention; it cannot enforce it (the reference's agent
called ``search_kb`` fifteen times with slightly reworded queries and got the same passages each
time). :class:`LoopGuard` counts, for each call of a tool, the earlier calls of that tool that are
nearly the same as it:

* an **exact repeat** has the same canonical arguments (JSON with sorted keys);
* a **near repeat** has the same argument names, equal values apart from strings, and every string
  close in words: :func:`word_overlap` at or above ``similarity``; inside objects and lists too.

Only calls alike to *this* call count, not calls alike to one another: a chain of small steps (seal
kit, repair kit, repair manual, installation manual) is research, not a loop.

Which earlier calls are looked at:

* those since the person's latest message, the window of the per-turn limits and of the read-only
  cache: a new message is new information, and a session's history is not this request's;
* and, within it, those after the last successful call of a tool that is not read-only, unless
  that call is an exact repeat of this one: a write may change what the next call returns (an
  edit between two test runs), just as it empties the read-only cache; and a write that differs,
  even a little, from the one before it (the next of several alike edits) is work, not a loop.
  The same write again and again, or a write that keeps failing, is still counted.

At ``nudge_after`` the call runs and its result gets a note in words: how many times, whether the
results changed, what to do instead. At ``stop_after`` the call is not run: its result says why and
the run ends ``failed`` with that reason (law 4: the model, and the person, read the decision). A
model is stopped only after it was told: if none of the alike calls carries a note yet, the call
runs and is nudged instead.

Some answers never pass through a middleware: an exact repeat of a read-only call is answered from
the read-only cache before any middleware runs, and a middleware listed before this one may refuse
a call itself. They are still calls the model made: before the next model call, such a result gets
its note (the transcript is rewritten), or the run stops there.
"""

from __future__ import annotations

import bisect
import json
import re
import sys
from collections import ChainMap
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tether._lru import ByteLRU
from tether.errors import ConfigError
from tether.harness.agent import Stop
from tether.harness.context import RunContext
from tether.harness.middleware import Middleware, ToolCall
from tether.harness.state import is_person, latest_reply, turn_start
from tether.messages import (
    NOT_JSON,
    AssistantMessage,
    Message,
    TextPart,
    ToolCallPart,
    ToolMessage,
    UserMessage,
    canonical_arguments,
    clean_text,
    parse_arguments,
)
from tether.providers.base import ModelRequest
from tether.tools.base import ToolResult

__all__ = ["LoopGuard", "word_overlap"]

# Words: runs of letters and digits, kept whole across - . / : so that FVAM-2050-B, errors.log and
# src/app.py are one token each (split, an identifier would outweigh the words around it).
_WORD = re.compile(r"\w+(?:[-./:]\w+)*")
_STOP_WORDS = frozenset(
    (
        # English
        "a",
        "an",
        "the",
        "of",
        "for",
        "to",
        "in",
        "on",
        "at",
        "by",
        "with",
        "from",
        "about",
        "into",
        "and",
        "or",
        "but",
        "not",
        "no",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "do",
        "does",
        "did",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
        "this",
        "that",
        "these",
        "those",
        "it",
        "its",
        "there",
        "their",
        "they",
        "them",
        "i",
        "me",
        "my",
        "we",
        "our",
        "you",
        "your",
        "he",
        "she",
        "his",
        "her",
        "can",
        "could",
        "should",
        "would",
        "will",
        "may",
        "might",
        "must",
        "please",
        "tell",
        "give",
        "show",
        "find",
        "search",
        "look",
        "up",
        "any",
        "some",
        "all",
        "more",
        "most",
        "other",
        "such",
        "than",
        "then",
        "so",
        "just",
        "also",
        "info",
        "information",
        "details",
        # Spanish
        "el",
        "la",
        "los",
        "las",
        "un",
        "una",
        "unos",
        "unas",
        "de",
        "del",
        "al",
        "y",
        "o",
        "en",
        "por",
        "para",
        "con",
        "sin",
        "que",
        "qué",
        "cuál",
        "cuáles",
        "cómo",
        "es",
        "son",
        "se",
        "su",
        "sus",
        "lo",
        "le",
    )
)
# Results this alike in words (and not identical) "barely changed"; only the wording of the note
# depends on it.
_RESULTS_ALIKE = 0.7
NOTE_START = "[Loop check: "
STOP_START = "stopped a loop: "


def _singular(word: str) -> str:
    """A crude English plural fold (seals → seal, assemblies → assembly): rewordings switch number."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _words(text: str) -> frozenset[str]:
    out: set[str] = set()
    for token in _WORD.findall(text.lower()):
        if token in _STOP_WORDS or (len(token) == 1 and not token.isdigit()):
            continue
        out.add(_singular(token) if token.isalpha() else token)
    return frozenset(out)


# Arguments are compared many times: their words are kept, in a cache bounded by bytes.
_WORDS_CACHE_BYTES = 4 << 20
_argument_word_sets: ByteLRU[str, frozenset[str]] = ByteLRU(_WORDS_CACHE_BYTES)


def _argument_words(text: str) -> frozenset[str]:
    if len(text) > 2000:
        return _words(text)  # never keep a whole file
    words = _argument_word_sets.get(text)
    if words is None:
        words = _words(text)
        size = sys.getsizeof(text) + sys.getsizeof(words) + sum(map(sys.getsizeof, words))
        _argument_word_sets.put(text, words, size)
    return words


def _identifiers(words: frozenset[str]) -> frozenset[str]:
    """Part numbers, file names, paths, versions, snake_case names: tokens with a digit or . / : _."""
    return frozenset(w for w in words if any(c.isdigit() or c in "./:_" for c in w))


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    union = a | b
    return len(a & b) / len(union) if union else 1.0


def word_overlap(a: str, b: str) -> float:
    """How alike two texts are in words, from 0 to 1: the share of their distinct words they have
    in common (Jaccard), lower-cased, plurals folded, stop words ignored.

    Two texts that each name an identifier the other does not (FVAM-2050-A and FVAM-2050-B,
    errors.log and access.log) score 0: they ask about different things however alike the rest
    reads. Use it to see how :class:`LoopGuard` would judge two queries of your own."""
    if a == b:
        return 1.0
    wa, wb = _argument_words(a), _argument_words(b)
    ids_a, ids_b = _identifiers(wa), _identifiers(wb)
    if ids_a - ids_b and ids_b - ids_a:
        return 0.0
    if not wa and not wb:  # nothing but stop words on either side
        return 1.0 if a.strip().lower() == b.strip().lower() else 0.0
    return _jaccard(wa, wb)


def _parsed(arguments: str) -> tuple[str | None, dict[str, Any] | None]:
    """A call's arguments as compared: their canonical JSON (sorted keys, a whole number written
    ``5.0`` as ``5``) and the object, or None for each when they are not a JSON object (or not JSON)."""
    value = parse_arguments(arguments)
    if value is NOT_JSON:
        return None, None
    try:
        value = _whole_numbers(value)
    except RecursionError:  # nested deeper than a walk can go: compared as written
        return canonical_arguments(arguments), value if isinstance(value, dict) else None
    canon = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return canon, value if isinstance(value, dict) else None


def _whole_numbers(value: Any) -> Any:
    """``value`` with each float that is a whole number as an int: ``{"limit": 5.0}`` asks for
    what ``{"limit": 5}`` asks for, and a model that alternates the two is repeating itself."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _whole_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(v) for v in value]
    return value


@dataclass(frozen=True)
class _Call:
    part: ToolCallPart
    canon: str | None
    args: dict[str, Any] | None
    result: ToolMessage | None

    @classmethod
    def of(cls, part: ToolCallPart, result: ToolMessage | None) -> _Call:
        return cls(part, *_parsed(part.arguments), result)


def _likeness(past: _Call, current: _Call, similarity: float) -> Literal["exact", "near"] | None:
    if past.part.name != current.part.name:
        return None
    if current.canon is not None and past.canon == current.canon:
        return "exact"
    a, b = past.args, current.args
    if a is None or b is None:
        return None
    try:
        return "near" if _alike(a, b, similarity) else None
    except RecursionError:  # arguments nested deeper than a comparison can go: not judged alike
        return None


def _alike(a: Any, b: Any, similarity: float) -> bool:
    """Two argument values alike: strings close in words, objects with the same keys and lists of
    the same length alike part by part (a query inside ``{"q": {"text": ...}}`` or a list is
    reworded just as one at the top), anything else equal."""
    if isinstance(a, str) and isinstance(b, str):
        return word_overlap(a, b) >= similarity
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_alike(a[k], b[k], similarity) for k in b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_alike(x, y, similarity) for x, y in zip(a, b, strict=True))
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)  # not ``==``: JSON's true and 1 differ


class _TurnIndex:
    """The calls and results since the person's latest message (a compaction summary's share of
    the turn counts too), by tool name and call id, extended as the transcript grows and rebuilt
    when it was rewritten. A call's streak then looks only at the calls of its tool and at the
    writes since, where a walk back over every earlier call and result made a reply of n calls
    cost n² steps (2,000 side effects in one reply: 31 s in the guard alone)."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.messages: list[Message] = ctx.state.messages
        self.rewrites = ctx.state.rewrites
        self.seen = 0
        self.last: Message | None = None
        self._restart(turn_start(self.messages))
        self._grow()

    @classmethod
    def of(cls, ctx: RunContext) -> _TurnIndex:
        index = ctx.scratch.get("loop_guard")
        if not isinstance(index, _TurnIndex) or not index._current():
            index = ctx.scratch["loop_guard"] = cls(ctx)
        index._grow()
        return index

    def _current(self) -> bool:
        messages, state = self.messages, self.ctx.state
        return (
            state.messages is messages
            and state.rewrites == self.rewrites
            and self.seen <= len(messages)
            and (self.seen == 0 or messages[self.seen - 1] is self.last)
        )

    def _restart(self, start: int) -> None:
        self.start = start  # where the turn begins in the transcript
        self.seen = start
        self.at = 0  # position in the turn (a summary's record of the turn spreads over several)
        self.calls: list[tuple[ToolCallPart, int]] = []  # each call, and the position of its reply
        self.parsed: dict[int, tuple[str | None, dict[str, Any] | None]] = {}
        self.by_name: dict[str, list[int]] = {}  # indexes into calls, ascending
        self.by_id: dict[str, list[int]] = {}
        self.results: dict[str, tuple[int, ToolMessage]] = {}  # the latest of each call id
        self.answers: dict[str, ToolMessage] = {}  # the same, of the transcript itself (no summary's)
        self.writers: list[int] = []  # calls that may have changed the world (checked when read)
        self.writing: set[int] = set()

    def _grow(self) -> None:
        messages = self.messages
        for i in range(self.seen, len(messages)):
            m = messages[i]
            if is_person(m):
                self._restart(i + 1)
            elif isinstance(m, UserMessage) and m.turn_so_far is not None:
                for inner in m.turn_so_far:
                    self._add(inner, own=False)
            else:
                self._add(m, own=True)
        self.seen = len(messages)
        self.last = messages[-1] if messages else None

    def _add(self, m: Message, *, own: bool) -> None:
        if isinstance(m, AssistantMessage):
            for c in m.tool_calls:
                n = len(self.calls)
                self.calls.append((c, self.at))
                self.by_name.setdefault(c.name, []).append(n)
                self.by_id.setdefault(c.id, []).append(n)
        elif isinstance(m, ToolMessage):
            self.results[m.call_id] = (self.at, m)
            if own:
                self.answers[m.call_id] = m
            if m.status == "ok":
                self._may_have_written(m.call_id)
        self.at += 1

    def _may_have_written(self, call_id: str) -> None:
        """Every call of ``call_id`` so far now has an ``ok`` result (this is its latest): those of
        a tool that is not read-only may have changed the world."""
        for n in self.by_id.get(call_id, ()):
            tool = self.ctx.tools.get(self.calls[n][0].name)
            if n not in self.writing and tool is not None and not getattr(tool, "read_only", False):
                self.writing.add(n)
                bisect.insort(self.writers, n)

    def replaced(self, old: ToolMessage, new: ToolMessage) -> None:
        """``old`` was replaced in the transcript by ``new`` (a note added), saved as a rewrite."""
        at, kept = self.results.get(old.call_id, (0, None))
        if kept is old:
            self.results[old.call_id] = (at, new)
        if self.answers.get(old.call_id) is old:
            self.answers[old.call_id] = new
        self.last = self.messages[-1] if self.messages else None

    def rewritten(self) -> None:
        """The caller's own rewrite, told to the index with :meth:`replaced`: it stays current."""
        self.rewrites = self.ctx.state.rewrites

    def calls_before(self, call: ToolCallPart) -> Iterator[_Call]:
        """The turn's calls before ``call`` (in the latest reply that has it) that are of its tool
        or may have changed the world, with results, the latest first: those the walk back over
        every call would stop at or count (the others it passes by)."""
        mine = self.by_id.get(call.id)
        if not mine:
            return
        end = mine[-1]
        same = self.by_name.get(call.name, [])
        i, j = bisect.bisect_left(same, end) - 1, bisect.bisect_left(self.writers, end) - 1
        while i >= 0 or j >= 0:
            a, b = same[i] if i >= 0 else -1, self.writers[j] if j >= 0 else -1
            n = max(a, b)
            i, j = i - (a == n), j - (b == n)
            yield self._call(n)

    def _call(self, n: int) -> _Call:
        part, at = self.calls[n]
        parsed = self.parsed.get(n)
        if parsed is None:
            parsed = self.parsed[n] = _parsed(part.arguments)
        seen = self.results.get(part.id)
        result = seen[1] if seen is not None and seen[0] > at else None  # a result comes after its call
        return _Call(part, parsed[0], parsed[1], result)


def _note_part(note: str) -> TextPart:
    return TextPart(text=f"\n\n{note}")


def _is_note(part: Any) -> bool:
    """A loop note: always a part of its own, after what the tool said."""
    return isinstance(part, TextPart) and part.text.startswith("\n\n" + NOTE_START)


def _notes(message: ToolMessage) -> int:
    return sum(map(_is_note, message.content))


def _result_text(message: ToolMessage) -> str:
    """What the tool said: without the read-only cache's note, and without loop notes."""
    parts = message.content[1:] if message.cached_from is not None else message.content
    return "".join(p.text for p in parts if isinstance(p, TextPart) and not _is_note(p))


def _plain(result: ToolResult | str) -> str:
    if isinstance(result, str):
        return result
    return "".join(p.text for p in result.parts() if isinstance(p, TextPart))


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


@dataclass(frozen=True)
class _Streak:
    name: str
    count: int  # the earlier alike calls, and this one
    exact: bool  # all of them had the very same arguments
    reworded: tuple[str, ...]  # the string arguments that differed
    earlier: tuple[_Call, ...]
    # The calls of the turn whose results got a note (see _noted): what the guard did, not part of
    # the streak itself.
    noted: Collection[str] = field(default=frozenset(), compare=False)

    @property
    def warned(self) -> bool:
        """One of the earlier alike calls already carries a loop note (or did, before a compaction
        summarised it: its record keeps the result's text cut short, the note merged in or cut off)."""
        return any(c.part.id in self.noted or (c.result is not None and _notes(c.result)) for c in self.earlier)

    def what(self) -> str:
        if self.exact:
            return "the same arguments"
        if len(self.reworded) == 1:
            return f"nearly the same {self.reworded[0]}"
        return "nearly the same arguments"

    def results(self, current: str | None) -> str:
        texts = [_result_text(c.result) for c in self.earlier if c.result is not None]
        if current is not None:
            texts.append(current)
        if len(texts) < 2:
            return ""
        last = texts[-1]
        if all(t == last for t in texts):
            return "the results did not change"
        if all(_jaccard(_words(t), _words(last)) >= _RESULTS_ALIKE for t in texts):
            return "the results barely changed"
        return "the results changed"


@dataclass
class LoopGuard(Middleware):
    """Catch a model calling a tool again and again with the same or nearly the same arguments:
    from the ``nudge_after``-th such call its result says so (and what to do instead); the
    ``stop_after``-th is not run and the run ends ``failed`` with the reason.

    ``similarity`` is the :func:`word_overlap` at or above which two string arguments count as the
    same question reworded (1.0: the same words in any order). ``stop_after=None`` only nudges. Watch
    only ``tools`` (default: all) and never ``ignore`` (a status poll, say, whose repeats are the
    point). The per-turn limits (``ToolCallLimitPerTurn``, ``RunToolCallLimit``) are separate and
    can be stacked with this one; list it before ``ToolOutputTrimmer``, so that its note is added
    to the end of an output already cut to size rather than cut off with the rest."""

    nudge_after: int = 3
    stop_after: int | None = 5
    similarity: float = 0.5
    tools: Collection[str] | None = None
    ignore: Collection[str] = ()

    def __post_init__(self) -> None:
        if self.nudge_after < 2:
            raise ConfigError(f"LoopGuard(nudge_after={self.nudge_after}): a first call is no repeat; use 2 or more")
        if self.stop_after is not None and self.stop_after < 2:
            raise ConfigError(f"LoopGuard(stop_after={self.stop_after}): use 2 or more, or None to never stop")
        if not 0 < self.similarity <= 1:
            raise ConfigError(f"LoopGuard(similarity={self.similarity}): a word overlap between 0 (excluded) and 1")

    def watches(self, name: str) -> bool:
        return (self.tools is None or name in self.tools) and name not in self.ignore

    async def before_tool_call(self, ctx: RunContext, call: ToolCallPart, args: dict[str, Any]) -> Stop | None:
        """The stop, before a person is asked about the call: a call the guard will not let run is
        never put to one (their "yes" would be wasted)."""
        if not self.watches(call.name):
            return None
        streak = self._streak(ctx, call)
        return Stop("failed", self._stop_reason(streak, call)) if self._stops(streak, call) else None

    async def wrap_tool_call(
        self, ctx: RunContext, call: ToolCallPart, args: dict[str, Any], call_next: ToolCall
    ) -> ToolResult | str | Stop:
        if not self.watches(call.name):
            return await call_next()
        streak = self._streak(ctx, call)
        result = await call_next()
        if isinstance(result, Stop) or streak.count < self.nudge_after:
            return result
        note = _note_part(self._nudge(streak, _plain(result)))
        _noted(ctx, call.id)
        if isinstance(result, str):
            return ToolResult([TextPart(text=result), note])
        return ToolResult([*result.parts(), note], is_error=result.is_error, widget=result.widget)

    async def before_model(self, ctx: RunContext, request: ModelRequest) -> ModelRequest | Stop:
        """Judge the latest results that did not pass through :meth:`wrap_tool_call` (answered
        from the read-only cache, or refused by a middleware before this one)."""
        messages = ctx.state.messages
        index = _TurnIndex.of(ctx)
        last = latest_reply(ctx.state)
        if last < index.start:
            return request
        calls = {c.id: c for c in messages[last].tool_calls}  # type: ignore[union-attr]
        # The earlier results a cached answer was copied from, as they were before this look
        # (a note added to one now is not in its copy).
        before: dict[str, ToolMessage] = {}
        answers = ChainMap(before, index.answers)
        verdict: Stop | None = None
        changed = False
        for i in range(last + 1, len(messages)):
            m = messages[i]
            call = calls.get(m.call_id) if isinstance(m, ToolMessage) else None
            if call is None or not isinstance(m, ToolMessage) or not self._unjudged(m, answers):
                continue
            streak = self._streak(ctx, call)
            if self._stops(streak, call):
                reason = self._stop_reason(streak, call)
                note, verdict = f"{NOTE_START}{reason}. The run stops here.]", Stop("failed", reason)
            elif streak.count >= self.nudge_after:
                note = self._nudge(streak, _result_text(m))
            else:
                continue
            # A cached answer copies the earlier result with its note: only the new note stays.
            kept = tuple(p for p in m.content if not _is_note(p))
            messages[i] = noted = m.model_copy(update={"content": (*kept, _note_part(note))})
            _noted(ctx, m.call_id)
            before.setdefault(m.call_id, m)
            index.replaced(m, noted)
            changed = True
            if verdict is not None:
                break
        if changed:
            ctx.persist(rewrite=True)
            index.rewritten()
        return verdict or request

    def _unjudged(self, message: ToolMessage, answers: Mapping[str, ToolMessage]) -> bool:
        if not self.watches(message.name) or message.text.startswith("Not run: " + STOP_START):
            return False
        copied = answers.get(message.cached_from) if message.cached_from is not None else None
        return _notes(message) <= (_notes(copied) if copied is not None else 0)

    def _stops(self, streak: _Streak, call: ToolCallPart) -> bool:
        """Stop only a model that was told: calls alike to this one need not be alike to one
        another, so this call may be the first to reach the count; then it is nudged instead."""
        if self.stop_after is None or streak.count < self.stop_after:
            return False
        return streak.warned or self._told_beside(streak, call) or self.nudge_after >= self.stop_after

    def _told_beside(self, streak: _Streak, call: ToolCallPart) -> bool:
        """Whether an earlier exact repeat still without a result (one running beside this call in
        its batch, which is judged before any of its calls has a result) gets the note: the
        ``nudge_after``-th exact repeat or a later one does, as the same calls one after another
        would have. Without this, a reply of the same call many times side by side all ran."""
        canon = _parsed(call.arguments)[0]
        exact = [c for c in streak.earlier if canon is not None and c.canon == canon]
        return any(c.result is None for c in exact[self.nudge_after - 1 :])

    def _streak(self, ctx: RunContext, call: ToolCallPart) -> _Streak:
        current = _Call.of(call, None)
        counted: list[_Call] = []
        exact = True
        reworded: set[str] = set()
        for past in _TurnIndex.of(ctx).calls_before(call):
            kind = _likeness(past, current, self.similarity)
            if kind != "exact" and _changed_the_world(ctx, past):
                break
            if kind is None:
                continue
            counted.append(past)
            if kind == "near" and past.args is not None and current.args is not None:
                exact = False
                reworded.update(k for k, v in current.args.items() if isinstance(v, str) and past.args[k] != v)
        noted = ctx.state.ext_state("loop_guard").get("noted") or ()
        return _Streak(
            call.name, len(counted) + 1, exact, tuple(sorted(reworded)), tuple(reversed(counted)), frozenset(noted)
        )

    def _nudge(self, streak: _Streak, current: str) -> str:
        results = streak.results(current)
        if self.stop_after is None:
            stop = ""
        elif streak.count + 1 >= self.stop_after:
            stop = " The next call like it will not be run: the run will stop there."
        else:
            stop = f" A {_ordinal(self.stop_after)} call like it will not be run: the run will stop there."
        return (
            f"{NOTE_START}you have called {streak.name} with {streak.what()} {streak.count} times since the "
            f"user's last message{'; ' + results if results else ''}. Another call like it is unlikely to "
            "find more: answer with what you have, or ask the user for what is missing." + stop + "]"
        )

    def _stop_reason(self, streak: _Streak, call: ToolCallPart) -> str:
        results = streak.results(None)
        shown = clean_text(call.arguments if len(call.arguments) <= 160 else call.arguments[:157] + "...")
        return (
            f"{STOP_START}{streak.name} was called {streak.count} times with {streak.what()} since the "
            f"user's last message{' (' + results + ')' if results else ''}; the last of them, {shown}, was not run"
        )


def _noted(ctx: RunContext, call_id: str) -> None:
    """Keep, with the run, that ``call_id``'s result got a note: a compaction's record of the turn
    keeps results cut short and in one text, where the note is no part of its own or cut off, and a
    model that was told was then told again instead of stopped. Only the turn's calls are kept."""
    part = ctx.state.ext_state("loop_guard")
    turn = _TurnIndex.of(ctx).by_id
    part["noted"] = [c for c in part.get("noted") or () if c in turn and c != call_id] + [call_id]


def _changed_the_world(ctx: RunContext, past: _Call) -> bool:
    """A successful call of a tool that is not read-only: what later calls return may differ."""
    tool = ctx.tools.get(past.part.name)
    return (
        past.result is not None
        and past.result.status == "ok"
        and tool is not None
        and not getattr(tool, "read_only", False)
    )

"""Replies cut off by the output limit (``finish_reason == "length"``).

**Cut text is continued once.** The loop asks again with no tools offered and a control message
("continue from exactly where it stopped"); the continuation is merged into the cut reply, with a
repeated overlap at the seam kept once (:func:`merge_seam`), and the stream shows only the new
text (:class:`Continuation`). The merged message counts both calls as turns
(``AssistantMessage.continuations``), so a second cut is not continued again: the run ends with
the merged text kept and a reason that says it is incomplete.

**A cut tool call is never run.** The limit can only cut what a reply ends with, so in a cut reply
the call that ends it is cut (:func:`cut_call`), whatever its arguments look like: partial JSON,
or nothing at all, which a wire reports as ``{}``. It is answered with an error that states the
size to stay under, half the limit and then half again (:func:`cut_answer`); complete calls before
it in the same reply still run. A cut after ``CUT_RETRIES`` such asks fails the run
(:func:`too_many_cuts`).

Everything here is worked out from the transcript, so a run resumed after a crash decides the same.
"""

from __future__ import annotations

from collections.abc import Sequence

from tether.harness.agent import Stop
from tether.harness.state import control_message
from tether.messages import AssistantMessage, Message, ReasoningPart, TextPart, ToolCallPart, UserMessage

__all__ = [
    "CUT",
    "CUT_RETRIES",
    "MIN_SEAM",
    "UNFINISHED",
    "Continuation",
    "cut_answer",
    "cut_call",
    "is_cut",
    "merge_seam",
    "too_many_cuts",
]

CUT = "length"  # the finish reason of a reply the output limit cut (Anthropic's max_tokens, mapped)
# tether's finish reason for a cut answer whose continuation added nothing (no words, only what was
# already there, or only calls, refused): as cut as before, though no limit cut the continuation, so
# it is neither continued again nor taken for a reply the budget cut short.
UNFINISHED = "unfinished"
CUT_RETRIES = 2  # asks for a smaller call after a cut one, each for half the size

# A shorter repeat is as likely to be a word said on purpose ("that", then "that's why"): keeping a
# doubled word is a smaller harm than losing one.
MIN_SEAM = 8

CONTINUE = (
    "Your last reply was cut off by the output limit. Continue it from exactly where it stopped, "
    "mid-word if need be: do not repeat what you already wrote, do not start over, and do not "
    "call tools."
)


def merge_seam(before: str, after: str) -> tuple[str, str]:
    """``(merged, new)``: ``before`` followed by ``after``, with the longest suffix of ``before``
    that ``after`` starts with (at least ``MIN_SEAM`` characters) kept once; ``new`` is the part of
    ``after`` that was not already said. An ``after`` that starts ``before`` over is a restart: the
    longer of the two is the whole text (a restart is cut where ``before`` was, or near it)."""
    if min(len(before), len(after)) >= MIN_SEAM:
        if after.startswith(before):
            return after, after[len(before) :]
        if before.startswith(after):
            return before, ""
    size = _seam(before, after)
    return before + after[size:], after[size:]


def _seam(before: str, after: str) -> int:
    """The length of the longest end of ``before`` that ``after`` starts with, however long (a
    model told to go on may repeat its last pages, not only its last words); 0 under ``MIN_SEAM``.
    Only the places where ``after``'s first characters occur in ``before`` are tried, longest
    first: a look at every length made a repeat past 2,000 characters a cost no reply could pay,
    and such a repeat was kept twice."""
    head = after[:MIN_SEAM]
    if len(head) < MIN_SEAM:
        return 0
    at = before.find(head, max(0, len(before) - len(after)))
    while at != -1:
        if after.startswith(before[at:]):
            return len(before) - at
        at = before.find(head, at + 1)
    return 0


def is_cut(message: Message | None) -> bool:
    """Whether the answer ``message`` holds is cut short: the output limit cut it, or a
    continuation did not finish it (``UNFINISHED``)."""
    return isinstance(message, AssistantMessage) and message.finish_reason in (CUT, UNFINISHED)


def continues(message: AssistantMessage) -> bool:
    """Whether a final reply is cut text that has not been continued yet."""
    return is_cut(message) and not message.tool_calls and not message.continuations


class Continuation:
    """One continuation of ``cut``: what is sent, what is streamed, what is kept.

    Streamed text is held while it may still be a repeat of the cut text's end (while it is a
    substring of that end) or the whole of it again (while it is its start), and let through from
    the moment it cannot be: from then on the seam is decided, and what was streamed is exactly
    the ``new`` of :func:`merge_seam`."""

    def __init__(self, cut: AssistantMessage) -> None:
        self.cut = cut
        self._held: str | None = ""  # None once the seam is decided
        self._restart = True  # what is held is the cut text's start (checked a chunk at a time)

    def request(self, messages: Sequence[Message]) -> list[Message]:
        return [*messages, control_message(CONTINUE)]

    def start(self) -> None:
        """A new stream of the continuation begins: what a failed one held back (a repeat of the
        cut text, nothing new shown yet) will be streamed again, so the seam is found afresh."""
        self._held = ""
        self._restart = True

    def feed(self, text: str) -> str:
        """The part of a streamed chunk to show now."""
        if self._held is None:
            return text
        whole = self.cut.text
        self._restart = self._restart and whole.startswith(text, len(self._held))
        self._held += text
        # Held while it occurs in the cut text: from there it may run on to its end, a seam.
        if (self._restart and len(self._held) <= len(whole)) or self._held in whole:
            return ""
        new = merge_seam(whole, self._held)[1]
        self._held = None
        return new

    def flush(self) -> str:
        """What is still held when the stream ends: the new part of it, if any."""
        held, self._held = self._held, None
        return merge_seam(self.cut.text, held)[1] if held else ""

    def merge(self, reply: AssistantMessage) -> AssistantMessage:
        """The cut reply and its continuation as one message. Its usage is the continuation's,
        which describes the whole conversation as it now stands (both calls were charged as they
        came); its finish reason is the continuation's, so a second cut shows. A continuation that
        said nothing new (no words, or only what was already there) finished nothing: the answer
        stays cut (it used to end the run ``completed`` with the half-written answer)."""
        merged, new = merge_seam(self.cut.text, reply.text)
        kept = [p for p in self.cut.content if isinstance(p, ReasoningPart)]
        return self.cut.model_copy(
            update={
                "content": (*kept, TextPart(text=merged)),
                "usage": reply.usage,
                "finish_reason": reply.finish_reason if new.strip() else UNFINISHED,
                "continuations": (self.cut.continuations or 0) + 1,
            }
        )


def cut_call(message: AssistantMessage) -> ToolCallPart | None:
    """The call a cut reply ends with: the one the limit cut, complete-looking or not."""
    if not is_cut(message) or not message.content:
        return None
    last = message.content[-1]
    return last if isinstance(last, ToolCallPart) else None


def _limit(message: AssistantMessage, max_tokens: int) -> int:
    usage = message.usage
    reported = usage is not None and not usage.estimated and usage.completion_tokens > 0
    return usage.completion_tokens if reported and usage is not None else max_tokens


def _cuts_in_a_row(messages: Sequence[Message]) -> int:
    """How many replies in a row, back from the latest, ended with a cut call."""
    count = 0
    for m in reversed(messages):
        if isinstance(m, UserMessage):
            break
        if isinstance(m, AssistantMessage):
            if cut_call(m) is None:
                break
            count += 1
    return count


def cut_answer(messages: Sequence[Message], call: ToolCallPart, max_tokens: int) -> str | None:
    """The result for ``call`` when it is the cut call of the latest reply (else None): an error
    that states the size a smaller call must stay under."""
    reply = next((m for m in reversed(messages) if isinstance(m, AssistantMessage)), None)
    cut = cut_call(reply) if reply is not None else None
    if reply is None or cut is None or cut.id != call.id:
        return None
    limit = _limit(reply, max_tokens)
    size = max(1, limit // 2 ** _cuts_in_a_row(messages))
    return (
        f"Error: not run. This call was cut off by the output limit ({limit} tokens), so its "
        f"arguments are incomplete. Send a smaller complete call, at most about {size} tokens of "
        "arguments: split the work into several calls (write a file in parts, for example)."
    )


def too_many_cuts(messages: Sequence[Message], max_tokens: int) -> Stop | None:
    """A ``failed`` stop once a call was cut again after ``CUT_RETRIES`` asks for a smaller one."""
    streak = _cuts_in_a_row(messages)
    if streak <= CUT_RETRIES:
        return None
    reply = next(m for m in reversed(messages) if isinstance(m, AssistantMessage))
    return Stop(
        "failed",
        f"a tool call was cut off by the output limit ({_limit(reply, max_tokens)} tokens) {streak} times "
        "in a row and was never run; raise max_tokens, or ask for the work in smaller steps",
    )

"""Keeping the context inside the window: summarise the older part once, keep the recent tail.

After a round of tools, when the estimated prompt passes ``compaction_threshold`` (60 %) of the
model's window, the older part of the transcript is summarised by the model in one call and
replaced by one user message carrying the summary; the recent tail (about ``compaction_keep``,
30 %, of the window) stays verbatim. The cut is at a clean boundary: the tail never begins with a
tool result. Summarising the whole older block at once keeps the cached prompt prefix stable for
every turn but the one after a compaction.

If the summary call fails, old tool outputs are replaced by a note instead (written as such). If
the context stays above the threshold three times in a row, the run stops with a clear reason
rather than looping.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence

from tether.errors import ProviderError, RunCancelled
from tether.events import Compaction, Event
from tether.harness.context import RunContext
from tether.harness.limits import Halt, message_tokens
from tether.harness.state import conversation_turns
from tether.messages import AssistantMessage, Message, TextPart, ToolMessage, UserMessage
from tether.providers.base import ModelRequest
from tether.tokens import count_tokens
from tether.usage import model_info

__all__ = [
    "SUMMARY_PROMPT",
    "compact",
    "context_window",
    "render_for_summary",
    "should_compact",
    "summarize",
    "trim_old_tool_outputs",
]

SUMMARY_PROMPT = (
    "Summarize the conversation below so that the work can continue from your summary alone. Keep the "
    "user's goals and constraints, decisions made, facts learned from tools (names, numbers, errors), "
    "and what remains to be done. Be concise; do not invent anything."
)
MAX_FAILURES = 3
_TOOL_CHARS = 1500  # per tool output, in the text sent for summarising


def context_window(rc: RunContext) -> int | None:
    agent = rc.agent
    if agent.context_window is not None:
        return agent.context_window
    settings_models = getattr(agent.settings, "models", None) or {}
    return agent.context_windows.get(rc.model_name) or model_info(rc.model_name, settings_models).context_window


def should_compact(rc: RunContext) -> bool:
    window = context_window(rc)
    if window is None or not rc.state.messages:
        return False
    return rc.prompt_estimate() > rc.agent.compaction_threshold * window


def render_for_summary(messages: Sequence[Message], budget_chars: int) -> str:
    """The older part of a transcript as plain text for the summary call (tool outputs shortened)."""
    lines: list[str] = []
    for m in messages:
        if isinstance(m, UserMessage):
            lines.append("user: " + "".join(p.text for p in m.content if isinstance(p, TextPart)))
        elif isinstance(m, AssistantMessage):
            if m.text:
                lines.append("assistant: " + m.text)
            lines.extend(f"  assistant called {c.name}({c.arguments[:300]})" for c in m.tool_calls)
        else:
            text = m.text if len(m.text) <= _TOOL_CHARS else m.text[:_TOOL_CHARS] + " [...]"
            lines.append(f"tool {m.name} ({m.status}): " + text.replace("\n", "\n  "))
    rendered = "\n".join(lines)
    return rendered if len(rendered) <= budget_chars else rendered[-budget_chars:]


def _cut_index(messages: Sequence[Message], keep_tokens: int, count: Callable[[str], int] = count_tokens) -> int:
    """Where the kept tail starts: about ``keep_tokens`` from the end, never on a tool result."""
    total, cut = 0, len(messages)
    while cut > 0 and total + message_tokens(messages[cut - 1], count) <= keep_tokens:
        cut -= 1
        total += message_tokens(messages[cut], count)
    if cut == len(messages):  # keep at least the latest turn
        cut = max((i for i, m in enumerate(messages) if isinstance(m, AssistantMessage)), default=0)
    while 0 < cut < len(messages) and isinstance(messages[cut], ToolMessage):
        cut -= 1  # back to the assistant message whose calls these results answer
    return cut


async def summarize(rc: RunContext, older: Sequence[Message], instruction: str = SUMMARY_PROMPT) -> str:
    """Ask the active model for a summary of ``older``; the call's cost is added to the run."""
    window = context_window(rc) or 128_000
    text = render_for_summary(older, budget_chars=int(window * 0.5 * 3))
    max_tokens = min(2048, rc.agent.max_tokens)
    budget = rc.agent.max_budget_usd
    if budget is not None and rc.price is not None:  # law 6 holds for this call too
        prompt = int((rc.count(instruction) + rc.count(text)) * 1.02) + 32
        max_tokens = min(max_tokens, rc.price.affordable_output_tokens(prompt, budget - rc.state.cost_usd))
        if max_tokens < rc.agent.min_output_tokens:
            raise ProviderError("the remaining budget cannot pay for a summary")
    request = ModelRequest(model=rc.model.model_id, messages=[UserMessage.text(f"{instruction}\n{text}")],
                           max_tokens=max_tokens)
    response = await rc.signal.race(rc.provider.complete(request))
    usage = response.message.usage
    if usage is not None:
        rc.state.usage = rc.state.usage + usage
        if rc.price is not None:
            rc.state.cost_usd += rc.price.cost(usage)
    return response.message.text.strip()


def summary_message(summary: str, turns: int) -> UserMessage:
    header = f"[Summary of the earlier conversation ({turns} earlier turns), written when the context filled up]"
    return UserMessage(content=(TextPart(text=f"{header}\n{summary}"),), summary_turns=turns)


async def compact(rc: RunContext, *, reason: str = "threshold") -> AsyncIterator[Event]:
    """Summarise the older part (or trim tool outputs if that fails); yield a ``compaction`` event."""
    state = rc.state
    window = context_window(rc) or 128_000
    before = rc.prompt_estimate()
    cut = _cut_index(state.messages, int(window * rc.agent.compaction_keep), rc.count)
    if cut <= 0 and reason == "overflow":  # the provider disagrees with our estimate: keep only the latest turn
        cut = _cut_index(state.messages, 0, rc.count)
    method = "summary"
    try:
        if cut <= 0 or (rc.agent.max_budget_usd is not None and state.cost_usd >= rc.agent.max_budget_usd):
            raise ProviderError("nothing older to summarise" if cut <= 0 else "no budget left for a summary")
        older = state.messages[:cut]
        summary = await summarize(rc, older)
        if not summary:
            raise ProviderError("the model returned an empty summary")
        state.messages[:cut] = [summary_message(summary, conversation_turns(older))]
    except RunCancelled:
        raise
    except ProviderError:
        method = "trim"
        if not trim_old_tool_outputs(rc):
            rc.compaction_failures += 1
            _maybe_give_up(rc, window)
            return
    rc.persist(rewrite=True)  # marks the last reply's prompt count stale: the estimate recounts
    after = rc.prompt_estimate()
    yield Compaction(state.run_id, before, after, method)
    rc.compaction_failures = rc.compaction_failures + 1 if after > rc.agent.compaction_threshold * window else 0
    _maybe_give_up(rc, window)


def _maybe_give_up(rc: RunContext, window: int) -> None:
    if rc.compaction_failures >= MAX_FAILURES:
        rc.stop(Halt("failed", f"the context stays above {rc.agent.compaction_threshold:.0%} of the "
                     f"{window}-token window after {MAX_FAILURES} compactions; start a new session, "
                     "raise the window, or trim the tools' outputs"))


TRIMMED = ("[This tool output was removed to fit the model's context window. Call the tool again "
           "if you need it.]")


def trim_old_tool_outputs(rc: RunContext) -> bool:
    """Replace the outputs of tool calls before the latest turn with a note; True if any changed.

    Pairing is kept: every result stays, only its content shrinks. This is the fallback when the
    summary call fails; the note tells the model how to get an output back.
    """
    messages = rc.state.messages
    last_assistant = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    changed = False
    for i, m in enumerate(messages[:last_assistant]):
        if isinstance(m, ToolMessage) and m.text != TRIMMED:
            messages[i] = m.model_copy(update={"content": (TextPart(text=TRIMMED),)})
            changed = True
    return changed

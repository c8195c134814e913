"""RunState.turns is derived from the transcript (law 2), whatever appends and rewrites happened.

The count is kept incrementally; a rewrite in place of earlier messages must be announced
(``transcript_rewritten``, which ``RunContext.persist(rewrite=True)`` does), every other change —
appends, a shorter or replaced list, a reload — is detected."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tether.harness.state import RunState, conversation_turns
from tether.messages import AssistantMessage, TextPart, UserMessage

ACTIONS = st.lists(
    st.tuples(
        st.sampled_from(["user", "assistant", "summary", "rewrite", "pop", "clear", "reload"]), st.integers(0, 5)
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(actions=ACTIONS, history=st.integers(0, 2))
def test_the_turn_count_always_equals_a_fresh_count(actions: list[tuple[str, int]], history: int) -> None:
    state = RunState(history_turns=history)
    for action, n in actions:
        messages = state.messages
        if action == "user":
            messages.append(UserMessage.text("hi"))
        elif action == "assistant":
            messages.append(AssistantMessage(content=(TextPart(text="ok"),)))
        elif action == "summary":  # compaction: an older prefix replaced by one summary message
            cut = min(n, len(messages))
            messages[:cut] = [
                UserMessage(content=(TextPart(text="s"),), summary_turns=conversation_turns(messages[:cut]))
            ]
        elif action == "rewrite" and messages:  # a middleware's rewrite in place, said as the contract asks
            messages[n % len(messages)] = UserMessage.text("x") if n % 2 else AssistantMessage(content=())
            state.transcript_rewritten()
        elif action == "pop" and messages:
            messages.pop()
        elif action == "clear":
            state.messages = []
        elif action == "reload":
            state = RunState.model_validate_json(state.model_dump_json())
        assert state.turns == conversation_turns(state.messages) - history

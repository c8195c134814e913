"""How runs and transcripts read (src/tether/cli/display.py)."""

from __future__ import annotations

from pathlib import Path

from tether.cli.display import cost_text, summary_lines, tokens_text, transcript_lines
from tether.config import Settings
from tether.messages import AssistantMessage, TextPart, ToolCallPart, ToolMessage, UserMessage
from tether.status import CancelledInterruption, RunResult
from tether.usage import ModelInfo, Price, Usage

SETTINGS = Settings(home=Path("/nowhere"))


def test_cost_says_unknown_without_a_price_and_dollars_with_one() -> None:
    assert cost_text(0.0, "openai/x", SETTINGS) == (
        'cost unknown (no price for openai/x; add one under [models."openai/x"] in config.toml)'
    )
    assert cost_text(None, "openai/x", SETTINGS, short=True) == "unknown"
    assert cost_text(0.0, "openai/gpt-4.1-mini", SETTINGS) == "$0.000000"  # a known price: really zero
    # runs that record which models answered without a price (cost_usd None, or counted in part)
    assert cost_text(None, "openai/x", SETTINGS, unpriced=["openai/x"]) == cost_text(0.0, "openai/x", SETTINGS)
    assert cost_text(0.002, "scripted/plan", SETTINGS, unpriced=["openai/x"]) == (
        'at least $0.002000; cost unknown (no price for openai/x; add one under [models."openai/x"] in config.toml)'
    )
    priced = Settings(home=Path("/nowhere"), models={"openai/x": ModelInfo(price=Price(input=1, output=2))})
    assert cost_text(0.5, "openai/x", priced) == "$0.500000"


def test_tokens_say_when_they_were_estimated() -> None:
    assert tokens_text(Usage(prompt_tokens=1000, completion_tokens=234)) == "1,234"
    assert tokens_text(Usage(prompt_tokens=1000, completion_tokens=234, estimated=True)) == "~1,234 (estimated)"


def test_the_summary_of_a_cancelled_run_says_how_to_resume() -> None:
    result = RunResult(run_id="run_1", status="interrupted", interruption=CancelledInterruption(reason="Ctrl-C"))
    assert any("tether resume run_1" in line for line in summary_lines(result, "scripted/plan", SETTINGS))


def test_transcript_labels_roles_calls_and_decisions_and_shortens_long_outputs() -> None:
    long = "\n".join(f"row {i}" for i in range(100))
    messages = [
        UserMessage.text("clean up"),
        AssistantMessage(
            content=(
                TextPart(text="Looking."),
                ToolCallPart(id="c1", name="read_file", arguments='{"path": "a.log"}'),
                ToolCallPart(id="c2", name="delete_file", arguments='{"path": "a.log"}'),
            )
        ),
        ToolMessage(call_id="c1", name="read_file", content=(TextPart(text=long),)),
        ToolMessage(call_id="c2", name="delete_file", content=(TextPart(text="declined"),), status="rejected"),
        AssistantMessage(content=()),
    ]
    lines = list(transcript_lines(messages, full_hint="--full"))
    text = "\n".join(lines)
    assert lines[:2] == ["#1 user", "    clean up"]
    assert '    -> read_file {"path": "a.log"}   [call c1]' in lines
    assert "#3 tool read_file [call c1]: ok" in lines
    assert "#4 tool delete_file [call c2]: declined by a person (the model was told)" in lines
    assert (
        "row 11" in text
        and "row 12" not in text
        and "    … (88 more lines not shown; --full prints everything)" in lines
    )
    assert "    (empty answer)" in lines
    assert "row 99" in "\n".join(transcript_lines(messages, full=True))
    one_long_line = list(transcript_lines([UserMessage.text("x" * 5000)]))
    assert one_long_line[-1] == "    … (3,000 more characters not shown; --full prints everything)"


def test_the_summary_of_an_empty_answer_says_so_from_the_result() -> None:
    from tether.status import EMPTY_ANSWER

    empty = RunResult(run_id="run_1", status="completed", reason=EMPTY_ANSWER, empty_answer=True)
    lines = summary_lines(empty, "scripted/plan", SETTINGS)
    assert lines[0].startswith(f"[completed] {EMPTY_ANSWER} |")
    assert "   `tether show run_1` prints what the model returned" in lines
    # Output "" from a run a stop condition ended on a tool call is not an empty answer.
    stopped = RunResult(run_id="run_2", status="completed", reason="stop condition met")
    assert not any("tether show" in line for line in summary_lines(stopped, "scripted/plan", SETTINGS))


def test_transcript_lines_never_carry_a_terminal_escape() -> None:
    """``tether show`` and ``tether sessions show`` print these lines: a tool's result is text from
    outside, and OSC 52 in it would write the terminal's clipboard."""
    evil = "\x1b]52;c;ZWNobyBwd25lZA==\x07 and \x1b[2J and \u202e"
    lines = list(
        transcript_lines(
            [UserMessage.text("hi " + evil), ToolMessage(call_id="c", name="fetch", content=(TextPart(text=evil),))]
        )
    )
    text = "\n".join(lines)
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert "\\x1b]52;c;" in text and "\\u202e" in text  # shown, escaped

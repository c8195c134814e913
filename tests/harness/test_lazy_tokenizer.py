"""The exact tokenizer loads only when a decision needs it: a budget, or a context near the
compaction threshold. Below it, a bound that needs no tokenizer (one token per byte) settles it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import tether.tokens as tokens_module
from tether import Agent, run
from tether.harness import loop as loop_module
from tether.messages import AssistantMessage, TextPart
from tether.testing import FunctionModel, call
from tether.tokens import token_bound
from tether.tools.files import FILE_TOOLS
from tether.usage import Price, Usage


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every tokenizer load the loop starts, in a process where none is loaded yet."""
    seen: list[str] = []
    real = tokens_module.encoding

    def recorded(name: str = "o200k_base") -> Any:
        seen.append(name)
        return real(name)

    monkeypatch.setattr(loop_module, "encoding", recorded)
    monkeypatch.setattr(loop_module, "encoding_loaded", lambda: bool(seen))
    monkeypatch.setattr(tokens_module, "encoding_loaded", lambda: bool(seen))
    return seen


def _model(read: str | None = None) -> FunctionModel:
    """An OpenAI model (exact counts are o200k) that lists the files (or reads one), then answers."""

    def reply(messages: list[Any], request: Any) -> Any:
        if len(messages) == 1:
            return call("c1", "read_file", {"path": read}) if read else call("c1", "list_files")
        return AssistantMessage(content=(TextPart(text="done"),), usage=Usage(prompt_tokens=50, completion_tokens=2))

    model = FunctionModel(reply, model_id="gpt-4.1-mini")
    model.name = "openai"
    return model


def test_a_run_well_below_the_threshold_never_loads_the_tokenizer(workspace: Path, loads: list[str]) -> None:
    agent = Agent(_model(), tools=FILE_TOOLS, cwd=workspace, context_window=128_000)
    result = asyncio.run(run(agent, "list"))
    assert result.status == "completed" and result.turns == 2
    assert loads == []


def test_a_context_near_the_threshold_is_counted_exactly(workspace: Path, loads: list[str]) -> None:
    (workspace / "big.txt").write_text("word " * 3000)  # 15,000 bytes: the bound passes 60 % of 8,000
    agent = Agent(_model(read="big.txt"), tools=FILE_TOOLS, cwd=workspace, context_window=8_000)
    result = asyncio.run(run(agent, "list"))
    assert result.status == "completed"
    assert loads == ["o200k_base"]


def test_a_budget_loads_the_tokenizer_for_its_plan(workspace: Path, loads: list[str]) -> None:
    agent = Agent(_model(), tools=FILE_TOOLS, cwd=workspace, max_budget_usd=1.0, price=Price(input=1, output=1))
    result = asyncio.run(run(agent, "list"))
    assert result.status == "completed"
    assert loads == ["o200k_base"]


def test_the_bound_is_never_below_the_exact_count() -> None:
    texts = ["hello world", "日本語のテキスト", "emoji 👩‍👩‍👧", "a\ud800b", "x" * 1000, "  \n\t " * 30, "<|endoftext|>"]
    for text in texts:
        assert token_bound(text) >= tokens_module.count_tokens(text), text

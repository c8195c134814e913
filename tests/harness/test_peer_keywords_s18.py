"""A peer's keyword arguments to tether's run functions say what tether writes instead."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tether import Agent, run, run_stream, run_sync
from tether.testing import FunctionModel


def _agent(calls: list[str]) -> Agent:
    def model(messages: Any, request: Any) -> str:
        calls.append("called")
        return "hello"

    return Agent(FunctionModel(model))


def _sync(agent: Agent, kw: dict[str, Any]) -> None:
    run_sync(agent, "hi", **kw)


def _run(agent: Agent, kw: dict[str, Any]) -> None:
    asyncio.run(run(agent, "hi", **kw))


def _stream(agent: Agent, kw: dict[str, Any]) -> None:
    async def main() -> None:
        async for _ in run_stream(agent, "hi", **kw):
            pass

    asyncio.run(main())


@pytest.mark.parametrize(("call", "name"), [(_sync, "run_sync"), (_run, "run"), (_stream, "run_stream")])
@pytest.mark.parametrize(
    ("kw", "said"),
    [
        ({"message_history": []}, "state=state"),
        ({"context": object()}, "deps="),
        ({"model_settings": {"temperature": 0.2}}, "request_extra="),
        ({"usage_limits": None}, "max_run_tokens="),
        ({"max_turns": 3}, "Agent(max_turns="),
        ({"dep": 1}, "did you mean deps=?"),
    ],
)
def test_a_peers_keyword_says_what_tether_writes_instead(call: Any, name: str, kw: dict[str, Any], said: str) -> None:
    """Was: Python's bare "run_sync() got an unexpected keyword argument 'message_history'", which
    says nothing of where the thing lives in tether."""
    calls: list[str] = []
    with pytest.raises(TypeError) as raised:
        call(_agent(calls), kw)
    text = str(raised.value)
    assert text.startswith(f"{name}() takes no {next(iter(kw))}= argument")
    assert said in text
    assert "It takes: prompt, state, store, tracer, signal, session, session_id, deps" in text
    assert calls == []  # refused before the model is asked anything


def test_every_unknown_keyword_is_named_once() -> None:
    """Was: Python named only the first unexpected keyword; a second mistake surfaced a run later."""
    with pytest.raises(TypeError) as raised:
        _sync(_agent([]), {"sesion_id": "s", "zzz": 1})
    text = str(raised.value)
    assert "takes no sesion_id= argument (did you mean session_id=?)" in text
    assert "takes no zzz= argument." in text


def test_the_keywords_it_takes_still_work() -> None:
    """The refusal is only for what the functions do not take: deps= reaches the run."""
    result = run_sync(_agent([]), "hi", deps={"db": 1})
    assert result.status == "completed" and result.output == "hello"

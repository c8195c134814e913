"""Sub-agents and tools, left alone before: a configuration error a tool raises in a plain run, the
spans a resumed sub-agent's costs go on, and what a sub-agent's step costs its parent's saves."""

from __future__ import annotations

import pytest

from tests.conftest import assert_pairing
from tether import Agent, RunState, run_sync, tool
from tether.errors import ConfigError
from tether.messages import Message, ToolMessage
from tether.providers.base import ModelRequest
from tether.testing import FunctionModel, Reply

# --------------------------------------------------------------------------- a tool's ConfigError


def retrying_lead(name: str) -> tuple[FunctionModel, list[int]]:
    """A model that calls ``name`` as long as it gets errors back (one that retries), three times
    at most, then answers around it."""
    asked: list[int] = []

    def lead(messages: list[Message], request: ModelRequest) -> Reply | str:
        asked.append(1)
        results = [m.text for m in messages if isinstance(m, ToolMessage)]
        if len(results) < 3:
            return Reply(calls=((f"c{len(results)}", name, {"query": "open issues"}),))
        return f"worked around it: {results[-1]}"

    return FunctionModel(lead), asked


def test_a_tool_that_raises_a_configuration_error_ends_a_plain_run_failed_saying_what_to_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: the ConfigError reached the model as an ordinary tool error, and it retried three
    times and worked around a problem only a person can fix (a key not set). Now the run ends
    failed with the error's words, as a misconfigured sub-agent does; the call has its one result
    and the model is not asked again. The key's value never goes into the reason."""
    runs: list[int] = []

    @tool(read_only=True)
    def tracker(query: str) -> str:
        """Search the issue tracker."""
        runs.append(1)
        raise ConfigError("TRACKER_TOKEN is sk-tracker-0123456789abcdef0123 and expired: set a new one in config.toml")

    model, asked = retrying_lead("tracker")
    state = RunState()
    monkeypatch.setenv("TRACKER_TOKEN", "sk-tracker-0123456789abcdef0123")
    result = run_sync(Agent(model, tools=[tracker]), "what is open?", state=state)
    assert result.status == "failed", result.reason
    assert result.reason is not None and result.reason.startswith("the tool tracker is not configured right: ")
    assert "set a new one in config.toml" in result.reason
    assert "sk-tracker" not in result.reason
    assert asked == [1] and runs == [1]
    (answer,) = [m for m in state.messages if isinstance(m, ToolMessage)]
    assert answer.status == "error" and "set a new one in config.toml" in answer.text
    assert "sk-tracker" not in answer.text
    assert_pairing(state.messages)


def test_a_tool_s_ordinary_error_still_goes_to_the_model() -> None:
    """Only a configuration error ends the run: any other failure is the model's to read."""

    @tool(read_only=True)
    def tracker(query: str) -> str:
        """Search the issue tracker."""
        raise ValueError("no issue matches")

    model, asked = retrying_lead("tracker")
    result = run_sync(Agent(model, tools=[tracker]), "what is open?")
    assert result.status == "completed" and len(asked) == 4

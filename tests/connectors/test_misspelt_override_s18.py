"""An approval override whose name is a misspelling of the server's tool."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.connectors.conftest import INVENTORY, inventory, logged, tether
from tether import Agent, run
from tether.connectors import McpConnector
from tether.harness.state import RunState
from tether.messages import Message, ToolMessage
from tether.providers.scripted import Reply
from tether.testing import FunctionModel


def test_a_misspelt_override_that_asks_still_guards_the_tool_it_meant(calls: Path, tmp_path: Path) -> None:
    """Was: with ``approval = "never"`` and ``tools = { reordr = "always" }`` (a typo of reorder),
    the override named no tool, a warning was logged, and ``reorder`` ran without asking: the
    person's guard on the one tool they meant to guard was silently gone. Now what a misspelt
    override asks more holds for the tool whose name is near it; the run stops for approval and
    nothing is ordered."""

    def reply(messages: list[Message], request: Any) -> Reply | str:
        if not any(isinstance(m, ToolMessage) for m in messages):
            return Reply(calls=(("c1", "inventory__reorder", {"part": "FV-2050", "quantity": 5}),))
        return "done"

    table = inventory(calls, approval="never", tools={"reordr": "always", "set_nte": "never"})
    connector = McpConnector("inventory", table)
    agent = Agent(FunctionModel(reply), extensions=[connector], cwd=tmp_path)
    result = asyncio.run(run(agent, "Order five more FV-2050.", state=RunState()))
    assert result.status == "interrupted" and result.interruption is not None
    assert result.interruption.type == "approval" and result.interruption.tool_name == "inventory__reorder"
    assert logged(calls) == []
    assert connector.unknown_overrides == ["reordr", "set_nte"]


def test_mcp_list_says_which_tool_a_misspelt_override_guards(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: "tools names reordr: the server has no such tool", and reorder shown as running
    without asking. Now the listing says reorder asks, by which entry, and what was meant; an
    entry that asks less (set_nte = "never") is lent to nothing and gets no hint."""
    (home / "config.toml").write_text(
        f"""
[mcp.inventory]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(INVENTORY))}]
env = {{ INVENTORY_LOG = {json.dumps(str(tmp_path / "calls.log"))} }}
approval = "never"
tools = {{ reordr = "always", set_nte = "never" }}
"""
    )
    code, out, _ = tether(capsys, "mcp", "list")
    assert code == 0, out
    lines = out.splitlines()
    shown = {line.split()[0]: line.split(None, 1)[1] for line in lines if line.startswith("  inventory__")}
    assert shown["inventory__reorder"] == 'asks first (tools.reordr = "always")'
    assert shown["inventory__set_note"] == 'runs without asking (approval = "never")'
    assert (
        "  [mcp.inventory] tools names reordr: the server has no such tool "
        "(did you mean reorder? it asks as reordr says meanwhile)"
    ) in lines
    assert "  [mcp.inventory] tools names set_nte: the server has no such tool" in lines

"""An agent whose MCP server signs each user in (tests/connectors/oauth_server.py at
$TETHER_TEST_MCP_URL): its model calls ``guarded__whoami`` once, then says what came back."""

from __future__ import annotations

import os
from typing import Any

from tether import Agent
from tether.connectors import McpConnector
from tether.messages import ToolMessage
from tether.providers.scripted import call
from tether.testing import FunctionModel


def reply(messages: list[Any], request: Any) -> Any:
    answers = [m for m in messages if isinstance(m, ToolMessage)]
    if not answers:
        return call("c1", "guarded__whoami", {})
    return f"the server said: {answers[-1].text}"


guarded = McpConnector("guarded", {"url": os.environ["TETHER_TEST_MCP_URL"], "auth": "oauth", "approval": "never"})
agents = {"mail": Agent(FunctionModel(reply), extensions=[guarded], max_turns=4)}

"""An MCP server's sampling request is a model call of the run: under the run's token limit
(Agent.max_run_tokens) it is checked before it is sent, as it is against the dollar budget."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import mcp_types as types

from tether.cancel import CancelSignal
from tether.config import load_settings
from tether.connectors._client_side import Asker, ClientSide
from tether.harness.state import RunState
from tether.testing import ScriptedServer
from tether.tools.base import ToolContext


def test_a_sampling_request_the_token_limit_cannot_hold_is_not_sent(tmp_path: Path) -> None:
    """Was: a sampling request was checked against the dollar budget only: with 50 tokens left of
    the run's limit, a request of up to ~120 (100 to answer) was sent and its tokens charged past the
    limit; nor was a sub-agent's unused share of the limit, running beside it, held from it."""
    with ScriptedServer() as server:
        (tmp_path / "config.toml").write_text(
            f'[endpoints.local]\nkind = "openai"\nbase_url = "{server.base_url}"\nmodels = ["hello"]\n'
        )
        side = ClientSide(
            "srv", {"sampling": "allow", "sampling_model": "local/hello"}, Asker(), settings=load_settings(tmp_path)
        )
        message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text="Say hi"))
        ask = types.CreateMessageRequestParams(messages=[message], max_tokens=100)

        def answered(tokens_left: int, held: int = 0) -> tuple[Any, RunState]:
            state = RunState()
            if held:
                state.hold_tokens("c2", lambda: held)  # a sub-agent beside this call was given that, unused
            ctx = ToolContext(cwd=tmp_path, signal=CancelSignal(), state=state, tokens_left=tokens_left, call_id="c1")
            side.begin(ctx, "tool")
            try:
                return asyncio.run(side.sampling(ask)), state
            finally:
                side.end(side.calls[0])

        for refused, state in (answered(50), answered(5_000, held=4_950)):
            assert isinstance(refused, types.ErrorData) and "left of the run's token limit" in refused.message
            assert state.usage.total_tokens == 0  # not sent
        allowed, state = answered(5_000)
        assert isinstance(allowed, types.CreateMessageResult) and 0 < state.usage.total_tokens <= 5_000

"""Property: whatever sequence of turns, crashes, torn writes and resumes, the transcript keeps
every tool call paired with exactly one result, in declared order (law 1)."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.harness.test_crash import assert_pairing
from tether import Agent, RunState, RunStore, run, tool
from tether.harness.state import approve, pending_tool_calls, reject
from tether.messages import AssistantMessage, ToolCallPart, ToolMessage
from tether.testing import FunctionModel


class Crash(BaseException):
    """Stands for SIGKILL: nothing after it runs, nothing in memory survives."""


class CrashingStore(RunStore):
    def __init__(self, root: Path, saves_left: int, torn: bytes) -> None:
        super().__init__(root, fsync=False)
        self.saves_left, self.torn = saves_left, torn

    def save(self, state: RunState, *, rewrite: bool = False, durable: bool = True) -> None:
        if self.saves_left == 0:
            run_dir = self.root / state.run_id
            if self.torn == b"HEADER" and run_dir.exists():  # cut short while writing the next header
                from tether.harness.store import read_header

                seq = int((read_header(run_dir) or {}).get("commit_seq", 0)) + 1
                (run_dir / ("state.b.json" if seq % 2 == 0 else "state.a.json")).write_bytes(b'3f9a\n{"run_')
            elif self.torn and run_dir.exists():  # a write cut short after the last commit
                with open(run_dir / "messages.jsonl", "ab") as f:
                    f.write(self.torn)
            raise Crash
        self.saves_left -= 1
        super().save(state, rewrite=rewrite, durable=durable)


@tool(read_only=True)
def ok_tool(x: int = 0) -> str:
    return f"ok {x}"


@tool(read_only=True)
def failing_tool() -> str:
    raise RuntimeError("boom")


@tool
def write_tool(x: int = 0) -> str:
    return f"wrote {x}"


@tool(needs_approval=True)
def guarded_tool() -> str:
    return "guarded ran"


CALL_KINDS = ["ok_tool", "failing_tool", "write_tool", "guarded_tool", "missing_tool", "bad_json"]

turn_script = st.lists(st.lists(st.sampled_from(CALL_KINDS), min_size=0, max_size=3), min_size=1, max_size=6)


def model_for(script: list[list[str]]) -> FunctionModel:
    def fn(messages: list[Any], request: Any) -> Any:
        turn = sum(isinstance(m, AssistantMessage) for m in messages)
        if turn >= len(script) or not script[turn]:
            return "done"
        parts = []
        for i, kind in enumerate(script[turn]):
            name = "ok_tool" if kind == "bad_json" else kind
            args = '{"x": ' if kind == "bad_json" else json.dumps({"x": i} if "ok" in kind or "write" in kind else {})
            parts.append(ToolCallPart(id=f"t{turn}_{i}", name=name, arguments=args))
        return AssistantMessage(content=tuple(parts))

    return FunctionModel(fn)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    script=turn_script,
    crashes=st.lists(st.integers(min_value=0, max_value=12), max_size=4),
    torn=st.sampled_from([b"", b'{"role":"tool","call', b"\x00\xff garbage", b"HEADER"]),
    decisions=st.lists(st.sampled_from(["approve", "reject", "reject-silent"]), min_size=8, max_size=8),
)
def test_pairing_survives_any_crash_sequence(
    script: list[list[str]], crashes: list[int], torn: bytes, decisions: list[str]
) -> None:
    agent = Agent(model_for(script), tools=[ok_tool, failing_tool, write_tool, guarded_tool], max_turns=20)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        state: RunState | None = RunState(run_id="run_prop")
        prompt: str | None = "go"
        for attempt in range(40):
            saves = crashes[attempt] if attempt < len(crashes) else 10**6
            store = CrashingStore(root, saves, torn)
            try:
                result = asyncio.run(run(agent, prompt, state=state, store=store))
            except Crash:
                result = None
            loaded = RunStore(root).load("run_prop") if RunStore(root).exists("run_prop") else None
            if loaded is not None:
                assert_pairing_prefix(loaded.messages)
            if result is None:
                # The crash lost whatever was in memory; the disk is the truth from here.
                state, prompt = (loaded, None) if loaded is not None else (RunState(run_id="run_prop"), "go")
                continue
            assert loaded is not None
            state, prompt = loaded, None
            if result.status == "completed":
                break
            if result.status == "interrupted":
                decision = decisions[attempt % len(decisions)]
                if decision == "approve":
                    approve(state)
                else:
                    reject(state, reason="not now" if decision == "reject" else None)
        assert state is not None and state.status == "completed", state.status if state else None
        assert_pairing(state.messages)
        assert not pending_tool_calls(state)
        results = [m for m in state.messages if isinstance(m, ToolMessage)]
        assert len({r.call_id for r in results}) == len(results)


def assert_pairing_prefix(messages: list[Any]) -> None:
    """A saved transcript may end with calls still pending, but never breaks order before that."""
    expected: list[str] = []
    for m in messages:
        if isinstance(m, AssistantMessage):
            assert not expected
            expected = [c.id for c in m.tool_calls]
        elif isinstance(m, ToolMessage):
            assert expected and m.call_id == expected[0]
            expected.pop(0)

"""tether.connectors.mcp: the tools of a real stdio MCP server (tests/connectors/inventory_server.py),
called directly and by agents driven by FunctionModel."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp_types import Tool as McpSpec
from mcp_types import ToolAnnotations

from tests.connectors.conftest import INVENTORY, inventory, live_processes, logged, wait_until
from tether import Agent, approve, run, run_stream
from tether.cancel import CancelSignal
from tether.connectors import McpConnector, needs_approval, tool_name
from tether.errors import ConfigError
from tether.harness.state import RunState
from tether.messages import AssistantMessage, ImagePart, Message, TextPart, ToolMessage
from tether.providers.scripted import Reply
from tether.testing import FunctionModel
from tether.tools.base import ToolContext, ToolResult

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc for leftover processes")


def ctx(tmp_path: Path, signal: CancelSignal | None = None) -> ToolContext:
    return ToolContext(cwd=tmp_path, signal=signal or CancelSignal())


def text(result: ToolResult) -> str:
    return "".join(p.text for p in result.parts() if isinstance(p, TextPart))


def turn(messages: list[Message]) -> int:
    return sum(isinstance(m, AssistantMessage) for m in messages)


def results(messages: list[Message]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


# --- names and approvals, without a server ----------------------------------------------------------


def test_tool_names_are_namespaced_in_the_characters_and_length_providers_accept() -> None:
    assert tool_name("inventory", "stock") == "inventory__stock"
    assert tool_name("my.server", "get weather/now") == "my_server__get_weather_now"
    long = tool_name("inventory", "x" * 80)
    assert len(long) == 64 and long.startswith("inventory__xxx")
    assert long != tool_name("inventory", "x" * 81)  # cut names stay apart
    assert tool_name("s", "a.b", taken=["s__a_b"]) != "s__a_b"  # so do names that sanitise alike


def test_two_servers_whose_tools_would_both_be_named_a__b__c_get_different_names() -> None:
    first, second = tool_name("a__b", "c"), tool_name("a", "b__c")
    assert first != second and first.startswith("a__b__c_") and second.startswith("a__b__c_")
    assert tool_name("a_", "b") != tool_name("a", "_b")
    servers = [McpConnector("a__b", {"command": "unused"}), McpConnector("a", {"command": "unused"})]
    servers[0]._tools = servers[0]._make_tools([McpSpec(name="c", input_schema={"type": "object"})])
    servers[1]._tools = servers[1]._make_tools([McpSpec(name="b__c", input_schema={"type": "object"})])
    assert len(Agent("scripted/plan", extensions=servers).tool_map()) == 2  # was a ConfigError


def test_approval_follows_the_policy_then_the_hints_with_mcps_defaults() -> None:
    read_only = ToolAnnotations(read_only_hint=True)
    safe = ToolAnnotations(read_only_hint=False, destructive_hint=False)
    for hints, asks in [
        (None, True),
        (ToolAnnotations(), True),
        (read_only, False),
        (safe, False),
        (ToolAnnotations(destructive_hint=True), True),
    ]:
        assert needs_approval("destructive", hints) is asks
        assert needs_approval("always", hints) is True
        assert needs_approval("never", hints) is False


# --- one server, called directly ------------------------------------------------------------------


def test_a_servers_tools_and_what_their_calls_answer(calls: Path, tmp_path: Path) -> None:
    connector = McpConnector(
        "inventory", inventory(calls, timeout_s=3.0, tools={"set_note": "always", "reorder": "never"})
    )

    async def go() -> dict[str, Any]:
        await connector.start()
        try:
            tools = {t.name: t for t in connector.tools()}
            out: dict[str, Any] = {"tools": tools}
            for name, args in [
                ("environment", {}),
                ("photo", {"part": "FV-2050"}),
                ("datasheet", {"part": "FV-2050"}),
                ("fail", {"part": "ZZ-1"}),
                ("slow", {"seconds": 120}),
                ("spawn", {}),
                ("spawn", {"leave_group": True}),
            ]:
                out.setdefault(name, []).append(await tools[f"inventory__{name}"].execute(args, ctx(tmp_path)))
            out["cancel reached the server"] = wait_until(
                lambda: "slow cancelled" in logged(calls), 30, "the server's handler being cancelled"
            )
            out["server alive after the timeout"] = bool(live_processes(connector.pids))
            return out
        finally:
            await connector.stop()

    out = asyncio.run(go())
    tools = out["tools"]
    assert set(tools) == {
        f"inventory__{n}"
        for n in (
            "stock",
            "photo",
            "datasheet",
            "reorder",
            "set_note",
            "fail",
            "busy",
            "slow",
            "crash",
            "environment",
            "spawn",
            "clock",
            "big",
            "grow",
        )
    }
    stock = tools["inventory__stock"]
    assert stock.description == "How many of a part are in stock."
    assert stock.input_schema["properties"]["part"]["type"] == "string" and stock.input_schema["required"] == ["part"]
    # The hints decide under approval = "destructive"; the per-tool overrides win.
    flags = {n.removeprefix("inventory__"): (t.read_only, t.needs_approval, t.idempotent) for n, t in tools.items()}
    assert flags["stock"] == (True, False, True)
    assert flags["crash"] == (False, True, False)  # no hints: destructive, by MCP's defaults
    assert flags["reorder"] == (False, False, False)  # tools.reorder = "never"
    assert flags["set_note"] == (False, True, True)  # tools.set_note = "always", though marked not destructive

    # Exactly the configured environment plus PATH (LC_CTYPE is set by the server's own Python, PEP 538).
    assert set(text(out["environment"][0]).split()) - {"LC_CTYPE"} == {"INVENTORY_LOG", "PATH"}
    photo = out["photo"][0]
    assert not photo.is_error and [type(p) for p in photo.parts()] == [TextPart, ImagePart]
    assert photo.parts()[1].media_type == "image/png" and photo.parts()[1].data.startswith("iVBOR")
    sheet = text(out["datasheet"][0])
    assert "[resource inventory://parts/FV-2050/datasheet (text/plain)]\nMax pressure: 40 bar" in sheet
    assert (
        "[resource inventory://parts/FV-2050/cad (application/octet-stream): 3 bytes of binary data, not shown]"
        in sheet
    )
    assert "[resource link https://example.com/FV-2050.pdf (application/pdf)] drawing" in sheet
    fail = out["fail"][0]
    assert fail.is_error and "part ZZ-1 is not in the catalogue" in text(fail)
    slow = out["slow"][0]
    assert slow.is_error and "did not answer within 3 s" in text(slow) and "cancelled" in text(slow)
    assert out["cancel reached the server"] and out["server alive after the timeout"]
    # The server and both processes it started (one left its group) are gone.
    children = [int(text(r)) for r in out["spawn"]]
    assert len(connector.pids) == 1 and live_processes([*connector.pids, *children]) == []


def test_a_server_that_dies_mid_call_is_restarted_once_then_is_down(calls: Path, tmp_path: Path) -> None:
    connector = McpConnector("inventory", inventory(calls))

    async def go() -> list[str]:
        await connector.start()
        try:
            tools = {t.name: t for t in connector.tools()}
            seen = []
            for name, args in [("crash", {}), ("stock", {"part": "A"}), ("crash", {}), ("stock", {"part": "B"})]:
                result = await tools[f"inventory__{name}"].execute(args, ctx(tmp_path))
                seen.append(("error: " if result.is_error else "") + text(result))
            return seen
        finally:
            await connector.stop()

    first, after_restart, second, after_down = asyncio.run(go())
    assert first.startswith("error: ") and "stopped during this call to inventory__crash" in first
    assert "killed by SIGKILL" in first and "was restarted" in first and "not run again" in first
    assert after_restart == "A: 12 in stock"
    assert second == after_down == "error: Error: server inventory is down: the process was killed by SIGKILL"
    # Each crash ran once, on its own process: the call was never run again behind the model's back.
    crashes = [line for line in logged(calls) if line.startswith("crash")]
    assert len(crashes) == 2 and crashes[0] != crashes[1]
    assert len(connector.pids) == 2 and live_processes(connector.pids) == []


def test_a_server_that_does_not_start_stops_the_run_before_anything_runs(tmp_path: Path) -> None:
    broken = McpConnector(
        "broken",
        {"command": sys.executable, "args": ["-c", "import sys; print('no API key', file=sys.stderr); sys.exit(3)"]},
    )
    asked: list[int] = []
    agent = Agent(FunctionModel(lambda m, r: asked.append(1) or "hi"), extensions=[broken], cwd=tmp_path)
    with pytest.raises(ConfigError) as err:
        asyncio.run(run(agent, "hello"))
    assert str(err.value) == (
        "MCP server broken did not start: the process exited with status 3 (its last words: no API key)"
    )
    assert asked == [] and live_processes(broken.pids) == []


# --- agents using a server ------------------------------------------------------------------------


def test_a_run_gets_text_and_images_reads_once_and_waits_for_approval_before_a_destructive_call(
    calls: Path, tmp_path: Path
) -> None:
    def reply(messages: list[Message], request: Any) -> Reply | str:
        if turn(messages) == 0:
            return Reply(
                calls=(("c1", "inventory__stock", {"part": "FV-2050"}), ("c2", "inventory__photo", {"part": "FV-2050"}))
            )
        if turn(messages) == 1:  # the same read again, and an order: destructive (no hints)
            return Reply(
                calls=(
                    ("c3", "inventory__stock", {"part": "FV-2050"}),
                    ("c4", "inventory__reorder", {"part": "FV-2050", "quantity": 5}),
                )
            )
        return f"{results(messages)[2].text.splitlines()[-1]}; {results(messages)[-1].text}"

    connector = McpConnector("inventory", inventory(calls, cache=["stock"]))
    agent = Agent(FunctionModel(reply), extensions=[connector], cwd=tmp_path)
    state = RunState()
    first = asyncio.run(run(agent, "Order five more FV-2050 if we are low.", state=state))
    assert first.status == "interrupted" and first.interruption is not None
    assert first.interruption.type == "approval" and first.interruption.tool_name == "inventory__reorder"
    stock, photo, again = results(state.messages)
    assert stock.status == "ok" and stock.text == "FV-2050: 12 in stock"
    assert [type(p) for p in photo.content] == [TextPart, ImagePart]
    assert again.status == "cached" and again.cached_from == "c1"
    # The two reads ran side by side (read-only), so the server logged them in either order; the
    # repeated read did not run, and the order waits.
    assert sorted(logged(calls)) == ["photo FV-2050", "stock FV-2050"]

    approve(state)
    second = asyncio.run(run(agent, state=state))
    assert second.status == "completed" and second.output == "FV-2050: 12 in stock; ordered 5 x FV-2050"
    assert sorted(logged(calls)[:2]) == ["photo FV-2050", "stock FV-2050"]
    assert logged(calls)[2:] == ["reorder FV-2050 5"]
    assert len(connector.pids) == 2 and live_processes(connector.pids) == []  # one server per run_stream call


def test_a_stop_during_a_slow_call_ends_the_run_interrupted_and_stops_the_server(calls: Path, tmp_path: Path) -> None:
    def reply(messages: list[Message], request: Any) -> Reply | str:
        return Reply(calls=(("c1", "inventory__slow", {"seconds": 300}),)) if turn(messages) == 0 else "waited"

    connector = McpConnector("inventory", inventory(calls))
    agent = Agent(FunctionModel(reply), extensions=[connector], cwd=tmp_path)

    async def go() -> Any:
        signal = CancelSignal()

        async def stop_when_the_server_works() -> None:
            while not progress or "slow started" not in logged(calls):  # the call is under way
                await asyncio.sleep(0.05)
            signal.cancel("stop")

        stopper = asyncio.create_task(stop_when_the_server_works())
        result = None
        async for event in run_stream(agent, "Wait for it.", signal=signal):
            if event.type == "tool_progress":
                progress.append(event.label)
            if event.type == "done":
                result = event.result
        await stopper
        return result

    progress: list[str] = []
    result = asyncio.run(asyncio.wait_for(go(), 120))  # a guard, not a measurement: Stop must not wait 300 s
    assert progress == ["0/1 waiting"]  # the server's progress notification, as the run's event
    assert result.status == "interrupted" and result.interruption.type == "cancelled"
    assert result.interruption.reason == "stop"
    assert "slow cancelled" in logged(calls)
    assert live_processes(connector.pids) == []


def test_a_servers_own_error_with_the_closed_connection_code_is_its_answer_not_a_crash(
    calls: Path, tmp_path: Path
) -> None:
    """-32000 is the SDK's code for a connection that closed, and many servers' code for their own
    errors. A stdio server that refuses with it is still up: the call is its refusal, in its words,
    and the same process serves the next call (no restart, no "server down")."""
    connector = McpConnector("inventory", inventory(calls))

    async def go() -> list[ToolResult]:
        await connector.start()
        try:
            tools = {t.name: t for t in connector.tools()}
            return [
                await tools["inventory__busy"].execute({"part": "FV-2050"}, ctx(tmp_path)),
                await tools["inventory__stock"].execute({"part": "FV-2050"}, ctx(tmp_path)),
            ]
        finally:
            await connector.stop()

    busy, stock = asyncio.run(go())
    assert busy.is_error and "the stock database is busy; ask about FV-2050 again in a minute" in text(busy)
    assert "stopped" not in text(busy) and "restarted" not in text(busy) and "down" not in text(busy)
    assert not stock.is_error and text(stock) == "FV-2050: 12 in stock"
    assert len(connector.pids) == 1, "the server was not restarted"
    assert [line for line in logged(calls) if line.startswith(("busy", "stock"))] == ["busy FV-2050", "stock FV-2050"]


# --- results kept in bounds, answers reused only when they may be ----------------------------------


def test_a_result_past_the_limit_keeps_its_head_and_tail_and_says_what_was_cut(calls: Path, tmp_path: Path) -> None:
    async def go(connector: McpConnector, chars: int) -> ToolResult:
        await connector.start()
        try:
            tools = {t.name: t for t in connector.tools()}
            return await tools["inventory__big"].execute({"chars": chars}, ctx(tmp_path))
        finally:
            await connector.stop()

    whole = asyncio.run(go(McpConnector("inventory", inventory(calls)), 90_000))
    assert len(text(whole)) == 90_000
    cut = asyncio.run(go(McpConnector("inventory", inventory(calls)), 3_000_000))
    assert text(cut).startswith("HEAD") and text(cut).endswith("TAIL")
    assert 100_000 < len(text(cut)) < 100_400  # the default: read_file's 100,000 characters and a note
    assert "2,900,000 of 3,000,000 characters cut here" in text(cut) and "max_result_chars" in text(cut)
    small = asyncio.run(go(McpConnector("inventory", inventory(calls, max_result_chars=1_000)), 5_000))
    assert len(text(small)) < 1_400 and text(small).endswith("TAIL") and "4,000 of 5,000" in text(small)


def test_a_read_only_tool_runs_every_time_unless_it_is_declared_cacheable(calls: Path, tmp_path: Path) -> None:
    """readOnlyHint says a tool does not write, not that its answer holds: the clock is read twice."""

    def reply(messages: list[Message], request: Any) -> Reply | str:
        if turn(messages) < 2:
            n = turn(messages)
            return Reply(calls=((f"k{n}", "inventory__clock", {}), (f"s{n}", "inventory__stock", {"part": "FV"})))
        return "done"

    state = RunState()
    connector = McpConnector("inventory", inventory(calls, cache=["stock"]))
    result = asyncio.run(run(Agent(FunctionModel(reply), extensions=[connector], cwd=tmp_path), "time?", state=state))
    assert result.status == "completed"
    first_clock, _, second_clock, second_stock = results(state.messages)
    assert second_clock.status == "ok" and second_clock.text != first_clock.text
    assert second_stock.status == "cached" and second_stock.cached_from == "s0"
    assert logged(calls).count("clock") == 2 and logged(calls).count("stock FV") == 1


def test_a_stdio_answer_past_the_line_limit_is_refused_at_once_with_its_size(
    calls: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: the line was dropped, the call waited its whole timeout, then said "did not answer ...
    safe to call it again". The limit is lowered to 1 MiB here, so the test sends 2 MB, not 64 MiB."""
    from tether.connectors import _stdio

    monkeypatch.setattr(_stdio, "LINE_LIMIT", 1024 * 1024)
    connector = McpConnector("inventory", inventory(calls, timeout_s=600))

    async def go() -> list[ToolResult]:
        await connector.start()
        try:
            tools = {t.name: t for t in connector.tools()}
            return [
                await tools["inventory__big"].execute({"chars": 2_000_000}, ctx(tmp_path)),
                await tools["inventory__stock"].execute({"part": "FV"}, ctx(tmp_path)),
            ]
        finally:
            await connector.stop()

    big, after = asyncio.run(asyncio.wait_for(go(), 300))  # a guard: the old way waited 600 s
    assert big.is_error and "did not answer" not in text(big)
    assert "answer is 4,000,2" in text(big)  # the text twice: as content and as structuredContent
    assert "more than the 1 MiB tether reads" in text(big)
    assert not after.is_error and text(after) == "FV: 12 in stock"  # the session goes on
    assert len(connector.pids) == 1


def test_the_servers_of_a_run_start_together(calls: Path, tmp_path: Path) -> None:
    """Each server waits, before it answers, until the other one has been started: one after the
    other, the first would wait for ever (here: give up after 20 s and fail the run)."""
    wait_for_peer = (
        "import pathlib, runpy, sys, time; me, peer = map(pathlib.Path, sys.argv[1:3]); me.touch(); "
        "deadline = time.time() + 20\n"
        "while not peer.exists():\n"
        "    time.sleep(0.02)\n"
        "    if time.time() > deadline: sys.exit('the other server never started')\n"
        f"sys.argv = [{str(INVENTORY)!r}]; runpy.run_path({str(INVENTORY)!r}, run_name='__main__')"
    )
    a, b = tmp_path / "a.started", tmp_path / "b.started"
    servers = [
        McpConnector(name, {**inventory(calls), "args": ["-c", wait_for_peer, str(me), str(peer)]})
        for name, me, peer in (("one", a, b), ("two", b, a))
    ]

    def reply(messages: list[Message], request: Any) -> str:
        return " ".join(sorted(d.name for d in request.tools if d.name.endswith("__stock")))

    result = asyncio.run(run(Agent(FunctionModel(reply), extensions=servers, cwd=tmp_path), "which?"))
    assert result.status == "completed" and result.output == "one__stock two__stock"
    assert all(live_processes(s.pids) == [] for s in servers)


def test_a_changed_tool_list_is_listed_again_for_the_next_run(calls: Path, tmp_path: Path) -> None:
    connector = McpConnector("inventory", inventory(calls))

    async def go() -> tuple[list[str], list[str]]:
        await connector.start()
        try:
            before = [t.name for t in connector.tools()]
            grow = next(t for t in connector.tools() if t.name == "inventory__grow")
            assert text(await grow.execute({}, ctx(tmp_path))) == "grown"
            for _ in range(200):  # the notification is handled as it comes: wait for the new list
                if "inventory__extra" in [t.name for t in connector.tools()]:
                    break
                await asyncio.sleep(0.05)
            return before, [t.name for t in connector.tools()]
        finally:
            await connector.stop()

    before, after = asyncio.run(go())
    assert "inventory__extra" not in before and "inventory__extra" in after

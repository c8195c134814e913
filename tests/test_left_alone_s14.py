"""Defects an earlier session noticed and left alone, each confirmed from outside and fixed: ids
reused over `tether mcp serve`'s stdio, a run under way when its client closes stdin, ...
Each test says what was wrong before its fix."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.connectors.test_attack_mcp_round2 import Wire
from tests.connectors.test_attack_mcp_serve_s13 import call, held_home, runs_started, tasks_run
from tether.harness.store import RunStore

# --- tether mcp serve over stdio ------------------------------------------------------------------

ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def test_mcp_serve_frees_the_id_of_a_request_the_sdk_refused_before_running_it(tmp_path: Path) -> None:
    """Was: over the 2026-07-28 protocol (no initialize; an envelope in each request's _meta), a
    request the SDK refuses before it runs (an envelope without its capabilities, no _meta at all,
    initialize) kept its id taken for the rest of the session: every later request with that id
    was refused as "taken by a request still running", though the first had been answered."""
    pytest.importorskip("mcp", reason="tether mcp serve needs the mcp extra")
    wire = Wire(held_home(tmp_path))
    half = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
    answers = []
    try:
        for ident, params in [(1, {"_meta": ENVELOPE}), (2, {"_meta": half}), (2, {"_meta": ENVELOPE}), (3, None)]:
            message = {"jsonrpc": "2.0", "id": ident, "method": "tools/list"}
            wire.send(message if params is None else {**message, "params": params})
            answers.append(wire.answer())
        wire.send({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": ENVELOPE}})
        answers.append(wire.answer())
    finally:
        code, rest, err = wire.close()
    assert [a and (a["id"], a.get("error", {}).get("code")) for a in answers] == [
        (1, None),
        (2, -32602),  # the envelope lacks its capabilities
        (2, None),  # was -32600: "the id 2 is taken by a request still running"
        (3, -32602),  # no envelope at all
        (3, None),
    ]
    assert "agent_held" in {t["name"] for t in answers[2]["result"]["tools"]}
    assert code == 0 and rest == b"" and "Traceback" not in err


def test_mcp_serve_whose_stdin_closes_during_a_run_answers_with_the_run_id(tmp_path: Path) -> None:
    """Was: closing stdin (MCP's way to end a stdio session) while an agent ran stopped the run but
    answered the call with the SDK's bare "Connection closed" (-32000), so the client never learnt
    which run to look for. Now the call answers as any stopped run does: status interrupted, the
    reason, the run id and how to continue it. A request cancelled by the client frees its id at
    once (it is never answered), so the id may be used again at once."""
    pytest.importorskip("mcp", reason="tether mcp serve needs the mcp extra")
    home = held_home(tmp_path)
    wire = Wire(home)
    try:
        wire.handshake()
        wire.send(call(1, "first"))
        runs_started(tmp_path, 1)
        wire.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
        wire.send(call(1, "again"))  # the model is held: this run is under way or not started yet
    finally:
        code, rest, err = wire.close()
    answers = [json.loads(line) for line in rest.splitlines()]
    assert len(answers) == 1 and answers[0]["id"] == 1, answers  # the cancelled call is not answered
    said = answers[0]["result"]["structuredContent"]
    assert said["status"] == "interrupted" and "closed the connection (stdin)" in said["reason"]
    assert f"tether show {said['run_id']}" in said["next_step"]
    record = RunStore(home / "runs").load(said["run_id"])
    assert record.status == "interrupted" and record.ext["config"]["prompt"] == "again"
    assert tasks_run(home) == ["again", "first"]
    assert code == 0 and "Traceback" not in err


def test_mcp_serve_over_stdio_stops_at_ctrl_c_or_sigterm_though_stdin_stays_open(tmp_path: Path) -> None:
    """Was: Ctrl-C or SIGTERM did not stop `tether mcp serve` (stdio) while its stdin stayed open:
    the SDK's reader waited in a thread for the next line and the process waited for it, until the
    client closed stdin (a person at a terminal pressed Ctrl-C in vain; a client's SIGTERM was
    ignored until its SIGKILL, which saves nothing). Now it ends at once with exit 130, as `tether
    run` does, its run saved interrupted (resumable)."""
    pytest.importorskip("mcp", reason="tether mcp serve needs the mcp extra")
    home = held_home(tmp_path)
    wire = Wire(home)
    try:
        wire.handshake()
        wire.send(call(1, "first"))
        runs_started(tmp_path, 1)
        wire.proc.send_signal(signal.SIGTERM)  # a client's; Ctrl-C's SIGINT hung the same way
        code = wire.proc.wait(30)  # a hang guard: before the fix it waited for stdin's end
    finally:
        if wire.proc.poll() is None:
            wire.proc.kill()
            wire.proc.wait()
    assert code == 130
    [record] = RunStore(home / "runs").list()
    assert record["status"] == "interrupted"


def test_mcp_serve_over_http_stopped_during_a_call_answers_it_with_the_run_id(tmp_path: Path) -> None:
    """Was: Ctrl-C (or SIGTERM) stopped `tether mcp serve --http` with a call's run under way: the
    run was saved as "cancelled: the MCP client cancelled the call", which it was not, and the
    client's open stream ended with no answer at all (the SDK's "Connection closed" gave up: "transport
    write blocked"). Now the runs stop first and each call answers with its run id, then the server
    stops (exit 130, as after Ctrl-C in `tether run`)."""
    pytest.importorskip("mcp", reason="tether mcp serve needs the mcp extra")
    import httpx

    from tests.connectors.test_mcp_serve_stop_s17 import opened_session, serving_over_http

    home = held_home(tmp_path)
    with serving_over_http(home) as (proc, url, log):
        with httpx.Client(timeout=30, headers={"Accept": "application/json, text/event-stream"}) as http:
            headers = opened_session(http, url)
            with http.stream("POST", url, json=call(1, "first"), headers=headers) as first:
                runs_started(tmp_path, 1)
                proc.send_signal(signal.SIGINT)
                said = first.read().decode()
        code = proc.wait(30)
    [data] = [line[len("data: ") :] for line in said.splitlines() if line.startswith("data: ")]
    answer = json.loads(data)["result"]["structuredContent"]
    assert answer["status"] == "interrupted" and "the server was stopped" in answer["reason"], answer
    assert RunStore(home / "runs").load(answer["run_id"]).status == "interrupted"
    assert code == 130 and "Traceback" not in log.read_text()


# --- tether kb add, two at once -------------------------------------------------------------------


def test_two_adds_at_once_of_one_file_name_from_two_folders_keep_both_documents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: `cd alpha && tether kb add README.md` and `cd beta && tether kb add README.md` started
    together both found no README.md in the base, both named their file README.md, and the later
    write replaced the other's document: both said "1 added", one text was gone (4 runs in 8 of two
    real processes). Here the other add is made to land exactly between this add's look-up and its
    write (two connections to one base file, as two processes have)."""
    from tether.knowledge import KnowledgeBase

    alpha, beta = tmp_path / "alpha", tmp_path / "beta"
    for folder, word in ((alpha, "brine"), (beta, "glycol")):
        folder.mkdir()
        (folder / "README.md").write_text(f"The {folder.name} project pumps {word}.\n")
    ours, theirs = KnowledgeBase.open(tmp_path / "kb.db"), KnowledgeBase.open(tmp_path / "kb.db")
    write = ours.store.replace_document
    landed = []

    def other_add_first(name: str, **kwargs: Any) -> int:
        if not landed:  # the other process's add, whole, after ours looked the name up
            monkeypatch.chdir(beta)
            landed.append(theirs.add_path("README.md"))
            monkeypatch.chdir(alpha)
        return write(name, **kwargs)

    monkeypatch.setattr(ours.store, "replace_document", other_add_first)
    monkeypatch.chdir(alpha)
    report = ours.add_path("README.md")
    assert landed[0].added == ["README.md"]
    assert report.added == [(alpha / "README.md").as_posix()] and report.updated == [], report
    kb = KnowledgeBase.open(tmp_path / "kb.db")
    assert sorted((d.name, d.path) for d in kb.documents()) == [
        ((alpha / "README.md").as_posix(), str((alpha / "README.md").resolve())),
        ("README.md", str((beta / "README.md").resolve())),
    ]
    for word, folder in (("brine", alpha), ("glycol", beta)):
        [hit] = kb.search(word, mode="keyword").hits
        assert hit.chunk.text.strip() == (folder / "README.md").read_text().strip()
    # Consistent: added again from either folder, each is the one document it was.
    assert kb.add_path("README.md").unchanged == [(alpha / "README.md").as_posix()]
    monkeypatch.chdir(beta)
    assert kb.add_path("README.md").unchanged == ["README.md"]
    assert kb.store.stats()["documents"] == 2 and kb.store.stats()["chunks"] == 2

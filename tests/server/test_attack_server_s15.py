"""``tether serve`` and its page attacked from outside (round fifteen): hostile model and tool output
on the page in a real headless Chromium, and the API as a hostile or unlucky client meets it. Each
test failed before its fix."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="needs tether[serve] (the [test] extra installs it)")
pytest.importorskip("playwright", reason="needs tether[test] (the [test] extra installs it)")

import httpx
from playwright.sync_api import Page, expect

from tests.server.conftest import EXAMPLE_WORKSPACE, NEEDS_CHROMIUM, parse_sse, read_events, wait_until
from tests.server.test_restart import Process

expect.set_options(timeout=15_000)

# One agent whose model is a function of the last user message: "buttons" and "form" answer with
# widgets whose every label is one word of 3,000 characters, "fail" fails with such a reason,
# "tool" calls a tool (that does not exist) of such a name, "table" answers a table of 300 columns,
# "image" an image 20,000 pixels wide; anything else is echoed.
AGENTS = '''
from tether import Agent, tool
from tether.messages import ToolMessage
from tether.providers.scripted import call
from tether.server.widgets import buttons, form, select, text
from tether.testing import FunctionModel

LONG = "W" * 3000


@tool(idempotent=True)
def offer(kind: str) -> object:
    """Offers buttons or a form."""
    if kind == "buttons":
        return buttons([LONG, "short"], title=LONG)
    return form([select("s", LONG, [LONG, "b"]), text("t", LONG, default=LONG)], title=LONG, submit=LONG)


def reply(messages, request):
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return "shown"
    said = "".join(getattr(p, "text", "") for p in last.content)
    if said in ("buttons", "form"):
        return call(f"c{len(messages)}", "offer", {"kind": said})
    if said == "fail":
        raise ValueError(LONG)
    if said == "table":
        return "|" + "|".join(f"c{i}" for i in range(300)) + "|\\n|" + "---|" * 300 + "\\n|" + "x|" * 300
    if said == "image":
        import base64
        svg = b'<svg xmlns="http://www.w3.org/2000/svg" width="20000" height="300"><rect width="20000" height="300"/></svg>'
        return "look: ![wide](data:image/svg+xml;base64," + base64.b64encode(svg).decode() + ")"
    if said == "tool":
        return call(f"c{len(messages)}", "no_such_" + LONG, {"x": LONG})
    return said


agents = {"wide": Agent(FunctionModel(reply), tools=[offer], max_turns=4)}
'''


def _module(tmp_path: Path) -> Path:
    path = tmp_path / "agents.py"
    path.write_text(AGENTS)
    return path


def _ask(page: Page, text: str) -> None:
    page.fill("#prompt", text)
    page.press("#prompt", "Enter")


@NEEDS_CHROMIUM
def test_a_word_thousands_of_characters_long_never_widens_the_conversation(
    served: Any, page: Page, tmp_path: Path
) -> None:
    """A widget's button, a form's submit, a failed run's reason and the name of a tool the model
    made up, each one word of 3,000 characters, made the conversation 25,000 to 32,000 pixels wide
    (a horizontal scrollbar under the whole chat, the answers pushed off screen), and so did an
    answer's wide image or table; every string of the conversation now wraps inside its column, an
    image is scaled down to it, and a table scrolls inside itself."""
    server = served(agents_module=_module(tmp_path))
    page.goto(server.url)
    expect(page.locator("#me")).to_contain_text("local")
    for n, said in enumerate(("buttons", "form", "fail", "tool", "table", "image"), 1):
        _ask(page, said)
        expect(page.locator(".turn .exit")).to_have_count(n)
        expect(page.locator("#send")).to_be_enabled()
    expect(page.locator(".widget-buttons button.cta").first).to_be_visible()
    chat = page.evaluate("() => { const c = document.getElementById('chat'); return [c.scrollWidth, c.clientWidth]; }")
    assert chat[0] <= chat[1], f"the conversation is {chat[0]} pixels wide in a column of {chat[1]}"


def test_a_message_sent_again_after_a_kill_before_its_run_began_is_answered(served: Any, tmp_path: Path) -> None:
    """``tether serve`` killed (-9) after it accepted a message and before the run's first save: the
    client, whose connection dropped, sends the message again with its message_id, as the docs say.
    It got 200 and a stream of the one ``started`` event, ending with no ``done``: the run never
    began unless someone found its Resume. Now the run begins, and answers once; a message whose
    session went on since (another message was answered) is not begun behind its back."""
    home, workspace = tmp_path / "home", tmp_path / "killed"
    shutil.copytree(EXAMPLE_WORKSPACE, workspace)
    ask = "Which file mentions a timeout?"
    first = Process(home, workspace)
    with first.client() as c:  # the "gated" agent's runs wait in their extension's start, unsaved
        sessions = [c.post("/v1/sessions", json={"agent": "gated"}).json()["session_id"] for _ in range(2)]
        runs = [
            c.post(f"/v1/sessions/{sid}/messages", json={"text": ask, "message_id": f"m-{n}"}).json()["run_id"]
            for n, sid in enumerate(sessions)
        ]
        reached = workspace / "gate-reached"
        wait_until(lambda: reached.exists() and len(reached.read_text().splitlines()) == 2, what="both runs waiting")
    assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    second = served(home=home)  # started again where the killed one stopped
    (tmp_path / "workspace0" / "open-gate").write_text("go")
    with second.client() as c:
        went_on = c.post(f"/v1/sessions/{sessions[1]}/messages", json={"text": ask}).json()["run_id"]
        assert read_events(c, f"/v1/runs/{went_on}/events")[-1]["result"]["status"] == "completed"
        stream = {"Accept": "text/event-stream"}
        for n, sid in enumerate(sessions):
            again = {"text": ask, "message_id": f"m-{n}"}
            with c.stream("POST", f"/v1/sessions/{sid}/messages", json=again, headers=stream) as r:
                assert r.status_code == 200
                events = list(parse_sse(r.iter_lines()))
            if n == 0:
                assert events[-1]["event"] == "done", [e["event"] for e in events]
                assert events[-1]["result"]["status"] == "completed" and events[-1]["run_id"] == runs[0]
            else:  # its session went on: not begun now (its stream ends as the restart ended it)
                assert [e["event"] for e in events] == ["started", "done"]
                assert events[-1]["result"]["status"] == "interrupted"
                assert c.get(f"/v1/runs/{runs[1]}").json()["status"] == "interrupted"
        transcript = c.get(f"/v1/runs/{runs[0]}/transcript").json()["messages"]
        assert [m["role"] for m in transcript].count("user") == 1
        r = c.post(f"/v1/sessions/{sessions[0]}/messages", json={"text": ask, "message_id": "m-0"})
        assert r.status_code == 200 and r.json()["run_id"] == runs[0]  # once more: nothing starts again
        assert c.get(f"/v1/runs/{runs[0]}").json()["status"] == "completed"
        reached = tmp_path / "workspace0" / "gate-reached"
        assert len(reached.read_text().splitlines()) == 2  # the two runs begun after the restart, no more


def test_a_page_served_over_https_by_a_proxy_is_told_what_the_proxy_must_send(served: Any) -> None:
    """Behind a proxy that ends TLS and does not say so (no ``X-Forwarded-Proto``), every change the
    page made was refused 403 "refused a POST from another site (https://chat.example.com)": the
    page's own site, named as another. It is still refused (the server cannot tell it from a page
    on the same name over plain http), saying what the proxy must send; with the header it passes."""
    server = served(tokens=["alice"], config='[serve]\nallowed_hosts = ["chat.example.com"]\n')
    with server.client("alice") as c:
        page = {"Host": "chat.example.com", "Origin": "https://chat.example.com"}
        r = c.post("/v1/sessions", json={}, headers=page)
        assert r.status_code == 403, r.text
        message = r.json()["error"]["message"]
        assert "another site" not in message and "X-Forwarded-Proto" in message, message
        r = c.post("/v1/sessions", json={}, headers=page | {"X-Forwarded-Proto": "https"})  # from a proxy on loopback
        assert r.status_code == 201, r.text
        evil = c.post("/v1/sessions", json={}, headers={"Host": "chat.example.com", "Origin": "https://evil.example"})
        assert evil.status_code == 403 and "another site" in evil.json()["error"]["message"]


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS in /proc/self/status")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the process's memory from /proc")
def test_clients_that_read_a_long_runs_events_slowly_do_not_each_hold_its_whole_log(served: Any) -> None:
    """The stream of a run that is not live read its whole log and parsed it before its first byte,
    and held all of it until its client had read it: a log of 24 MB was about 80 MB of the server's
    memory for each client that opened it and read slowly (four: over 300 MB; a few dozen take all
    of a server's). Its events are now read as the client takes them, a slice at a time."""
    server = served()  # in this process: its memory is this process's
    with server.client() as c:
        sid = c.post("/v1/sessions", json={"agent": "plan"}).json()["session_id"]
        run_id = c.post(f"/v1/sessions/{sid}/messages", json={"text": "Which file mentions a timeout?"}).json()[
            "run_id"
        ]
        done = read_events(c, f"/v1/runs/{run_id}/events")[-1]
        path = server.home / "serve" / "events" / f"{run_id}.log"
        kept = path.read_text().splitlines()[-1].split("\t", 2)[2]  # the run's own done
        last = 200_000
        delta = json.dumps({"type": "text_delta", "run_id": run_id, "text": "word " * 16})
        with path.open("w") as f:  # a long answer, as many deltas
            f.writelines(f"{n}\ttext_delta\t{delta}\n" for n in range(1, last))
            f.write(f"{last}\tdone\t{kept}\n")
        host, port = server.url.removeprefix("http://").split(":")
        before = _rss_mb()
        slow = []
        for _ in range(4):  # clients that reload the page and then read nothing
            sock = socket.create_connection((host, int(port)))
            sock.sendall(f"GET /v1/runs/{run_id}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
            assert sock.recv(64).startswith(b"HTTP/1.1 200")
            slow.append(sock)
        grown = _rss_mb() - before
        for sock in slow:
            sock.close()
        assert grown < 150, f"four streams of a 24 MB log took {grown:.0f} MB"
        tail = read_events(c, f"/v1/runs/{run_id}/events", last_event_id=last - 3)
        assert [e["id"] for e in tail] == [last - 2, last - 1, last]
        assert tail[-1]["event"] == "done" and tail[-1]["result"] == done["result"]


@pytest.mark.parametrize("route", ["decision", "resume"])
def test_a_message_sent_while_a_decision_reads_the_conversation_is_not_answered_twice(
    served: Any, tmp_path: Path, route: str
) -> None:
    """A decision (or a resume) checked that its session had no live run, then read the session's
    conversation off the event loop (has it gone on?); a message sent in that moment (another tab)
    started its run, and the decision then started the waiting run too: two live runs in one
    session, the 202 the session's "one message at a time" promises to refuse, and once the
    decided run ended, the session looked free while the message's run still answered. The check
    is made again after the read: 409, naming the run that answers."""
    from tests.server.test_attacks import Attack, decide, ended, send, waiting_delete

    a = Attack(served, tmp_path)
    manager = a.s.app.state.core.manager
    sessions = manager.sessions
    read = sessions.load
    reading, go_on = threading.Event(), threading.Event()

    def held_load(session_id: str, *args: Any, **kw: Any) -> Any:  # the decision's read, held
        if threading.current_thread().name.startswith("asyncio") and not reading.is_set():
            reading.set()
            go_on.wait(30)
        return read(session_id, *args, **kw)

    with a.client() as c:
        sid, run_id, w = waiting_delete(c)
        if route == "resume":  # a run stopped at its approval is resumed by deciding; cancel one mid-call
            run_id = send(c, sid, "wait")["run_id"]
            assert c.post(f"/v1/runs/{run_id}/cancel").status_code == 202
            ended(c, run_id)
        answers: list[httpx.Response] = []
        body = decide(w) if route == "decision" else None
        sessions.load = held_load
        deciding = threading.Thread(target=lambda: answers.append(c.post(f"/v1/runs/{run_id}/{route}", json=body)))
        deciding.start()
        try:
            assert reading.wait(20), "the conversation was never read"
            with a.client() as other:  # another tab sends a message meanwhile
                busy = send(other, sid, "wait")["run_id"]
        finally:
            go_on.set()
            deciding.join(30)
        assert answers[0].status_code == 409 and busy in answers[0].json()["error"]["message"], answers[0].text
        assert list(manager.live) == [busy] and manager.live_run_of(sid) == busy
        a.release()
        ended(c, busy)
    assert (a.workspace / "access.log").exists()  # the call waiting for approval never ran


def test_a_decision_whose_session_is_deleted_while_it_reads_the_conversation_runs_nothing(
    served: Any, tmp_path: Path
) -> None:
    """The same moment, with the session deleted from another tab instead: the decision went on and
    ran the call it allowed (access.log deleted) for a conversation that was gone, and answered
    202. Now 404, as for a session deleted before the decision, and nothing runs."""
    from tests.server.test_attacks import Attack, decide, waiting_delete

    a = Attack(served, tmp_path)
    manager = a.s.app.state.core.manager
    read = manager.sessions.load
    reading, go_on = threading.Event(), threading.Event()

    def held_load(session_id: str, *args: Any, **kw: Any) -> Any:  # the decision's read, held
        if threading.current_thread().name.startswith("asyncio") and not reading.is_set():
            reading.set()
            go_on.wait(30)
        return read(session_id, *args, **kw)

    with a.client() as c:
        sid, run_id, w = waiting_delete(c)
        answers: list[httpx.Response] = []
        manager.sessions.load = held_load
        deciding = threading.Thread(
            target=lambda: answers.append(c.post(f"/v1/runs/{run_id}/decision", json=decide(w)))
        )
        deciding.start()
        try:
            assert reading.wait(20), "the conversation was never read"
            with a.client() as other:
                assert other.delete(f"/v1/sessions/{sid}").status_code == 200
        finally:
            go_on.set()
            deciding.join(30)
        assert answers[0].status_code == 404, answers[0].text
        assert not manager.live
    assert (a.workspace / "access.log").exists()

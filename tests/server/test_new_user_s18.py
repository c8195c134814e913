"""A user who embeds tether's app in their own FastAPI app, as docs/server.md's "In your own
FastAPI app" shows: mounted under a prefix, served by uvicorn on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.server.conftest import Uvicorn, read_events, start_uvicorn
from tether import Agent
from tether.config import load_settings
from tether.server import create_app


@pytest.fixture
def served() -> Iterator[list[Uvicorn]]:
    ups: list[Uvicorn] = []
    yield ups
    for up in ups:
        up.stop()


def _parent(tmp_path: Path, *, with_lifespan: bool) -> FastAPI:
    tether_app = create_app(load_settings(tmp_path / "home"), agents={"helper": Agent("scripted/hello")})
    app = FastAPI(lifespan=tether_app.router.lifespan_context) if with_lifespan else FastAPI()
    app.mount("/agents", tether_app)

    @app.get("/hello")
    def hello() -> dict[str, Any]:
        return {"hi": 1}

    return app


def test_mounted_without_its_lifespan_says_how_to_run_it(tmp_path: Path, served: list[Uvicorn]) -> None:
    """Was: mounted in another app (which does not run a mounted app's lifespan), tether's app
    served every route as if started, but never ended a run a kill had cut (its stream stayed open
    with nothing said) and stopped no live run on shutdown. It now answers 500 misconfigured,
    naming the one line that runs its lifespan; the user's own routes are untouched."""
    up = start_uvicorn(_parent(tmp_path, with_lifespan=False), lifespan="on")
    served.append(up)
    with httpx.Client(base_url=up.url, timeout=30) as c:
        r = c.post("/agents/v1/sessions", json={"agent": "helper"})
        assert r.status_code == 500, r.text
        error = r.json()["error"]
        assert error["code"] == "misconfigured"
        assert "FastAPI(lifespan=tether_app.router.lifespan_context)" in error["message"]
        assert c.get("/agents/healthz").status_code == 500
        assert c.get("/hello").json() == {"hi": 1}


def test_mounted_with_its_lifespan_answers_an_events_url_under_the_mount(tmp_path: Path, served: list[Uvicorn]) -> None:
    """Was: a message's 202 named its events as /v1/runs/ID/events, a path the user's app does
    not serve when tether's is mounted under a prefix (404). It now names it under the mount."""
    up = start_uvicorn(_parent(tmp_path, with_lifespan=True), lifespan="on")
    served.append(up)
    with httpx.Client(base_url=up.url, timeout=30) as c:
        session = c.post("/agents/v1/sessions", json={"agent": "helper"})
        assert session.status_code == 201, session.text
        r = c.post(f"/agents/v1/sessions/{session.json()['session_id']}/messages", json={"text": "Hi"})
        assert r.status_code == 202, r.text
        events = r.json()["events"]
        assert events == f"/agents/v1/runs/{r.json()['run_id']}/events"
        got = read_events(c, events)
        assert got[-1]["type"] == "done" and got[-1]["result"]["status"] == "completed"


def test_a_stopped_run_whose_session_went_on_is_not_offered_for_resume(tmp_path: Path, served: list[Uvicorn]) -> None:
    """Was: a run stopped (Stop, or a server killed under it) after which another message was
    answered in its session showed ``"resumable": true`` (a cut one: "resume it to continue"), in
    GET /v1/runs/ID, the runs list and the session's turns, so the page offered Resume; every
    resume was then refused (409: the session went on). Its view now says it cannot continue."""
    from tether.tools.demo import DEMO_TOOLS

    app = create_app(load_settings(tmp_path / "home"), agents={"slow": Agent("scripted/slow", tools=DEMO_TOOLS)})
    up = start_uvicorn(app, lifespan="on")
    served.append(up)
    with httpx.Client(base_url=up.url, timeout=30) as c:
        sid = c.post("/v1/sessions", json={"agent": "slow"}).json()["session_id"]
        first = c.post(f"/v1/sessions/{sid}/messages", json={"text": "Scan the archive."}).json()
        read_events(c, first["events"], until=lambda e: e["type"] == "tool_start")
        assert c.post(f"/v1/runs/{first['run_id']}/cancel").status_code == 202
        assert read_events(c, first["events"])[-1]["result"]["status"] == "interrupted"
        assert c.get(f"/v1/runs/{first['run_id']}").json()["resumable"] is True  # nothing came after it yet

        second = c.post(f"/v1/sessions/{sid}/messages", json={"text": "Never mind, hello."}).json()
        assert read_events(c, second["events"])[-1]["result"]["status"] == "completed"

        view = c.get(f"/v1/runs/{first['run_id']}").json()
        assert view["status"] == "interrupted" and view["resumable"] is False, view
        listed = {r["run_id"]: r for r in c.get("/v1/runs").json()["runs"]}
        assert listed[first["run_id"]]["resumable"] is False
        turns = {t["run_id"]: t for t in c.get(f"/v1/sessions/{sid}").json()["turns"]}
        assert turns[first["run_id"]]["resumable"] is False
        refused = c.post(f"/v1/runs/{first['run_id']}/resume", json={})
        assert refused.status_code == 409 and "went on" in refused.json()["error"]["message"]


def test_a_run_whose_run_process_died_says_so_in_its_view_as_in_its_stream(
    tmp_path: Path, served: list[Uvicorn]
) -> None:
    """Was: with runs in run processes, a run whose process was killed under it got a done saying
    so ("the run's process (pid N) ended unexpectedly with exit code -9"), while GET /v1/runs/ID,
    the runs list and the page said "the server stopped while this run was running", though the
    server had not. The view now gives the done's reason."""
    import os
    import signal

    module = tmp_path / "agents.py"
    module.write_text(
        "from tether import Agent\nfrom tether.tools.demo import DEMO_TOOLS\n"
        'agents = {"slow": Agent("scripted/slow", tools=DEMO_TOOLS)}\n'
    )
    app = create_app(load_settings(tmp_path / "home"), agent_spec=str(module), run_processes=1)
    up = start_uvicorn(app, lifespan="on")
    served.append(up)
    with httpx.Client(base_url=up.url, timeout=30) as c:
        sid = c.post("/v1/sessions", json={"agent": "slow"}).json()["session_id"]
        run = c.post(f"/v1/sessions/{sid}/messages", json={"text": "Scan the archive."}).json()
        read_events(c, run["events"], until=lambda e: e["type"] == "tool_start")
        [pid] = app.state.core.manager.processes.pids()
        os.kill(pid, signal.SIGKILL)
        done = read_events(c, run["events"])[-1]["result"]
        assert done["status"] == "interrupted" and f"pid {pid}" in done["reason"], done
        view = c.get(f"/v1/runs/{run['run_id']}").json()
        assert view["reason"] == done["reason"] and view["resumable"] is True, view


def test_agents_given_to_create_app_are_named_and_checked_as_served_ones(tmp_path: Path, served: list[Uvicorn]) -> None:
    """Was: agents handed to create_app(agents={...}), as an app that embeds tether does, skipped
    what `tether serve --agent FILE` does to the same dict: a run was not named after its agent
    (`tether runs` showed no agent, a served run's header none), and a name no door can offer or a
    value that is no Agent was taken without a word. Both now go through the same check."""
    from tether.errors import ConfigError
    from tether.harness.store import RunStore

    settings = load_settings(tmp_path / "home")
    with pytest.raises(ConfigError, match="agent name 'helper bot' cannot be served"):
        create_app(settings, agents={"helper bot": Agent("scripted/hello")})
    with pytest.raises(ConfigError, match="agent 'helper' is a str, not a tether.Agent"):
        create_app(settings, agents={"helper": "scripted/hello"})  # type: ignore[dict-item]

    given = {"helper": Agent("scripted/hello")}
    up = start_uvicorn(create_app(settings, agents=given), lifespan="on")
    served.append(up)
    assert given["helper"].name == ""  # the caller's agents are left as they were
    with httpx.Client(base_url=up.url, timeout=30) as c:
        sid = c.post("/v1/sessions", json={"agent": "helper"}).json()["session_id"]
        run = c.post(f"/v1/sessions/{sid}/messages", json={"text": "Hi"}).json()
        assert read_events(c, run["events"])[-1]["result"]["status"] == "completed"
    assert RunStore(settings.home / "runs").load(run["run_id"]).agent == "helper"


def test_the_guard_knows_its_routes_under_a_mount(tmp_path: Path, served: list[Uvicorn]) -> None:
    """Was: mounted under a prefix, tether's checks compared the whole path (/agents/v1/...) with
    its routes' own (/v1/...): the sign-in confirmation's form post was refused 415 as if it were
    a cross-site form, and a Stop while the database is away was not known as a Stop (503). They
    now read the path as its routes do, without the mount's prefix."""
    up = start_uvicorn(_parent(tmp_path, with_lifespan=True), lifespan="on")
    served.append(up)
    with httpx.Client(base_url=up.url, timeout=30) as c:
        r = c.post("/agents/v1/connections/callback", data={"key": "not-a-flow"})
        assert r.status_code == 400 and "this sign-in is unknown" in r.text, r.text
        assert r.headers["content-type"].startswith("text/html")

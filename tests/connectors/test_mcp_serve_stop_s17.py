"""``tether mcp serve --http`` stopped while a call's run is slow to stop: the call's open stream
must still carry its answer (the run id and how it stopped) before the server goes."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.connectors.test_attack_mcp_serve_s13 import INIT, call, runs_started
from tests.connectors.test_mcp_serve import SERVE, env
from tether.harness.store import RunStore

# The model notes its run in `started`, waits, and once cancelled takes STOPPING_S to stop (a model
# call whose cancellation is slow, as an HTTP request being torn down can be).
SLOW_TO_STOP = """\
from pathlib import Path

import anyio

from tether import Agent
from tether.testing import FunctionModel

HERE = Path(__file__).parent


async def reply(messages, request):
    with (HERE / "started").open("a") as f:
        f.write("run\\n")
    try:
        await anyio.sleep(3600)
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.sleep({stopping})
    return "never"


agents = {{"held": Agent(FunctionModel(reply), cwd=str(HERE))}}
"""


@contextlib.contextmanager
def serving_over_http(home: Path) -> Iterator[tuple[subprocess.Popen[bytes], str, Path]]:
    """``tether mcp serve --http`` for ``home`` on a free port: (the process, its /mcp address, its
    stderr's file). Killed at the end if it is still there."""
    log = home / "serve.log"
    with log.open("w") as err:
        proc = subprocess.Popen([*SERVE, "--http", "--port", "0"], env=env(home), stderr=err, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60  # a hang guard
        while "/mcp" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        yield proc, log.read_text().split(" at ", 1)[1].split()[0], log
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def opened_session(http: httpx.Client, url: str) -> dict[str, str]:
    """Initialize an MCP session over ``http``: the headers its later requests carry."""
    opened = http.post(url, json=INIT)
    headers = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
    http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    return headers


def slow_home(tmp_path: Path, stopping: float) -> Path:
    (tmp_path / "agents.py").write_text(SLOW_TO_STOP.format(stopping=stopping))
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'[serve]\nagent = "{tmp_path / "agents.py"}"\n')
    return home


@pytest.mark.parametrize("stopping", [0.0, 1.5])
def test_a_call_whose_run_is_slow_to_stop_still_gets_its_answer(tmp_path: Path, stopping: float) -> None:
    """Was: sse_starlette ends every open event stream within 0.5 s of SIGINT or SIGTERM (it patches
    uvicorn's signal handler), whatever the server still had to write: a call whose run took longer
    than that to stop, or a loaded machine's few milliseconds landing after its poll, left the client
    an empty stream (the CI run of session 16 failed so, one run in many). Now the streams end only
    after the runs have stopped and their answers are written."""
    home = slow_home(tmp_path, stopping)
    with serving_over_http(home) as (proc, url, log):
        with httpx.Client(timeout=30, headers={"Accept": "application/json, text/event-stream"}) as http:
            headers = opened_session(http, url)
            with http.stream("POST", url, json=call(1, "first"), headers=headers) as first:
                runs_started(tmp_path, 1)
                proc.send_signal(signal.SIGTERM)
                said = first.read().decode()
        code = proc.wait(30)
    data = [line[len("data: ") :] for line in said.splitlines() if line.startswith("data: ")]
    assert len(data) == 1, f"the call's stream ended with {said!r}; the server said {log.read_text()}"
    answer = json.loads(data[0])["result"]["structuredContent"]
    assert answer["status"] == "interrupted" and "the server was stopped" in answer["reason"], answer
    assert RunStore(home / "runs").load(answer["run_id"]).status == "interrupted"
    assert code == 130 and "Traceback" not in log.read_text()


def test_a_client_listening_on_its_get_stream_does_not_hold_the_server_open(tmp_path: Path) -> None:
    """The streams that never end by themselves (a client's GET, where the server may send it
    requests) are ended by the server once the calls' answers are written: it still stops (the
    hang guard is the 30 s wait), and the GET's reader sees its stream end."""
    ended, listening = threading.Event(), threading.Event()
    with (
        serving_over_http(slow_home(tmp_path, 0.0)) as (proc, url, log),
        httpx.Client(timeout=30, headers={"Accept": "application/json, text/event-stream"}) as http,
    ):
        headers = opened_session(http, url)

        def listen() -> None:
            with http.stream("GET", url, headers={**headers, "Accept": "text/event-stream"}) as get:
                listening.set()
                for _ in get.iter_bytes():
                    pass
            ended.set()

        reader = threading.Thread(target=listen, daemon=True)
        reader.start()
        assert listening.wait(30)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(30)
        reader.join(30)
    assert ended.is_set()
    assert code == 130 and "Traceback" not in log.read_text()

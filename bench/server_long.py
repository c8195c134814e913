"""The server's reads of a long session and a long run, as the size doubles.

    python bench/server_long.py            # sessions of 100..800 turns, runs of 5,000..40,000 messages
    python bench/server_long.py --quick    # the two smallest of each

The app (``create_app``, files and SQLite as shipped) runs under uvicorn on a loopback port in this
process. A session of N turns is made as a served session leaves it: N runs, the k-th holding the
conversation up to it (2k messages); a long run holds M messages (a reply with a tool call, the
tool's result of about 400 characters, in turn) and a trace of M lines. Each GET is read by a
client that throws the body away as it comes:

- **ms**: the median of 3 reads, each a first read (the transcripts the server keeps for paging
  are forgotten before each);
- **peak MiB**: the most memory Python held during one read above what it held before
  (tracemalloc; a separate read, as tracing slows it down);
- **body MiB**: the response's size. "page opens it": the session's view, then GET /v1/runs/ID
  for each turn, as the page asks when it opens a session (one read, no peak taken). ``page`` rows read the same record in pages of 1,000
  (``?limit=1000``, then ``?after=NEXT``): the time is for all of them, the peak is one page's.

Writes bench/results/server_long.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._results import tether_commit, write_results

MiB = 1024 * 1024


def _home(root: Path) -> tuple[Any, Any, Any, Any]:
    import uvicorn

    from tether import Agent
    from tether.config import load_settings
    from tether.server.app import create_app
    from tether.server.store import SqliteServerStore
    from tether.testing import FunctionModel

    home = root / "home"
    home.mkdir()
    settings = load_settings(home)
    store = SqliteServerStore(home / "serve" / "server.db")
    app = create_app(settings, agents={"echo": Agent(FunctionModel(lambda m, r: "ok"))}, store=store)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on"))
    return home, store, server, app


def _message(i: int) -> Any:
    from tether.messages import AssistantMessage, TextPart, ToolCallPart, ToolMessage, UserMessage

    if i == 0:
        return UserMessage.text("look through the archive")
    if i % 2:
        call = ToolCallPart(id=f"call_{i}", name="read_file", arguments=json.dumps({"path": f"notes/{i}.md"}))
        return AssistantMessage(content=(TextPart(text=f"reading part {i}"), call), model="function/function")
    return ToolMessage(call_id=f"call_{i - 1}", name="read_file", content=(TextPart(text=f"line {i} " * 50),))


def _session(home: Path, store: Any, turns: int) -> str:
    """A session of ``turns`` finished runs, as the server leaves one (each run's transcript holds
    the conversation up to it)."""
    from tether.harness.state import RunState
    from tether.harness.store import RunStore
    from tether.messages import AssistantMessage, TextPart, UserMessage
    from tether.server.store import SessionRecord, TurnRecord

    runs = RunStore(home / "runs", fsync=False)
    sid = f"s_long{turns}"
    now = time.time()
    store.add_session(SessionRecord(sid, "local", "echo", f"{turns} turns", now, now))
    messages: list[Any] = []
    for k in range(turns):
        run_id = f"run_{sid}_{k}"
        messages += [
            UserMessage.text(f"question {k}: what is in part {k}?"),
            AssistantMessage(content=(TextPart(text=f"part {k} holds notes " * 10),), model="function/function"),
        ]
        state = RunState(run_id=run_id, session_id=sid, agent="echo", messages=list(messages), status="completed")
        state.history_turns = k
        runs.save(state)
        store.add_turn(TurnRecord(f"m_{sid}_{k}", run_id, sid, "local", "echo", f"t{k}", f"question {k}", now + k))
    runs.close()
    return sid


def _run(home: Path, store: Any, size: int) -> str:
    """A finished run of ``size`` messages and a trace of ``size`` lines."""
    from tether.harness.state import RunState
    from tether.harness.store import RunStore
    from tether.server.store import SessionRecord, TurnRecord

    runs = RunStore(home / "runs", fsync=False)
    sid, run_id = f"s_run{size}", f"run_long{size}"
    now = time.time()
    store.add_session(SessionRecord(sid, "local", "echo", "long run", now, now))
    state = RunState(run_id=run_id, session_id=sid, agent="echo", status="completed")
    state.messages = [_message(i) for i in range(size)]
    runs.save(state)
    runs.close()
    store.add_turn(TurnRecord(f"m_{run_id}", run_id, sid, "local", "echo", "t", "look", now))
    (home / "traces").mkdir(exist_ok=True)
    with open(home / "traces" / f"{run_id}.jsonl", "w") as f:
        for i in range(size):
            kind = ("turn", "tool_start", "tool_result")[i % 3]
            line = {"run_id": run_id, "type": kind, "call_id": f"call_{i}", "name": "read_file", "ms": 3}
            line |= {"output": f"line {i} " * 20} if kind == "tool_result" else {"cost_usd": 1e-5 * i}
            f.write(json.dumps(line) + "\n")
    return run_id


def _read(client: Any, path: str, paged: bool) -> tuple[int, str]:
    """(bytes, last status) of reading ``path`` whole, or page by page when ``paged``."""
    if not paged:
        size = 0
        with client.stream("GET", path) as r:
            for chunk in r.iter_raw():
                size += len(chunk)
        return size, str(r.status_code)
    size, after = 0, 0
    while after is not None:
        r = client.get(path, params={"limit": 1000, "after": after})
        if r.status_code != 200:
            return size, str(r.status_code)
        size += len(r.content)
        after = r.json().get("next")
    return size, "200"


def _cold(app: Any) -> None:
    """Forget the transcripts the server keeps: every figure is of a first read."""
    kept = getattr(app.state.core, "transcripts", None)
    if kept is not None:
        kept.clear()


def _opened(client: Any, sid: str) -> tuple[int, str]:
    """What the page asks when it opens a session: its view, then each turn's run."""
    r = client.get(f"/v1/sessions/{sid}")
    size = len(r.content)
    for turn in r.json()["turns"]:
        size += len(client.get(f"/v1/runs/{turn['run_id']}").content)
    return size, str(r.status_code)


def _measure(app: Any, client: Any, path: str, paged: bool = False) -> dict[str, Any]:
    times = []
    for _ in range(3):
        _cold(app)
        t0 = time.perf_counter()
        size, status = _read(client, path, paged)
        times.append((time.perf_counter() - t0) * 1000)
    _cold(app)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    if paged:  # one page's peak
        client.get(path, params={"limit": 1000, "after": 0})
    else:
        _read(client, path, False)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return {
        "ms": round(statistics.median(times), 1),
        "peak_mib": round(peak / MiB, 1),
        "body_mib": round(size / MiB, 2),
        "status": status,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    import threading

    import httpx

    sessions = [100, 200] if args.quick else [100, 200, 400, 800]
    sizes = [5000, 10000] if args.quick else [5000, 10000, 20000, 40000]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        home, store, server, app = _home(Path(tmp))
        made = {n: _session(home, store, n) for n in sessions}
        long_runs = {n: _run(home, store, n) for n in sizes}
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.01)
        url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
        with httpx.Client(base_url=url, timeout=600) as client:
            for n, sid in made.items():
                t0 = time.perf_counter()
                size, status = _opened(client, sid)
                ms = round((time.perf_counter() - t0) * 1000, 1)
                opened = {"ms": ms, "peak_mib": None, "body_mib": round(size / MiB, 2), "status": status}
                rows.append({"what": "page opens it (view + each run)", "size": f"{n} turns"} | opened)
                rows.append(
                    {"what": "GET /v1/sessions/{id}", "size": f"{n} turns"}
                    | _measure(app, client, f"/v1/sessions/{sid}")
                )
            for n, run_id in long_runs.items():
                for record in ("transcript", "trace"):
                    path = f"/v1/runs/{run_id}/{record}"
                    rows.append({"what": f"GET .../{record}", "size": f"{n} items"} | _measure(app, client, path))
                    rows.append(
                        {"what": "  ... in pages of 1000", "size": f"{n} items"} | _measure(app, client, path, True)
                    )
        server.should_exit = True
        thread.join(30)
    print(f"{'request':32} {'size':>12} {'ms':>9} {'peak MiB':>9} {'body MiB':>9} status")
    for r in rows:
        peak = "-" if r["peak_mib"] is None else r["peak_mib"]
        print(f"{r['what']:32} {r['size']:>12} {r['ms']:>9} {peak:>9} {r['body_mib']:>9} {r['status']}")
    write_results("server_long", {"commit": tether_commit(), "rows": rows})


if __name__ == "__main__":
    main()

"""The server's list routes for a user with many records, as the count grows.

    python bench/server_lists.py            # 1,000, 5,000 and 20,000 of each, SQLite and Postgres
    python bench/server_lists.py --quick    # 1,000 and 5,000, SQLite only

One user owns N sessions, N turns (runs) and N feedback records (another user owns as many, which
no list may show). The app (``create_app``) answers through its ASGI interface in this process
(httpx's ASGI transport: no sockets, so the figure is the server's own work). Each row is the
median of 15 reads of ``GET /v1/runs?limit=20``, ``/v1/sessions?limit=20`` and
``/v1/feedback?limit=20``. Postgres is a private ``pgserver`` (durable, as shipped).

Writes bench/results/server_lists.json.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._results import tether_commit, write_results

ROUTES = ("/v1/runs?limit=20", "/v1/sessions?limit=20", "/v1/feedback?limit=20")


def _fill(store: Any, n: int) -> None:
    from tether.server.store import FeedbackRecord, SessionRecord, TurnRecord

    for owner in ("local", "someone-else"):
        for i in range(n):
            at = 1_700_000_000.0 + i
            sid = f"s_{owner}_{i}"
            store.add_session(SessionRecord(sid, owner, "echo", f"chat {i}", at, at))
            store.add_turn(TurnRecord(f"m{i}", f"run_{owner}_{i}", sid, owner, "echo", f"t{i}", f"hello {i}", at))
            store.put_feedback(FeedbackRecord(f"m{i}", f"run_{owner}_{i}", f"t{i}", owner, "up", None, at))


async def _time(app: Any) -> dict[str, float]:
    import httpx

    timings: dict[str, float] = {}
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client,
    ):
        for route in ROUTES:
            samples = []
            for _ in range(16):
                started = time.perf_counter()
                answer = await client.get(route)
                samples.append(time.perf_counter() - started)
                assert answer.status_code == 200, answer.text
                assert len(next(iter(answer.json().values()))) == 20
            timings[route.split("?")[0]] = round(statistics.median(samples[1:]) * 1000, 2)
    return timings


def _measure(backend: str, n: int, pg: Any) -> dict[str, Any]:
    from tether import Agent
    from tether.config import load_settings
    from tether.server.app import create_app
    from tether.testing import FunctionModel

    with tempfile.TemporaryDirectory() as root:
        url = pg.fresh_database() if backend == "postgres" else None
        if url:
            os.environ["TETHER_DATABASE_URL"] = url
        try:
            settings = load_settings(Path(root))
            app = create_app(settings, agents={"echo": Agent(FunctionModel(lambda m, r: "ok"))})
            _fill(app.state.core.store, n)
            return {"backend": backend, "records": n, "ms": asyncio.run(_time(app))}
        finally:
            os.environ.pop("TETHER_DATABASE_URL", None)
            if url:
                from tether.postgres.db import close_all

                close_all()
                pg.drop_database(url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1,000 and 5,000 records, SQLite only")
    args = parser.parse_args()
    sizes = [1_000, 5_000] if args.quick else [1_000, 5_000, 20_000]
    backends = ["sqlite"] if args.quick else ["sqlite", "postgres"]
    rows = []
    pg: Any = None
    if "postgres" in backends:
        from tether.testing.services import PostgresServer

        pg = PostgresServer()
    try:
        print(f"{'backend':<10}{'records':>9}" + "".join(f"{r.split('?')[0]:>16}" for r in ROUTES) + "   (ms)")
        for backend in backends:
            for n in sizes:
                row = _measure(backend, n, pg)
                rows.append(row)
                print(f"{backend:<10}{n:>9,}" + "".join(f"{v:>16.2f}" for v in row["ms"].values()), flush=True)
    finally:
        if pg is not None:
            pg.stop()
    write_results("server_lists", {"commit": tether_commit(), "rows": rows})


if __name__ == "__main__":
    main()

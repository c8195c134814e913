"""An outsider's attack on the Postgres-backed server of round s12 (a Stop posted while the
database is away, for a run this server drives): it must be taken only from the run's owner, as
when the database is up, and at once, without the server's loop waiting for the database."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.dispatch.conftest import Cluster
from tests.postgres.test_left_alone_dispatch import Outage
from tests.postgres.test_left_alone_s11 import _order_started, _short_waits, _until, shared  # noqa: F401


@pytest.fixture
def node(shared: Cluster) -> Iterator[tuple[str, threading.Thread]]:  # noqa: F811
    """A server that runs its runs itself on the module's database, and the thread of its loop."""
    from tests.server.conftest import start_uvicorn
    from tether.server.app import create_app

    up = start_uvicorn(create_app(shared.settings, agents=shared.worker.agents), lifespan="on")
    yield up.url, up.thread
    up.stop(10)


def test_a_stop_while_the_database_is_away_is_taken_from_the_runs_owner_only_and_at_once(
    shared: Cluster,  # noqa: F811
    node: tuple[str, threading.Thread],
    db_url: str,
    pg_server: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Ann's token leaked: the operator revoked it (`tether serve token revoke ann`, a process of
    its own) and made her a new one. With the database up the old token is refused (401); while it
    was away, a Stop with it was taken (202) and stopped Ann's run, since the server still knew the
    token as hers from before the revocation (so too a token replaced by `token create ann`). Now
    a revocation or a replacement anywhere is known to the server at its next look-up of any token,
    and the old tokens, another user's token, and no token at all are refused while the database
    is away; Ann's own Stop is taken.

    And the run's end, once that Stop was taken, asked the database (is the run saved? touch its
    session) on the server's event loop: each ask waited the pool's 30 s for a connection, so the
    Stop "answered at once" came a minute later, every other request and stream of the server
    standing still meanwhile. Those asks are now made once the run's save is done, off the loop."""
    from tether.postgres.db import database
    from tether.postgres.server import PgServerStore

    base, loop_thread = node
    caplog.set_level(logging.WARNING, logger="tether")
    _short_waits(monkeypatch, db_url)
    cli = PgServerStore(database(db_url))  # what `tether serve token ...` does, in a process of its own
    leaked, bob = cli.add_token("ann"), cli.add_token("bob")

    def checked(token: str) -> None:  # a request while the database is up: the server knows the token's user
        assert httpx.get(f"{base}/v1/sessions", headers={"Authorization": f"Bearer {token}"}).status_code == 200

    checked(leaked)
    checked(bob)
    cli.revoke_token("ann")
    replaced = cli.add_token("ann")  # her next token, in turn replaced (token create ann again)
    checked(replaced)
    ann = {"Authorization": f"Bearer {cli.add_token('ann')}"}
    assert httpx.get(f"{base}/v1/sessions", headers=ann).status_code == 200

    pool = database(db_url).pool
    on_loop: list[str] = []
    asking = pool.connection

    def connection(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is loop_thread:
            on_loop.append("a connection asked for on the server's loop")
        return asking(*args, **kwargs)

    outage = Outage(pg_server.url, db_url)
    with httpx.Client(base_url=base, timeout=60, headers=ann) as client:
        _, posted, _ = _order_started(client, shared, "order-attack", "m-attack")
        run_id = posted.json()["run_id"]
        outage.begin()
        try:
            _until(lambda: "saved once the database is back" in caplog.text, "the run never waited for the database")
            stop = f"{base}/v1/runs/{run_id}/cancel"
            for who, headers in (
                ("revoked", {"Authorization": f"Bearer {leaked}"}),
                ("replaced", {"Authorization": f"Bearer {replaced}"}),
                ("bob", {"Authorization": f"Bearer {bob}"}),
                ("nobody", {}),
            ):
                refused = httpx.post(stop, headers=headers, timeout=60)
                assert refused.status_code in (401, 404, 503), (who, refused.text)
            monkeypatch.setattr(pool, "connection", connection)
            own = client.post(f"/v1/runs/{run_id}/cancel")
            assert own.status_code == 202 and own.json()["status"] == "interrupted", own.text
            monkeypatch.setattr(pool, "connection", asking)
        finally:
            outage.end()
        assert on_loop == []

        def saved() -> str:
            try:
                return str(shared.worker.runs.load(run_id).reason)
            except Exception:
                return ""

        _until(lambda: "stopped by ann" in saved(), "the stop was never saved")
        assert "stopped by ann" in client.get(f"/v1/runs/{run_id}").json()["reason"]

"""An outsider's attack on the Postgres-backed server of round s12: a Stop posted while the
database is away, for a run this server drives, must be taken only from the run's owner, as when
the database is up (a token revoked before the outage, another user's token, no token: refused)."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest

from tests.dispatch.conftest import Cluster
from tests.postgres.test_left_alone_dispatch import Outage
from tests.postgres.test_left_alone_s11 import (  # noqa: F401
    _order_started,
    _short_waits,
    _until,
    one_node,
    shared,
)


def test_a_token_revoked_before_the_outage_cannot_stop_a_run_while_the_database_is_away(
    shared: Cluster,  # noqa: F811
    one_node: str,  # noqa: F811
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
    is away; Ann's own Stop is taken."""
    from tether.postgres.db import database
    from tether.postgres.server import PgServerStore

    caplog.set_level(logging.WARNING, logger="tether")
    _short_waits(monkeypatch, db_url)
    cli = PgServerStore(database(db_url))  # what `tether serve token ...` does, in a process of its own
    leaked, bob = cli.add_token("ann"), cli.add_token("bob")

    def checked(token: str) -> None:  # a request while the database is up: the server knows the token's user
        assert httpx.get(f"{one_node}/v1/sessions", headers={"Authorization": f"Bearer {token}"}).status_code == 200

    checked(leaked)
    checked(bob)
    cli.revoke_token("ann")
    replaced = cli.add_token("ann")  # her next token, in turn replaced (token create ann again)
    checked(replaced)
    ann = {"Authorization": f"Bearer {cli.add_token('ann')}"}
    assert httpx.get(f"{one_node}/v1/sessions", headers=ann).status_code == 200
    outage = Outage(pg_server.url, db_url)
    with httpx.Client(base_url=one_node, timeout=60, headers=ann) as client:
        _, posted, _ = _order_started(client, shared, "order-attack", "m-attack")
        run_id = posted.json()["run_id"]
        outage.begin()
        try:
            _until(lambda: "saved once the database is back" in caplog.text, "the run never waited for the database")
            stop = f"{one_node}/v1/runs/{run_id}/cancel"
            for who, headers in (
                ("revoked", {"Authorization": f"Bearer {leaked}"}),
                ("replaced", {"Authorization": f"Bearer {replaced}"}),
                ("bob", {"Authorization": f"Bearer {bob}"}),
                ("nobody", {}),
            ):
                refused = httpx.post(stop, headers=headers, timeout=60)
                assert refused.status_code in (401, 404, 503), (who, refused.text)
            own = client.post(f"/v1/runs/{run_id}/cancel")
            assert own.status_code == 202 and own.json()["status"] == "interrupted", own.text
        finally:
            outage.end()

        def saved() -> str:
            try:
                return str(shared.worker.runs.load(run_id).reason)
            except Exception:
                return ""

        _until(lambda: "stopped by ann" in saved(), "the stop was never saved")
        assert "stopped by ann" in client.get(f"/v1/runs/{run_id}").json()["reason"]

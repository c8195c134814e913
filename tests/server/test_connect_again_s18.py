"""Connect pressed for a server whose account the user has connected already."""

from __future__ import annotations

from typing import Any

from tests.server.test_accounts import auth_server, connect, serving  # noqa: F401  (fixtures)


def test_connect_again_with_working_tokens_answers_connected_not_a_timeout(serving: Any) -> None:  # noqa: F811
    """Was: a second POST /v1/connections/NAME, with the user's tokens still good, signed in at once
    with them and opened no page, and the server waited for one: 60 s later a 400 said "its
    authorization server did not answer within 60 s", though it had answered at once."""
    alice = serving.client("alice")
    connect(alice)
    r = alice.post("/v1/connections/guarded", timeout=90)
    assert r.status_code == 200, r.text
    assert r.json() == {"server": "guarded", "authorize_url": None, "connected": True}
    assert "set-cookie" not in r.headers  # no flow started: nothing for a callback to check
    assert alice.get("/v1/connections").json()["connections"][0]["connected"] is True

"""/openapi.json says what the server really answers: every status a real request got is declared
for its route, and every JSON body validates against the declared schema (so a client generated
from the document is not surprised; it cannot drift)."""

from __future__ import annotations

import re
from typing import Any

import httpx
import jsonschema

from tests.server.conftest import read_events


def _operation(doc: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    for template, item in doc["paths"].items():
        pattern = "^" + re.sub(r"\{[^/]+\}", "[^/]+", template) + "$"
        if re.match(pattern, path) and method.lower() in item:
            op: dict[str, Any] = item[method.lower()]
            return op
    raise AssertionError(f"{method} {path} is not in /openapi.json")


def check(doc: dict[str, Any], response: httpx.Response) -> None:
    request = response.request
    op = _operation(doc, request.method, request.url.path)
    declared = op["responses"].get(str(response.status_code))
    assert declared is not None, (
        f"{request.method} {request.url.path} answered {response.status_code}, which /openapi.json does not "
        f"declare ({sorted(op['responses'])}): {response.text[:200]}"
    )
    ctype = response.headers.get("content-type", "").split(";")[0]
    assert ctype in declared.get("content", {}), (request.method, request.url.path, response.status_code, ctype)
    if ctype == "application/json":
        schema = {**declared["content"][ctype]["schema"], "components": doc["components"]}
        jsonschema.validate(response.json(), schema)


def test_real_responses_match_the_openapi_document(served: Any) -> None:
    s = served(tokens=["alice"], config="[serve]\nmax_body_bytes = 4096\n")
    with s.client("alice") as c, s.client() as anon:
        doc = c.get("/openapi.json").json()
        assert doc["components"]["securitySchemes"]["bearer"] == {
            **doc["components"]["securitySchemes"]["bearer"],
            "type": "http",
            "scheme": "bearer",
        }
        assert "HTTPValidationError" not in doc["components"]["schemas"]
        seen = []

        def go(r: httpx.Response) -> httpx.Response:
            check(doc, r)
            seen.append(r.status_code)
            return r

        sid = go(c.post("/v1/sessions", json={"agent": "destructive"})).json()["session_id"]
        go(c.get("/v1/sessions"))
        go(c.get("/v1/agents"))
        go(c.get("/v1/me"))
        posted = go(c.post(f"/v1/sessions/{sid}/messages", json={"text": "free space", "message_id": "m1"})).json()
        read_events(c, posted["events"])
        go(c.post(f"/v1/sessions/{sid}/messages", json={"text": "free space", "message_id": "m1"}))  # 200: the same
        run = go(c.get(f"/v1/runs/{posted['run_id']}")).json()
        go(c.get(f"/v1/sessions/{sid}"))
        go(c.get(f"/v1/runs/{posted['run_id']}/transcript"))
        go(c.get(f"/v1/runs/{posted['run_id']}/trace"))
        go(c.get("/v1/runs", params={"limit": 5}))
        waiting = run["waiting"]
        go(c.post(f"/v1/runs/{posted['run_id']}/decision", json={**waiting, "approve": False, "call_id": "x"}))  # 409
        go(c.post(f"/v1/runs/{posted['run_id']}/cancel"))  # 409: not running
        go(c.post(f"/v1/messages/{posted['message_id']}/feedback", json={"score": "up"}))
        go(c.get("/v1/feedback"))
        go(c.patch(f"/v1/sessions/{sid}", json={"title": "Disk space"}))
        # the errors a client meets
        go(c.post(f"/v1/sessions/{sid}/messages", json={"txt": "no"}))  # 400, not 422
        go(c.get("/v1/runs", params={"limit": "many"}))  # 400
        go(anon.get("/v1/sessions"))  # 401
        go(c.get("/v1/sessions/s_nope"))  # 404
        go(c.post(f"/v1/sessions/{sid}/messages", content=b"text=hi", headers={"Content-Type": "text/plain"}))  # 415
        go(c.post(f"/v1/sessions/{sid}/messages", json={"text": "x" * 5000}))  # 413
        go(c.post("/v1/sessions", json={}, headers={"Origin": "https://elsewhere.example"}))  # 403
        go(c.delete(f"/v1/sessions/{sid}"))
        go(c.get(f"/v1/sessions/{sid}"))  # 404: deleted
    assert {200, 201, 202, 400, 401, 403, 404, 409, 413, 415} <= set(seen), sorted(set(seen))

"""Hostile and broken provider servers, session 14, through real HTTP on loopback (the byte-for-byte
server of the second round): a base URL with a user and password in it (``https://user:pass@host``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.providers.test_attack_wire_round2 import (
    KEY,
    WIRES,
    Reply,
    WireServer,
    anthropic_text,
    assert_sound,
    event,
    openai_text,
    provider,
    run_against,
    sse,
    text_reply,
)
from tests.providers.test_attack_wire_round4 import _sent_ids, done, echo, recording
from tether.errors import ConfigError
from tether.providers.anthropic import AnthropicProvider
from tether.providers.auth import NoAuth
from tether.providers.openai_chat import OpenAIChatProvider

Serve = Callable[[list[Reply]], WireServer]
JSON = {"content-type": "application/json"}

# --- a user and password in the base URL ---------------------------------------------------------

PASSWORD = "gateway-pw-7731"
BASIC = base64.b64encode(f"alice:{PASSWORD}".encode()).decode()


def with_userinfo(server: WireServer, path: str = "") -> str:
    return server.url.replace("http://", f"http://alice:{PASSWORD}@") + path


def test_a_base_url_password_and_a_bearer_key_are_refused_together_before_any_request(serve: Serve) -> None:
    """Before: httpx put the URL's user and password in the Authorization header over the Bearer
    key, so the key was silently never sent (the gateway's 401 then blamed the key). A request
    carries one Authorization header: the provider is refused where it is made, saying which two
    clash and what to take out, and showing no password. (Anthropic's key goes in ``x-api-key``:
    both are sent there, below.)"""
    server = serve([text_reply("openai", "hello")])
    with pytest.raises(ConfigError) as caught:
        OpenAIChatProvider(with_userinfo(server, "/v1"), KEY)
    message = str(caught.value)
    assert "user:password@" in message and "the api_key given to the openai provider" in message
    assert PASSWORD not in message and KEY not in message and BASIC not in message
    assert server.requests == []


@pytest.mark.parametrize("kind", WIRES)
@pytest.mark.parametrize("userinfo", [f"alice:{PASSWORD}", PASSWORD], ids=["user and password", "token as user"])
def test_a_base_url_password_is_sent_as_basic_auth_and_never_shown(
    serve: Serve, tmp_path: Path, kind: str, userinfo: str
) -> None:
    """A gateway behind HTTP Basic auth, its user and password (or a token as the user name) in
    the base URL. The server answers 400 quoting the header it got: before, the encoded
    ``user:password`` stood in the reason, the trace and the saved run (only the credentials' own
    headers were scrubbed)."""
    basic = base64.b64encode((userinfo if ":" in userinfo else userinfo + ":").encode()).decode()
    echo = json.dumps({"error": {"message": f"bad header: Basic {basic} (secret {PASSWORD})"}}).encode()
    server = recording(serve([Reply(400, [echo], JSON)]))
    url = server.url.replace("http://", f"http://{userinfo}@")
    model = OpenAIChatProvider(url + "/v1", credentials=NoAuth()) if kind == "openai" else AnthropicProvider(url, KEY)
    out = run_against(kind, server, tmp_path, model=model)
    assert out.result.status == "failed" and "HTTP 400" in (out.result.reason or "")
    assert server.headers_seen[0]["authorization"] == f"Basic {basic}"  # type: ignore[attr-defined]
    if kind == "anthropic":
        assert server.headers_seen[0]["x-api-key"] == KEY  # type: ignore[attr-defined]
    assert_sound(out)
    leaked = [path for path, text in out.files.items() if basic in text or PASSWORD in text]
    assert not leaked and basic not in (out.result.reason or "") and PASSWORD not in (out.result.reason or "")


class _VaultToken:
    """Credentials of one's own that send a Bearer token (and say nothing of their header)."""

    hint = "the token from the vault"

    async def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {KEY}"}

    async def refresh(self) -> bool:
        return False


def test_credentials_of_ones_own_that_clash_with_a_base_url_password_fail_before_sending(
    serve: Serve, tmp_path: Path
) -> None:
    """What a provider cannot know when it is made (its credentials' header) is checked before the
    first request leaves: the run fails once, saying what clashes, and nothing is sent."""
    server = serve([text_reply("openai", "hello")])
    model = OpenAIChatProvider(with_userinfo(server, "/v1"), credentials=_VaultToken())
    out = run_against("openai", server, tmp_path, model=model)
    reason = out.result.reason or ""
    assert out.result.status == "failed" and "the token from the vault" in reason and "user:password@" in reason
    assert server.requests == [] and PASSWORD not in reason and BASIC not in reason
    assert_sound(out)


# --- what follows the end marker ----------------------------------------------------------------

GATEWAY_ERROR = sse({"error": {"message": "upstream connection closed", "type": "server_error"}})
OVERLOADED = event("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})


@pytest.mark.parametrize(
    ("kind", "after"),
    [
        ("openai", [GATEWAY_ERROR]),
        ("openai", [b"data: <html>502 Bad Gateway</html>\n\n", b"data: [DONE]\n\n"]),
        ("anthropic", [OVERLOADED]),
        ("anthropic", [b"data: {not json\n\n", b": keep-alive\n\n"]),
    ],
    ids=["openai error chunk", "openai page", "anthropic error event", "anthropic line not JSON"],
)
def test_what_a_gateway_writes_after_the_end_marker_does_not_undo_the_reply(
    serve: Serve, tmp_path: Path, kind: str, after: list[bytes]
) -> None:
    """The reply was whole (``finish_reason``, ``message_stop``) and shown; then a gateway wrote an
    error, or a page, before closing. Before: the run failed "overloaded_error mid-stream ... (after
    part of the reply reached the user; not retried)", the answer the person had read was not
    recorded, and a resume would ask (and pay) again. A dropped connection there already left the
    reply standing; so does this now."""
    parts = openai_text("hello") if kind == "openai" else anthropic_text("hello")
    end = 3 if kind == "openai" else len(parts)  # after the finish_reason, before the usage chunk
    server = serve([Reply(200, [*parts[:end], *after, *parts[end:]]), text_reply(kind, "asked twice")])
    out = run_against(kind, server, tmp_path)
    assert (out.result.status, out.result.text) == ("completed", "hello")
    assert len(server.requests) == 1
    assert_sound(out)


# --- tool calls as compatible servers send them ---------------------------------------------------


def _anthropic_call_without_id(stream: bool) -> Reply:
    block = {"type": "tool_use", "name": "echo", "input": {"x": 7}}  # no "id"
    usage = {"input_tokens": 50, "output_tokens": 9}
    if not stream:
        body = {"type": "message", "role": "assistant", "content": [block], "stop_reason": "tool_use", "usage": usage}
        return Reply(200, [json.dumps(body).encode()], JSON)
    delta = {"type": "input_json_delta", "partial_json": '{"x": 7}'}
    return Reply(
        200,
        [
            anthropic_text("")[0],
            event("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
            event("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            event("content_block_stop", {"type": "content_block_stop", "index": 0}),
            event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": usage}),
            event("message_stop", {"type": "message_stop"}),
        ],
    )


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "complete"])
def test_an_anthropic_call_without_an_id_is_given_one_and_runs(serve: Serve, tmp_path: Path, stream: bool) -> None:
    """The docs promise a call id a server leaves out is replaced by a new one "on both wires". On
    Anthropic's it failed the run: "unexpected stream event (KeyError: 'id')", or "the response is
    not a Messages body: KeyError('id')" (a compatible server that sends none)."""
    server = serve([_anthropic_call_without_id(stream), done("anthropic", stream, "seven")])
    out = run_against("anthropic", server, tmp_path, tools=[echo], stream=stream)
    assert (out.result.status, out.result.text) == ("completed", "seven"), out.result.reason
    calls, results = _sent_ids("anthropic", server.requests[1][1])
    assert len(calls) == 1 and calls[0] and results == calls
    assert out.store.load(out.result.run_id).messages[2].text == "x=7"
    assert_sound(out)


def _block(index: int, block: dict[str, Any], delta: dict[str, Any]) -> list[bytes]:
    return [
        event("content_block_start", {"type": "content_block_start", "index": index, "content_block": block}),
        event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}),
        event("content_block_stop", {"type": "content_block_stop", "index": index}),
    ]


def test_anthropic_blocks_a_server_numbers_alike_are_each_kept(serve: Serve, tmp_path: Path) -> None:
    """A compatible server that starts every content block at index 0 (text, then a call). Before,
    the call's block overwrote the text's: the person was shown "Let me look." and the transcript,
    the session and the next request had no such words. Now each block is its own, as Chat
    Completions' calls numbered alike are."""
    usage = {"input_tokens": 50, "output_tokens": 9}
    first = Reply(
        200,
        [
            anthropic_text("")[0],
            *_block(0, {"type": "text", "text": ""}, {"type": "text_delta", "text": "Let me look."}),
            *_block(
                0,
                {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {}},
                {"type": "input_json_delta", "partial_json": '{"x": 3}'},
            ),
            event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": usage}),
            event("message_stop", {"type": "message_stop"}),
        ],
    )
    server = serve([first, text_reply("anthropic", "three")])
    out = run_against("anthropic", server, tmp_path, tools=[echo])
    assert (out.result.status, out.result.text) == ("completed", "three"), out.result.reason
    reply = out.store.load(out.result.run_id).messages[1]
    assert reply.text == "Let me look." and [c.name for c in reply.tool_calls] == ["echo"]  # type: ignore[union-attr]
    sent = json.loads(server.requests[1][1])["messages"][1]["content"]
    assert [b["type"] for b in sent] == ["text", "tool_use"] and sent[0]["text"] == "Let me look."
    assert_sound(out)


def test_an_anthropic_reply_begun_again_inside_one_stream_is_not_taken_for_the_second(
    serve: Serve, tmp_path: Path
) -> None:
    """A gateway that retried upstream by itself and went on in the same stream: a second
    ``message_start``, and the new reply's blocks from index 0. Before, the person was shown
    "The total is 41" then "The total is 42", and the run completed with the second alone, as if
    the first had not been shown. Now it is a malformed stream: what was shown is not repeated
    as an answer, and the reason says why."""
    cut, again = anthropic_text("The total is 41"), anthropic_text("The total is 42")
    server = serve([Reply(200, [*cut[:4], *again]), text_reply("anthropic", "asked twice")])
    out = run_against("anthropic", server, tmp_path)
    assert out.result.status == "failed" and "began again" in (out.result.reason or "")
    assert "42" not in out.result.text and len(server.requests) == 1
    assert_sound(out)


# --- an error page from what stands in front of the server --------------------------------------

CDN_PAGE = b"""<!DOCTYPE html>
<!--[if lt IE 7]> <html class="no-js ie6 oldie" lang="en-US"> <![endif]-->
<head>
<title>api.example.com | 502: Bad gateway</title>
<meta charset="UTF-8" /><style>body{margin:0;padding:0}</style>
</head><body><h1>Bad gateway</h1> Error code 502</body></html>"""


@pytest.mark.parametrize("kind", WIRES)
def test_an_error_page_is_quoted_by_its_title_not_its_markup(serve: Serve, tmp_path: Path, kind: str) -> None:
    """A CDN's or a proxy's 502 page. Before, each retry event and the reason quoted its first 300
    characters of markup ('HTTP 502 <!DOCTYPE html> <!--[if lt IE 7]> <html class="no-js ie6
    oldie" ...'), which ended before saying what had happened."""
    page = Reply(502, [CDN_PAGE], {"content-type": "text/html"})
    server = serve([page, page, page, page])
    out = run_against(kind, server, tmp_path)
    reason = out.result.reason or ""
    assert out.result.status == "failed" and len(server.requests) == 4
    assert "HTTP 502 (an HTML page: api.example.com | 502: Bad gateway)" in reason, reason
    assert "<" not in reason
    retries = [json.loads(line) for text in out.files.values() for line in text.splitlines() if '"retry"' in line]
    assert retries and all("<" not in json.dumps(r) for r in retries)
    assert_sound(out)


# --- a model the server does not have, said inside the stream -----------------------------------


@pytest.mark.parametrize("kind", WIRES)
def test_a_model_the_server_does_not_have_said_mid_stream_falls_back(serve: Serve, tmp_path: Path, kind: str) -> None:
    """The docs: a model the server does not have (404) moves the turn to the next fallback model.
    Said inside the stream (OpenRouter's ``{"error": {"code": 404, "message": "No endpoints found
    for ..."}}``; a Messages-compatible server's ``not_found_error`` event), the status was read
    to classify the error and then dropped, so the run failed at once with the fallback unused."""
    if kind == "openai":
        missing = sse({"error": {"code": 404, "message": "No endpoints found for meta-llama/llama-3-70b."}})
    else:
        missing = event("error", {"type": "error", "error": {"type": "not_found_error", "message": "model: llama"}})
    primary, backup = serve([Reply(200, [missing])]), serve([text_reply(kind, "from the fallback")])
    model = provider(kind, primary, name="router")
    out = run_against(kind, primary, tmp_path, model=model, fallback_models=[provider(kind, backup, name="backup")])
    assert (out.result.status, out.result.text) == ("completed", "from the fallback"), out.result.reason
    assert (len(primary.requests), len(backup.requests)) == (1, 1)
    fallbacks = [line for text in out.files.values() for line in text.splitlines() if '"fallback"' in line]
    assert fallbacks and "router" in fallbacks[0] and "backup" in fallbacks[0]
    assert not [path for path, text in out.files.items() if KEY in text]  # (the fallback has no price: no cost)


# --- an error answered as a success ---------------------------------------------------------------

OVERLOADED_200 = {
    "openai": {"error": {"message": "The server is overloaded, try again", "type": "server_error"}},
    "anthropic": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
}
REFUSED_200 = {
    "openai": {"error": {"message": "Unknown parameter: 'foo'", "type": "invalid_request_error"}},
    "anthropic": {"type": "error", "error": {"type": "invalid_request_error", "message": "Unknown parameter: 'foo'"}},
}


@pytest.mark.parametrize("kind", WIRES)
def test_an_error_answered_with_200_is_classified_as_in_a_stream(serve: Serve, tmp_path: Path, kind: str) -> None:
    """Some gateways answer an error with HTTP 200 and the error's JSON. Not streamed, it was "the
    response is not a Chat Completions body: KeyError('choices')" (or a Messages body's 'content'):
    never retried, and the server's words left out of the reason. It is now the error it says, as
    the same object inside a stream is: an overload is retried, a refused request fails saying why."""
    overloaded = Reply(200, [json.dumps(OVERLOADED_200[kind]).encode()], JSON)
    server = serve([overloaded, done(kind, False, "after the retry")])
    out = run_against(kind, server, tmp_path, stream=False)
    assert (out.result.status, out.result.text) == ("completed", "after the retry"), out.result.reason
    assert len(server.requests) == 2
    assert_sound(out)

    refused = serve([Reply(200, [json.dumps(REFUSED_200[kind]).encode()], JSON)])
    out = run_against(kind, refused, tmp_path / "refused", stream=False)
    reason = out.result.reason or ""
    assert out.result.status == "failed" and len(refused.requests) == 1
    assert "Unknown parameter: 'foo'" in reason and "HTTP 200" in reason and "KeyError" not in reason

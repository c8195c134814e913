"""A scripted model server speaking OpenAI Chat Completions and Anthropic Messages, on loopback.

* ``POST /v1/chat/completions`` (with and without ``stream``) and ``GET /v1/models`` (in OpenAI's
  shape, or in Anthropic's with ``has_more``/``last_id`` pages when the request carries
  ``anthropic-version``; ``limit`` and ``after_id`` are honoured);
* ``POST /v1/messages`` (with and without ``stream``), the Anthropic streaming event format
  including thinking blocks with signatures (when the request enables ``thinking``); a
  ``tool_choice`` that forces a call turns the scripted text reply into that call (structured
  output's ``final_answer``);
* ``response_format`` (Chat Completions) is checked as OpenAI checks it, strict mode included;
* the request's ``model`` names the scenario (``plan`` or ``scripted/plan``);
* requests are checked as the real APIs check them (:mod:`tether.testing.validate`), and as the
  strictest common server does where they differ (an assistant message's ``content`` must be a
  string, as llama.cpp requires): an invalid one gets a 400, so passing tests send valid requests;
* ``dialect="llama.cpp"`` answers as llama.cpp's servers do: an assistant ``content`` that is null
  or missing gets HTTP 500; streamed tool calls repeat their ``id`` in every chunk (``name`` null
  after the first); streams carry no usage even when ``include_usage`` asks (bodies do);
* faults, consumed one per request in order: ``429`` (``429:retry_after=1.5``,
  ``429:retry_after_ms=200``), ``500``, ``503``, ``507``, ``529``, ``401``, ``429_quota`` (a 429
  whose body says ``insufficient_quota``, as OpenAI's does), ``low_credit`` (a 400 saying the credit
  balance is too low, as Anthropic's does), ``overflow``, ``cut`` (the stream
  stops mid-way before any content), ``cut_after_text``, ``stall:SECONDS`` (nothing is sent for that
  long), ``malformed`` (a chunk that is not JSON), ``error_event`` (an error inside the stream);
* faults that end a stream early: the ``cut_*`` ones drop the connection (no terminating chunk),
  the ``end_*`` ones close the body cleanly, as a server that believes it is done would:
  ``cut_in_arguments`` / ``end_in_arguments`` (right after the first piece of a tool call's
  arguments), ``end_before_content``, ``end_after_text``; ``no_finish`` sends every content event
  but no end marker (Chat Completions: no ``finish_reason`` and no usage chunk, ``[DONE]`` kept;
  Messages: no ``message_delta`` and no ``message_stop``); ``no_done`` omits only ``[DONE]`` (as
  some compatible servers do; the reply is complete);
* ``garbled_gzip`` (``content-encoding: gzip`` over bytes that are not gzip), ``no_usage`` (no usage
  anywhere in this reply), ``lone_surrogate`` (the reply's text carries a lone surrogate, ``\\ud800``);
* ``repeat_ids``: this reply's streamed tool calls repeat their id in every chunk (as llama.cpp);
  ``bad_tool_json``: the first tool call's arguments are not JSON (Messages: streamed as such
  ``partial_json``, or, without ``stream``, an ``input`` that is that text instead of an object);
* ``GET /v1/models`` takes the status faults (``401``, ``429``, ...) too, and leaves the others;
* ``context_window``: prompts with more tokens get the provider's context-length error;
* a request's ``max_tokens`` cuts the reply as a real model's is cut (``finish_reason`` ``length``,
  ``stop_reason`` ``max_tokens``): the text up to the limit, or the tool call the limit reached with
  its arguments as far as they got (Messages without a stream: the object a partial parse makes);
* ``omit_usage``: no reply reports usage (both endpoints); ``report_prompt_tokens=N``: every reply
  reports a prompt of N tokens whatever it was (a server that under-reports);
* ``GET /_stats`` reports requests served and seconds spent serving them; ``POST /_stats/reset``.

Run it with ``tether scripted serve --port 0``; it prints its base URL.
"""

from __future__ import annotations

import collections
import json
import threading
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pydantic_core

from tether.errors import ConfigError
from tether.providers.scripted import SCENARIOS, count_prompt_tokens, scripted_completion, split_text
from tether.testing.validate import assistant_content_problem, check_anthropic, check_openai, sign_thinking

__all__ = ["ScriptedServer"]

THINKING_TEXT = "Let me work out which tool answers this."
_PARTIAL = "_partial_json"  # a cut tool_use block's arguments as far as they got (not sent as such)


def _openai_chunks(body: dict[str, Any], include_usage: bool, repeat_ids: bool = False) -> list[dict[str, Any]]:
    """A completion body as the SSE chunks a Chat Completions server sends; with ``repeat_ids`` as
    llama.cpp sends tool calls: the id and type in every chunk of a call, the name null after the
    first, and null content beside them."""
    base = {"id": body["id"], "object": "chat.completion.chunk", "created": body["created"], "model": body["model"]}
    choice = body["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": ""})]
    out.extend(chunk({"content": piece}) for piece in split_text(message.get("content") or ""))
    for index, call in enumerate(message.get("tool_calls") or []):
        args = call["function"]["arguments"]
        head = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""},
        }
        out.append(chunk({"tool_calls": [head]}))
        cut = len(args) // 2  # arguments arrive in pieces, split anywhere
        for piece in (args[:cut], args[cut:]):
            if piece and repeat_ids:
                out.append(
                    chunk(
                        {
                            "role": None,
                            "content": None,
                            "tool_calls": [
                                {
                                    "index": index,
                                    "id": call["id"],
                                    "type": "function",
                                    "function": {"name": None, "arguments": piece},
                                }
                            ],
                        }
                    )
                )
            elif piece:
                out.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    out.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        out.append({**base, "choices": [], "usage": body["usage"]})
    return out


def _anthropic_to_openai(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Messages-API history → the Chat Completions shape the scenarios and the counter read."""
    out: list[dict[str, Any]] = []
    system = body.get("system")
    if system:
        text = system if isinstance(system, str) else "".join(b.get("text", "") for b in system)
        out.append({"role": "system", "content": text})
    for m in body["messages"]:
        content = m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]
        if m["role"] == "assistant":
            calls = [
                {
                    "id": b["id"],
                    "type": "function",
                    "function": {"name": b["name"], "arguments": json.dumps(b.get("input") or {})},
                }
                for b in content
                if b.get("type") == "tool_use"
            ]
            text = "".join(b.get("text", "") for b in content if b.get("type") == "text")
            out.append({"role": "assistant", "content": text or None, **({"tool_calls": calls} if calls else {})})
            continue
        for b in content:
            if b.get("type") == "tool_result":
                inner = b.get("content") or []
                text = inner if isinstance(inner, str) else "".join(x.get("text", "") for x in inner)
                out.append({"role": "tool", "tool_call_id": b["tool_use_id"], "content": text})
        text = "".join(b.get("text", "") for b in content if b.get("type") == "text")
        if text:
            out.append({"role": "user", "content": text})
    return out


def _anthropic_message(body: dict[str, Any], reply: dict[str, Any], thinking: bool) -> dict[str, Any]:
    choice = reply["choices"][0]
    msg = choice["message"]
    blocks: list[dict[str, Any]] = []
    if thinking:
        blocks.append(
            {
                "type": "thinking",
                "thinking": THINKING_TEXT,
                "signature": sign_thinking(str(body.get("model")), THINKING_TEXT),
            }
        )
    if msg.get("content"):
        blocks.append({"type": "text", "text": msg["content"]})
    calls = msg.get("tool_calls") or []
    for i, c in enumerate(calls):
        arguments = c["function"]["arguments"]
        block = {"type": "tool_use", "id": c["id"], "name": c["function"]["name"]}
        if choice["finish_reason"] == "length" and i == len(calls) - 1:
            # Cut by max_tokens: streamed as far as it got; without a stream, the input is what
            # a partial parse makes of it (an object that looks whole, as far as it goes).
            block["input"] = pydantic_core.from_json(arguments or "{}", allow_partial=True)
            block[_PARTIAL] = arguments
        else:
            block["input"] = json.loads(arguments)
        blocks.append(block)
    stop = {"tool_calls": "tool_use", "length": "max_tokens"}.get(choice["finish_reason"], "end_turn")
    usage = reply["usage"]
    cached = usage.get("prompt_tokens_details", {}).get("cached_tokens", 0)
    return {
        "id": f"msg_{reply['id']}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model"),
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage["prompt_tokens"] - cached,
            "output_tokens": usage["completion_tokens"],
            "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": 0,
        },
    }


def _anthropic_events(message: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    start = {**message, "content": [], "stop_reason": None, "usage": {**message["usage"], "output_tokens": 1}}
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(message["content"]):
        kind = block["type"]
        empty = {
            "text": {"type": "text", "text": ""},
            "thinking": {"type": "thinking", "thinking": ""},
            "tool_use": {"type": "tool_use", "id": block.get("id"), "name": block.get("name"), "input": {}},
        }[kind]
        events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": empty}))
        if kind == "text":
            deltas = [{"type": "text_delta", "text": p} for p in split_text(block["text"])]
        elif kind == "thinking":
            deltas = [{"type": "thinking_delta", "thinking": p} for p in split_text(block["thinking"])]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        else:
            raw = block.pop(_PARTIAL, None)
            if raw is None:
                raw = block["input"] if isinstance(block["input"], str) else json.dumps(block["input"])
            cut = len(raw) // 2
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in (raw[:cut], raw[cut:])]
        events += [("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in deltas]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": message["usage"]["output_tokens"]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def _shaped_events(message: dict[str, Any], fault: str | None, no_usage: bool) -> list[tuple[str, dict[str, Any]]]:
    """The Messages stream for ``message``, without usage or without its end when a fault says so."""
    events = _anthropic_events(message)
    if no_usage:
        for _, data in events:
            data.pop("usage", None)
            if "message" in data:
                data["message"] = {k: v for k, v in data["message"].items() if k != "usage"}
    if fault == "no_finish":
        events = [(name, data) for name, data in events if name not in ("message_delta", "message_stop")]
    return events


def _with_cache(reply: dict[str, Any], messages: list[dict[str, Any]], tools: Any) -> dict[str, Any]:
    """Report the prefix sent before (everything up to the last assistant message) as cached."""
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1)
    if last >= 0:
        cached = count_prompt_tokens(messages[: last + 1], tools)
        reply["usage"]["prompt_tokens_details"] = {"cached_tokens": min(cached, reply["usage"]["prompt_tokens"])}
    return reply


_STATUS_FAULTS = ("429", "429_quota", "low_credit", "500", "503", "507", "529", "401")
FAULTS = (
    *_STATUS_FAULTS,
    "overflow",
    "garbled_gzip",
    "stall",
    "cut",
    "cut_after_text",
    "cut_in_arguments",
    "end_before_content",
    "end_after_text",
    "end_in_arguments",
    "no_finish",
    "no_done",
    "no_usage",
    "malformed",
    "error_event",
    "lone_surrogate",
    "repeat_ids",
    "bad_tool_json",
)


def check_fault(fault: str) -> str:
    """``fault`` if the server knows it (with a valid argument); else a ConfigError naming the known ones."""
    kind, colon, arg = fault.partition(":")
    if kind not in FAULTS:
        raise ConfigError(f"unknown fault {fault!r}; known: {', '.join(FAULTS)} (stall takes :SECONDS)")
    if kind == "stall":
        try:
            ok = float(arg or 5) >= 0
        except ValueError:
            ok = False
        if not ok:
            raise ConfigError(f"fault {fault!r}: stall takes a number of seconds >= 0 (stall:2.5)")
    elif kind == "429" and colon:
        name, _, value = arg.partition("=")
        try:
            ok = name in ("retry_after", "retry_after_ms") and float(value) >= 0
        except ValueError:
            ok = False
        if not ok:
            raise ConfigError(f"fault {fault!r}: 429 takes :retry_after=S or :retry_after_ms=MS")
    elif colon:
        raise ConfigError(f"fault {fault!r}: {kind} takes no argument")
    return fault


def _anthropic_models(query: dict[str, list[str]]) -> dict[str, Any]:
    """``GET /v1/models`` as the Messages API answers it: pages of ``limit`` after ``after_id``."""
    names = list(SCENARIOS)
    limit = max(1, min(1000, int((query.get("limit") or ["20"])[0])))
    after = (query.get("after_id") or [""])[0]
    start = names.index(after) + 1 if after in names else 0
    page = names[start : start + limit]
    return {
        "data": [{"type": "model", "id": n, "display_name": n, "created_at": "2025-01-01T00:00:00Z"} for n in page],
        "has_more": start + limit < len(names),
        "first_id": page[0] if page else None,
        "last_id": page[-1] if page else None,
    }


def _break_tool_json(reply: dict[str, Any]) -> None:
    """Make the first tool call's arguments invalid JSON (a trailing comma), as a weak model does."""
    calls = reply["choices"][0]["message"].get("tool_calls") or []
    if calls:
        args = calls[0]["function"]["arguments"]
        calls[0]["function"]["arguments"] = args[:-1].rstrip() + ",}"


def _obey_tool_choice(reply: dict[str, Any], request: dict[str, Any]) -> None:
    """A Messages ``tool_choice`` that forces a call turns a text reply into a call, as the API's
    model would have made it: to the named tool (``tool``), or (``any``) to ``final_answer`` when
    offered, else the first tool. A JSON object in the text becomes the input; other text becomes
    ``{"text": ...}``."""
    choice = request.get("tool_choice") or {}
    message = reply["choices"][0]["message"]
    if choice.get("type") not in ("tool", "any") or message.get("tool_calls"):
        return
    names = [t["name"] for t in request.get("tools") or []]
    name = choice.get("name") if choice["type"] == "tool" else ("final_answer" if "final_answer" in names else names[0])
    text = message.get("content") or ""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    arguments = text if isinstance(value, dict) else json.dumps({"text": text})
    message["content"] = None
    message["tool_calls"] = [
        {
            "id": f"toolu_{reply['id'].rsplit('-', 1)[-1]}_answer",
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
    ]
    reply["choices"][0]["finish_reason"] = "tool_calls"


KEEP_REQUESTS = 500  # requests a server keeps for inspection


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body leave in one segment: with Nagle and delayed ACKs, two small writes per
    # response would add ~40 ms to every request on loopback.
    disable_nagle_algorithm = True
    wbufsize = -1
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read stdout
        return

    def _send(
        self, status: int, payload: bytes, content_type: str = "application/json", headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(payload)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(payload).encode(), headers=headers)

    def _anthropic_api(self) -> bool:
        return self.path.endswith("/messages") or "anthropic-version" in self.headers

    def _error(
        self,
        status: int,
        message: str,
        kind: str = "invalid_request_error",
        headers: dict[str, str] | None = None,
        code: str | None = None,
    ) -> None:
        if self._anthropic_api():
            self._json(status, {"type": "error", "error": {"type": kind, "message": message}}, headers)
        else:
            self._json(status, {"error": {"message": message, "type": kind, "param": None, "code": code}}, headers)

    def do_GET(self) -> None:
        from urllib.parse import parse_qs, urlsplit

        url = urlsplit(self.path)
        if url.path.rstrip("/") in ("/v1/models", "/models"):
            fault = self.server.next_fault(only=_STATUS_FAULTS)
            if fault and self._fault_before(fault, url.path):
                return
            if self._anthropic_api():
                self._json(200, _anthropic_models(parse_qs(url.query)))
                return
            created = int(time.time())
            self._json(
                200,
                {
                    "object": "list",
                    "data": [
                        {"id": name, "object": "model", "created": created, "owned_by": "tether-scripted"}
                        for name in SCENARIOS
                    ],
                },
            )
        elif self.path == "/_stats":
            self._json(200, self.server.stats())
        else:
            self._error(404, f"no route {self.path}")

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        started = time.perf_counter()
        path = self.path.rstrip("/")
        if path == "/_stats/reset":
            self.server.reset()
            self._json(200, self.server.stats())
            return
        if path not in ("/v1/chat/completions", "/chat/completions", "/v1/messages"):
            self._error(404, f"no route {self.path}")
            return
        try:
            request = json.loads(raw)
        except ValueError:
            self._error(400, "the body is not JSON")
            return
        self.server.log_request(path, request, dict(self.headers))
        fault = self.server.next_fault()
        if fault and self._fault_before(fault, path):
            return
        if path == "/v1/messages":
            self._messages(request, fault)
        else:
            self._chat(request, fault)
        self.server.record(time.perf_counter() - started)

    def _fault_before(self, fault: str, path: str) -> bool:
        """Faults that replace the answer; True when one was sent."""
        kind, _, arg = fault.partition(":")
        if kind.startswith("stall"):
            time.sleep(float(arg or 5))
            return False
        if kind == "429_quota":
            self._error(
                429,
                "You exceeded your current quota, please check your plan and billing details.",
                "insufficient_quota",
                code="insufficient_quota",
            )
            return True
        if kind == "low_credit":
            self._error(
                400,
                "Your credit balance is too low to access the Anthropic API. Please go to Plans & "
                "Billing to upgrade or purchase credits.",
            )
            return True
        if kind in ("429", "500", "503", "507", "529", "401"):
            headers = {}
            if arg.startswith("retry_after_ms="):
                headers["retry-after-ms"] = arg.split("=", 1)[1]
            elif arg.startswith("retry_after="):
                headers["retry-after"] = arg.split("=", 1)[1]
            names = {"429": "rate_limit_error", "401": "authentication_error", "529": "overloaded_error"}
            self._error(int(kind), f"scripted fault {kind}", names.get(kind, "api_error"), headers)
            return True
        if kind == "overflow":
            self._overflow(path)
            return True
        if kind == "garbled_gzip":
            # The bytes arrive intact; they are just not gzip: the client's decoder must refuse them.
            self._send(200, b"\x1f\x8b\x08\x00garbage, not deflate data" * 4, headers={"content-encoding": "gzip"})
            return True
        return False

    def _overflow(self, path: str) -> None:
        if path == "/v1/messages":
            self._error(400, "prompt is too long: 250000 tokens > 200000 maximum")
        else:
            self._json(
                400,
                {
                    "error": {
                        "message": "This model's maximum context length is exceeded.",
                        "type": "invalid_request_error",
                        "code": "context_length_exceeded",
                    }
                },
            )

    def _scripted(
        self, path: str, messages: list[dict[str, Any]], tools: Any, max_tokens: Any, model: str
    ) -> dict[str, Any] | None:
        """The scripted reply, or None after answering with the error a real server would send."""
        scenario = model.removeprefix("scripted/")
        try:
            reply = scripted_completion(scenario, messages, tools or (), max_tokens, model=scenario)
        except ConfigError as exc:
            self._error(400, f"bad request: {exc}")
            return None
        window = self.server.context_window
        if window is not None and reply["usage"]["prompt_tokens"] > window:
            self._overflow(path)
            return None
        reported = self.server.report_prompt_tokens
        if reported is not None:
            usage = reply["usage"]
            usage["prompt_tokens"], usage["total_tokens"] = reported, reported + usage["completion_tokens"]
        return reply

    def _refused_chat(self, request: dict[str, Any]) -> bool:
        """Answer an invalid Chat Completions request as the server would; True when refused."""
        problem = check_openai(request)
        if problem is None:
            return False
        if self.server.dialect == "llama.cpp" and assistant_content_problem(request):
            # What llama.cpp's servers answer when their chat template meets a null content.
            self._error(500, f"Internal Server Error: {problem}", "server_error")
        else:
            self._error(400, problem)
        return True

    def _chat(self, request: dict[str, Any], fault: str | None) -> None:
        if self._refused_chat(request):
            return
        reply = self._scripted(
            "/v1/chat/completions",
            request["messages"],
            request.get("tools"),
            request.get("max_tokens") or request.get("max_completion_tokens"),
            str(request.get("model", "")),
        )
        if reply is None:
            return
        if request.get("prompt_cache_key"):
            reply = _with_cache(reply, request["messages"], request.get("tools") or ())
        if fault == "lone_surrogate":
            message = reply["choices"][0]["message"]
            message["content"] = (message.get("content") or "") + " \ud800 "
        if fault == "bad_tool_json":
            _break_tool_json(reply)
        no_usage = self.server.omit_usage or fault == "no_usage"
        if not request.get("stream"):
            if no_usage:
                reply.pop("usage", None)
            self._send(200, b"{not json" if fault == "malformed" else json.dumps(reply).encode())
            return
        llama_cpp = self.server.dialect == "llama.cpp"
        include = bool((request.get("stream_options") or {}).get("include_usage")) and not no_usage and not llama_cpp
        chunks = _openai_chunks(reply, include, repeat_ids=llama_cpp or fault == "repeat_ids")
        if fault == "no_finish":
            chunks = [c for c in chunks if c["choices"] and not c["choices"][0]["finish_reason"]]
        events = [f"data: {json.dumps(c)}\n\n" for c in chunks]
        if fault != "no_done":
            events.append("data: [DONE]\n\n")
        if fault == "malformed":
            events.insert(2, "data: {oops\n\n")
        elif fault == "error_event":
            events.insert(1, 'data: {"error": {"message": "overloaded", "type": "server_error"}}\n\n')
        self._stream(events, fault, text_markers=('"content": "',), args_markers=('"function": {"arguments": "',))

    def _messages(self, request: dict[str, Any], fault: str | None) -> None:
        problem = check_anthropic(request)
        if problem:
            self._error(400, problem)
            return
        history = _anthropic_to_openai(request)
        tools = [
            {
                "type": "function",
                "function": {
                    "name": t["name"],
                    "description": t.get("description", ""),
                    "parameters": t.get("input_schema", {}),
                },
            }
            for t in request.get("tools") or []
        ]
        reply = self._scripted("/v1/messages", history, tools, request.get("max_tokens"), str(request.get("model", "")))
        if reply is None:
            return
        _obey_tool_choice(reply, request)
        if any("cache_control" in b for m in request["messages"] for b in m["content"] if isinstance(b, dict)):
            reply = _with_cache(reply, history, tools)
        thinking = (request.get("thinking") or {}).get("type") == "enabled"
        if fault == "lone_surrogate":
            choice = reply["choices"][0]["message"]
            choice["content"] = (choice.get("content") or "") + " \ud800 "
        message = _anthropic_message(request, reply, thinking)
        if fault == "bad_tool_json":
            uses = [b for b in message["content"] if b["type"] == "tool_use"]
            if uses:  # the input as text that is not JSON: streamed as partial_json, or sent as a string
                uses[0]["input"] = json.dumps(uses[0]["input"])[:-1].rstrip() + ",}"
        no_usage = self.server.omit_usage or fault == "no_usage"
        if not request.get("stream"):
            for block in message["content"]:
                block.pop(_PARTIAL, None)
            if no_usage:
                message.pop("usage")
            self._json(200, message)
            return
        events = [
            f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in _shaped_events(message, fault, no_usage)
        ]
        if fault == "malformed":
            events.insert(2, "event: content_block_delta\ndata: {oops\n\n")
        elif fault == "error_event":
            error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
            events.insert(3, f"event: error\ndata: {json.dumps(error)}\n\n")
        self._stream(events, fault, text_markers=('"text_delta"',), args_markers=('"input_json_delta"',))

    def _stream(
        self, events: list[str], fault: str | None, text_markers: Iterable[str], args_markers: Iterable[str]
    ) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        stop = _stop_index(events, fault, tuple(text_markers), tuple(args_markers))
        for event in events[:stop]:
            data = event.encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        if stop is not None and (fault or "").startswith("cut"):
            self.close_connection = True  # the stream is cut: no terminating chunk
            return
        self.wfile.write(b"0\r\n\r\n")  # a clean end, even when the server stopped early
        self.wfile.flush()


def _stop_index(events: list[str], fault: str | None, text: tuple[str, ...], args: tuple[str, ...]) -> int | None:
    """How many events a fault lets out (None: all of them)."""
    if fault in ("cut", "end_before_content"):
        return 1  # before any content
    markers = {"cut_after_text": text, "end_after_text": text, "cut_in_arguments": args, "end_in_arguments": args}
    wanted = markers.get(fault or "")
    if wanted is None:
        return None
    # Right after the first event carrying the marker (the first event only opens the reply).
    return next((i + 1 for i, e in enumerate(events) if i > 0 and any(m in e for m in wanted)), None)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address, _Handler)
        self._lock = threading.Lock()
        self.requests = 0
        self.server_s = 0.0
        self.faults: collections.deque[str] = collections.deque()
        self.context_window: int | None = None
        self.omit_usage = False
        self.report_prompt_tokens: int | None = None
        self.dialect = "openai"
        # The latest requests, for tests to inspect; bounded, so a long-running `tether scripted
        # serve` stays flat in memory (a 200-turn run sends ~20 MB of request bodies).
        self.received: collections.deque[tuple[str, dict[str, Any], dict[str, str]]] = collections.deque(
            maxlen=KEEP_REQUESTS
        )

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up (a cancelled run, a killed process) is not the server's error.
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def next_fault(self, only: tuple[str, ...] | None = None) -> str | None:
        """The next fault; with ``only``, the next one only when its kind is among those."""
        with self._lock:
            if not self.faults or (only is not None and self.faults[0].partition(":")[0] not in only):
                return None
            return self.faults.popleft()

    def log_request(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> None:
        with self._lock:
            self.received.append((path, body, headers))

    def record(self, seconds: float) -> None:
        with self._lock:
            self.requests += 1
            self.server_s += seconds

    def reset(self) -> None:
        with self._lock:
            self.requests, self.server_s = 0, 0.0

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"requests": self.requests, "server_s": self.server_s}


class ScriptedServer:
    """The scripted model behind HTTP on loopback. ``with ScriptedServer() as s: s.base_url``."""

    DIALECTS = ("openai", "llama.cpp")

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        faults: Iterable[str] = (),
        context_window: int | None = None,
        omit_usage: bool = False,
        dialect: str = "openai",
        report_prompt_tokens: int | None = None,
    ) -> None:
        if dialect not in self.DIALECTS:
            raise ConfigError(f"unknown scripted server dialect {dialect!r}; known: {', '.join(self.DIALECTS)}")
        faults = [check_fault(f) for f in faults]  # before the port is taken
        self._server = _Server((host, port))
        self._server.faults.extend(faults)
        self._server.context_window = context_window
        self._server.omit_usage = omit_usage
        self._server.report_prompt_tokens = report_prompt_tokens
        self._server.dialect = dialect
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def root_url(self) -> str:
        """Where it listens (``--host 127.0.0.2``: there, not 127.0.0.1); on every address, loopback's."""
        host = str(self._server.server_address[0])
        return f"http://{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL (``.../v1``); the Anthropic base URL is :attr:`root_url`."""
        return f"{self.root_url}/v1"

    def set_faults(self, faults: Iterable[str], *, context_window: int | None = None) -> None:
        faults = [check_fault(f) for f in faults]
        with self._server._lock:
            self._server.faults.clear()
            self._server.faults.extend(faults)
            self._server.context_window = context_window
            self._server.received.clear()

    @property
    def received(self) -> list[tuple[str, dict[str, Any], dict[str, str]]]:
        """(path, body, headers) of the latest chat requests (up to ``KEEP_REQUESTS``), for tests."""
        with self._server._lock:
            return list(self._server.received)

    def start(self) -> ScriptedServer:
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def stats(self) -> dict[str, Any]:
        return self._server.stats()

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

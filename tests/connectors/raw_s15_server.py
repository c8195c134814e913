"""A stdio MCP server in plain JSON-RPC lines that misbehaves on purpose, for
test_attack_mcp_s15.py. ``argv[1]`` says how:

* ``flood_then_die``: writes 65 MiB to stderr without a newline (more than tether reads of a
  stdout line), then a line saying why it stops, and exits with status 3 before the handshake;
* ``long_question``: at a call, asks the person (elicitation) a question of 198,000 characters with
  a one-field form, then a short one whose field's description is 200,000 characters, and answers
  the call with what it was told each time, ``action`` or error;
* ``plain``: a tool ``go`` that answers ``fine``.
"""

from __future__ import annotations

import json
import sys

MODE = sys.argv[1]


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(ident: object, text: str) -> None:
    send({"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text", "text": text}]}})


def refuse(ident: object, text: str) -> None:
    send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32603, "message": text}})


if MODE == "flood_then_die":
    sys.stderr.buffer.write(b"x" * (65 * 1024 * 1024) + b"\nfatal: cannot open the stock database\n")
    sys.stderr.flush()
    sys.exit(3)


def ask(n: int) -> None:
    about = "a" * 200_000 if n else "yes or no"
    form = {"type": "object", "properties": {"ok": {"type": "boolean", "description": about}}}
    message = "Please read all this. " * (9_000 if n == 0 else 1)
    params = {"mode": "form", "message": message, "requestedSchema": form}
    send({"jsonrpc": "2.0", "id": f"q{n}", "method": "elicitation/create", "params": params})


call, told = None, []
for line in sys.stdin:
    message = json.loads(line)
    method, ident = message.get("method"), message.get("id")
    if method is None and isinstance(ident, str) and ident.startswith("q"):  # an answer to its question
        told.append(message.get("result", {}).get("action") or message.get("error", {}).get("message"))
        if len(told) < 2:
            ask(len(told))
        else:
            answer(call, " | ".join(told))
        continue
    if ident is None:
        continue
    if method == "initialize":
        send(
            {
                "jsonrpc": "2.0",
                "id": ident,
                "result": {
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "raw", "version": "1"},
                },
            }
        )
    elif method == "tools/list":
        spec = {"name": "go", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}
        send({"jsonrpc": "2.0", "id": ident, "result": {"tools": [spec]}})
    elif method == "tools/call" and MODE == "long_question":
        call = ident
        ask(0)
    elif method == "tools/call":
        answer(ident, "fine")
    else:
        refuse(ident, "no such method")

"""The scripted server every peer talks to: :class:`tether.testing.ScriptedServer` in its own process.

    python bench/_peers/server.py [--port 0]     # prints "scripted server on <base url>"

Two changes for a benchmark, both made here and nowhere in tether:

* an assistant message whose ``content`` is null or missing beside its tool calls is accepted, as
  OpenAI's API accepts it (the test server refuses it, as llama.cpp does, so that tether's own
  requests stay valid everywhere; most frameworks send null, and would all fail otherwise);
* the server does not keep every request body for tests to inspect (thousands of 200-turn
  requests would hold gigabytes and slow the server down as the run goes on).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any

import tether.testing.validate as validate
from tether.testing import server as scripted

_strict = validate._assistant_content


def _as_openai_accepts(i: int, m: dict[str, Any]) -> str | None:
    if m.get("content") is None and m.get("tool_calls"):
        return None
    return _strict(i, m)


validate._assistant_content = _as_openai_accepts
scripted._Server.log_request = lambda self, path, body, headers: None  # type: ignore[method-assign]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    server = scripted.ScriptedServer("127.0.0.1", args.port)
    print(f"scripted server on {server.base_url}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    sys.exit(0)


if __name__ == "__main__":
    main()

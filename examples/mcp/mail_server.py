"""A mail server for tether's MCP example: an MCP server over stdio with two tools.

* ``list_messages`` (read-only): the inbox, newest first.
* ``send_email`` (destructive): "sends" a message by appending it, one JSON line, to a local
  outbox file: a stand-in for a real mail API, so the example runs offline and its effect can be
  checked.

Give it to tether in ``$TETHER_HOME/config.toml``::

    [mcp.mail]
    command = "python"
    args = ["examples/mcp/mail_server.py", "--outbox", "outbox.jsonl"]

then ``tether run --mcp mail "Answer the latest e-mail"``: the agent sees ``mail__list_messages``
and ``mail__send_email``, and tether asks before the second runs. ``--inbox FILE`` reads the inbox
from a JSON list of ``{"id", "date", "from", "subject", "body"}`` objects instead of the sample.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

SAMPLE_INBOX = [
    {
        "id": "m1",
        "date": "2026-03-01",
        "from": "luis@example.com",
        "subject": "Thanks for the quick fix",
        "body": "The invoice is right now. Thank you!",
    },
    {
        "id": "m2",
        "date": "2026-03-02",
        "from": "ana@example.com",
        "subject": "Order 1042 is late",
        "body": "My order 1042 has not arrived yet. When will it ship?",
    },
]

server = MCPServer("mail", instructions="Read the inbox and send e-mail on the user's behalf.")
paths = {"inbox": None, "outbox": Path("outbox.jsonl")}


def inbox() -> list[dict[str, str]]:
    source = paths["inbox"]
    messages = json.loads(Path(source).read_text(encoding="utf-8")) if source else SAMPLE_INBOX
    return sorted(messages, key=lambda m: m["date"], reverse=True)


@server.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
def list_messages() -> str:
    """The messages in the inbox, newest first: id, date, sender, subject and text."""
    return (
        "\n\n".join(f"{m['id']}  {m['date']}  From: {m['from']}  Subject: {m['subject']}\n{m['body']}" for m in inbox())
        or "The inbox is empty."
    )


@server.tool(
    annotations=ToolAnnotations(
        read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=True
    )
)
def send_email(to: str, subject: str, body: str) -> str:
    """Send an e-mail. It cannot be unsent."""
    outbox = Path(paths["outbox"])
    with outbox.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"to": to, "subject": subject, "body": body, "sent_at": time.time()}) + "\n")
    count = len(outbox.read_text(encoding="utf-8").splitlines())
    return f"Sent to {to}: {subject!r} (message {count} in {outbox.name})."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inbox", help="a JSON file of messages (default: a sample inbox)")
    parser.add_argument("--outbox", default="outbox.jsonl", help="where sent messages go (default: outbox.jsonl)")
    args = parser.parse_args()
    paths["inbox"], paths["outbox"] = args.inbox, Path(args.outbox)
    server.run()


if __name__ == "__main__":
    main()

"""Which built-in read-only answers the harness may reuse within a run (issue 29, defect 2): read_file
while the file's size and mtime are unchanged; a listing or a search never (any file changes them)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from tether import Agent, run
from tether.harness.state import RunState
from tether.messages import AssistantMessage, Message, ToolMessage
from tether.providers.scripted import Reply
from tether.testing import FunctionModel
from tether.tools.files import list_files, read_file


def three_calls(cwd: Path, name: str, args: dict[str, Any], between: Any) -> tuple[list[ToolMessage], list[str]]:
    """The model makes the same call three times; ``between(n)`` runs after the n-th answer."""

    def reply(messages: list[Message], request: Any) -> Reply | str:
        n = sum(isinstance(m, AssistantMessage) for m in messages)
        if n:
            between(n)
        return Reply(calls=((f"c{n}", name, args),)) if n < 3 else "done"

    state = RunState()
    asyncio.run(run(Agent(FunctionModel(reply), tools=[read_file, list_files], cwd=cwd), "go", state=state))
    out = [m for m in state.messages if isinstance(m, ToolMessage)]
    return out, [m.status for m in out]


def test_read_file_is_reused_only_while_the_file_is_unchanged(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("version 1\n")

    def change_after_the_second(n: int) -> None:
        if n == 2:  # another process writes the file: same size, a later mtime
            notes.write_text("version 2\n")
            os.utime(notes, ns=(notes.stat().st_atime_ns, notes.stat().st_mtime_ns + 10_000_000))

    out, statuses = three_calls(tmp_path, "read_file", {"path": "notes.txt"}, change_after_the_second)
    assert statuses == ["ok", "cached", "ok"]
    assert "version 1" in out[1].text and "version 2" in out[2].text


def test_a_listing_is_never_reused(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a")
    out, statuses = three_calls(tmp_path, "list_files", {}, lambda n: (tmp_path / f"new{n}.txt").write_text("x"))
    assert statuses == ["ok", "ok", "ok"] and "new2.txt" in out[2].text

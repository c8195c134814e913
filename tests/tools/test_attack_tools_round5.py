"""Round 5 of attacks on the tools: what rounds 1-4 left alone.

- ``@tool`` on a function with odd parameters: a parameter whose name starts with ``_`` was left
  out of the schema and every call failed with a TypeError; ``model_config`` failed at decoration
  with "'ellipsis' object is not iterable"; positional-only parameters failed at every call; ``*args``
  and ``**kwargs`` became required fields no call could fill;
- an argument the schema does not name was dropped without a word: ``list_files`` given ``glob``
  (``search_files``' name for it) listed every file, as if no pattern had been given.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import stat
import warnings
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from tether import Agent, run
from tether.cancel import CancelSignal
from tether.harness.state import RunState
from tether.messages import AssistantMessage, Message, ToolMessage
from tether.providers.scripted import Reply
from tether.testing import FunctionModel
from tether.tools.base import ToolContext, ToolError, ToolInputError, ToolResult, tool, validate_arguments
from tether.tools.files import FILE_TOOLS, edit_file, list_files, write_file
from tether.tools.sandbox import sandbox_status
from tether.tools.shell import RunCommand, ShellSettings

TOOLS = {"write_file": write_file, "edit_file": edit_file}


def call(t: Any, cwd: Path, arguments: dict[str, Any]) -> Any:
    ctx = ToolContext(cwd=cwd, signal=CancelSignal())
    return asyncio.run(t.execute(validate_arguments(t, json.dumps(arguments)), ctx))


# --- @tool on functions with odd signatures -------------------------------------------------------


def test_a_parameter_named_like_a_pydantic_attribute_is_offered_and_passed(tmp_path: Path) -> None:
    """A leading underscore made pydantic drop the field (the schema had no ``_path``, and every call
    ended in "missing 1 required positional argument"); ``model_config`` broke the decoration; names
    such as ``schema`` or ``json`` warned at import."""

    def lookup(_path: str, schema: str = "v1", model_config: int = 0, json: bool = False) -> str:
        """Look something up."""
        return f"{_path} {schema} {model_config} {json}"

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Field name ... shadows an attribute in parent BaseModel"
        made = tool(lookup)
    assert sorted(made.input_schema["properties"]) == ["_path", "json", "model_config", "schema"]
    assert made.input_schema["required"] == ["_path"]
    assert call(made, tmp_path, {"_path": "a", "model_config": 2}) == "a v1 2 False"


def test_positional_only_parameters_are_passed_in_order(tmp_path: Path) -> None:
    @tool
    def scale(ctx: ToolContext, value: float, factor: float = 2.0, /, *, unit: str = "m") -> str:
        """Scale a value."""
        assert isinstance(ctx, ToolContext)
        return f"{value * factor:g} {unit}"

    assert sorted(scale.input_schema["properties"]) == ["factor", "unit", "value"]
    assert call(scale, tmp_path, {"value": 3, "unit": "km"}) == "6 km"
    assert call(scale, tmp_path, {"value": 3, "factor": 10}) == "30 m"


@pytest.mark.parametrize("star", ["*items", "**options"])
def test_star_parameters_are_refused_when_the_tool_is_made(star: str) -> None:
    """They became required fields of the wrong type (``items`` a string, ``options`` an integer):
    no call could satisfy the schema, and the model was told to fix what it could not."""
    namespace: dict[str, Any] = {}
    exec(f"def gather(first: int, {star}: int) -> str:\n    'Gather.'\n    return ''\n", namespace)
    with pytest.raises(TypeError, match=rf"@tool cannot make a tool of gather: its parameter \{star}"):
        tool(namespace["gather"])


class Range(BaseModel):
    start: int
    end: int


def test_nested_models_literals_and_optionals_are_checked_as_the_schema_says(tmp_path: Path) -> None:
    @tool
    def pick(span: Range, mode: Literal["lines", "bytes"] = "lines", limit: int | None = None) -> str:
        """Pick a span."""
        return f"{span.start}-{span.end} {mode} {limit}"

    assert pick.input_schema["properties"]["mode"]["enum"] == ["lines", "bytes"]
    assert call(pick, tmp_path, {"span": {"start": 1, "end": 2}}) == "1-2 lines None"
    with pytest.raises(ToolInputError, match="mode: Input should be 'lines' or 'bytes'"):
        validate_arguments(pick, '{"span": {"start": 1, "end": 2}, "mode": "words"}')
    with pytest.raises(ToolInputError, match=r"span\.end: Field required"):
        validate_arguments(pick, '{"span": {"start": 1}}')


# --- arguments the schema does not name -----------------------------------------------------------


def test_an_argument_the_tool_does_not_take_is_refused_and_named(tmp_path: Path) -> None:
    """``list_files({"glob": "*.py"})`` listed every file, as if the model had asked for all of
    them: the misnamed argument was dropped, and the model took the listing for the answer."""
    assert list_files.input_schema["additionalProperties"] is False
    with pytest.raises(ToolInputError) as caught:
        validate_arguments(list_files, '{"glob": "*.py"}')
    assert "glob: not an argument of list_files (its arguments: pattern)" in str(caught.value)


def test_through_the_loop_the_model_is_told_and_its_next_call_works(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("print(1)\n")
    (tmp_path / "notes.txt").write_text("n\n")
    seen: list[str] = []

    def reply(messages: list[Message], request: Any) -> Reply | str:
        n = sum(isinstance(m, AssistantMessage) for m in messages)
        if n:
            assert isinstance(messages[-1], ToolMessage)
            seen.append(messages[-1].text)
        if n == 0:
            return Reply(calls=(("c0", "list_files", {"glob": "*.py"}),))
        if n == 1:
            return Reply(calls=(("c1", "list_files", {"pattern": "*.py"}),))
        return "done"

    result = asyncio.run(run(Agent(FunctionModel(reply), tools=list(FILE_TOOLS), cwd=tmp_path), "go", state=RunState()))
    assert result.status == "completed"
    refused, listed = seen
    assert "glob: not an argument of list_files (its arguments: pattern)" in refused
    assert "notes.txt" not in refused
    assert listed == "app.py\t9 bytes"


# --- read-only files and owners -------------------------------------------------------------------


@pytest.mark.parametrize("tool_name", ["write_file", "edit_file"])
def test_a_read_only_file_is_not_replaced_and_the_message_says_what_to_do(tmp_path: Path, tool_name: str) -> None:
    """The tools write a new file and rename it over the old one, which needs only the directory's
    permission: a file marked read-only (chmod 444, a vendored or generated file) was replaced
    without a word, where an editor or ``>`` would have been refused."""
    locked = tmp_path / "vendor.lock"
    locked.write_text("pinned = 1\n")
    locked.chmod(0o444)
    args = (
        {"path": "vendor.lock", "content": "pinned = 2\n"}
        if tool_name == "write_file"
        else {"path": "vendor.lock", "old_text": "1", "new_text": "2"}
    )
    with pytest.raises(ToolError, match=r"vendor\.lock is read-only \(mode 0444\); it was not changed\. .*chmod u\+w"):
        call(TOOLS[tool_name], tmp_path, args)
    assert locked.read_text() == "pinned = 1\n"
    assert stat.S_IMODE(locked.stat().st_mode) == 0o444
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vendor.lock"]  # no temporary file left


@pytest.mark.skipif(
    os.geteuid() != 0, reason="only root can give a file to another user"
)  # chown needs root; CI runs as root
@pytest.mark.parametrize("tool_name", ["write_file", "edit_file"])
def test_a_file_edited_by_root_keeps_its_owner(tmp_path: Path, tool_name: str) -> None:
    """tether as root (a container over a mounted checkout) handed every file it wrote or edited to
    root: its owner could no longer change the file, nor a build running as them."""
    owned = tmp_path / "app.py"
    owned.write_text("port = 80\n")
    os.chown(owned, 65534, 65534)
    args = (
        {"path": "app.py", "content": "port = 81\n"}
        if tool_name == "write_file"
        else {"path": "app.py", "old_text": "80", "new_text": "81"}
    )
    call(TOOLS[tool_name], tmp_path, args)
    assert owned.read_text() == "port = 81\n"
    assert (owned.stat().st_uid, owned.stat().st_gid) == (65534, 65534)
    call(write_file, tmp_path, {"path": "new.py", "content": "x\n"})  # a new file is the writer's own
    assert (tmp_path / "new.py").stat().st_uid == 0


# --- .git and .tether -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool_name", "path"),
    [
        ("write_file", ".git/config"),
        ("write_file", "sub/../.git/hooks/pre-commit"),
        ("write_file", "repo-link/config"),  # a link inside the workspace, to .git
        ("write_file", ".GIT/config"),  # the same directory where case is ignored
        ("write_file", ".tether/skills/helper/SKILL.md"),
        ("edit_file", "repo-link/config"),
    ],
)
def test_the_file_tools_do_not_write_what_git_and_tether_run_later(tmp_path: Path, tool_name: str, path: str) -> None:
    """The sandbox keeps the workspace's .git and .tether read-only for commands, because git runs
    what .git/config names outside any sandbox (core.fsmonitor at the next git status) and tether
    reads .tether/skills into later runs; write_file and edit_file, which run without asking, wrote
    there freely: the model could set core.fsmonitor to any command and the user's next git status
    ran it, unsandboxed."""
    git = tmp_path / ".git"
    git.mkdir()
    (git / "config").write_text("[core]\n\tbare = false\n")
    os.symlink(".git", tmp_path / "repo-link")
    args = (
        {"path": path, "content": "[core]\n\tfsmonitor = touch /tmp/pwned\n"}
        if tool_name == "write_file"
        else {"path": path, "old_text": "bare = false", "new_text": "fsmonitor = touch /tmp/pwned"}
    )
    with pytest.raises(ToolError, match=r"^refused: .* is inside \.(git|tether), which .* Nothing was changed"):
        call(TOOLS[tool_name], tmp_path, args)
    assert (git / "config").read_text() == "[core]\n\tbare = false\n"
    assert sorted(p.name for p in git.iterdir()) == ["config"]
    assert not (tmp_path / ".tether").exists()


def test_files_merely_named_like_them_are_still_written(tmp_path: Path) -> None:
    call(write_file, tmp_path, {"path": ".gitignore", "content": "*.pyc\n"})
    call(write_file, tmp_path, {"path": "docs/.git-notes/a.md", "content": "a\n"})
    assert (tmp_path / ".gitignore").read_text() == "*.pyc\n"
    assert (tmp_path / "docs/.git-notes/a.md").read_text() == "a\n"  # a nested .git: test_left_alone_s11.py


@pytest.mark.skipif(
    not sandbox_status().available, reason=f"no sandbox: {sandbox_status().why_not}"
)  # bubblewrap; .ci/run installs it
def test_a_sandboxed_command_cannot_make_tether_s_folder_where_there_is_none(tmp_path: Path) -> None:
    """An existing .tether was bound read-only, a missing one was not protected at all: a command
    run without asking could create .tether/skills/NAME/SKILL.md, a project skill every later run
    lists in its prompt and loads as instructions."""
    ws = tmp_path / "ws"
    ws.mkdir()
    shell = RunCommand(ShellSettings(sandbox="workspace-write"))
    ctx = ToolContext(cwd=ws, signal=CancelSignal())
    planted = asyncio.run(
        shell.execute({"command": "mkdir -p .tether/skills/x && echo planted > .tether/skills/x/SKILL.md"}, ctx)
    )
    assert isinstance(planted, ToolResult) and planted.is_error
    assert "[refused: write outside the workspace blocked by the sandbox" in str(planted.content)
    assert not (ws / ".tether" / "skills").exists()
    assert [p.name for p in ws.iterdir()] == [".tether"] and list((ws / ".tether").iterdir()) == []
    ordinary = asyncio.run(shell.execute({"command": "echo x > notes.txt && cat notes.txt"}, ctx))
    assert isinstance(ordinary, ToolResult) and ordinary.content == "exit code 0\nx\n"
    listed = RunCommand(ShellSettings(sandbox="workspace-write", writable=(".tether",)))
    made = asyncio.run(listed.execute({"command": "mkdir -p .tether/skills/x"}, ctx))
    assert isinstance(made, ToolResult) and not made.is_error and (ws / ".tether/skills/x").is_dir()


@pytest.mark.parametrize("mode", ["off", "workspace-write"])
def test_a_working_directory_removed_during_the_run_is_named_in_the_shell_s_answer(tmp_path: Path, mode: Any) -> None:
    """A command in ``mode = "off"`` can remove the workspace (``cd .. && rm -rf ws``); every later
    run_command then failed with a bare "[Errno 2] No such file or directory: PosixPath(...)", which
    the harness asks the model to fix by changing its arguments. The file tools already said it."""
    if mode != "off" and not sandbox_status().available:
        pytest.skip(f"no sandbox: {sandbox_status().why_not}")  # bubblewrap; .ci/run installs it
    ws = tmp_path / "ws"
    seen: list[str] = []

    def reply(messages: list[Message], request: Any) -> Reply | str:
        if isinstance(messages[-1], ToolMessage):
            seen.append(messages[-1].text)
            return "done"
        ws.rmdir()
        return Reply(calls=(("c0", "run_command", {"command": "echo hi"}),))

    ws.mkdir()
    shell = RunCommand(ShellSettings(sandbox=mode, policy="never-ask"))
    result = asyncio.run(run(Agent(FunctionModel(reply), tools=[shell], cwd=ws), "go", state=RunState()))
    assert result.status == "completed"
    assert seen[0].startswith(
        f"Error: the tool run_command failed: the command did not run: the working directory {ws} no longer "
        "exists. No command can run until it is back; tell the user."
    )


@pytest.mark.skipif(
    not sandbox_status().available, reason=f"no sandbox: {sandbox_status().why_not}"
)  # bubblewrap; .ci/run installs it
def test_a_log_that_mentions_a_refused_connection_is_not_read_as_the_sandbox_refusing(tmp_path: Path) -> None:
    """The refusal note is judged from the output: ``grep refused app.log`` (exit 0, no network
    tool) got "[refused: network access blocked by the sandbox ... call run_command_unsandboxed]",
    so the model asked a person to run a harmless grep outside the sandbox. A real refusal still reads
    as one, from a command that failed or a network tool behind a pipe."""
    (tmp_path / "app.log").write_text("12:00 worker 7: connect to db:5432: Connection refused\n")
    shell = RunCommand(ShellSettings(sandbox="workspace-write"))
    ctx = ToolContext(cwd=tmp_path, signal=CancelSignal())

    def text(command: str) -> str:
        out = asyncio.run(shell.execute({"command": command}, ctx))
        assert isinstance(out, ToolResult) and isinstance(out.content, str)
        return out.content

    assert text("grep -h refused app.log") == "exit code 0\n12:00 worker 7: connect to db:5432: Connection refused\n"
    failed = text("python3 -c \"import socket; socket.create_connection(('127.0.0.1', 9))\"")
    assert "[refused: network access blocked by the sandbox" in failed
    piped = text("curl -sS http://example.com 2>&1 | head -3")
    assert "[refused: network access blocked by the sandbox" in piped


@dataclasses.dataclass
class Shipment:
    carrier: str
    parcels: list[Range]


def test_a_tool_that_returns_models_gives_the_model_their_fields_as_json(tmp_path: Path) -> None:
    """A returned pydantic model or dataclass was turned into one string by ``str``: the model read
    ``"start=1 end=2"`` instead of an object, and a dataclass's nested models as their repr."""

    @tool
    def track(order: int) -> dict[str, Any]:
        """Track an order."""
        return {"order": order, "span": Range(start=1, end=2), "shipment": Shipment("DHL", [Range(start=3, end=4)])}

    assert json.loads(call(track, tmp_path, {"order": 7})) == {
        "order": 7,
        "span": {"start": 1, "end": 2},
        "shipment": {"carrier": "DHL", "parcels": [{"start": 3, "end": 4}]},
    }


def test_a_hint_naming_a_class_local_to_a_function_says_what_to_do() -> None:
    """Under ``from __future__ import annotations`` (this module's), a model class defined in the
    same function cannot be looked up: a bare NameError came out of typing's internals."""

    class Local(BaseModel):
        x: int

    def use(item: Local) -> str:
        """Use it."""
        return str(item.x)

    with pytest.raises(
        TypeError, match=r"@tool cannot read the type hints of use: name 'Local' is not defined\..*module level"
    ):
        tool(use)

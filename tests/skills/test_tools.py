"""The ``Skills`` extension and its tools (src/tether/skills/extension.py, tools.py, _files.py):
the index in the system prompt, ``load_skill``, and ``read_skill_file`` kept inside the skill's
folder whatever path or link it is given."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.skills.conftest import EXAMPLE_SKILL, write_skill
from tether import Agent, run_sync
from tether.cancel import CancelSignal
from tether.messages import ToolMessage
from tether.providers.base import ModelRequest
from tether.skills import Skills, index_block
from tether.testing import FunctionModel, Reply, call
from tether.tools.base import ToolContext, ToolResult


def skills_in(home: Path, project: Path | None = None) -> Skills:
    return Skills.open(home, cwd=project or home / "no-project")


def use(skills: Skills, tool: str, **args: Any) -> tuple[str, bool]:
    """(text, is_error) of one call of the tool named ``tool``."""
    found = {t.name: t for t in skills.tools()}[tool]
    ctx = ToolContext(cwd=Path.cwd(), signal=CancelSignal())
    out = asyncio.run(found.execute(args, ctx))
    return (out.content, out.is_error) if isinstance(out, ToolResult) else (out, False)  # type: ignore[return-value]


@pytest.fixture
def skills(home: Path) -> Skills:
    shutil.copytree(EXAMPLE_SKILL, home / "skills" / "release-notes")
    write_skill(
        home / "skills",
        "deploy",
        description="Ship a build to production.\n  Needs a green CI.",
        body="Run the checks, then deploy.",
        files={"checklist.md": "- CI green\n", "sub/dir/notes.txt": "n\n"},
    )
    return skills_in(home)


# --- the index -------------------------------------------------------------------------------


def test_the_index_lists_names_and_descriptions_sorted(skills: Skills, home: Path) -> None:
    block = skills.prompt_block()
    assert block is not None
    lines = block.splitlines()
    assert lines[0] == "# Skills" and "load_skill" in lines[1]
    assert lines[2:] == [
        "- deploy: Ship a build to production. Needs a green CI.",
        "- release-notes: Write the one-line release note for the next version of the project. Use when asked "
        "to announce a release or to write release notes.",
    ]
    # Names and descriptions only: no bodies, files or paths (they would break the cached prefix).
    assert "Run the checks" not in block and "checklist" not in block and str(home) not in block


def test_the_index_is_byte_identical_however_the_folders_were_made(tmp_path: Path) -> None:
    blocks = []
    for n, order in enumerate((["b", "a", "c"], ["c", "a", "b"])):
        home = tmp_path / f"home{n}"
        for name in order:
            write_skill(home / "skills", f"folder-{name}", name=f"skill-{name}", description=f"Does {name}.")
        blocks.append(skills_in(home).prompt_block())
    assert blocks[0] == blocks[1] and blocks[0] is not None
    assert blocks[0].encode() == index_block(skills_in(tmp_path / "home0").found.skills.values()).encode()


def test_no_skills_no_block(home: Path) -> None:
    assert skills_in(home).prompt_block() is None


def test_the_system_prompt_holds_the_index_on_every_call_of_every_run(skills: Skills) -> None:
    systems: list[str | None] = []

    def reply(messages: list[Any], request: ModelRequest) -> Reply | str:
        systems.append(request.system)
        return call("c1", "load_skill", {"name": "deploy"}) if len(messages) == 1 else "ok"

    for _ in range(2):
        run_sync(Agent(FunctionModel(reply), instructions="Be brief.", extensions=[skills]), "Deploy it.")
    assert len(systems) == 4 and len(set(systems)) == 1
    assert systems[0] is not None and systems[0].startswith("Be brief.\n\n# Skills\n")


# --- load_skill ------------------------------------------------------------------------------


def test_load_skill_gives_the_instructions_and_the_files(skills: Skills) -> None:
    text, error = use(skills, "load_skill", name="deploy")
    assert not error
    assert text.startswith("# Skill: deploy\n\nRun the checks, then deploy.\n\n---\n")
    assert text.endswith("- checklist.md (11 bytes)\n- sub/dir/notes.txt (2 bytes)")
    assert "SKILL.md" not in text


def test_load_skill_of_an_unknown_name_lists_the_known_ones(skills: Skills) -> None:
    for name in ("nope", "../deploy", ""):
        text, error = use(skills, "load_skill", name=name)
        assert error and text == f"There is no skill named {name!r}. Known skills: deploy, release-notes."


def test_the_tools_are_read_only_and_need_no_approval(skills: Skills) -> None:
    assert [(t.name, t.read_only, t.needs_approval) for t in skills.tools()] == [
        ("load_skill", True, False),
        ("read_skill_file", True, False),
    ]


def test_a_skill_without_files(home: Path) -> None:
    write_skill(home / "skills", "bare")
    text, _ = use(skills_in(home), "load_skill", name="bare")
    assert text.endswith("---\nThis skill has no other files.")


def test_a_long_listing_says_it_was_cut(home: Path) -> None:
    write_skill(home / "skills", "many", files={f"f{n:03}.md": "x" for n in range(205)})
    text, _ = use(skills_in(home), "load_skill", name="many")
    assert text.count(" (1 bytes)") == 200 and text.endswith(
        "- f199.md (1 bytes)\n(only the first 200 files are listed)"
    )


# --- read_skill_file: what it reads, and what it refuses --------------------------------------


def test_read_skill_file_reads_a_file_of_the_skill(skills: Skills) -> None:
    assert use(skills, "read_skill_file", name="deploy", path="checklist.md") == ("- CI green\n", False)
    assert use(skills, "read_skill_file", name="deploy", path="./sub/dir/notes.txt") == ("n\n", False)
    text, error = use(skills, "read_skill_file", name="nope", path="checklist.md")
    assert error and "Known skills: deploy, release-notes" in text


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("../release-notes/SKILL.md", "climbs with '..'"),
        ("sub/../../deploy/SKILL.md", "climbs with '..'"),
        ("sub\\..\\..\\x", "climbs with '..'"),
        ("/etc/passwd", "is absolute"),
        ("~/.netrc", "is absolute"),
        ("C:\\Windows\\win.ini", "is absolute"),
        ("", "give the path of a file"),
        ("a\x00b", "NUL byte"),
        ("missing.md", "no such file: missing.md. load_skill lists the skill's files."),
        ("sub", "sub is a directory. load_skill lists the skill's files."),
    ],
)
def test_read_skill_file_refuses_paths_outside_or_wrong(skills: Skills, path: str, says: str) -> None:
    text, error = use(skills, "read_skill_file", name="deploy", path=path)
    assert error and says in text, text
    assert "root:" not in text and "list_files" not in text


def test_a_planted_link_to_etc_passwd_is_refused(skills: Skills, home: Path) -> None:
    folder = home / "skills" / "deploy"
    (folder / "passwd.md").symlink_to("/etc/passwd")
    (folder / "up.md").symlink_to("../release-notes/release.md")  # out of this skill, into another
    (folder / "sub" / "etc").symlink_to("/etc")
    for path in ("passwd.md", "up.md", "sub/etc/passwd"):
        text, error = use(skills, "read_skill_file", name="deploy", path=path)
        assert error and "leads outside the skill's folder" in text and "symbolic link" in text, text
        assert "root:" not in text
    listed, _ = use(skills, "load_skill", name="deploy")
    assert "passwd" not in listed and "up.md" not in listed and "etc" not in listed


def test_a_link_that_stays_inside_is_followed(skills: Skills, home: Path) -> None:
    (home / "skills" / "deploy" / "alias.md").symlink_to("sub/dir/notes.txt")
    assert use(skills, "read_skill_file", name="deploy", path="alias.md") == ("n\n", False)
    assert "- alias.md (2 bytes)" in use(skills, "load_skill", name="deploy")[0]


def test_a_symlinked_skill_folder_pointing_outside_is_not_a_skill(home: Path, tmp_path: Path) -> None:
    outside = write_skill(tmp_path / "elsewhere", "sneaky", files={"data.md": "secret\n"})
    (home / "skills").mkdir(parents=True)
    (home / "skills" / "sneaky").symlink_to(outside)
    skills = skills_in(home)
    text, error = use(skills, "read_skill_file", name="sneaky", path="data.md")
    assert error and "There is no skill named 'sneaky'" in text


def test_binary_huge_non_utf8_and_special_files_are_refused(skills: Skills, home: Path) -> None:
    folder = home / "skills" / "deploy"
    (folder / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (folder / "big.md").write_text("x" * 100_001)
    (folder / "latin1.txt").write_bytes(b"caf\xe9\n")
    os.mkfifo(folder / "pipe")
    (folder / "empty.md").write_text("")
    cases = {
        "logo.png": "is a binary file",
        "big.md": "100,001 bytes; files of a skill are read whole, up to 100,000",
        "latin1.txt": "is not UTF-8 text (byte 0xe9 at offset 3)",
        "pipe": "is a FIFO (named pipe), not a file",
    }
    for path, says in cases.items():
        text, error = use(skills, "read_skill_file", name="deploy", path=path)
        assert error and says in text, text
    assert use(skills, "read_skill_file", name="deploy", path="empty.md") == ("(empty.md is empty.)", False)
    (folder / "ok.md").write_text("x" * 100_000)
    assert use(skills, "read_skill_file", name="deploy", path="ok.md")[0] == "x" * 100_000


def test_a_link_swapped_in_after_discovery_is_refused(skills: Skills, home: Path) -> None:
    assert skills.get("deploy") is not None  # found while the folder was clean
    sub = home / "skills" / "deploy" / "sub"
    shutil.rmtree(sub)
    sub.symlink_to("/etc")
    text, error = use(skills, "read_skill_file", name="deploy", path="sub/passwd")
    assert error and "leads outside the skill's folder" in text


# --- through a run ---------------------------------------------------------------------------


def test_a_run_loads_a_skill_and_reads_its_file(home: Path) -> None:
    shutil.copytree(EXAMPLE_SKILL, home / "skills" / "release-notes")
    agent = Agent("scripted/skill", extensions=[skills_in(home)])
    result = run_sync(agent, "Write the release notes.")
    assert result.status == "completed"
    assert result.output == (
        "Release 0.9.0: skills: know-how an agent loads only when a task needs it; "
        "tether skills list and tether skills show"
    )


def test_the_scripted_answer_follows_the_skill_not_a_script(home: Path) -> None:
    folder = home / "skills" / "release-notes"
    shutil.copytree(EXAMPLE_SKILL, folder)
    md = (folder / "SKILL.md").read_text().replace("`Release <version>: <summary>`", "`v<version> brings <summary>`")
    (folder / "SKILL.md").write_text(md.replace("`release.md`", "`facts/next.md`"))
    (folder / "facts").mkdir()
    (folder / "release.md").rename(folder / "facts" / "next.md")
    (folder / "facts" / "next.md").write_text("version: 2.0.1\nhighlights:\n- one fix\n- another fix\n")
    state = run_sync(Agent("scripted/skill", extensions=[skills_in(home)]), "Release notes, please.")
    assert state.output == "v2.0.1 brings one fix; another fix"


def test_without_the_skill_the_scripted_model_says_so(home: Path) -> None:
    write_skill(home / "skills", "other")
    result = run_sync(Agent("scripted/skill", extensions=[skills_in(home)]), "Release notes, please.")
    assert (
        result.output == "I could not load the release-notes skill: There is no skill named 'release-notes'. "
        "Known skills: other."
    )


def test_tool_results_are_in_the_transcript(home: Path) -> None:
    shutil.copytree(EXAMPLE_SKILL, home / "skills" / "release-notes")
    from tether import run
    from tether.harness.state import RunState

    state = RunState()
    asyncio.run(run(Agent("scripted/skill", extensions=[skills_in(home)]), "Notes.", state=state))
    results = [m for m in state.messages if isinstance(m, ToolMessage)]
    assert [r.content[0].text.splitlines()[0] for r in results] == [
        "# Skill: release-notes",
        "# The release being prepared",
    ]


# --- names that differ only in case (issue 29, defect 8) ---------------------------------------------


def test_a_file_named_in_another_case_gets_a_suggestion(home: Path) -> None:
    write_skill(
        home / "skills",
        "pdf",
        description="Work with PDF files.",
        body="For the details, read REFERENCE.md and Forms/Guide.md.",
        files={"reference.md": "the reference\n", "forms/guide.md": "the guide\n"},
    )
    skills = skills_in(home)
    loaded, _ = use(skills, "load_skill", name="pdf")
    assert "(the instructions name REFERENCE.md; the file is reference.md: names are case-sensitive)" in loaded
    assert "(the instructions name Forms/Guide.md; the file is forms/guide.md" in loaded
    text, is_error = use(skills, "read_skill_file", name="pdf", path="REFERENCE.md")
    assert is_error and text.endswith("Did you mean 'reference.md'? File names are case-sensitive.")
    text, is_error = use(skills, "read_skill_file", name="pdf", path="nothing.md")
    assert is_error and "Did you mean" not in text

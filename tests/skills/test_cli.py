"""``tether skills`` (src/tether/cli/skills.py) and skills in ``tether run`` and ``tether chat``:
what a person sees, and a real scripted run whose answer comes from the skill."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.cli.conftest import run_main, tether
from tests.skills.conftest import write_skill

ANSWER = (
    "Release 0.9.0: skills: know-how an agent loads only when a task needs it; "
    "tether skills list and tether skills show"
)


def test_list_names_describes_and_says_where(
    example_home: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_skill(example_home / "skills", "deploy", description="The user's way to deploy.")
    write_skill(project / ".tether" / "skills", "deploy", description="This project's way to deploy.")
    code, out, err = run_main("skills", "list", "--cwd", str(project), capsys=capsys)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].split() == ["deploy", "This", "project's", "way", "to", "deploy."]
    assert lines[1].strip() == f"project: {(project / '.tether' / 'skills' / 'deploy').resolve()}"
    assert lines[2].strip() == f"shadows the user skill 'deploy' in {(example_home / 'skills' / 'deploy').resolve()}"
    assert lines[3].startswith("release-notes  Write the one-line release note")
    assert lines[4].strip().startswith("user: ")


def test_list_json(example_home: Path, project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_skill(example_home / "skills", "deploy", description="The user's way to deploy.")
    write_skill(project / ".tether" / "skills", "deploy", description="This project's way to deploy.")
    code, out, _ = run_main("skills", "list", "--cwd", str(project), "--json", capsys=capsys)
    rows = {r["name"]: r for r in json.loads(out)}
    assert code == 0 and rows["deploy"]["scope"] == "project"
    assert rows["deploy"]["description"] == "This project's way to deploy."
    assert rows["deploy"]["shadows"] == [str((example_home / "skills" / "deploy").resolve())]
    assert rows["release-notes"]["scope"] == "user"


def test_list_reports_malformed_skills_and_lists_the_rest(
    example_home: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = example_home / "skills" / "broken"
    bad.mkdir()
    (bad / "SKILL.md").write_text("---\nname: broken\n---\nNo description.\n")
    for _ in range(2):  # the listing command shows them every time it is asked
        code, out, err = run_main("skills", "list", "--cwd", str(project), capsys=capsys)
        assert code == 0 and out.startswith("release-notes ")
        assert (
            err == f"tether: skipped a skill: {bad}/SKILL.md: the front matter has no description; say what "
            "the skill is for and when to use it\n"
        )


def test_list_without_skills_says_where_it_looked(
    tether_home: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_main("skills", "list", "--cwd", str(project), capsys=capsys)
    assert code == 0 and out.splitlines() == [
        "no skills found; looked in:",
        f"  {tether_home / 'skills'} (user)",
        f"  {project / '.tether' / 'skills'} (project)",
    ]


def test_show_prints_front_matter_body_and_files(
    example_home: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_main("skills", "show", "release-notes", "--cwd", str(project), capsys=capsys)
    folder = (example_home / "skills" / "release-notes").resolve()
    assert code == 0
    assert out.startswith(
        f"release-notes (user skill, {folder}/SKILL.md)\n---\nname: release-notes\ndescription: Write the one-line"
    )
    assert "\n---\n# Release notes\n\n1. Read `release.md`" in out
    assert out.endswith("\nfiles:\n  release.md  (161 bytes)\n")


def test_show_of_an_unknown_skill_is_a_usage_error(
    example_home: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_main("skills", "show", "nope", "--cwd", str(project), capsys=capsys)
    assert code == 2 and out == ""
    assert err == "tether: no skill named 'nope' (known: release-notes); tether skills list says where they are\n"


def test_a_scripted_run_answers_from_the_skill(example_home: Path, project: Path, env: dict[str, str]) -> None:
    out = tether("run", "--model", "scripted/skill", "--cwd", str(project), "Write the release notes.", env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ANSWER
    assert "-> load_skill" in out.stderr and "-> read_skill_file" in out.stderr


def test_a_project_skill_changes_the_answer(
    example_home: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_skill(
        project / ".tether" / "skills",
        "release-notes",
        description="This project's notes.",
        body="Read `next.md`. Answer in the format: `<version> is out: <summary>`",
        files={"next.md": "version: 3.1\nhighlights:\n- faster\n"},
    )
    code, out, _ = run_main("run", "--model", "scripted/skill", "--cwd", str(project), "Notes.", capsys=capsys)
    assert code == 0 and out.strip() == "3.1 is out: faster"


def test_no_skills_flag_and_config_turn_skills_off(
    example_home: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    off = "I could not load the release-notes skill: Error: there is no tool named 'load_skill'."
    code, out, _ = run_main(
        "run", "--model", "scripted/skill", "--cwd", str(project), "--no-skills", "Notes.", capsys=capsys
    )
    assert code == 0 and out.strip().startswith(off)
    (example_home / "config.toml").write_text("[skills]\nenabled = false\n")
    code, out, _ = run_main("run", "--model", "scripted/skill", "--cwd", str(project), "Notes.", capsys=capsys)
    assert code == 0 and out.strip().startswith(off)


def test_a_run_reports_a_malformed_skill_once_and_goes_on(
    example_home: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = example_home / "skills" / "broken"
    bad.mkdir()
    (bad / "SKILL.md").write_bytes(b"no front matter\n")
    line = f"tether: skipped a skill: {bad}/SKILL.md: no front matter"
    code, out, err = run_main("run", "--model", "scripted/skill", "--cwd", str(project), "Notes.", capsys=capsys)
    assert code == 0 and out.strip() == ANSWER
    assert err.count(line) == 1
    code, out, err = run_main("run", "--model", "scripted/skill", "--cwd", str(project), "Again.", capsys=capsys)
    assert code == 0 and line not in err  # once per process


def test_the_run_records_skills_and_its_snapshot_holds_the_index(
    example_home: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tether.cli.common import load_run, run_store, settings

    code, out, _ = run_main(
        "run", "--model", "scripted/skill", "--cwd", str(project), "--json", "Notes.", capsys=capsys
    )
    state = load_run(run_store(settings()), json.loads(out)["run_id"])
    assert code == 0 and state.config["skills"] is True
    assert state.prompt_blocks is not None and state.prompt_blocks["skills"].startswith("# Skills\n")
    assert "- release-notes: Write the one-line release note" in state.prompt_blocks["skills"]


def test_chat_offers_skills_too(example_home: Path, project: Path, env: dict[str, str]) -> None:
    out = subprocess.run(
        ["tether", "chat", "--model", "scripted/skill", "--cwd", str(project)],
        input="Write the release notes.\n",
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert ANSWER in out.stdout


def test_list_says_how_long_a_description_past_the_limit_is(
    example_home: Path, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_skill(example_home / "skills", "verbose", description="x" * 1100, body="b")
    code, _, err = run_main("skills", "list", "--cwd", str(project), capsys=capsys)
    assert code == 0
    assert "verbose/SKILL.md: the description is 1100 characters long; the limit is 1024" in err

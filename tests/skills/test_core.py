"""Finding skills (src/tether/skills/core.py): the roots and their precedence, and every way a
skill folder can be unusable, each reported once and skipped while the others still load."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from tests.skills.conftest import write_skill
from tether.skills import SkillFolders, SkillProblem, SkillRoot, default_roots, read_skill, report_problems


def find(home: Path, project: Path, paths: tuple[str, ...] = ()) -> tuple[dict[str, str], list[SkillProblem]]:
    found = SkillFolders.default(home, project, paths).find()
    return {name: s.scope for name, s in found.skills.items()}, found.problems


def test_roots_in_rising_precedence(home: Path, project: Path) -> None:
    roots = default_roots(home, project, ["team", "~/shared"])
    assert [(r.scope, r.required) for r in roots] == [
        ("user", False),
        ("config", True),
        ("config", True),
        ("project", False),
    ]
    assert roots[0].path == home / "skills" and roots[-1].path == project / ".tether" / "skills"
    assert roots[1].path == home / "team"  # relative to $TETHER_HOME, where config.toml lives
    assert roots[2].path == Path("~/shared").expanduser()


def test_a_later_root_shadows_an_earlier_one_and_says_so(home: Path, project: Path, tmp_path: Path) -> None:
    write_skill(home / "skills", "deploy", description="User's deploy.")
    write_skill(home / "skills", "review", description="User's review.")
    write_skill(tmp_path / "team", "deploy", description="Team's deploy.")
    write_skill(tmp_path / "team", "lint", description="Team's lint.")
    write_skill(project / ".tether" / "skills", "deploy", description="Project's deploy.")
    found = SkillFolders.default(home, project, [str(tmp_path / "team")]).find()
    assert list(found.skills) == ["deploy", "lint", "review"]  # sorted by name
    assert found.skills["deploy"].description == "Project's deploy."
    assert found.skills["deploy"].scope == "project"
    assert [s.scope for s in found.shadowed["deploy"]] == ["user", "config"]
    assert found.skills["lint"].scope == "config" and found.skills["review"].scope == "user"
    assert found.problems == []


def test_missing_roots_are_normal_but_a_configured_one_is_a_problem(home: Path, project: Path) -> None:
    skills, problems = find(home, project, ("nowhere",))
    assert skills == {}
    assert [(p.path, p.problem.split(" (")[0]) for p in problems] == [(home / "nowhere", "no such folder")]


def test_the_same_folder_reached_twice_is_read_once(home: Path) -> None:
    # Working in the folder that holds $TETHER_HOME: its skills are the user's and the project's.
    project = home.parent
    write_skill(home / "skills", "deploy")
    (project / ".tether").symlink_to(home)
    found = SkillFolders.default(home, project).find()
    assert list(found.skills) == ["deploy"] and found.shadowed == {} and found.problems == []


def test_front_matter_details(home: Path, project: Path) -> None:
    root = home / "skills"
    (root / "crlf").mkdir(parents=True)
    (root / "crlf" / "SKILL.md").write_bytes(
        b"\xef\xbb\xbf---\r\nname: crlf\r\ndescription: >\r\n  Folded\r\n  text.\r\nversion: 2\r\n---\r\nBody line.\r\n"
    )
    write_skill(root, "other-folder", name="renamed", body="")
    found = SkillFolders([SkillRoot(root, "user")]).find()
    crlf = found.skills["crlf"]
    assert crlf.description == "Folded text." and crlf.body == "Body line."
    assert crlf.meta["version"] == 2 and "version: 2" in crlf.front_matter
    assert found.skills["renamed"].folder == root / "other-folder"  # the name is the front matter's
    assert found.skills["renamed"].body == ""


MALFORMED: dict[str, tuple[bytes, str]] = {
    "no-front-matter": (b"# Just a heading\n", "no front matter"),
    "empty-file": (b"", "no front matter"),
    "never-ends": (b"---\nname: x\ndescription: y\n", "never ends"),
    "bad-yaml": (b"---\nname: [unclosed\ndescription: y\n---\n", "bad YAML in the front matter at line"),
    "tab-yaml": (b"---\nname: x\n\tdescription: y\n---\n", "bad YAML"),
    "a-list": (b"---\n- name\n- description\n---\n", "must be a mapping"),
    "empty-front": (b"---\n---\nbody\n", "must be a mapping with name and description, not nothing"),
    "no-name": (b"---\ndescription: y\n---\n", "has no name"),
    "empty-name": (b"---\nname: ''\ndescription: y\n---\n", "has no name"),
    "number-name": (b"---\nname: 123\ndescription: y\n---\n", "not a skill name"),
    "spaced-name": (b"---\nname: release notes\ndescription: y\n---\n", "not a skill name"),
    "slash-name": (b"---\nname: ../etc\ndescription: y\n---\n", "not a skill name"),
    "long-name": (b"---\nname: " + b"a" * 65 + b"\ndescription: y\n---\n", "not a skill name"),
    "no-description": (b"---\nname: x1\n---\n", "has no description"),
    "blank-description": (b"---\nname: x2\ndescription: '   '\n---\n", "has no description"),
    "list-description": (b"---\nname: x3\ndescription: [a, b]\n---\n", "description must be text"),
    "long-description": (b"---\nname: x4\ndescription: " + b"d" * 1025 + b"\n---\n", "the limit is 1024"),
    "latin-1": (b"---\nname: x5\ndescription: caf\xe9\n---\n", "not UTF-8 text (byte 0xe9"),
    "binary": (b"---\nname: x6\x00\ndescription: y\n---\n", "binary file"),
    "huge": (b"---\nname: x7\ndescription: y\n---\n" + b"word " * 20_001, "read whole, up to 100,000 bytes"),
    "deep-yaml": (b"---\nname: " + b"[" * 5000 + b"\n---\n", "bad YAML"),
    "long-front": (b"---\nname: x8\ndescription: y\nnotes: " + b"n" * 16_400 + b"\n---\n", "the limit is 16,384"),
}


@pytest.mark.parametrize("folder", sorted(MALFORMED))
def test_a_malformed_skill_is_reported_once_and_skipped(
    folder: str, home: Path, project: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = home / "skills"
    write_skill(root, "good")
    (root / folder).mkdir(parents=True)
    content, expected = MALFORMED[folder]
    (root / folder / "SKILL.md").write_bytes(content)
    skills, problems = find(home, project)
    assert skills == {"good": "user"}
    assert len(problems) == 1 and problems[0].path == root / folder / "SKILL.md", problems
    assert expected in problems[0].problem, problems[0].problem
    with caplog.at_level(logging.WARNING, logger="tether.skills"):
        assert report_problems(problems) == problems
        assert report_problems(find(home, project)[1]) == []  # found again: not reported again
    assert [r.getMessage() for r in caplog.records] == [f"skipped a skill: {problems[0]}"]


def test_unreadable_skill(home: Path, project: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    folder = write_skill(home / "skills", "locked")
    write_skill(home / "skills", "open")
    (folder / "SKILL.md").chmod(0)
    try:
        skills, problems = find(home, project)
    finally:
        (folder / "SKILL.md").chmod(0o644)
    assert skills == {"open": "user"}
    assert len(problems) == 1 and "Permission denied" in problems[0].problem


def test_skill_md_that_is_not_a_file(home: Path, project: Path) -> None:
    root = home / "skills"
    write_skill(root, "good")
    (root / "dir" / "SKILL.md").mkdir(parents=True)
    (root / "fifo").mkdir()
    os.mkfifo(root / "fifo" / "SKILL.md")  # opening it must not wait for a writer
    skills, problems = find(home, project)
    assert skills == {"good": "user"}
    by_folder = {p.path.parent.name: p.problem for p in problems}
    assert by_folder["dir"].startswith("SKILL.md is a directory")
    assert by_folder["fifo"].startswith("SKILL.md is a FIFO (named pipe), not a file")
    assert "list_files" not in by_folder["dir"] + by_folder["fifo"]


def test_folders_that_are_not_skills(home: Path, project: Path) -> None:
    root = home / "skills"
    write_skill(root, "good")
    (root / "README.md").write_text("Skills live here.\n")  # a file beside the skills: ignored
    (root / ".git").mkdir()  # hidden: ignored
    (root / "notes").mkdir()
    (root / "lower").mkdir()
    (root / "lower" / "skill.md").write_text("---\nname: lower\ndescription: d\n---\n")
    skills, problems = find(home, project)
    assert skills == {"good": "user"}
    by_folder = {p.path.name: p.problem for p in problems}
    assert set(by_folder) == {"notes", "lower"}
    assert by_folder["notes"].startswith("no SKILL.md in this folder")
    assert "found 'skill.md': the name is case-sensitive" in by_folder["lower"]


def test_duplicate_names_in_one_root_load_neither(home: Path, project: Path, tmp_path: Path) -> None:
    root = home / "skills"
    write_skill(root, "a", name="deploy")
    write_skill(root, "b", name="deploy")
    write_skill(root, "c")
    write_skill(project / ".tether" / "skills", "z", name="deploy-2")
    skills, problems = find(home, project)
    assert skills == {"c": "user", "deploy-2": "project"}
    assert len(problems) == 1 and problems[0].path == root
    assert "2 skills are named 'deploy' (a, b)" in problems[0].problem


def test_a_skill_folder_linked_from_outside_its_root_is_refused(home: Path, project: Path, tmp_path: Path) -> None:
    outside = write_skill(tmp_path / "elsewhere", "sneaky")
    root = home / "skills"
    write_skill(root, "good")
    (root / "sneaky").symlink_to(outside)
    (root / "to-root").symlink_to(root)  # the root itself is not a skill folder inside it
    (root / "dangling").symlink_to(tmp_path / "gone")
    skills, problems = find(home, project)
    assert skills == {"good": "user"}
    by_folder = {p.path.name: p.problem for p in problems}
    assert set(by_folder) == {"sneaky", "to-root", "dangling"}
    assert by_folder["sneaky"].startswith(f"a symbolic link to {outside.resolve()}, outside")
    assert "refused" in by_folder["to-root"]
    assert by_folder["dangling"].startswith("cannot open")


def test_a_link_inside_the_root_is_followed_and_not_counted_twice(home: Path, project: Path) -> None:
    root = home / "skills"
    real = write_skill(root / "library", "shared")
    write_skill(root, "plain")
    (root / "shared").symlink_to(real)  # a skill kept in a sub-folder, linked in: followed
    (root / "alias").symlink_to(root / "plain")  # another name for a skill already here: the same one
    found = SkillFolders.default(home, project).find()
    assert set(found.skills) == {"shared", "plain"}
    assert found.skills["shared"].folder == real.resolve()
    assert found.problems == []  # library holds no SKILL.md, but the skills linked in from it: not a problem


def test_skill_md_linked_outside_its_folder_is_refused(home: Path, project: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("---\nname: secret\ndescription: leaked\n---\nThe secret.\n")
    folder = home / "skills" / "linked"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").symlink_to(secret)
    skills, problems = find(home, project)
    assert skills == {}
    assert len(problems) == 1 and "leads outside the skill's folder" in problems[0].problem


def test_read_skill_reads_one_folder(home: Path) -> None:
    folder = write_skill(home, "one", description="One thing.", body="Step 1.\nStep 2.")
    skill = read_skill(folder)
    assert (skill.name, skill.description, skill.body, skill.scope) == ("one", "One thing.", "Step 1.\nStep 2.", "user")
    assert skill.file == folder / "SKILL.md" and skill.where == f"user: {folder}"


def test_report_problems_to_a_stream_instead_of_the_log(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    import io

    problem = SkillProblem(tmp_path / "x" / "SKILL.md", "no front matter")
    echo = io.StringIO()
    with caplog.at_level(logging.WARNING, logger="tether.skills"):
        assert report_problems([problem, problem], echo=echo) == [problem]
        assert report_problems([problem]) == []
    assert echo.getvalue() == f"tether: skipped a skill: {tmp_path}/x/SKILL.md: no front matter\n"
    assert caplog.records == []


def test_the_public_names_resolve() -> None:
    import tether.skills

    assert set(tether.skills.__all__) == {
        "MAX_DESCRIPTION_CHARS",
        "MAX_FILE_BYTES",
        "MAX_FRONT_MATTER_CHARS",
        "Discovery",
        "Skill",
        "SkillFolders",
        "SkillProblem",
        "SkillRoot",
        "SkillScope",
        "SkillSource",
        "Skills",
        "default_roots",
        "index_block",
        "read_skill",
        "report_problems",
    }
    for name in tether.skills.__all__:
        assert getattr(tether.skills, name) is not None

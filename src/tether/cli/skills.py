"""``tether skills``: which skills an agent would be offered here, and what one says.

A skill folder that cannot be used is named on stderr with what is wrong (once per process), and
skipped; the others are still listed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.cli.common import directory, usage_error
from tether.cli.common import settings as load_settings

if TYPE_CHECKING:
    from tether.config import Settings
    from tether.skills import Discovery

__all__ = ["add_parsers", "add_skills_options", "find_skills", "skills_override"]

HELP = """\
A skill is a folder with a SKILL.md: YAML front matter between two '---' lines giving its name and
description, then the instructions, plus any files they refer to. Skills are looked for in
$TETHER_HOME/skills, in the folders [skills] paths names in config.toml (relative to
$TETHER_HOME), and in the project's .tether/skills (the --cwd directory); a skill there shadows
one of the same name found before it. The agent sees only names and descriptions until it loads one.
"""


def add_skills_options(parser: argparse.ArgumentParser) -> None:
    """``--no-skills`` for the commands that run an agent."""
    parser.add_argument(
        "--no-skills", action="store_true", help="run without skills (no load_skill tool, no index in the prompt)"
    )


def skills_override(args: argparse.Namespace) -> bool | None:
    """What ``--no-skills`` changes in an agent's skills (None: nothing)."""
    return False if args.no_skills else None


def find_skills(settings: Settings, cwd: Path | str) -> Discovery:
    """The skills for an agent working in ``cwd``; problems not reported before go to stderr."""
    from tether.skills import SkillFolders, report_problems

    found = SkillFolders.default(settings.home, cwd, settings.skills.paths).find()
    report_problems(found.problems, echo=sys.stderr)
    return found


def add_parsers(sub: Any) -> None:
    s = sub.add_parser(
        "skills",
        help="list the skills an agent is offered, or show one",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ss = s.add_subparsers(dest="skills_command", required=True)
    ls = ss.add_parser("list", help="each skill's name, description and where it was found")
    ls.add_argument(
        "--cwd",
        type=directory,
        default=".",
        metavar="DIR",
        help="the project whose .tether/skills count (default: the current directory)",
    )
    ls.add_argument("--json", action="store_true", help="print the skills as one JSON array")
    ls.set_defaults(handler=cmd_list)
    show = ss.add_parser("show", help="a skill's front matter, instructions and files")
    show.add_argument("name", metavar="NAME")
    show.add_argument(
        "--cwd",
        type=directory,
        default=".",
        metavar="DIR",
        help="the project whose .tether/skills count (default: the current directory)",
    )
    show.set_defaults(handler=cmd_show)


def _short(text: str, n: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= n else flat[: n - 1] + "\u2026"


def _shown(text: object) -> str:
    """A skill's text as a person reads it: line by line, each control character written as an
    escape, since an escape sequence in a skill from a repository could retitle the terminal,
    write its clipboard or hide the lines it is meant to show."""
    from tether.cli.display import shown

    return "\n".join(shown(line) for line in str(text).split("\n"))


def cmd_list(args: argparse.Namespace) -> int:
    from tether.skills import SkillFolders

    settings = load_settings()
    found = SkillFolders.default(settings.home, args.cwd, settings.skills.paths).find()
    for problem in found.problems:  # all of them, every time: this is where a person looks for them
        print(f"tether: skipped a skill: {problem}", file=sys.stderr)
    if args.json:
        print(json.dumps(_skills_json(found), ensure_ascii=False, indent=1))
    elif not found.skills:
        from tether.skills import default_roots

        roots = default_roots(settings.home, args.cwd, settings.skills.paths)
        print("no skills found; looked in:\n" + "\n".join(f"  {r.path} ({r.scope})" for r in roots))
        return 0
    else:
        _print_skills(found)
    if not settings.skills.enabled:
        print(
            "([skills] enabled = false in config.toml: tether run and tether chat offer none of these)", file=sys.stderr
        )
    return 0


def _print_skills(found: Discovery) -> None:
    width = max(len(name) for name in found.skills)
    for name, skill in found.skills.items():
        print(f"{name:<{width}}  {_shown(_short(skill.description))}")
        print(f"{'':<{width}}  {_shown(skill.where)}")
        for hidden in found.shadowed.get(name, []):
            print(f"{'':<{width}}  shadows the {hidden.scope} skill {name!r} in {_shown(hidden.folder)}")


def _skills_json(found: Discovery) -> list[dict[str, Any]]:
    return [
        {
            "name": name,
            "description": skill.description,
            "scope": skill.scope,
            "folder": str(skill.folder),
            "shadows": [str(hidden.folder) for hidden in found.shadowed.get(name, [])],
        }
        for name, skill in found.skills.items()
    ]


def cmd_show(args: argparse.Namespace) -> int:
    from tether.skills._files import MAX_LISTED, list_files
    from tether.skills.core import SKILL_FILE

    found = find_skills(load_settings(), args.cwd)
    skill = found.skills.get(args.name)
    if skill is None:
        known = ", ".join(found.skills) or "none"
        raise usage_error(f"no skill named {args.name!r} (known: {known}); tether skills list says where they are")
    print(f"{skill.name} ({skill.scope} skill, {_shown(skill.file)})")
    print(f"---\n{_shown(skill.front_matter.rstrip())}\n---")
    print(_shown(skill.body))
    files = list_files(skill.folder, skip=SKILL_FILE, same_as=skill.folder_id)
    print("\nfiles:" if files else "\nno other files")
    for path, size in files[:MAX_LISTED]:
        print(f"  {_shown(path)}  ({size:,} bytes)")
    if len(files) > MAX_LISTED:  # as load_skill says it to the model
        print(f"  (only the first {MAX_LISTED} files are listed)")
    return 0

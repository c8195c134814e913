"""Skills as data: what a ``SKILL.md`` holds, where skill folders are found, and what is wrong
with the ones that cannot be used.

A skill is a folder holding ``SKILL.md``: YAML front matter between two ``---`` lines with a
``name`` and a ``description``, then the instructions, then any files the instructions refer to.
Folders are looked for one level deep in each root, roots in rising precedence: the user's
(``$TETHER_HOME/skills``), the ones ``[skills] paths`` names, the project's (``.tether/skills`` in
the working directory). A skill of a later root shadows one of the same name in an earlier one.

Nothing here raises for a bad skill: a folder that cannot be used becomes a :class:`SkillProblem`
and the others still load. :func:`report_problems` logs each problem once per process.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import sys
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TextIO

from tether._lru import ENTRY_OVERHEAD, ByteLRU

__all__ = [
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
    "default_roots",
    "read_skill",
    "report_problems",
]

SkillScope = Literal["user", "config", "project"]
NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_DESCRIPTION_CHARS = 1024
MAX_FILE_BYTES = 100_000  # SKILL.md and each file read_skill_file returns
MAX_FRONT_MATTER_CHARS = 16_384
SKILL_FILE = "SKILL.md"
_log = logging.getLogger("tether.skills")
# The scan's verdicts on descriptions by (policy, name, description), for _description_accepted.
_judged: ByteLRU[tuple[str, str, str], tuple[bool, tuple[str, ...]]] = ByteLRU(1 << 20)


@dataclass(frozen=True)
class Skill:
    """One usable skill. ``folder`` is its real path; ``front_matter`` the YAML text as written;
    ``folder_id`` the folder's ``(st_dev, st_ino)`` when it was read: its files are read only while
    the folder at that path is still that one."""

    name: str
    description: str
    body: str
    folder: Path
    scope: SkillScope
    front_matter: str = ""
    meta: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    folder_id: tuple[int, int] | None = field(default=None, compare=False, repr=False)

    @property
    def file(self) -> Path:
        return self.folder / SKILL_FILE

    @property
    def where(self) -> str:
        """``user: /path/to/folder``, for people."""
        return f"{self.scope}: {self.folder}"


@dataclass(frozen=True)
class SkillProblem:
    """A skill folder (or root) that cannot be used, and why, in words for the person who wrote it."""

    path: Path
    problem: str

    def __str__(self) -> str:
        # A folder's name (and so a problem's text) is the repository's: its control characters
        # are shown as escapes, not obeyed by the terminal the line reaches.
        return "".join(c if c.isprintable() else repr(c)[1:-1] for c in f"{self.path}: {self.problem}")


@dataclass(frozen=True)
class SkillRoot:
    """A folder of skill folders. ``required``: its absence is a problem (a configured path), not
    the normal case (nobody has made ``.tether/skills`` here)."""

    path: Path
    scope: SkillScope
    required: bool = False


@dataclass
class Discovery:
    """What a search found: the usable skills by name (sorted), the ones they shadow, the problems."""

    skills: dict[str, Skill] = field(default_factory=dict)
    shadowed: dict[str, list[Skill]] = field(default_factory=dict)
    problems: list[SkillProblem] = field(default_factory=list)


class SkillSource(Protocol):
    """Where skills come from: anything with ``find()``. :class:`SkillFolders` is the default;
    a deployment that keeps skills elsewhere gives :class:`~tether.skills.Skills` its own."""

    def find(self) -> Discovery: ...


class _Malformed(Exception):
    """Why one SKILL.md cannot be used; becomes a :class:`SkillProblem`."""


def default_roots(home: Path | str, cwd: Path | str, paths: Sequence[str] = ()) -> list[SkillRoot]:
    """The roots in rising precedence: ``home/skills``, each of ``paths`` (``~`` expanded; relative
    to ``home``, where config.toml lives), then ``cwd/.tether/skills``."""
    home = Path(home)
    extra = [SkillRoot(home / _expanded(p), "config", required=True) for p in paths]
    return [SkillRoot(home / "skills", "user"), *extra, SkillRoot(Path(cwd) / ".tether" / "skills", "project")]


def _expanded(path: str) -> Path:
    try:
        return Path(path).expanduser()
    except RuntimeError:  # ~user of no user here: kept as written, and reported as no such folder
        return Path(path)


class SkillFolders:
    """Skills in folders: each root's subfolders that hold a ``SKILL.md``.

    A subfolder that is a symbolic link is followed only when its real path stays inside the
    root's real path; a link leading anywhere else is refused as a problem, so a planted link
    cannot bring in instructions or files from elsewhere. (A root itself may be a link: you named it.)
    """

    def __init__(self, roots: Sequence[SkillRoot]) -> None:
        self.roots = list(roots)

    @classmethod
    def default(
        cls, home: Path | str | None = None, cwd: Path | str | None = None, paths: Sequence[str] = ()
    ) -> SkillFolders:
        if home is None:
            from tether.config import tether_home

            home = tether_home()
        return cls(default_roots(home, cwd if cwd is not None else Path.cwd(), paths))

    def find(self) -> Discovery:
        found = Discovery()
        seen: set[Path] = set()
        for root in self.roots:
            real = _real_root(root, found.problems)
            if real is None or real in seen:  # the same folder twice (cwd is $TETHER_HOME/..): once
                continue
            seen.add(real)
            for skill in _scan(real, root.scope, found.problems):
                if skill.name in found.skills:
                    found.shadowed.setdefault(skill.name, []).append(found.skills[skill.name])
                found.skills[skill.name] = skill
        found.skills = dict(sorted(found.skills.items()))
        return found


def _real_root(root: SkillRoot, problems: list[SkillProblem]) -> Path | None:
    try:
        real = root.path.resolve(strict=True)
    except FileNotFoundError:
        if root.required:
            problems.append(SkillProblem(root.path, "no such folder ([skills] paths in config.toml names it)"))
        return None
    except (OSError, RuntimeError) as exc:  # a link loop, no permission
        problems.append(SkillProblem(root.path, f"cannot open this skills folder: {_why(exc)}"))
        return None
    if not real.is_dir():
        problems.append(SkillProblem(root.path, "not a folder; a skills folder holds one folder per skill"))
        return None
    return real


def _scan(root: Path, scope: SkillScope, problems: list[SkillProblem]) -> list[Skill]:
    """The usable skills directly under ``root``, in folder-name order; duplicates are refused."""
    try:
        names = sorted(e.name for e in os.scandir(root) if not e.name.startswith("."))
    except OSError as exc:
        problems.append(SkillProblem(root, f"cannot list this skills folder: {_why(exc)}"))
        return []
    looked = [(root / name, _skill_folder(root, root / name)) for name in names]
    linked = {f for path, f in looked if isinstance(f, Path) and f != path}
    taken: set[Path] = set()
    by_name: dict[str, list[Skill]] = {}
    for path, folder in looked:
        if isinstance(folder, SkillProblem):
            # A folder holding skills that are linked in from here is a library, not a broken skill.
            if not any(path in target.parents for target in linked):
                problems.append(folder)
            continue
        # A link to another skill folder of this root is that skill, not a second one.
        if folder is None or folder in taken or (folder != path and (root / folder.name) == folder):
            continue
        taken.add(folder)
        try:
            skill = read_skill(folder, scope)
        except _Malformed as exc:
            problems.append(SkillProblem(path / SKILL_FILE, str(exc)))
            continue
        if not _description_accepted(skill, path, problems):
            continue
        by_name.setdefault(skill.name, []).append(skill)
    return _unique(root, by_name, problems)


def _description_accepted(skill: Skill, path: Path, problems: list[SkillProblem]) -> bool:
    """The memory scan over what the model will read of the skill in its system prompt: its
    description, and its name (read as words: ``ignore-previous-instructions`` is a name too);
    judged once per process (every session searches again: a kept one's warning is logged once,
    like a problem)."""
    from tether.memory.scan import context_policy

    policy = context_policy()
    key = (policy, skill.name, skill.description)
    verdict = _judged.get(key)
    if verdict is None:
        verdict = _judge(policy, skill.description, f"the skill {skill.name!r} description")
        if verdict[0]:
            words = " ".join(re.split(r"[-_]+|(?<=[a-z0-9])(?=[A-Z])", skill.name))  # IgnoreAll: Ignore All
            verdict = _judge(policy, words, f"the skill name {skill.name!r}")
        _judged.put(key, verdict, sys.getsizeof(skill.description) + ENTRY_OVERHEAD)
    ok, why = verdict
    problems.extend(SkillProblem(path / SKILL_FILE, reason) for reason in why)  # dropped: like any problem
    return ok


def _judge(policy: str, text: str, source: str) -> tuple[bool, tuple[str, ...]]:
    """Whether ``text`` may enter the prompt under ``policy``, and why it is dropped if not."""
    from tether.memory.scan import accept_context, scan_context_text

    if policy == "drop":  # said once, as the skipped skill (accept_context would log it too)
        finding = scan_context_text(text, source=source)
        return (finding is None, () if finding is None else (f"dropped {finding.reason}",))
    return (accept_context(text, source=source), ())  # warn: kept, and accept_context logs why; off: not scanned


def _unique(root: Path, by_name: dict[str, list[Skill]], problems: list[SkillProblem]) -> list[Skill]:
    out = []
    for name, same in by_name.items():
        if len(same) > 1:
            where = ", ".join(s.folder.name for s in same)
            problems.append(
                SkillProblem(
                    root,
                    f"{len(same)} skills are named {name!r} ({where}); none of them "
                    "is loaded until each has its own name",
                )
            )
        else:
            out.extend(same)
    return out


def _skill_folder(root: Path, path: Path) -> Path | SkillProblem | None:
    """``path`` (in ``root``) as a real path if it is a skill folder; a problem, or None for a
    file beside the skills."""
    try:
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode):
            real = path.resolve(strict=True)
            if root not in real.parents:
                return SkillProblem(
                    path,
                    f"a symbolic link to {real}, outside {root}: refused. Move or copy the "
                    "skill here, or add its folder to [skills] paths",
                )
            st = real.stat()
            path = real
    except (OSError, RuntimeError) as exc:  # a dangling link, a loop
        return SkillProblem(path, f"cannot open: {_why(exc)}")
    if not stat.S_ISDIR(st.st_mode):
        return None  # a README beside the skills, say: not a skill, not a problem
    try:
        os.lstat(path / SKILL_FILE)  # a link there is judged when it is read
    except FileNotFoundError:
        lower = [n for n in _listing(path) if n.lower() == SKILL_FILE.lower()]
        hint = f" (found {lower[0]!r}: the name is case-sensitive)" if lower else ""
        return SkillProblem(
            path,
            f"no {SKILL_FILE} in this folder{hint}; a skill is a folder with a {SKILL_FILE} "
            "whose front matter gives its name and description",
        )
    except OSError as exc:  # a folder that cannot be searched (mode 000, another user's)
        return SkillProblem(path, f"cannot open: {_why(exc)}")
    return path


def _listing(folder: Path) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


def read_skill(folder: Path | str, scope: SkillScope = "user") -> Skill:
    """The skill in ``folder``, checked; raises an exception whose message says what is wrong.

    ``SKILL.md`` is opened beneath the folder without following a link out of it (see
    :mod:`tether.tools._confine`), read whole up to :data:`MAX_FILE_BYTES`, and decoded as UTF-8."""
    from tether.skills._files import read_text

    folder = Path(folder)
    try:
        st = os.stat(folder)
        folder_id = (st.st_dev, st.st_ino)
        text = read_text(folder, SKILL_FILE, limit=MAX_FILE_BYTES, same_as=folder_id)
    except OSError as exc:
        raise _Malformed(f"cannot open the folder: {_why(exc)}") from None
    except ValueError as exc:
        raise _Malformed(str(exc)) from None
    front, body = _split(text.replace("\r\n", "\n"))
    meta = _parse_yaml(front)
    name, description = _check(meta)
    return Skill(
        name=name,
        description=description,
        body=body.strip("\n"),
        folder=folder,
        scope=scope,
        front_matter=front,
        meta=meta,
        folder_id=folder_id,
    )


def _split(text: str) -> tuple[str, str]:
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise _Malformed(
            "no front matter: SKILL.md must begin with a line '---', then YAML giving name and "
            "description, then another '---'"
        )
    for i, line in enumerate(lines[1:], 1):
        if line.rstrip() == "---":  # at the line's start: an indented one is a block scalar's text
            return "".join(lines[1:i]), "".join(lines[i + 1 :])
    raise _Malformed("the front matter never ends: add a line '---' after its last field")


def _parse_yaml(front: str) -> dict[str, Any]:
    import yaml  # type: ignore[import-untyped]

    if len(front) > MAX_FRONT_MATTER_CHARS:
        raise _Malformed(
            f"the front matter is {len(front):,} characters long; the limit is "
            f"{MAX_FRONT_MATTER_CHARS:,} (the instructions belong in the body)"
        )
    # safe_load's semantics; libyaml's loader where installed, which refuses deep nesting at once
    # where the pure-Python one recurses for seconds.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        meta = yaml.load(front, Loader=loader)
    except yaml.MarkedYAMLError as exc:
        at = f" at line {exc.problem_mark.line + 2}" if exc.problem_mark is not None else ""
        hint = _quote_hint(front, exc)
        raise _Malformed(f"bad YAML in the front matter{at}: {exc.problem or exc.context}{hint}") from None
    except (yaml.YAMLError, RecursionError) as exc:
        first = (str(exc).splitlines() or ["nested too deeply"])[0]
        raise _Malformed(f"bad YAML in the front matter: {first}") from None
    if not isinstance(meta, dict):
        got = "nothing" if meta is None else f"a {type(meta).__name__}"
        raise _Malformed(f"the front matter must be a mapping with name and description, not {got}")
    return meta


def _quote_hint(front: str, exc: Any) -> str:
    """What to do about the commonest slip: a value holding ``: `` (``description: Use when: ...``),
    which YAML reads as a second mapping on the line unless the value is quoted."""
    mark = exc.problem_mark
    if mark is None or "mapping values are not allowed" not in str(exc.problem):
        return ""
    lines = front.splitlines()
    line = lines[mark.line] if mark.line < len(lines) else ""
    key, colon, value = line.partition(":")
    if not colon or not key.strip() or not value.strip() or key != key.lstrip():
        return ""
    quoted = value.strip().replace("\\", "\\\\").replace('"', '\\"')
    if len(quoted) > 60:
        quoted = quoted[:57] + "..."
    return f'; a value that holds ": " needs quotes: {key.strip()}: "{quoted}"'


def _check(meta: dict[str, Any]) -> tuple[str, str]:
    name, description = meta.get("name"), meta.get("description")
    if name is None or name == "":
        raise _Malformed("the front matter has no name")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise _Malformed(f"name {name!r} is not a skill name: 1 to 64 letters, digits, '-' or '_'")
    if description is None or (isinstance(description, str) and not description.strip()):
        raise _Malformed("the front matter has no description; say what the skill is for and when to use it")
    if not isinstance(description, str):
        raise _Malformed(f"description must be text, not a {type(description).__name__} (quote it)")
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise _Malformed(
            f"the description is {len(description)} characters long; the limit is "
            f"{MAX_DESCRIPTION_CHARS} (the instructions belong in the body)"
        )
    return name, description.strip()


def _why(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


# --- reporting, once per process -----------------------------------------------------------

_reported: set[tuple[str, str]] = set()
_reported_lock = threading.Lock()


def report_problems(problems: Iterable[SkillProblem], echo: TextIO | None = None) -> list[SkillProblem]:
    """Report the problems not reported before in this process, and return them: a warning on the
    ``tether.skills`` logger, or a line on ``echo`` instead when given (the command line, which
    configures no logging, passes stderr)."""
    fresh = []
    with _reported_lock:
        for p in problems:
            key = (str(p.path), p.problem)
            if key not in _reported:
                _reported.add(key)
                fresh.append(p)
    for p in fresh:
        if echo is not None:
            print(f"tether: skipped a skill: {p}", file=echo)
        else:
            _log.warning("skipped a skill: %s", p)
    return fresh

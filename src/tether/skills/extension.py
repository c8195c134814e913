"""The ``Skills`` extension: an index of skills in the system prompt, and the tools that load them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tether.harness.extension import Extension
from tether.skills.core import Discovery, Skill, SkillFolders, SkillSource, report_problems

__all__ = ["Skills", "index_block"]

INDEX_HEADER = (
    "# Skills\n"
    "Instructions for particular kinds of task, kept out of this prompt until needed. When a task "
    "matches a skill's description, call load_skill with its name before you start, and follow it."
)


def index_block(skills: Iterable[Skill]) -> str:
    """The index the model reads: each skill's name and description (on one line), sorted by name.
    Nothing else (no paths, no sizes), so the same skills always give the same bytes."""
    lines = [f"- {s.name}: {' '.join(s.description.split())}" for s in sorted(skills, key=lambda s: s.name)]
    return INDEX_HEADER + "\n" + "\n".join(lines)


class Skills(Extension):
    """Skills for an agent: ``Agent(extensions=[Skills.open()])``.

    The index is read when a session begins (a snapshot, like every extension's block); the tools
    read what was found then, or found on their first use in a resumed run. Problems with skill
    folders are logged once per process (:func:`~tether.skills.report_problems`) and those
    folders are skipped."""

    name = "skills"

    def __init__(self, source: SkillSource, *, found: Discovery | None = None) -> None:
        self.source = source
        self._found = found
        self._searched: Discovery | None = None
        self._tools = self._make_tools()

    @classmethod
    def open(
        cls, home: Path | str | None = None, *, cwd: Path | str | None = None, paths: Sequence[str] = ()
    ) -> Skills:
        """Skills from ``home/skills`` (``$TETHER_HOME`` by default), ``paths``, and
        ``cwd/.tether/skills`` (``cwd`` defaults to the current directory)."""
        return cls(SkillFolders.default(home, cwd, paths))

    def _make_tools(self) -> tuple[Any, ...]:
        from tether.skills.tools import LoadSkill, ReadSkillFile

        return (LoadSkill(self), ReadSkillFile(self))

    @property
    def found(self) -> Discovery:
        """What the last search found (searching now if there was none)."""
        if self._found is None:
            return self.refresh()
        return self._found

    def refresh(self) -> Discovery:
        """Search the source again; problems not reported before are logged."""
        found = self.source.find()
        report_problems(found.problems)
        self._found = found
        return found

    async def start(self) -> None:
        """Search before the run reads its prompt, on a worker thread: a skills folder on a slow
        or hung network mount holds up this run's start, not every run of the process."""
        from tether.tools.base import _in_thread

        self._searched = await _in_thread(self.refresh, {})

    async def stop(self) -> None:
        self._searched = None  # a later session's index is searched afresh

    def get(self, name: str) -> Skill | None:
        return self.found.skills.get(name)

    def tools(self) -> Sequence[Any]:
        return self._tools

    def prompt_block(self) -> str | None:
        """The index, searched afresh (a session begins); None when there is no skill."""
        skills = (self._searched or self.refresh()).skills  # found as the run started (start)
        return index_block(skills.values()) if skills else None

"""``load_skill`` and ``read_skill_file``: how the model reads a skill when a task needs it.

Both are read-only. An unknown name is answered with the names that exist; a file path is
confined to the skill's folder (see :mod:`tether.skills._files`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, ClassVar

from tether.skills._files import MAX_LISTED, SkillFileError, list_files, read_text, same_but_case
from tether.skills.core import MAX_FILE_BYTES, SKILL_FILE, Skill
from tether.tools.base import ToolContext, ToolResult, _in_thread

if TYPE_CHECKING:
    from tether.skills.extension import Skills

__all__ = ["LoadSkill", "ReadSkillFile", "render_skill"]


# A run of what a file's path is made of, matched possessively: once read, a character is never tried
# again (a pattern that backtracked to find the extension took minutes over a long token in a body).
_PATH_RUN = re.compile(r"[\w.-]++(?:/[\w.-]++)*+")


def file_names(text: str) -> list[str]:
    """What reads as a file's path in ``text`` (``REFERENCE.md``, ``forms/guide.md``), each once, in
    order: a run of path characters, less a sentence's last dot, ending in an extension of 1-8
    letters or digits."""
    out: dict[str, None] = {}
    for run in _PATH_RUN.findall(text):
        run = run.rstrip(".")
        stem, dot, ext = run.rpartition(".")
        if dot and stem.rpartition("/")[2] and 0 < len(ext) <= 8 and ext.isascii() and ext.isalnum():
            out[run] = None
    return list(out)


def render_skill(skill: Skill) -> str:
    """What ``load_skill`` answers: the instructions, then the skill's other files."""
    files = list_files(skill.folder, skip=SKILL_FILE, same_as=skill.folder_id)
    more, files = len(files) > MAX_LISTED, files[:MAX_LISTED]
    if files:
        listed = "\n".join(f"- {path} ({size} bytes)" for path, size in files)
        if more:
            listed += f"\n(only the first {MAX_LISTED} files are listed)"
        tail = f"Files of this skill (read one with read_skill_file, name {skill.name!r} and its path):\n{listed}"
        paths = [path for path, _ in files]
        for name in file_names(skill.body):
            if (actual := same_but_case(name, paths)) is not None:
                tail += f"\n(the instructions name {name}; the file is {actual}: names are case-sensitive)"
    else:
        tail = "This skill has no other files."
    return f"# Skill: {skill.name}\n\n{skill.body.strip()}\n\n---\n{tail}"


class _SkillTool:
    read_only = True
    needs_approval = False

    def __init__(self, owner: Skills) -> None:
        self.owner = owner

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult | str:
        # On the sync tools' daemon workers: a read that blocks (a hung mount) cannot hold up Stop.
        result: ToolResult | str = await _in_thread(self.run, {"args": input})
        return result

    def run(self, args: dict[str, Any]) -> ToolResult | str:
        raise NotImplementedError

    def _skill(self, name: Any) -> Skill | ToolResult:
        skill = self.owner.get(name) if isinstance(name, str) else None
        if skill is not None:
            return skill
        known = ", ".join(self.owner.found.skills) or "none"
        return ToolResult(f"There is no skill named {name!r}. Known skills: {known}.", is_error=True)


class LoadSkill(_SkillTool):
    name = "load_skill"
    description = (
        "Load a skill: instructions for a kind of task, listed by name and description in your "
        "system prompt. Call it when the task matches a skill's description, before you start, and "
        "follow what it says. It returns the instructions and the skill's other files."
    )
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"name": {"type": "string", "description": "the skill's name, as listed"}},
        "required": ["name"],
        "additionalProperties": False,
    }

    def run(self, args: dict[str, Any]) -> ToolResult | str:
        skill = self._skill(args.get("name"))
        return skill if isinstance(skill, ToolResult) else render_skill(skill)


class ReadSkillFile(_SkillTool):
    name = "read_skill_file"
    description = (
        "Read a text file of a skill (a template, a reference, an example) that its instructions "
        "refer to. The path is relative to the skill's folder, as load_skill lists it."
    )
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "the skill's name"},
            "path": {"type": "string", "description": "the file's path inside the skill, e.g. template.md"},
        },
        "required": ["name", "path"],
        "additionalProperties": False,
    }

    def run(self, args: dict[str, Any]) -> ToolResult | str:
        skill = self._skill(args.get("name"))
        if isinstance(skill, ToolResult):
            return skill
        path = str(args.get("path", ""))
        try:
            text = read_text(skill.folder, path, limit=MAX_FILE_BYTES, same_as=skill.folder_id)
        except SkillFileError as exc:
            files = [p for p, _ in list_files(skill.folder, skip=SKILL_FILE, same_as=skill.folder_id)]
            other = same_but_case(path, files)
            hint = f" Did you mean {other!r}? File names are case-sensitive." if other else ""
            return ToolResult(f"{exc}{hint}", is_error=True)
        return text or f"({path} is empty.)"

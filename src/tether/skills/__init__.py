"""Skills: know-how an agent loads only when a task needs it.

A skill is a folder with a ``SKILL.md`` (YAML front matter giving ``name`` and ``description``,
then the instructions) and any files the instructions refer to. The model sees an index of names
and descriptions in its system prompt, and reads a skill with ``load_skill`` and its files with
``read_skill_file`` when a task matches.

``Agent(model=..., extensions=[Skills.open()])`` is all an agent needs. Skills come from a
:class:`SkillSource` (the seam); :class:`SkillFolders` finds them in ``$TETHER_HOME/skills``,
``[skills] paths`` and the project's ``.tether/skills``.
"""

from tether.skills.core import (
    MAX_DESCRIPTION_CHARS,
    MAX_FILE_BYTES,
    MAX_FRONT_MATTER_CHARS,
    Discovery,
    Skill,
    SkillFolders,
    SkillProblem,
    SkillRoot,
    SkillScope,
    SkillSource,
    default_roots,
    read_skill,
    report_problems,
)
from tether.skills.extension import Skills, index_block

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
    "Skills",
    "default_roots",
    "index_block",
    "read_skill",
    "report_problems",
]

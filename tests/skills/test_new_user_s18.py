"""A new user writing skills the way other tools' skill folders are often written."""

from __future__ import annotations

from pathlib import Path

from tether.skills import SkillFolders, SkillRoot


def test_a_description_holding_a_colon_is_skipped_with_the_quotes_it_needs(tmp_path: Path) -> None:
    """Was: `description: Write the report. Use when: asked for one.` (a colon and a space inside an
    unquoted value, as skill descriptions often say "Use when:") skipped the skill with only
    "bad YAML in the front matter at line 3: mapping values are not allowed in this context",
    which says nothing of what to change. The line now says the value needs quotes, and how."""
    folder = tmp_path / "skills" / "weekly-report"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: weekly-report\ndescription: Write the report. Use when: asked for one.\n---\nDo it.\n",
        encoding="utf-8",
    )
    found = SkillFolders([SkillRoot(tmp_path / "skills", "user")]).find()
    assert not found.skills
    [problem] = [str(p) for p in found.problems]
    assert "bad YAML in the front matter at line 3: mapping values are not allowed" in problem
    assert 'needs quotes: description: "Write the report. Use when: asked for one."' in problem
    # Quoted as the line says, the skill loads.
    (folder / "SKILL.md").write_text(
        '---\nname: weekly-report\ndescription: "Write the report. Use when: asked for one."\n---\nDo it.\n',
        encoding="utf-8",
    )
    again = SkillFolders([SkillRoot(tmp_path / "skills", "user")]).find()
    assert again.skills["weekly-report"].description == "Write the report. Use when: asked for one."

    # A front matter broken otherwise (an unclosed bracket) is not told to add quotes.
    (folder / "SKILL.md").write_text("---\nname: x\ndescription: [a, b\n---\nDo it.\n", encoding="utf-8")
    [other] = [str(p) for p in SkillFolders([SkillRoot(tmp_path / "skills", "user")]).find().problems]
    assert "bad YAML" in other and "needs quotes" not in other

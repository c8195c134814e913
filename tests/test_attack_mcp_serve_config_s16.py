"""``tether mcp serve`` and config.toml attacked from outside, session 16. Each test says what a
user saw before its fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.cli import main as tether_main

KEY = "sk-proj-abc123abc123abc123abc123"
GITHUB = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"


def test_a_key_pasted_where_a_model_or_words_go_is_never_echoed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A key pasted as the model (into config.toml or $TETHER_MODEL, where OPENAI_API_KEY was meant)
    or into an agent's instructions: `tether config show` printed it whole, and `config check` and
    every run printed it in their error. Now each shows it `<redacted>`, and the rest stays."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("TETHER_HOME", str(home))
    monkeypatch.delenv("TETHER_MODEL", raising=False)
    (home / "config.toml").write_text(
        f'model = "{KEY}"\n\n[agents.x]\nmodel = "scripted/plan"\ninstructions = "push with {GITHUB} please"\n'
    )
    assert tether_main(["config", "show"]) == 0
    shown = capsys.readouterr().out
    assert KEY not in shown and GITHUB not in shown
    assert 'model = "<redacted>"' in shown and 'instructions = "push with <redacted> please"' in shown
    assert tether_main(["config", "check"]) == 2
    said = capsys.readouterr().err
    assert KEY not in said and "cannot tell which provider serves '<redacted>'" in said

    (home / "config.toml").write_text('model = "scripted/plan"\n')
    monkeypatch.setenv("TETHER_MODEL", KEY)
    assert tether_main(["config", "show", "--json"]) == 0
    assert KEY not in (out := capsys.readouterr().out) and '"TETHER_MODEL": "<redacted>"' in out
    assert tether_main(["config", "check"]) == 2
    assert KEY not in (said := capsys.readouterr().err) and "$TETHER_MODEL" in said
    assert tether_main(["run", "hello"]) == 2
    assert KEY not in (said := capsys.readouterr().err) and "from $TETHER_MODEL" in said
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())

"""What the server tells its clients about its own files: the home is named ``$TETHER_HOME``."""

from __future__ import annotations

from pathlib import Path

from tether.server.events import for_clients, hide_home, hide_home_in


def test_the_home_is_named_in_every_form_it_is_written(tmp_path: Path) -> None:
    real = tmp_path / "real-home"
    real.mkdir()
    link = tmp_path / "home"
    link.symlink_to(real)
    for home in (link, Path(str(link) + "/")):
        text = f"cannot read {link}/sessions/s.jsonl nor {real}/runs/r/state.a.json; {link}"
        said = hide_home(text, home)
        assert said == "cannot read $TETHER_HOME/sessions/s.jsonl nor $TETHER_HOME/runs/r/state.a.json; $TETHER_HOME"


def test_only_the_home_itself_is_hidden_not_a_neighbour_or_the_root(tmp_path: Path) -> None:
    home = tmp_path / "home"
    text = f"{home}2/x and {home}.bak and {home}-old and {home}_x, but {home}/x"
    assert hide_home(text, home) == f"{home}2/x and {home}.bak and {home}-old and {home}_x, but $TETHER_HOME/x"
    assert hide_home("/etc/passwd and /", Path("/")) == "/etc/passwd and /"  # a home at / hides nothing


def test_an_events_reasons_are_hidden_and_nothing_else(tmp_path: Path) -> None:
    home = tmp_path / "home"
    data = {
        "type": "done",
        "text": f"{home}/a",  # what the model said is the model's: kept
        "result": {"reason": f"the file {home}/a is a named pipe", "text": f"{home}/a"},
    }
    assert for_clients(data, home) == {
        "type": "done",
        "text": f"{home}/a",
        "result": {"reason": "the file $TETHER_HOME/a is a named pipe", "text": f"{home}/a"},
    }
    assert for_clients({"type": "retry", "reason": f"{home}/x"}, home)["reason"] == "$TETHER_HOME/x"
    assert hide_home_in([{"a": [f"{home}/t", 3, None]}], home) == [{"a": ["$TETHER_HOME/t", 3, None]}]

"""The argument types and shared helpers (src/tether/cli/common.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from tether.cli.common import (
    directory,
    non_negative_float,
    port_number,
    positive_float,
    positive_int,
    session_name,
    session_store_spec,
)


@pytest.mark.parametrize(
    ("parse", "good", "bad"),
    [
        (positive_int, {"1": 1, "50": 50}, ["0", "-3", "2.5", "inf", "x", ""]),
        (positive_float, {"0.01": 0.01, "3": 3.0}, ["0", "-1", "inf", "-inf", "nan", "1e999", "x"]),
        (non_negative_float, {"0": 0.0, "3600": 3600.0}, ["-1", "nan", "inf", "x"]),
        (port_number, {"0": 0, "65535": 65535}, ["-1", "65536", "80.5", "x"]),
        (session_name, {"work": "work", "a.b-c_1": "a.b-c_1"}, ["", " ", "../x", "a/b", ".hidden"]),
        (
            session_store_spec,
            {"jsonl": "jsonl", "sqlite:/tmp/x.db": "sqlite:/tmp/x.db", "memory": "memory"},
            ["postgres", "jsonl:", "memory:/x", ""],
        ),
    ],
)
def test_argument_types(parse: object, good: dict[str, object], bad: list[str]) -> None:
    assert callable(parse)
    for text, value in good.items():
        assert parse(text) == value
    for text in bad:
        with pytest.raises(argparse.ArgumentTypeError):
            parse(text)


def test_directory_is_made_absolute_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "w").mkdir()
    assert directory("w") == tmp_path / "w" and directory("w").is_absolute()
    with pytest.raises(argparse.ArgumentTypeError, match="is not a directory"):
        directory("missing")

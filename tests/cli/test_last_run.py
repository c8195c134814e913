"""``tether show`` and ``tether trace`` without a run id (or with ``last``) read the newest run, as
``tether runs`` lists it first: every flow in the docs had people copy a run id by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import run_main


def test_show_and_trace_read_the_newest_run_when_none_is_named(
    quiet_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_main("show", capsys=capsys)
    assert code == 2 and "there is no run yet" in err
    ids = []
    for prompt in ("first", "second"):
        code, _, err = run_main("run", "--model", "scripted/hello", "--cwd", str(tmp_path), prompt, capsys=capsys)
        assert code == 0, err
        ids.append(err.strip().rsplit("| ", 1)[-1])
    for args in (("show",), ("show", "last")):
        code, out, _ = run_main(*args, capsys=capsys)
        assert code == 0 and out.startswith(f"run {ids[1]}:") and "second" in out, out
    code, out, _ = run_main("trace", capsys=capsys)
    assert code == 0 and {json.loads(line)["run_id"] for line in out.splitlines()} == {ids[1]}
    code, out, _ = run_main("show", ids[0], capsys=capsys)  # a run named is that run
    assert code == 0 and out.startswith(f"run {ids[0]}:")

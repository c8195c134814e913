"""A process that made many stores (a server over many homes, a test worker) keeps each one's path
from commands (fileio.keep_from_commands). Building a command's sandbox compared every hidden path
with every other: with thousands, each command spent minutes there (the suite hung in
test_sandbox_modes after a few thousand tests in one worker)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether.tools import _jail


@pytest.fixture
def guard() -> Iterator[None]:
    """Fail, not hang: the quadratic walk took hours at this size; the one by parents, a blink."""

    def hung(*_: object) -> None:
        raise AssertionError("jail_args was still running after 60 s")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_thousands_of_kept_paths_make_a_command_s_sandbox_at_once_each_covered_once(
    tmp_path: Path, guard: None
) -> None:
    tops = []
    for i in range(4000):  # as a test worker's or a multi-home server's stores: side by side
        top = tmp_path / f"store{i}"
        top.mkdir()
        tops.append(top)
    inner = [top / f"run{j}" for top in tops[:10] for j in range(100)]  # inside a hidden folder: no cover of their own
    alone = tmp_path / "alone.db"
    alone.write_text("", encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    jail = _jail.Jail(cwd=work, hidden=(*inner, *tops, alone))
    argv = _jail.jail_args(jail, "bwrap")
    covers = [argv[i + 1] for i, a in enumerate(argv) if a in ("--tmpfs", "--ro-bind") and argv[i + 1] != "/dev/null"]
    covers += [argv[i + 2] for i, a in enumerate(argv) if a == "--ro-bind" and argv[i + 1] == "/dev/null"]
    ours = [c for c in covers if c.startswith(str(tmp_path)) and not c.startswith(str(work))]  # not work/.tether
    assert sorted(ours) == sorted(map(str, [*tops, alone]))

"""The ``tether`` command itself (src/tether/cli/__init__.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import run_main, tether


def test_a_bare_tether_prints_the_help(env: dict[str, str]) -> None:
    out = tether(env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: tether") and "run" in out.stdout and "config" in out.stdout
    assert "error" not in out.stderr


def test_an_unknown_command_is_still_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main("nonsense", capsys=capsys)[0] == 2


def test_a_named_command_builds_only_its_group_and_parses_as_the_full_parser_does() -> None:
    import argparse

    from tether.cli import GROUPS, build_parser

    full = build_parser()
    choices = next(a for a in full._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert set(choices) == {c for commands in GROUPS.values() for c in commands}  # the table cannot drift
    for group, commands in GROUPS.items():
        for command in commands:
            lazy = build_parser([command])
            built = next(a for a in lazy._actions if isinstance(a, argparse._SubParsersAction)).choices
            assert set(built) == set(commands), (group, command)
    for argv in (
        ["run", "--model", "scripted/plan", "--max-turns", "3", "hi"],
        ["kb", "--name", "docs", "search", "--mode", "exact", "FVAM-2050-B"],
        ["memory", "add", "--notes", "a note"],
        ["serve", "--port", "0"],
        ["show", "r_1"],
    ):
        lazy_args, full_args = vars(build_parser(argv).parse_args(argv)), vars(full.parse_args(argv))
        assert lazy_args.keys() == full_args.keys()
        assert {k: v for k, v in lazy_args.items() if not callable(v)} == {
            k: v for k, v in full_args.items() if not callable(v)
        }
        assert lazy_args["handler"].__qualname__ == full_args["handler"].__qualname__


def test_a_mistyped_command_is_told_every_command(capsys: Any) -> None:
    from tether.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["rnu"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'rnu'" in err and "'run'" in err and "'worker'" in err
    assert err.rstrip().endswith("did you mean 'run'?")


@pytest.mark.parametrize(
    ("argv", "near"),
    [
        (["kb", "serach", "x"], "search"),
        (["memroy", "show"], "memory"),
        (["kb", "search", "--mode", "hybird", "x"], "hybrid"),
    ],
)
def test_a_typo_at_any_level_is_told_the_nearest_choice(capsys: Any, argv: list[str], near: str) -> None:
    from tether.cli import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert capsys.readouterr().err.rstrip().endswith(f"did you mean '{near}'?")


def test_a_word_near_no_choice_gets_no_guess(capsys: Any) -> None:
    from tether.cli import main

    with pytest.raises(SystemExit):
        main(["zzzz"])
    err = capsys.readouterr().err
    assert "invalid choice: 'zzzz'" in err and "did you mean" not in err


def test_kb_runs_numpys_blas_on_one_thread_unless_the_user_chose_and_other_commands_leave_it(
    tmp_path: Path,
) -> None:
    """What counts is the variable when numpy is first imported (OpenBLAS reads it then): an audit
    hook records it at that moment, during a real search. A user's own setting wins; a run, whose
    tools may want every core, leaves it alone."""
    probe = (
        "import contextlib, io, os, sys\n"
        "seen = []\n"
        "def hook(event, args):\n"
        "    if event == 'import' and args[0] == 'numpy' and not seen:\n"
        "        seen.append(os.environ.get('OPENBLAS_NUM_THREADS', 'unset'))\n"
        "sys.addaudithook(hook)\n"
        "from tether.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        "    code = main()\n"  # the process's own command, as `tether kb` is
        "print(code, *(seen or ['numpy-not-imported']), os.environ.get('OPENBLAS_NUM_THREADS', 'unset'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"} | {"TETHER_HOME": str(tmp_path)}
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "valves.md").write_text("# Valves\n\nThe valve is rated for sixteen bar.\n")

    def probed(*argv: str, **extra: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", probe, *argv], env={**env, **extra}, capture_output=True, text=True, timeout=60
        )
        return done.stdout.split()

    assert probed("kb", "add", str(docs), "--embedder", "hashing/64")[0] == "0"
    assert probed("kb", "search", "--mode", "vector", "pressure") == ["0", "1", "1"]
    assert probed("kb", "search", "--mode", "vector", "pressure", OPENBLAS_NUM_THREADS="3") == ["0", "3", "3"]
    work = tmp_path / "work"
    work.mkdir()
    assert probed("run", "--model", "scripted/plan", "--cwd", str(work), "hi")[::2] == ["0", "unset"]


FREEZE_PROBE = (
    "import atexit, gc, sys\n"
    "atexit.register(lambda: print('frozen' if gc.get_freeze_count() else 'collected'))\n"
    "from tether.cli import main\n"
    "sys.argv = ['tether', *sys.argv[1:]]\n"
    "code = main()\n"
    "sys.exit(code)\n"
)


@pytest.mark.parametrize(
    ("argv", "exit_as"),
    [
        (["kb", "bases"], "frozen"),  # wrote nothing: its objects are left to the operating system
        (["memory", "show"], "frozen"),
        (["memory", "add", "The deploy script lives in tools/deploy.sh."], "collected"),  # wrote: as usual
        (["--help"], "collected"),
    ],
)
def test_only_a_command_that_wrote_nothing_exits_without_the_last_collections(
    env: dict[str, str], argv: list[str], exit_as: str
) -> None:
    out = subprocess.run(
        [sys.executable, "-c", FREEZE_PROBE, *argv], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.rstrip().splitlines()[-1] == exit_as


def test_a_program_that_calls_main_keeps_collecting(tether_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import gc

    assert gc.get_freeze_count() == 0
    assert run_main("kb", "bases", capsys=capsys)[0] == 0
    assert gc.get_freeze_count() == 0  # main(argv) is a library call: nothing of the caller's is frozen


def test_a_search_that_exits_without_collecting_leaves_its_base_closed(env: dict[str, str], tmp_path: Path) -> None:
    """The base's SQLite connection is closed by the command, not left to a finaliser: no -wal or
    -shm file stays beside it; and a search imports neither the graph's rules nor the chunker."""
    doc = tmp_path / "seals.md"
    doc.write_text("The FVAM-2050-B valve has PTFE seals rated for sixteen bar.\n")
    added = subprocess.run(
        [sys.executable, "-m", "tether", "kb", "add", str(doc), "--embedder", "none"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert added.returncode == 0, added.stderr
    kb_dir = Path(env["TETHER_HOME"]) / "kb"
    for side in kb_dir.glob("*.db-*"):
        side.unlink()
    probe = (
        "import atexit, sys\n"
        "atexit.register(lambda: print(*[m in sys.modules for m in ('tether.knowledge.graph', "
        "'tether.knowledge.chunking')]))\n"
        "from tether.cli import main\n"
        "sys.argv = ['tether', 'kb', 'search', 'seals']\n"
        "sys.exit(main())\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "seals.md" in out.stdout
    assert out.stdout.rstrip().splitlines()[-1] == "False False"
    assert sorted(p.name for p in kb_dir.glob("*.db*")) == ["default.db"]

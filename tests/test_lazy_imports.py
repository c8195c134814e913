"""What a command does not need, it does not import (issue 24): a run that writes no memory loads
no memory scanner, a run without --kb no knowledge base, and no run loads bpe-openai's wrapper."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROBE = """
import contextlib, io, sys
from tether.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    code = main(sys.argv[1:])
heavy = ("tether.memory.scan", "tether.knowledge", "bpe_openai", "sqlite3")
print(code, *[m for m in heavy if m in sys.modules])
"""


def _probe(tmp_path: Path, *argv: str) -> list[str]:
    env = {**os.environ, "TETHER_HOME": str(tmp_path / "home")}
    env.pop("TETHER_MODEL", None)
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], env=env, capture_output=True, text=True, check=True)
    return done.stdout.split()


def test_a_run_loads_neither_the_scanner_nor_the_knowledge_base(workspace: Path, tmp_path: Path) -> None:
    out = _probe(tmp_path, "run", "--model", "scripted/plan", "--cwd", str(workspace), "Which file mentions a timeout?")
    assert out == ["0"]


def test_a_memory_write_is_scanned(tmp_path: Path) -> None:
    out = _probe(tmp_path, "memory", "add", "--notes", "the build uses make")
    assert out == ["0", "tether.memory.scan"]


def test_a_knowledge_base_command_does_not_assemble_agents(tmp_path: Path) -> None:
    """``tether kb`` asks the assembly for a base only: the agent assembly (its tools, middleware
    and providers) and the knowledge base's agent tools are not imported; both packages import
    those names when they are used."""
    probe = (
        "import contextlib, io, sys\n"
        "from tether.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        "    code = main(sys.argv[1:])\n"
        "print(code, *[m in sys.modules for m in ('tether.assembly.parts', 'tether.assembly.agents', "
        "'tether.knowledge.tools')])\n"
    )
    env = {**os.environ, "TETHER_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, "-c", probe, "kb", "--name", "docs", "bases"], env=env, capture_output=True, text=True
    )
    assert done.stdout.split() == ["0", "True", "False", "False"], done.stderr
    # and the names still resolve, typed, when an importer asks for them
    import tether.assembly as assembly
    import tether.knowledge as knowledge

    assert assembly.kb_name("docs") == "docs" and callable(assembly.build_agent)
    assert knowledge.KnowledgeTools.__name__ == "KnowledgeTools"


def test_a_library_run_does_not_read_the_settings_to_say_why_it_stopped(tmp_path: Path) -> None:
    """Every stop's reason has the secrets the process holds taken out; that list is the
    environment's and the loaded config files', and finding it must not import tether.config (a
    library run reads no config file; the import cost its first run 12 ms)."""
    probe = (
        "import sys\n"
        "from tether import Agent, run_sync\n"
        "assert run_sync(Agent('scripted/hello'), 'hi').status == 'completed'\n"
        "print('tether.config' in sys.modules)\n"
    )
    env = {**os.environ, "TETHER_HOME": str(tmp_path / "home")}
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False", done.stderr


HTTPX_PROBE = """
import sys
from tether.cli import main
own = sys.argv[1] == "own"
sys.argv = ["tether", "config", "path"]
code = main() if own else main(["config", "path"])
import httpx
print(code, "click" in sys.modules, "pygments.lexers" in sys.modules, sys.modules.get("httpx._main", "absent") is None)
"""


def test_the_command_does_not_import_httpx_s_own_command_line_client(tmp_path: Path) -> None:
    """httpx imports its command-line client (click, pygments) whenever they are installed, as they
    are here (uvicorn, pytest): the process's own tether command skips it; a program that calls
    main(argv) keeps its imports as they were."""
    env = {**os.environ, "TETHER_HOME": str(tmp_path / "home")}
    out = {}
    for who in ("own", "program"):
        done = subprocess.run([sys.executable, "-c", HTTPX_PROBE, who], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        out[who] = done.stdout.split()[-4:]
    assert out["own"] == ["0", "False", "False", "True"]
    assert out["program"] == ["0", "True", "True", "False"]  # click and pygments are test dependencies

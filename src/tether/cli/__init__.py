"""The ``tether`` command.

Exit codes: 0 completed, 1 failed, 2 usage or configuration error (nothing ran), 3
max_turns_exceeded, 4 budget_exceeded, 5 interrupted for approval, 6 ``tether serve`` (or ``scripted
serve``, ``mcp serve --http``) could not listen (the address is in use or not allowed), 130 cancelled
(Ctrl-C, SIGTERM).
Progress goes to stderr, the answer to stdout; ``--json`` prints the RunResult as JSON instead, and
every listing command's ``--json`` prints its rows as one JSON array.

One module per command group: :mod:`~tether.cli.run` (``run``, ``resume``: driving a run, its
printing and the approval questions), :mod:`~tether.cli.chat`, :mod:`~tether.cli.sessions`,
:mod:`~tether.cli.runs` (``runs``, ``show``, ``trace``), :mod:`~tether.cli.memory`,
:mod:`~tether.cli.kb`, :mod:`~tether.cli.models` (``models``, ``auth``), :mod:`~tether.cli.scripted`,
:mod:`~tether.cli.serve` (``serve``, ``serve token``), :mod:`~tether.cli.mcp` (``mcp list``,
``login``, ``serve``), :mod:`~tether.cli.skills`, :mod:`~tether.cli.config` (``config path``, ``show``,
``check``); :mod:`~tether.cli.common` holds settings,
stores, errors and argument types, :mod:`~tether.cli.display` how runs and transcripts read,
:mod:`~tether.cli.signals` what SIGTERM and SIGHUP do and how a person's answer is read. Heavy
modules are imported inside the commands so ``tether --help`` starts fast.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any, NoReturn

__all__ = ["GROUPS", "build_parser", "main"]

EPILOG = """\
Settings live in $TETHER_HOME/config.toml (`tether config path` prints where; `tether config
check` checks it). Try it with no key and no network:
  tether run --model scripted/plan --cwd examples/workspace "Which file mentions a timeout?"
"""


# The command groups, in the order --help lists them, and the commands each one adds.
GROUPS: dict[str, tuple[str, ...]] = {
    "run": ("run", "resume"),
    "chat": ("chat",),
    "sessions": ("sessions",),
    "runs": ("runs", "show", "trace"),
    "memory": ("memory",),
    "skills": ("skills",),
    "kb": ("kb",),
    "mcp": ("mcp",),
    "models": ("models", "auth"),
    "config": ("config",),
    "scripted": ("scripted",),
    "serve": ("serve",),
    "worker": ("worker",),
}
_GROUP_OF = {command: group for group, commands in GROUPS.items() for command in commands}


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose "invalid choice" also names the nearest choice (``tether rnu``:
    did you mean 'run'?). Sub-commands' parsers are of the same class."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.suggest_on_error = False  # Python 3.14's own guess, worded otherwise: one voice on every version

    def error(self, message: str) -> NoReturn:
        import difflib
        import re

        m = re.match(r"argument \S+: invalid choice: '(.*)' \(choose from (.*)\)$", message)
        if m:
            choices = [c.strip().strip("'") for c in m.group(2).split(",")]  # quoted or not, by version
            near = difflib.get_close_matches(m.group(1), choices, n=1, cutoff=0.6)
            if near:
                message = f"{message}: did you mean '{near[0]}'?"
        for action in self._actions:  # a missing sub-command by its choices, not its dest (kb_command)
            if isinstance(action, argparse._SubParsersAction) and action.metavar is None and action.dest:
                named = "{" + ",".join(action.choices) + "}"
                message = re.sub(rf"(required: (?:.*, )?){re.escape(action.dest)}\b", rf"\g<1>{named}", message)
        super().error(message)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser for ``argv``: when it names a command, only that command's group is built (its
    module imported, its arguments added), which spares every command the others' start-up;
    otherwise (``--help``, a typo, nothing) all of them, so the listing and the error name them all."""
    import importlib

    from tether import __version__

    parser = _Parser(
        prog="tether",
        description="A governed agent loop.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"tether {__version__}")
    sub = parser.add_subparsers(dest="command")
    named = _GROUP_OF.get(argv[0]) if argv else None
    for group in (named,) if named is not None else GROUPS:
        importlib.import_module(f"tether.cli.{group}").add_parsers(sub)
    return parser


def _unrecognized(parser: argparse.ArgumentParser, args: argparse.Namespace, extras: list[str]) -> NoReturn:
    """Arguments no parser took, said by the command typed (its usage, not the top level's), with
    the option meant for a misspelt one and, for a prompt of several words left unquoted, the
    quotes."""
    import difflib

    command = parser
    while True:  # down to the deepest command named: tether config show, tether serve token list
        found = [a for a in command._actions if isinstance(a, argparse._SubParsersAction)]
        chosen = getattr(args, found[0].dest, None) if found else None
        if not found or chosen not in found[0].choices:
            break
        command = found[0].choices[chosen]
    message = f"unrecognized arguments: {' '.join(extras)}"
    options = [o[2:] for a in command._actions for o in a.option_strings if o.startswith("--")]
    for extra in extras:
        near = difflib.get_close_matches(extra.split("=", 1)[0][2:], options, n=1, cutoff=0.6)
        if extra.startswith("--") and near:
            message += f" (did you mean --{near[0]}?)"
            break
    else:
        prompt = getattr(args, "prompt", None)
        if isinstance(prompt, str) and not any(e.startswith("-") for e in extras):
            message += f'; a prompt of several words goes in quotes: "{" ".join([prompt, *extras])}"'
    command.error(message)


def _one_blas_thread() -> None:
    """numpy's BLAS on one thread for ``tether kb``, unless ``OPENBLAS_NUM_THREADS`` says otherwise
    (read when numpy is first imported, so set before). Its only BLAS work is a query's small
    matrix products (the local embedder's numpy interpreter), where a second thread gives little
    on an idle machine and, spinning while it waits, doubled a search on a busy one (0.35 -> 0.70 s
    with two other busy processes on 2 cores). Other commands leave it alone: an agent's own tools
    may want every core. Only for the process's own command: OpenBLAS reads the variable once, when
    numpy loads, so a program that calls main() (a test, an app embedding tether) would have every
    later numpy of its own, and every child it starts, held to one thread; it keeps its setting."""
    import os

    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _without_httpx_cli() -> None:
    """httpx's ``__init__`` imports its own command-line client (``httpx._main``) whenever click,
    pygments and rich are installed, as they are beside a web server, a test runner or a rich
    console: about 35 ms of CPU on each tether command that makes a request, for a client tether
    never runs. Marked as missing for the process's own command only (httpx then defines the stub
    it has for a machine without them); a program that calls main() keeps its imports as they are."""
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]  # None: "not importable"


def _exit_without_collecting() -> None:
    """The process is about to exit after a command that wrote nothing: what it made is left to the
    operating system instead of the interpreter's last collections, which walk every object the
    imports made (pydantic's schemas, numpy) to free them one by one: 34 -> 10 ms to exit after a
    `tether kb search` (bench/startup.py). Only for the process's own command (``main()`` with no
    ``argv``), never for a program that calls main() and goes on; atexit handlers still run, and a
    command that writes (a run, a memory entry, an add) exits as usual. What such a command opens
    it closes itself (a base's SQLite connection): nothing is left to a finaliser."""
    import gc

    gc.freeze()


def _closed_streams_to_devnull() -> None:
    """A process started with stdout or stderr closed (``>&-``) has None for it: what would be
    printed there goes nowhere, instead of failing in the middle of a run with an AttributeError
    (or, for stderr, landing on stdout). The first free descriptors are the closed ones, so the
    commands a run starts inherit the null device there too, never a file tether opened."""
    import os

    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115 (kept open for the process)


def _log_records_in_one_line() -> None:
    """What tether logs because of the machine (a state that could not be saved on a full disk, a
    trace that stops: an OSError) is one line on stderr, ``tether: <what> (<error>)``, not
    Python's traceback; an error that is tether's own keeps its traceback, for the report. Only
    for the process's own command; a program calling main() keeps its own logging."""
    import logging

    from tether.cli.display import shown as _shown  # a record may quote a server's words: escapes written out

    class OneLine(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            try:
                exc = record.exc_info[1] if record.exc_info else None
                if exc is not None and not isinstance(exc, OSError):
                    message = logging.Formatter().format(record)  # with the traceback
                else:
                    message = record.getMessage()
                    if exc is not None and str(exc) not in message:
                        message += f" ({type(exc).__name__}: {exc})"
                from tether.harness.context import without_secrets  # ... or a key (an MCP server's last words)

                message = without_secrets(message)  # the server's or a worker's log file, often
                print(f"tether: {_shown(message, keep_newlines=True)}", file=sys.stderr, flush=True)
            except Exception:  # a record that cannot be written is not the command's error
                self.handleError(record)

    logger = logging.getLogger("tether")
    if not logger.handlers:
        logger.addHandler(OneLine(logging.WARNING))


def main(argv: list[str] | None = None) -> int:
    """Run the ``tether`` command with ``argv`` (default: the process's arguments); return the
    exit code. A usage or configuration error is one line on stderr and exit code 2; Ctrl-C, 130."""
    code = _command(argv)
    if argv is None:
        _code_stands(code)
    return code


def _code_stands(code: int) -> None:
    """The process's own command is over, its exit code decided: SIGTERM from here on ends the
    process at once with that code (what it printed flushed first). Before, one that came as the
    command returned raised Terminated outside every handler (a traceback, exit 1, after a run had
    completed), and one during the interpreter's exit (its last collections: about 0.2 s after a
    run) killed it by the signal's default (exit 143); there :func:`_sigterm_ignored_at_exit` holds."""
    import os
    import signal

    def leave(signum: int, frame: Any) -> None:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed or full stream: nothing more to save
                stream.flush()
        os._exit(code)

    with contextlib.suppress(ValueError, OSError):  # not the main thread
        signal.signal(signal.SIGTERM, leave)


def _sigterm_ignored_at_exit() -> None:
    """The last of the exit handlers (registered first): SIGTERM ignored for the interpreter's own
    teardown, which resets a Python handler to the signal's default but leaves an ignored signal
    ignored; the command's exit code stands (:func:`_code_stands`)."""
    import signal

    with contextlib.suppress(ValueError, OSError):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _command(argv: list[str] | None) -> int:
    from tether.cli.signals import Terminated

    try:
        if argv is None:
            import atexit

            from tether.cli.signals import stop_from_the_start

            stop_from_the_start()  # first: a SIGTERM while the command starts ends it in words
            atexit.register(_sigterm_ignored_at_exit)  # before any other: it runs last
            _without_httpx_cli()
            _closed_streams_to_devnull()
            _log_records_in_one_line()
        return _main(argv)
    except KeyboardInterrupt:
        # Ctrl-C while the command starts or ends, outside a run's own handler (under which a run
        # saves, and ends interrupted/cancelled): the same exit code, without a traceback.
        print("\ntether: interrupted (Ctrl-C)", file=sys.stderr)
        return 130
    except Terminated:  # SIGTERM before the command's own handling (chat's, serve's, a worker's)
        with contextlib.suppress(OSError):
            print("\ntether: terminated (SIGTERM)", file=sys.stderr, flush=True)
        return 130


def _main(argv: list[str] | None) -> int:
    own_command = argv is None  # the process's own command, not a program calling main(argv)
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(argv)
    args, extras = parser.parse_known_args(argv)
    if extras:
        _unrecognized(parser, args, extras)
    if args.command == "kb" and own_command:
        _one_blas_thread()
    if args.command is None:  # a bare `tether`: what it can do, not an error
        parser.print_help()
        return 0
    from tether.errors import ConfigError, StoreError, UserError

    try:
        code = int(args.handler(args))
        if own_command and getattr(args, "read_only", False):
            _exit_without_collecting()
        return code
    except (ConfigError, UserError, StoreError) as exc:
        from tether.harness.context import without_secrets  # an MCP server's last words may quote its key

        print(f"tether: {without_secrets(str(exc))}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (tether memory show | head): no traceback; what is left goes nowhere.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # as a shell reports a command ended by SIGPIPE
    except OSError as exc:
        import errno
        import os

        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        # A full disk (stdout a file there: `tether runs > list.txt`): one line, as during a run, not a traceback.
        with contextlib.suppress(OSError, ValueError):  # what stdout still holds is not written at exit either
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        where = f" ({exc.filename})" if exc.filename else ""
        print(
            f"tether: cannot write: {exc.strerror or exc}{where}; free some room (or raise the quota), then "
            "run it again",
            file=sys.stderr,
        )
        return 1

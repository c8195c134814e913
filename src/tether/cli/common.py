"""What every command shares: settings, the run and session stores, one-line errors, exit codes,
and the argument types that refuse a bad value before anything runs.

Each argument type is an argparse ``type=`` function: a wrong value is a usage error (exit 2) that
names the option and the valid range, raised while parsing, so nothing is created.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from tether.config import Settings
    from tether.harness.state import RunState
    from tether.harness.store import RunStore
    from tether.sessions import SessionStore
    from tether.status import RunResult

__all__ = [
    "EXIT_CODES",
    "add_session_store_option",
    "directory",
    "exit_code",
    "load_run",
    "non_negative_float",
    "one_word",
    "open_sessions",
    "port_number",
    "positive_float",
    "positive_int",
    "run_store",
    "session_name",
    "session_store_spec",
    "settings",
    "stops_in_words",
    "text",
    "usage_error",
]

EXIT_CODES = {"completed": 0, "failed": 1, "max_turns_exceeded": 3, "budget_exceeded": 4}


def exit_code(result: RunResult) -> int:
    if result.status == "interrupted":
        return 130 if result.interruption is not None and result.interruption.type == "cancelled" else 5
    return EXIT_CODES.get(result.status, 1)


def stops_in_words(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """For a command that waits or works outside a run (a question, a sign-in, a process, a long
    read): SIGTERM (``kill``, a service manager) or SIGHUP ends it in one line, ``tether: terminated
    (SIGTERM)``, and exit code 130, as Ctrl-C does, never killed mid-write by the signal's default
    (tether.cli.run.sigterm_stops). A command that says what it kept raises ``Terminated(words)``."""
    import contextlib
    import functools

    @functools.wraps(handler)
    def stoppable(args: argparse.Namespace) -> int:
        from tether.cli.signals import Terminated, sigterm_stops, stopped_by

        try:
            with sigterm_stops():
                return handler(args)
        except Terminated as exc:
            said = f"; {exc}" if exc.args else ""
            with contextlib.suppress(OSError):  # stderr's reader left too: the exit code says it
                print(f"\ntether: {stopped_by()}{said}", file=sys.stderr, flush=True)
            return 130

    return stoppable


def usage_error(message: str) -> Exception:
    """A request the command line refuses (exit 2, nothing ran)."""
    from tether.errors import UserError

    return UserError(message)


# --- argument types ---------------------------------------------------------------------------


def _number(value: str, kind: type[int] | type[float], wanted: str) -> float:
    try:
        number = kind(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {wanted}, got {value!r}") from None
    if not math.isfinite(number):
        raise argparse.ArgumentTypeError(f"expected {wanted}, got {value!r}")
    return number


def positive_int(value: str) -> int:
    """A whole number of 1 or more (``--max-turns``, ``--context-window``)."""
    number = int(_number(value, int, "a whole number of 1 or more"))
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of 1 or more, got {value!r}")
    return number


def positive_float(value: str) -> float:
    """A finite number above 0 (``--max-budget``, ``--first-token-timeout``)."""
    number = _number(value, float, "a finite number greater than 0")
    if number <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite number greater than 0, got {value!r}")
    return number


def non_negative_float(value: str) -> float:
    """A finite number of 0 or more (``--expires-in``)."""
    number = _number(value, float, "a finite number of 0 or more")
    if number < 0:
        raise argparse.ArgumentTypeError(f"expected a finite number of 0 or more, got {value!r}")
    return number


def port_number(value: str) -> int:
    """0 (pick a free port) to 65535."""
    number = int(_number(value, int, "a port number from 0 to 65535"))
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number from 0 to 65535, got {value!r}")
    return number


def text(value: str) -> str:
    """A value that is not empty or blank (``--refresh-token``)."""
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return value


def secret_token(given: str | None, option: str, env: str) -> str:
    """A token for an option that should not carry it: ``-`` reads stdin (asked for without echo at
    a terminal); none reads ``$env``; anything else is the token as given (it shows in ``ps`` and
    in the shell's history, which the option's help says). The token never appears in a message."""
    if given == "-":
        if sys.stdin is not None and sys.stdin.isatty():  # typed or pasted: not echoed
            import getpass

            from tether.cli.signals import reads_hear_signals

            with reads_hear_signals():  # SIGTERM there ends the command, the echo put back
                read = getpass.getpass(f"{option.lstrip('-').replace('-', ' ')}: ")
        else:
            read = sys.stdin.read() if sys.stdin is not None else ""
        token = read.strip()
        if not token:
            raise usage_error(f"{option} -: stdin was empty (pipe the token in, or set {env})")
        return one_word(token, f"{option} -: stdin")
    if given is not None:
        return one_word(given, option)
    token = os.environ.get(env, "").strip()
    if not token:
        raise usage_error(f"no {option.lstrip('-').replace('-', ' ')}: give {option} - and pipe it in, or set {env}")
    return one_word(token, f"${env}")


def one_word(token: str, where: str) -> str:
    """A token as a server issues it, one word, from ``where`` (an option, a variable, stdin): "Bearer
    abc" or two tokens pasted together is refused here, the same whichever way it came, instead of
    being stored and failing at the server later. The token never appears in the message."""
    token = token.strip()
    if len(token.split()) > 1:
        raise usage_error(f'{where} holds more than one word; give the token alone (without "Bearer")')
    return token


def session_name(value: str) -> str:
    from tether.errors import UserError
    from tether.sessions import check_session_id

    try:
        return check_session_id(value)
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def session_store_spec(value: str) -> str:
    """``--session-store``, its relative DIR or PATH made absolute here, where the command is typed
    (a run records it: a resume or a chat's next message from elsewhere opens the same store)."""
    from tether.config import check_session_store

    try:
        spec = check_session_store(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc}, not {value!r}") from None
    kind, _, where = spec.partition(":")
    if not where or where.startswith("~") or os.path.isabs(where):
        return spec  # ~ is expanded when the store opens (a ~user unknown here is said then)
    return f"{kind}:{os.path.abspath(where)}"


def directory(value: str) -> Path:
    """An existing directory, made absolute once (``--cwd``)."""
    try:
        path = Path(value).expanduser().resolve()
    except (OSError, RuntimeError) as exc:  # a loop of symbolic links (RuntimeError before Python 3.13)
        why = getattr(exc, "strerror", None) or exc
        raise argparse.ArgumentTypeError(f"{value!r} cannot be resolved: {why}") from None
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{value!r} is not a directory")
    return path


def add_session_store_option(parser: argparse.ArgumentParser, *, nested: bool = False) -> None:
    """``--session-store``. ``nested`` is for a subcommand's own copy of an option its parent also
    takes: it leaves the parent's value alone unless it is given here."""
    parser.add_argument(
        "--session-store",
        metavar="SPEC",
        type=session_store_spec,
        default=argparse.SUPPRESS if nested else None,
        help="jsonl[:DIR] (default), sqlite[:PATH] or memory "
        "(else $TETHER_SESSION_STORE, else session_store in config.toml)",
    )


# --- settings and stores ----------------------------------------------------------------------


def settings() -> Settings:
    from tether.config import load_settings

    return load_settings()


_RUN_STORES: dict[tuple[str, str | None], RunStore] = {}


def run_store(settings: Settings) -> RunStore:
    """The run store: files under ``$TETHER_HOME/runs``, or Postgres when ``database_url`` is set.
    One per process and place: the store that loaded a run is the one that saves it (it knows which
    of the run's commits it loaded, which matters after a power cut)."""
    from tether.stores import run_store as chosen

    key = (str(settings.home), settings.database_url)
    store = _RUN_STORES.get(key)
    if store is None:
        store = _RUN_STORES[key] = chosen(settings)
    return store


def load_run(store: RunStore, run_id: str) -> RunState:
    """The run, or one line saying what is wrong with its files and what to do."""
    from pydantic import ValidationError

    from tether.errors import StoreError

    where = store.root / run_id if hasattr(store, "root") else f"the database's run {run_id}"
    try:
        return store.load(run_id)
    except StoreError as exc:
        cause = exc.__cause__
        if isinstance(cause, ValidationError) and (newer := unknown_status(cause)):
            raise StoreError(f"run {run_id} ({where}): {newer}") from None
        if isinstance(cause, ValidationError):
            raise StoreError(
                f"the header of run {run_id} ({where}) is damaged: {first_error(cause)}. "
                f"Restore it from a backup or delete the run ({where})."
            ) from None
        raise
    except (ValueError, TypeError, KeyError, AttributeError) as exc:  # a header edited into other shapes
        raise StoreError(
            f"the header of run {run_id} ({where}) is damaged ({type(exc).__name__}: {exc}). "
            f"Restore it from a backup or delete the run ({where})."
        ) from None
    except OSError as exc:  # a name the file system refuses (too long), a folder it cannot read
        raise StoreError(
            f"cannot read run {run_id[:80]!r}{'...' if len(run_id) > 80 else ''}: {exc.strerror or exc}. "
            "`tether runs` lists the runs"
        ) from None


def unknown_status(exc: Any) -> str | None:
    """When a run's header is refused only for a status this tether does not know (a newer tether
    saved the run), what to say: it is not damaged, and deleting it, as for a damaged one, loses it."""
    import re

    errors = exc.errors()
    if not errors or any(tuple(e["loc"]) != ("status",) or e["type"] != "literal_error" for e in errors):
        return None
    if not isinstance(errors[0].get("input"), str) or not re.fullmatch(r"[a-z][a-z_]{0,40}", errors[0]["input"]):
        return None  # no status word: the header is damaged
    return (
        f"its status {errors[0].get('input')!r} is not one this tether knows (a newer tether saved it?); "
        "the run is kept as it is: upgrade tether to read it"
    )


def first_error(exc: Any) -> str:
    """One line for a pydantic ValidationError: where, and what the value should be."""
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error["loc"]) or "the value"
    got = error.get("input")
    shown = f" (it is {got!r})" if isinstance(got, str | int | float | bool) or got is None else ""
    return f"{where}: {error['msg'][:1].lower()}{error['msg'][1:]}{shown}"


def open_sessions(spec: str | None, settings: Settings) -> SessionStore:
    """The session store named by ``--session-store``, else the environment's, else the config's
    (:func:`tether.assembly.session_store`)."""
    from tether.assembly import session_store

    return session_store(spec, settings)

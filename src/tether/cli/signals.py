"""SIGTERM and SIGHUP at the command line, and the person's answers read at the terminal.

A run stops itself on either (its own handlers cancel it, saved and resumable: tether.cli.run);
around it and between its questions :func:`sigterm_held` only notes the signal, and a question
(:func:`ask`) raises :class:`Terminated`. A command that waits or works outside a run
(``resume --wait``, ``mcp login``, ``memory clear``, ``kb add``) runs under :func:`sigterm_stops`
(tether.cli.common.stops_in_words): there the signal raises :class:`Terminated` wherever the
command is, as Ctrl-C raises KeyboardInterrupt, and the command ends in one line, exit 130.
"""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Coroutine, Iterator

    from tether.cancel import CancelSignal

__all__ = [
    "HUNG_UP",
    "TERMINATED",
    "Terminated",
    "ask",
    "hand_over_sigterm",
    "hold_sigterm",
    "reads_hear_signals",
    "run_stoppable",
    "sigterm_held",
    "sigterm_stops",
    "stopped_by",
    "terminated",
]

T = TypeVar("T")

# The reason a run stopped by SIGTERM records: the command that drives it ends there too.
TERMINATED = "terminated (SIGTERM)"
# ... by SIGHUP (the terminal was closed: nothing is shown any more, the run is saved)
HUNG_UP = "the terminal was closed (SIGHUP)"


class Terminated(BaseException):
    """SIGTERM (or SIGHUP) came while the command waited for the person (a question, the chat's
    prompt), or outside a run under :func:`sigterm_stops`. A BaseException, as KeyboardInterrupt
    is: an ``except Exception`` in the code it lands in (a reader that skips a bad file) must not
    take it for that code's own failure."""


SIGTERM_NUMBER = 15  # signal.SIGTERM, the same on every platform Python runs on
_waiting_for_person = False  # a question is on screen: SIGTERM raises Terminated there
_anywhere = False  # outside a run (sigterm_stops): SIGTERM raises Terminated wherever the command is
_terminated = False  # SIGTERM came; the command ends at its next question (or as soon as it can)
_why = TERMINATED  # ... and which signal it was: TERMINATED or HUNG_UP
_held = 0  # how many sigterm_held() blocks are open (a chat's, then each run's)
_hangup_ignored = False  # SIGHUP was ignored when the command began (nohup): it stays ignored
_handed_over = False  # a server's own handling (uvicorn's, Celery's) took SIGTERM over


def terminated() -> bool:
    """Whether SIGTERM (or SIGHUP) came since the command began (the chat ends then, its run
    resumable)."""
    return _terminated


def stopped_by() -> str:
    """Which signal stopped the command, in words (TERMINATED or HUNG_UP)."""
    return _why


def _terminal_gone() -> None:
    """SIGHUP: the terminal was closed. What would be written to it goes nowhere (each write there
    would fail), so the run still stops and is saved as it would at a Stop."""
    import os
    import stat

    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None and stat.S_ISCHR(os.fstat(stream.fileno()).st_mode):
                os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
        except (OSError, ValueError):
            pass


def _on_term(signum: int, frame: Any) -> None:
    global _waiting_for_person, _anywhere
    _noted(hangup=signum != SIGTERM_NUMBER)
    raising = _waiting_for_person or _anywhere
    _waiting_for_person = _anywhere = False  # once: the same signal sent again only notes
    if raising:
        raise Terminated


def stop_from_the_start() -> None:
    """The ``tether`` command's first step: SIGTERM raises :class:`Terminated` wherever the command
    is until its own handling takes over (a chat's prompt, a run, a server's), so it ends in one
    line and exit 130 (tether.cli.main), not killed by the signal's default while it imports, reads
    its settings or connects to its database. Only Python's own start is left to the default."""
    import signal as os_signal

    with contextlib.suppress(ValueError):  # not the main thread
        os_signal.signal(os_signal.SIGTERM, _on_early_term)


def _on_early_term(signum: int, frame: Any) -> None:
    if _handed_over:
        # Put back by a server that handled SIGTERM and sends it to itself again as it ends
        # (uvicorn): that server's exit is what it was, the signal's default.
        import signal as os_signal

        os_signal.signal(signum, os_signal.SIG_DFL)
        os_signal.raise_signal(signum)
        return
    _noted(hangup=False)
    raise Terminated


def hand_over_sigterm() -> None:
    """A server whose own handling takes SIGTERM over (uvicorn, Celery) is about to start: from
    there on it decides how the process ends, as it did before :func:`stop_from_the_start`."""
    global _handed_over
    _handed_over = True


def _noted(*, hangup: bool) -> None:
    """SIGTERM or SIGHUP came: noted, and after SIGHUP nothing more goes to the closed terminal."""
    global _terminated, _why
    _terminated = True
    _why = HUNG_UP if hangup else TERMINATED
    if hangup:
        _terminal_gone()


def _on_hangup(cancel: CancelSignal | None) -> None:
    """A run's SIGHUP handler: the terminal is gone, the run stops as SIGTERM stops it."""
    _noted(hangup=True)
    if cancel is not None:
        cancel.cancel(HUNG_UP)


def _hangup() -> int | None:
    """SIGHUP, where there is one and nohup did not ignore it."""
    import signal as os_signal

    hup = getattr(os_signal, "SIGHUP", None)
    return None if hup is None or _hangup_ignored else int(hup)


def hold_sigterm() -> None:
    """Inside :func:`sigterm_held`, (re)install its SIGTERM and SIGHUP handler: asyncio puts the
    default back when each run's loop closes."""
    import signal as os_signal

    if _held:
        with contextlib.suppress(ValueError):  # not the main thread (a program calling main() in one)
            for signum in (os_signal.SIGTERM, _hangup()):
                if signum is not None:
                    os_signal.signal(signum, _on_term)


@contextlib.contextmanager
def sigterm_held() -> Iterator[None]:
    """SIGTERM (``kill``, a service manager) ends the command in words, never by the signal's default
    (killed, no summary, the terminal left without echo): during a run the run's own handler stops it
    (TERMINATED); at a question it raises :class:`Terminated`; in between it is noted, and the next
    question raises it. SIGHUP (the terminal closed) does the same, silently. The handlers found
    are put back at the end (a program calling main())."""
    import signal as os_signal

    global _held, _terminated, _hangup_ignored, _anywhere, _why
    if not _held:
        _terminated, _why = False, TERMINATED
        hup = getattr(os_signal, "SIGHUP", None)
        with contextlib.suppress(ValueError):
            _hangup_ignored = hup is not None and os_signal.getsignal(hup) == os_signal.SIG_IGN
    before: dict[int, Any] = {}
    for signum in (os_signal.SIGTERM, _hangup()):
        if signum is not None:
            with contextlib.suppress(ValueError):
                before[signum] = os_signal.getsignal(signum)
    _held += 1
    stopping, _anywhere = _anywhere, False  # inside, only noted (a run stops itself, a change is made whole)
    hold_sigterm()
    try:
        yield
    finally:
        _held -= 1
        _anywhere = stopping and not _terminated
        for signum, handler in before.items():
            if handler is not None:
                with contextlib.suppress(ValueError, TypeError):
                    os_signal.signal(signum, handler)


@contextlib.contextmanager
def sigterm_stops() -> Iterator[None]:
    """For a command outside a run that waits or works (a question, a sign-in, a process it waits
    for, a long read): SIGTERM or SIGHUP raises :class:`Terminated` wherever the command is, as
    Ctrl-C raises KeyboardInterrupt, instead of killing it by the signal's default (mid-write, the
    terminal left without echo). Inside it, :func:`sigterm_held` marks what must not be cut (a run,
    a change made whole): there it is only noted (:func:`terminated`)."""
    global _anywhere
    with sigterm_held():
        _anywhere = True
        try:
            yield
        finally:
            _anywhere = False


def run_stoppable(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` under :func:`sigterm_stops`: SIGTERM or SIGHUP wakes the loop (a signal
    the kernel gave another thread would not) and cancels ``main``, which cleans up (a loopback
    closed, a server stopped); then :class:`Terminated` is raised, whatever the cancelled code
    raised instead. One that came before ``main`` began cancels it as it begins."""
    import asyncio
    import signal as os_signal

    async def go() -> T:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        added = []
        for signum in (int(os_signal.SIGTERM), _hangup()):
            if signum is not None and task is not None:
                with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):  # not the main thread
                    loop.add_signal_handler(signum, _cancel_on, signum, task)
                    added.append(signum)
        try:
            if _terminated:
                raise Terminated
            return await main
        finally:  # handed back before the loop closes, which would put the signals' default back
            for signum in added:
                loop.remove_signal_handler(signum)
            hold_sigterm()

    with sigterm_held():  # only noted while the loop is made and closed: raised there it left one open
        try:
            return asyncio.run(go())
        except (Exception, asyncio.CancelledError):
            if _terminated:
                raise Terminated from None
            raise
        finally:
            main.close()  # never awaited when SIGTERM came first


def _cancel_on(signum: int, task: asyncio.Task[Any]) -> None:
    """Cancel once: the same signal sent again only notes, never cutting the cleanup short."""
    _noted(hangup=signum != SIGTERM_NUMBER)
    if not task.cancelling():
        task.cancel()


def ask(question: str) -> str | None:
    """A line from the person at stdin (the question on stderr, or at a terminal from readline,
    which shows it once it reads keys itself); None at end of input. Raises :class:`Terminated` when
    SIGTERM comes while it waits, or came before."""
    global _waiting_for_person
    hold_sigterm()
    if _terminated:
        raise Terminated
    try:
        if _line_editor():
            try:
                with reads_hear_signals():
                    _waiting_for_person = True
                    if _terminated:  # came as the question was being put
                        raise Terminated
                    return input(question)
            except EOFError:  # Ctrl-D: what follows starts on a line of its own
                print(file=sys.stderr)
                return None
        with reads_hear_signals():
            _waiting_for_person = True
            if _terminated:
                raise Terminated
            print(question, end="", file=sys.stderr, flush=True)
            line = sys.stdin.readline() if sys.stdin is not None else ""
        return line.rstrip("\n") if line else None
    finally:
        _waiting_for_person = False


@contextlib.contextmanager
def reads_hear_signals() -> Iterator[None]:
    """Around a read that waits for the person (readline's, ``input()``, a line of stdin, getpass):
    such a read looks for a signal only when its wait is interrupted, so SIGTERM or SIGHUP that
    comes while readline handles a key, or between the question and the read's start, would be
    heard at the next key only, and a `kill` wait for the person to type. While it reads, a thread
    hears each (Python's wakeup descriptor) and sends it to the main thread again until the read
    is given up; their handler only notes a signal once the question is gone."""
    import os
    import select
    import signal as os_signal
    import threading
    import time

    read, write = os.pipe()
    os.set_blocking(write, False)
    try:
        before = os_signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    except ValueError:  # not the main thread
        os.close(read)
        os.close(write)
        yield
        return
    watched = {signum for signum in (int(os_signal.SIGTERM), _hangup()) if signum is not None}
    done = threading.Event()
    main = threading.main_thread().ident

    def resend() -> None:
        heard: set[int] = set()
        while not done.is_set():
            ready, _, _ = select.select([read], [], [], 0.05)
            if ready:
                heard |= set(os.read(read, 64)) & watched
            for signum in heard:
                if not done.is_set() and main is not None:
                    os_signal.pthread_kill(main, signum)
            if heard:
                time.sleep(0.1)

    thread = threading.Thread(target=resend, name="tether-signals", daemon=True)
    thread.start()
    global _waiting_for_person
    try:
        yield
    finally:
        _waiting_for_person = False  # a signal sent again from here on is only noted
        done.set()
        with contextlib.suppress(OSError):  # wakes the thread's select now (0 is no signal), not
            os.write(write, b"\0")  # at its next 50 ms: each question of a chat waited for it
        thread.join()
        os_signal.set_wakeup_fd(before)
        os.close(read)
        os.close(write)


def _line_editor() -> bool:
    """Whether lines are read through readline: at a terminal (stdin and stdout), where the
    terminal's own line discipline keeps only the first 4,095 characters of a line and drops the
    rest of a long pasted message without a word; readline reads it whole (and edits it)."""
    if sys.stdin is None or sys.stdout is None or not (sys.stdin.isatty() and sys.stdout.isatty()):
        return False
    try:
        import readline  # noqa: F401 (input() reads through it once it is imported)
    except ImportError:  # a Python built without it
        return False
    return True

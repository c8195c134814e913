"""Runs driven in processes of their own (``[serve] run_processes``, ``tether serve --run-processes
N``), so that the server's work and the runs' work use more than one core.

The server's process keeps every decision: which runs are live, one per session, their numbered
event logs, the streams, cancel and resume. A run process only drives what it is given. Each is a
fresh interpreter (``python -m tether.server.procs FD``) that builds the same agents and stores from
the same ``$TETHER_HOME`` and config as the server (``--agent``, ``[agents.NAME]``); the two talk
over a socket pair, one line per message:

- server to run process, JSON: the spec to build from, then ``start`` (the turn, the state, the
  prompt or the resume's changes, the session's chosen values), ``cancel`` (a stop, with its
  reason; ``now``: a save waiting for the database stops waiting) and ``abort`` (cut after the
  shutdown's grace). They are read on a thread of their own, so a Stop reaches a run whose loop
  waits in a save. End of file: the server is gone or
  closing, and every run is stopped (saved ``interrupted``, resumable) before the process exits.
- run process to server: ``E<run_id>\\t<kind>\\t<event JSON>`` for each event, already encoded as
  the event log keeps it; ``X<run_id>`` when the run's task has ended (after its last save);
  ``R`` once built, or ``!<why>`` when it could not be.

A run process that dies ends its runs with a ``done`` saying so; they are resumable from their
last save, as after a server that stopped, and the next run starts a new process.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from tether.events import Done
from tether.harness.context import without_secrets
from tether.harness.state import RunState
from tether.server.events import encode_event, event_data, for_clients
from tether.server.runs import drive, refused, run_tracer, tune_collector
from tether.server.store import TurnRecord

__all__ = ["RunProcesses", "main"]

_log = logging.getLogger("tether.server")

SHUTDOWN_REASON = "the server is shutting down; resume the run to continue it"
EXIT_WAIT_S = 15.0  # how long close() waits for a run process to stop its runs and exit


class _Child(asyncio.Protocol):
    """The server's end of one run process: what it was given, and its answers as they come."""

    def __init__(self, owner: RunProcesses, spec: dict[str, Any]) -> None:
        self.owner = owner
        ours, theirs = socket.socketpair()
        self.sock = ours
        try:
            # -P: nothing is imported from the working folder (where a model may write files) before
            # the run process takes the server's own sys.path from the spec.
            self.proc = subprocess.Popen(
                [sys.executable, "-P", "-m", "tether.server.procs", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.runs: dict[str, tuple[Any, asyncio.Future[None]]] = {}  # run id: (LiveRun, ended)
        self.transport: asyncio.Transport | None = None
        self.queued: list[bytes] = []
        self.buf = bytearray()
        self.alive = True
        self.ready = False  # it said R: its agents are built, it takes runs at once
        self.why: str | None = None  # what it said when it could not be built
        self.send(spec)
        loop = asyncio.get_running_loop()
        self.connecting = loop.create_task(loop.connect_accepted_socket(lambda: self, ours))

    # --- to the run process

    def send(self, message: dict[str, Any]) -> None:
        line = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        if self.transport is not None:
            self.transport.write(line)
        elif self.alive:
            self.queued.append(line)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        for line in self.queued:
            transport.write(line)
        self.queued.clear()

    # --- from the run process

    def data_received(self, data: bytes) -> None:
        cut = data.rfind(b"\n")  # in what came, not in all that waits: a huge line is read in linear time
        self.buf += data
        if cut < 0:
            return
        end = len(self.buf) - len(data) + cut
        chunk = self.buf[:end].decode("utf-8", "surrogatepass")
        del self.buf[: end + 1]
        run_id: str | None = None
        batch: list[tuple[str, str]] = []
        for line in chunk.split("\n"):
            if line[:1] == "E":
                rid, _, rest = line[1:].partition("\t")
                kind, _, text = rest.partition("\t")
                if rid != run_id:
                    self._deliver(run_id, batch)
                    run_id, batch = rid, []
                batch.append((kind, text))
                continue
            self._deliver(run_id, batch)
            run_id, batch = None, []
            if line[:1] == "X":
                self._ended(line[1:])
            elif line == "R":
                self.ready = True
            elif line[:1] == "!":
                self.why = line[1:]
                _log.error("a run process could not start: %s", self.why)
        self._deliver(run_id, batch)

    def _deliver(self, run_id: str | None, batch: list[tuple[str, str]]) -> None:
        entry = self.runs.get(run_id) if run_id is not None else None
        if entry is not None and batch:
            entry[0].log.extend_encoded(batch)

    def _ended(self, run_id: str) -> None:
        entry = self.runs.pop(run_id, None)
        if entry is not None and not entry[1].done():
            entry[1].set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.alive = False
        self.transport = None
        self.burying = asyncio.get_running_loop().create_task(self._bury())

    async def _bury(self) -> None:
        """Reap the process (its exit code, for the reason: the socket closes a moment before the
        process can be waited for), then end the runs it still had."""
        waiting = threading.Thread(target=self.proc.wait, daemon=True)  # reaped, whenever it exits
        waiting.start()
        for _ in range(100):
            if self.proc.returncode is not None or not waiting.is_alive():
                break
            await asyncio.sleep(0.01)
        code = self.proc.returncode
        if not self.runs:
            return
        why = self.why or (
            f"the run's process (pid {self.proc.pid}) ended unexpectedly"
            + (f" with exit code {code}" if code is not None else "")
            + "; resume the run to continue from its last save"
        )
        _log.error("run process %s is gone with %d live runs: %s", self.proc.pid, len(self.runs), why)
        for run_id in list(self.runs):
            live, _ = self.runs[run_id]
            if not live.ended:  # (it may have died between its done and its end)
                with contextlib.suppress(Exception):
                    live.log.append("done", self.owner.cut_short(live, why))
            self._ended(run_id)

    # --- its end

    def end_of_input(self) -> None:
        """End of file to the run process, after what is queued: it stops its runs and exits."""
        if self.transport is not None:
            with contextlib.suppress(Exception):
                self.transport.write_eof()
        else:
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_WR)

    def wait_exit(self, wait_s: float) -> None:
        """Wait for the process, killed after ``wait_s`` (any thread)."""
        try:
            self.proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            _log.warning("run process %s did not exit in %.0f s: killed", self.proc.pid, wait_s)
            self.proc.kill()
            self.proc.wait()

    def close_end(self) -> None:
        """Close this end of the socket (on the loop)."""
        if self.transport is not None:
            self.transport.abort()
        with contextlib.suppress(OSError):
            self.sock.close()


class RunProcesses:
    """The server's run processes: each run goes to the one with the fewest live runs."""

    def __init__(
        self,
        count: int,
        *,
        home: Path,
        runs: Any,
        agent_spec: str | None = None,
        model: str | None = None,
        cwd: str | None = None,
    ) -> None:
        self.count = max(1, count)
        self.runs = runs
        self.spec = {
            "op": "build",
            "home": str(home),
            "agent": agent_spec,
            "model": model,
            "cwd": cwd,
            "path": list(sys.path),  # a module named by --agent is found as the server found it
        }
        self.children: list[_Child | None] = [None] * self.count
        self.cut: dict[str, str] = {}  # run id → why its process died under it (its view says the same)

    def warm(self) -> None:
        """Start every run process now (on the server's loop), so the first runs do not wait."""
        for i in range(self.count):
            self._child(i)

    def _child(self, i: int) -> _Child:
        child = self.children[i]
        if child is None or not child.alive:
            child = self.children[i] = _Child(self, self.spec)
        return child

    def pids(self) -> list[int]:
        return [c.proc.pid for c in self.children if c is not None and c.alive]

    def ready(self) -> int:
        """How many run processes have built their agents and are up (what /healthz says): not
        one still building them, nor one that could not and is on its way out."""
        return sum(1 for c in self.children if c is not None and c.alive and c.ready and c.why is None)

    def begin(
        self,
        live: Any,
        turn: TurnRecord,
        state: RunState,
        prompt: str | None,
        changes: dict[str, Any],
        chosen: dict[str, Any],
    ) -> asyncio.Future[None]:
        """Have a run process drive the run: the future is done when the run has ended."""
        idle = min(range(self.count), key=lambda i: len(c.runs) if (c := self.children[i]) and c.alive else 0)
        child = self._child(idle)
        ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        child.runs[turn.run_id] = (live, ended)
        run_id = turn.run_id
        live.halt = lambda reason, now: child.send({"op": "cancel", "run_id": run_id, "reason": reason, "now": now})
        ended.add_done_callback(lambda f: self._over(child, run_id, f))
        child.send(
            {
                "op": "start",
                "turn": dataclasses.asdict(turn),
                "state": state.model_dump(mode="json"),
                "prompt": prompt,
                "changes": changes,
                "chosen": chosen,
            }
        )
        return ended

    @staticmethod
    def _over(child: _Child, run_id: str, ended: asyncio.Future[None]) -> None:
        """A run over for the server (ended, or cut after the shutdown's grace): a cut one is
        aborted in its process, and nothing more of it is taken in."""
        entry = child.runs.get(run_id)
        if entry is not None and entry[1] is ended:
            del child.runs[run_id]
        if ended.cancelled():
            child.send({"op": "abort", "run_id": run_id})

    def cut_short(self, live: Any, why: str) -> dict[str, Any]:
        """The ``done`` of a run whose process died: as of its last save, resumable from it."""
        state: RunState = live.state
        with contextlib.suppress(Exception):
            if self.runs.exists(live.run_id):
                state = self.runs.load(live.run_id)
        result = state.result()
        status = "interrupted" if result.status == "running" else result.status
        self.cut[live.run_id] = why
        return event_data(Done(live.run_id, result.model_copy(update={"status": status, "reason": why})))

    async def aclose(self, wait_s: float = EXIT_WAIT_S) -> None:
        """End every run process together, reading what each still sends until it exits (killed
        after ``wait_s``); on the server's loop, which goes on serving meanwhile."""
        children = [c for c in self.children if c is not None]
        self.children = [None] * self.count
        for child in children:
            child.end_of_input()
        await asyncio.gather(*(asyncio.to_thread(child.wait_exit, wait_s) for child in children))
        for child in children:
            child.close_end()

    def close(self) -> None:
        """:meth:`aclose` without a loop: what is left is waited for (and killed) one by one."""
        for child in self.children:
            if child is not None:
                child.end_of_input()
                child.wait_exit(EXIT_WAIT_S)
                child.close_end()
        self.children = [None] * self.count


# --- the run process ------------------------------------------------------------------------------


class _Wire:
    """The run process's end of the socket, read and written on threads of their own: a Stop is
    heard (its run's ``stopping`` set) even while the runs' loop waits in a save for the database,
    and what the runs send waits for no reader."""

    def __init__(self, sock: socket.socket, loop: asyncio.AbstractEventLoop) -> None:
        self.sock, self.loop = sock, loop
        self.messages: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()  # None: end of input
        self.stopping: dict[str, threading.Event] = {}  # each run's, made when its start is read
        self.outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self.writing = threading.Thread(target=self._write, name="tether-procs-out", daemon=True)
        self.writing.start()
        threading.Thread(target=self._read, name="tether-procs-in", daemon=True).start()

    def _read(self) -> None:
        try:
            with self.sock.makefile("rb") as lines:
                for line in lines:
                    with contextlib.suppress(ValueError):
                        message = json.loads(line)
                        if isinstance(message, dict):
                            self._heard(message)
                            self._deliver(message)
        except (OSError, ValueError):  # the socket closed under it: as the end of input
            pass
        self._deliver(None)

    def _deliver(self, message: dict[str, Any] | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits for it
            self.loop.call_soon_threadsafe(self.messages.put_nowait, message)

    def _heard(self, message: dict[str, Any]) -> None:
        op = message.get("op")
        if op == "start" and isinstance(message.get("turn"), dict):
            self.stopping[str(message["turn"].get("run_id", ""))] = threading.Event()
        elif op == "cancel" and message.get("now"):  # a person's Stop (a shutdown's lets a save wait)
            stop = self.stopping.get(str(message.get("run_id", "")))
            if stop is not None:
                stop.set()

    def _write(self) -> None:
        while (data := self.outbox.get()) is not None:
            try:
                self.sock.sendall(data)
            except OSError:  # the server is gone: what is left is for nobody
                return

    def write(self, data: bytes) -> None:
        self.outbox.put(data)

    async def close(self, wait_s: float = 10.0) -> None:
        """Send what is queued (for ``wait_s`` at most), then close the socket."""
        self.outbox.put(None)
        await asyncio.to_thread(self.writing.join, wait_s)
        with contextlib.suppress(OSError):
            self.sock.close()


class _Out:
    """Lines to the server, gathered while the loop turns: one write per turn of the loop."""

    def __init__(self, wire: _Wire) -> None:
        self.wire = wire
        self.pending: list[str] = []

    def line(self, text: str) -> None:
        self.pending.append(text)
        if len(self.pending) == 1:
            asyncio.get_running_loop().call_soon(self.flush)

    def event(self, run_id: str, kind: str, data: dict[str, Any]) -> None:
        self.line(f"E{run_id}\t{kind}\t{encode_event(data)}")

    def flush(self) -> None:
        if self.pending:
            text = "\n".join(self.pending) + "\n"
            self.pending = []
            self.wire.write(text.encode("utf-8", "surrogatepass"))


def _turn(message: dict[str, Any]) -> TurnRecord:
    """The turn of a start message; one this run process cannot read (a tether upgraded on disk
    under a running server) still ends its run, with a ``done`` saying why."""
    raw: Any = message.get("turn")
    try:
        return TurnRecord(**raw)
    except Exception:
        run_id = str(raw.get("run_id", "")) if isinstance(raw, dict) else ""
        turn = TurnRecord("", run_id, "", "", "", "", "", 0.0)
        message["unreadable"] = f"this run process could not read the run it was given ({raw!r:.200})"
        return turn


class _Runner:
    """What a run process builds from the spec, and the runs it drives."""

    def __init__(self, spec: dict[str, Any], out: _Out) -> None:
        from tether.assembly import served_agents, session_store
        from tether.config import load_settings
        from tether.stores import run_store
        from tether.telemetry import telemetry_from_settings

        if isinstance(spec.get("path"), list):
            sys.path[:] = [str(x) for x in spec["path"]]
        settings = load_settings(Path(spec["home"]))
        self.home = settings.home
        self.agents = served_agents(settings, spec.get("agent"), model=spec.get("model"), cwd=spec.get("cwd"))
        self.runs = run_store(settings)
        self.sessions = session_store(None, settings)
        self.telemetry = telemetry_from_settings(settings)
        self.out = out
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.signals: dict[str, Any] = {}

    def emit(self, run_id: str, kind: str, data: dict[str, Any]) -> None:
        self.out.event(run_id, kind, for_clients(data, self.home))

    def handle(self, message: dict[str, Any]) -> None:
        op, run_id = message.get("op"), str(message.get("run_id", ""))
        if op == "start":
            self.start(message)
        elif op == "cancel" and run_id in self.signals:
            self.signals[run_id].cancel(str(message.get("reason") or "stopped"))
        elif op == "abort" and run_id in self.tasks:
            self.tasks[run_id].cancel()

    def start(self, message: dict[str, Any]) -> None:
        from tether.cancel import CancelSignal

        turn = _turn(message)
        self.signals[turn.run_id] = CancelSignal()
        task = asyncio.get_running_loop().create_task(self._drive(turn, message))
        self.tasks[turn.run_id] = task

    async def _drive(self, turn: TurnRecord, message: dict[str, Any]) -> None:
        run_id = turn.run_id
        prompt = message.get("prompt")
        state = RunState(run_id=run_id, session_id=turn.session_id)
        try:
            if message.get("unreadable"):
                raise ValueError(message["unreadable"])
            state = RunState.model_validate(message["state"])
            agent = self.agents.get(turn.agent)
            if agent is None:
                reason = f"the run could not start: this server's run processes have no agent {turn.agent!r}"
                self.emit(run_id, "done", refused(state, self.runs, prompt is not None, reason))
                return
            changes = message.get("changes") or {}
            if changes:
                agent = dataclasses.replace(agent, **changes)
            await drive(
                turn,
                agent,
                state,
                prompt,
                message.get("chosen") or {},
                lambda kind, data: self.emit(run_id, kind, data),
                self.signals[run_id],
                self.runs,
                self.sessions,
                lambda t, resumed, cost: run_tracer(self.home, self.telemetry, t, resumed=resumed, cost_usd=cost),
                stopping=self.out.wire.stopping.get(run_id),
            )
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # a message that did not make a run: say so, and go on with the others
            _log.exception("run %s could not be driven", run_id)
            reason = f"the run could not start: {type(exc).__name__}: {exc}"
            self.emit(run_id, "done", refused(state, self.runs, False, reason))
        finally:
            self.signals.pop(run_id, None)
            self.tasks.pop(run_id, None)
            self.out.wire.stopping.pop(run_id, None)  # before X: its next part's start makes a new one
            self.out.line(f"X{run_id}")

    async def stop_all(self, grace_s: float) -> None:
        """Every run stopped (saved ``interrupted``, resumable), then cut after ``grace_s``."""
        for sig in list(self.signals.values()):
            sig.cancel(SHUTDOWN_REASON)
        tasks = list(self.tasks.values())
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace_s)
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.wait(pending, timeout=2.0)

    async def close(self) -> None:
        from tether.providers.http import close_clients

        with contextlib.suppress(Exception):
            await close_clients()
        if self.telemetry is not None:
            with contextlib.suppress(Exception):
                self.telemetry.shutdown()
        with contextlib.suppress(Exception):
            self.runs.close()


async def _serve(fd: int) -> int:
    loop = asyncio.get_running_loop()
    wire = _Wire(socket.socket(fileno=fd), loop)
    out = _Out(wire)
    try:
        spec = await wire.messages.get()
        if spec is None:
            raise ValueError("the server closed the socket before it said what to build")
        runner = _Runner(spec, out)
    except Exception as exc:  # the server says why to every run it gives here
        why = f"{type(exc).__name__}: {exc}".replace("\n", " ").replace("\r", " ")
        wire.write(f"!{why}\n".encode("utf-8", "replace"))
        await wire.close()
        return 1
    out.line("R")
    tune_collector()  # its agents are built: as the server's own process (tether.server.runs)
    stopping = asyncio.Event()
    with contextlib.suppress(NotImplementedError):
        loop.add_signal_handler(signal.SIGTERM, stopping.set)
    reading = loop.create_task(wire.messages.get())
    waiting = loop.create_task(stopping.wait())
    while True:
        done, _ = await asyncio.wait({reading, waiting}, return_when=asyncio.FIRST_COMPLETED)
        if waiting in done:
            break
        message = reading.result()
        if message is None:  # the server is gone, or closing
            break
        with contextlib.suppress(ValueError, TypeError, KeyError):
            runner.handle(message)
        reading = loop.create_task(wire.messages.get())
    reading.cancel()
    waiting.cancel()
    await runner.stop_all(grace_s=10.0)
    out.flush()
    await runner.close()
    await wire.close()
    return 0


def _ignore(signum: int, frame: Any) -> None:
    pass


class _WithoutSecrets(logging.Formatter):
    """A record as the server's log shows it, traceback included, without the keys tether holds (an
    MCP server's last words, an extension that could not sign in)."""

    def format(self, record: logging.LogRecord) -> str:
        return without_secrets(super().format(record))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not args[0].isdigit():
        print("usage: python -m tether.server.procs FD (started by tether serve --run-processes)", file=sys.stderr)
        return 2
    # Ctrl-C in a terminal reaches the whole process group: the server stops the runs through us.
    signal.signal(signal.SIGINT, _ignore)  # a handler, not SIG_IGN: the tools' own processes keep Ctrl-C
    said = logging.StreamHandler()  # to the server's log, often a file: no key a record quotes
    said.setFormatter(_WithoutSecrets(f"tether run process {os.getpid()}: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[said])
    return asyncio.run(_serve(int(args[0])))


if __name__ == "__main__":
    sys.exit(main())

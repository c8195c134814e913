"""Real services for tests, started from packages without root and stopped afterwards.

* :class:`PostgresServer` — Postgres 16 with pgvector, from the ``pgserver`` wheel (PyPI);
  ``fresh_database()`` gives each test an empty database of its own.
* :class:`RabbitServer` — Debian's ``rabbitmq-server`` on a free port, with its data in a
  temporary directory (the broker ``tether worker`` takes its runs from).
* :func:`on_a_free_port` — start a server that must be told its port number, again on another
  port when the one picked was taken before the server bound it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["PortTaken", "PostgresServer", "RabbitServer", "free_port", "on_a_free_port", "port_in_use"]

T = TypeVar("T")


def free_port() -> int:
    """A loopback port free at this moment: only for a server that must be told a number (and
    then through :func:`on_a_free_port`); a server that can bind port 0 and say where it listens
    should (another process can take this one before the server binds it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PortTaken(RuntimeError):
    """The server could not bind the port it was given: another process took it first."""


def on_a_free_port(start: Callable[[int], T], *, attempts: int = 5) -> T:
    """``start(port)`` on a free port, and on another one each time it raises :class:`PortTaken`
    (at most ``attempts`` times): a port free when picked can be taken before the server binds
    it, by anything else starting on the machine meanwhile (tests run in parallel)."""
    for attempt in range(1, attempts + 1):
        try:
            return start(free_port())
        except PortTaken:
            if attempt == attempts:
                raise
    raise AssertionError("unreachable")  # the loop returns or raises


def port_in_use(output: str) -> bool:
    """Whether a server's output says a port it was to bind was in use: the kernel's words
    (``EADDRINUSE``, "Address already in use", as Python, Node and Erlang print them), epmd's or
    the Erlang distribution's."""
    lowered = output.lower()
    return any(
        words in lowered
        for words in ("eaddrinuse", "already in use", "already a epmd running", "dist_port_already_used")
    )


class PostgresServer:
    """A private Postgres (with pgvector) in ``directory`` (a new temporary one by default).

    ``durable=False`` turns off fsync and synchronous commits: for tests, whose databases are
    thrown away, never for a benchmark that compares with stores that do fsync."""

    def __init__(self, directory: Path | str | None = None, *, durable: bool = True) -> None:
        import pgserver

        self._tmp = None if directory else tempfile.mkdtemp(prefix="tether-pg-")
        self.directory = Path(directory or self._tmp or "")
        self._server: Any = pgserver.get_server(str(self.directory), cleanup_mode="stop")
        self.url = str(self._server.get_uri())
        self._template = False
        if not durable:
            import psycopg

            with psycopg.connect(self.url, autocommit=True) as conn:
                for setting in ("fsync", "synchronous_commit", "full_page_writes"):
                    conn.execute(f"ALTER SYSTEM SET {setting} = off")
                conn.execute("SELECT pg_reload_conf()")

    def fresh_database(self) -> str:
        """The URL of a new, empty database on this server."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:16]
        with psycopg.connect(self.url, autocommit=True) as conn:
            if not self._template:  # made once: a copy of it already has pgvector
                conn.execute('DROP DATABASE IF EXISTS "tether_template"')
                conn.execute('CREATE DATABASE "tether_template"')
                with psycopg.connect(self._url_of("tether_template"), autocommit=True) as db:
                    db.execute("CREATE EXTENSION IF NOT EXISTS vector")
                self._template = True
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "tether_template"')
        return self._url_of(name)

    def drop_database(self, url: str) -> None:
        """Drop a database ``fresh_database`` made (closing whatever is still connected to it)."""
        import psycopg

        name = url.partition("?")[0].rsplit("/", 1)[-1]
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def _url_of(self, name: str) -> str:
        base, _, query = self.url.partition("?")
        return f"{base.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._server.cleanup()
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # a member runs as another user (the broker as rabbitmq): still there
    return True


def _wait_port(port: int, timeout: float, proc: subprocess.Popen[bytes], output: Callable[[], str]) -> None:
    """Until something accepts connections on 127.0.0.1:``port``, while ``proc`` runs; PortTaken
    when it exits saying the port was in use."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _exited(proc, output())
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listened on port {port} within {timeout} s")


def _exited(proc: subprocess.Popen[bytes], output: str) -> None:
    """Raise for a service's process that ended while it should run: PortTaken when it says a
    port was in use (another start may succeed), RuntimeError otherwise."""
    name = Path(str(proc.args[0] if isinstance(proc.args, list) else proc.args)).name
    if port_in_use(output):
        raise PortTaken(f"{name} could not bind its port:\n{output}")
    raise RuntimeError(f"{name} exited ({proc.returncode}):\n{output}")


class RabbitServer:
    """RabbitMQ on a free loopback port, its files in a temporary directory. Needs Debian's
    ``rabbitmq-server`` (``apt-get install rabbitmq-server``); ``available()`` says whether it is."""

    def __init__(self, *, start_timeout: float = 60) -> None:
        binary = self.binary()
        if binary is None:  # before any folder is made: nothing is left behind
            raise RuntimeError("RabbitMQ is not installed: apt-get install rabbitmq-server (Debian)")
        on_a_free_port(lambda port: self._try(binary, port, start_timeout))

    def _try(self, binary: str, port: int, start_timeout: float) -> None:
        """One start on ``port``, everything it started stopped and removed if it fails."""
        self.port = port
        self.dir = Path(tempfile.mkdtemp(prefix="tether-rabbit-"))
        self._epmd: subprocess.Popen[bytes] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        try:
            self._start(binary, start_timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, binary: str, start_timeout: float) -> None:
        name = f"tether{self.port}@localhost"
        (self.dir / "plugins").write_text("[].\n")
        env = dict(
            os.environ,
            RABBITMQ_NODENAME=name,
            RABBITMQ_NODE_IP_ADDRESS="127.0.0.1",
            RABBITMQ_NODE_PORT=str(self.port),
            RABBITMQ_DIST_PORT=str(free_port()),
            RABBITMQ_MNESIA_BASE=str(self.dir / "mnesia"),
            RABBITMQ_LOG_BASE=str(self.dir / "log"),
            RABBITMQ_ENABLED_PLUGINS_FILE=str(self.dir / "plugins"),
            RABBITMQ_FEATURE_FLAGS_FILE=str(self.dir / "feature_flags"),
            RABBITMQ_CONFIG_FILE=str(self.dir / "rabbitmq"),
            RABBITMQ_ADVANCED_CONFIG_FILE=str(self.dir / "advanced.config"),
            RABBITMQ_PID_FILE=str(self.dir / "pid"),
            HOME=str(self.dir),
            ERL_CRASH_DUMP=str(self.dir / "erl_crash.dump"),  # a broker that cannot start writes one
        )
        for sub in ("mnesia", "log"):
            (self.dir / sub).mkdir()
        self.url = f"amqp://guest:guest@127.0.0.1:{self.port}//"
        # Erlang's node registry (epmd) of its own, on a free port, run in the foreground as our
        # child: left to itself, the broker starts `epmd -daemon` on 4369, which detaches from every
        # process group and outlives the tests. Its -d says, on a port taken, "there is already a
        # epmd running" (and it exits).
        self.epmd_port = free_port()
        env["ERL_EPMD_PORT"] = str(self.epmd_port)
        with (self.dir / "epmd.log").open("wb") as out:
            self._epmd = subprocess.Popen(
                [shutil.which("epmd") or "epmd", "-port", str(self.epmd_port), "-d"],
                env=env,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )
        _wait_port(self.epmd_port, 10, self._epmd, self._output)
        with (self.dir / "broker.log").open("wb") as out:
            self._proc = subprocess.Popen(
                [binary], env=env, stdout=out, stderr=out, cwd=self.dir, start_new_session=True
            )
        self._wait(start_timeout)

    def _output(self) -> str:
        """The ends of what epmd and the broker wrote."""
        files = [self.dir / "epmd.log", self.dir / "broker.log", *(self.dir / "log").glob("*.log")]
        return "\n".join(p.read_text(errors="replace")[-2000:] for p in files if p.exists())

    @staticmethod
    def binary() -> str | None:
        # The broker's own script, run as this user: Debian's /usr/sbin/rabbitmq-server switches to
        # the rabbitmq user through ``su``, whose new session a stop would not reach.
        direct = "/usr/lib/rabbitmq/bin/rabbitmq-server"
        return direct if os.path.exists(direct) else shutil.which("rabbitmq-server")

    @classmethod
    def available(cls) -> bool:
        return cls.binary() is not None

    def _wait(self, timeout: float) -> None:
        import kombu

        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            for proc in (self._epmd, self._proc):  # the broker may have reached another's epmd, and stopped
                if proc is not None and proc.poll() is not None:
                    _exited(proc, self._output())
            try:
                with kombu.Connection(self.url, connect_timeout=2) as conn:
                    conn.connect()
                    return
            except Exception as exc:  # not up yet
                last = exc
                time.sleep(0.3)
        raise RuntimeError(f"rabbitmq-server did not accept connections within {timeout} s ({last})")

    def stop(self) -> None:
        # The whole process group, whether or not the script started is still there: Debian's
        # wrapper may exit (it switches to the rabbitmq user) and leave the broker running.
        if self._proc is None:  # it never started: only its epmd and its folder to remove
            self._stop_epmd()
            shutil.rmtree(self.dir, ignore_errors=True)
            return
        group = self._proc.pid
        for sig, wait_s in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(group, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline and _group_alive(group):
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._proc.wait(0.1)
            if not _group_alive(group):
                break
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(1)
        self._stop_epmd()  # after the broker, which unregisters from it
        shutil.rmtree(self.dir, ignore_errors=True)

    def _stop_epmd(self) -> None:
        if self._epmd is None:
            return
        self._epmd.terminate()
        try:
            self._epmd.wait(5)
        except subprocess.TimeoutExpired:
            self._epmd.kill()
            self._epmd.wait()

    def __enter__(self) -> RabbitServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

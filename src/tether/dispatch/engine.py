"""The one interface the rest of tether sees of the task engine, and its Celery implementation."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from tether.errors import ConfigError

if TYPE_CHECKING:
    from tether.config import Settings

__all__ = ["HELD", "TASK", "CeleryDispatcher", "Dispatcher", "ThreadDispatcher", "celery_app", "open_dispatcher"]

TASK = "tether.drive"
# What a drive returns when another process holds the run: the job is looked at again later.
HELD = "held by another worker"
_log = logging.getLogger("tether.dispatch")
DEFAULT_QUEUE = "tether-runs"


class Dispatcher(Protocol):
    def enqueue(self, run_id: str) -> None:
        """Have some worker drive ``run_id``'s job: at least once, and again if that worker dies."""
        ...

    def close(self) -> None: ...


def celery_app(broker_url: str, queue: str = DEFAULT_QUEUE) -> Any:
    """The Celery app both sides share: late acknowledgement, one message at a time per worker
    thread, no result backend (a run's outcome is in the run store, its events in Postgres)."""
    try:
        from celery import Celery
    except ImportError as exc:
        raise ConfigError("external workers need Celery: pip install 'tether[distributed]'") from exc
    app = Celery("tether", broker=broker_url, set_as_current=False)
    app.conf.update(
        task_acks_late=True,  # acknowledged when the run's part is over, not when it is received
        task_reject_on_worker_lost=True,  # a pool child that dies puts its message back
        worker_prefetch_multiplier=1,  # a worker holds no more messages than it runs
        task_default_queue=queue,
        task_ignore_result=True,
        task_serializer="json",
        accept_content=["json"],
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
        broker_heartbeat=10,  # a silent peer is noticed in seconds, not minutes
    )
    return app


class CeleryDispatcher:
    def __init__(self, broker_url: str, queue: str = DEFAULT_QUEUE) -> None:
        self.app = celery_app(broker_url, queue)
        self.queue = queue
        self._lock = threading.Lock()

    def enqueue(self, run_id: str) -> None:
        with self._lock:  # one producer connection, shared by the server's threads
            self.app.send_task(
                TASK,
                args=[run_id],
                queue=self.queue,
                retry=True,
                retry_policy={"max_retries": 5, "interval_start": 0.2, "interval_step": 0.5},
            )

    def close(self) -> None:
        self.app.close()


class ThreadDispatcher:
    """Runs each job on a thread of this process with ``drive``: for tests and for one machine
    that wants the Postgres stores without a broker. At most ``concurrency`` runs are driven at
    once (each holds a database connection of its own while it runs: hundreds queued at once
    would exhaust the server's ``max_connections``); one another process holds, or that met the
    database away, is looked at again every ``retry_s``. No redelivery: a process that dies takes
    its jobs with it (they stay queued or running in ``tether_jobs``)."""

    def __init__(self, drive: Callable[[str], object], *, concurrency: int = 8, retry_s: float = 5.0) -> None:
        self.drive = drive
        self.retry_s = retry_s
        self.threads: list[threading.Thread] = []
        self._slots = threading.Semaphore(concurrency)
        self._closing = threading.Event()

    def enqueue(self, run_id: str) -> None:
        t = threading.Thread(target=self._drive, args=(run_id,), name=f"tether-job-{run_id}", daemon=True)
        self.threads = [x for x in self.threads if x.is_alive()] + [t]
        t.start()

    def _drive(self, run_id: str) -> None:
        while not self._closing.is_set():
            with self._slots:
                try:
                    if self.drive(run_id) != HELD:
                        return
                except Exception as exc:  # the database away: as the Celery task, look again later
                    from tether.postgres.db import SchemaNewer

                    if isinstance(exc, SchemaNewer):  # a newer tether migrated it: looking again cannot help
                        _log.error("run %s: %s", run_id, exc)
                        return
                    _log.warning("run %s: %s; looking again in %.0f s", run_id, exc, self.retry_s)
            self._closing.wait(self.retry_s)

    def close(self) -> None:
        self._closing.set()  # no more looking again; the runs being driven go on to their stop
        for t in self.threads:
            t.join(30)


def open_dispatcher(settings: Settings) -> CeleryDispatcher:
    """The dispatcher ``[dispatch]`` in config.toml (or ``$TETHER_BROKER_URL``) configures."""
    import os

    table = settings.dispatch
    url = os.environ.get("TETHER_BROKER_URL") or table.broker_url
    if not url:
        raise ConfigError(
            "external workers need a broker: set broker_url under [dispatch] in config.toml "
            "(amqp://USER:PASSWORD@HOST//) or $TETHER_BROKER_URL"
        )
    _check_broker_url(url)
    return CeleryDispatcher(url, table.queue or DEFAULT_QUEUE)


def _check_broker_url(url: str) -> None:
    """Refuse a URL the broker's client cannot read, naming it without its password: a raw '/',
    '#' or '?' in a password (a generated one often has one) ends the host part, and the client's
    own error (a traceback) shows what came before it as the port."""
    from urllib.parse import urlsplit

    from tether.postgres.db import redact

    try:
        _ = urlsplit(url).port  # reading it is the check
    except ValueError:
        raise ConfigError(
            f"the broker URL {redact(url)} ([dispatch] broker_url or $TETHER_BROKER_URL) cannot be read: "
            "percent-encode any '/', '#', '?' or ':' in its password (%2F, %23, %3F, %3A)"
        ) from None

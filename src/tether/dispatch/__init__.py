"""Runs beyond one process: ``tether serve --workers external`` queues each run, and any
``tether worker`` on any machine runs it.

The seam is :class:`Dispatcher` — one method, ``enqueue(run_id)``: deliver "run this" to some
worker at least once, and again if that worker dies before it is through. It is backed by Celery
on RabbitMQ (:class:`CeleryDispatcher`: late acknowledgement, so a worker killed mid-run leaves
its message unacknowledged and the broker hands it to another worker the moment the dead
worker's connection closes). Everything else is tether's own and lives in Postgres: what each
run's next part is (:mod:`tether.dispatch.jobs`), the run itself (its state and intent records,
in the Postgres run store, whose lock makes a second delivery of the same run wait or step
aside), and its events, announced with LISTEN/NOTIFY to whichever node streams them.
"""

from tether.dispatch.engine import CeleryDispatcher, Dispatcher, ThreadDispatcher, open_dispatcher

__all__ = ["CeleryDispatcher", "Dispatcher", "ThreadDispatcher", "open_dispatcher"]

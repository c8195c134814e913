"""``tether worker``: drive the runs that ``tether serve --workers external`` queues."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tether.cli.common import directory, usage_error
from tether.cli.common import settings as load_settings

__all__ = ["add_parsers"]

WORKER_HELP = """\
Takes runs from the queue ([dispatch] broker_url, or $TETHER_BROKER_URL) and drives them with the
stores in Postgres (database_url, or $TETHER_DATABASE_URL). Give it the same agents as the servers
(--agent FILE_OR_MODULE, or the [agents.NAME] tables of config.toml). A worker that dies mid-run leaves
its run to another: the broker hands the run's message on, and the run continues from its last
commit without paying twice for a recorded turn or repeating a recorded side effect.
"""


def add_parsers(sub: Any) -> None:
    w = sub.add_parser(
        "worker",
        help="drive queued runs (for tether serve --workers external)",
        description=WORKER_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    w.add_argument("--agent", metavar="FILE_OR_MODULE", help="a Python file or module defining `agent` or `agents`")
    w.add_argument("--model", help="the default agent's model (when no agent is configured)")
    w.add_argument("--cwd", type=directory, metavar="DIR", help="the default agent's working directory")
    w.add_argument(
        "--concurrency",
        type=_positive,
        metavar="N",
        help="runs driven at once (default: [dispatch] concurrency, else 8)",
    )
    w.add_argument("--name", help="this worker's name in the job table (default host:pid)")
    w.set_defaults(handler=cmd_worker)


def _positive(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"{n} must be at least 1")
    return n


def cmd_worker(args: argparse.Namespace) -> int:
    settings = load_settings()
    if not settings.database_url:
        raise usage_error(
            "tether worker needs the stores in Postgres: set database_url in config.toml "
            "(or $TETHER_DATABASE_URL), the same as the servers'"
        )
    from tether.cli.serve import check_models, default_agent_flags

    default_agent_flags(args, settings, "tether worker")
    from tether.assembly import served_agents
    from tether.dispatch.engine import DEFAULT_QUEUE, open_dispatcher
    from tether.dispatch.worker import Worker, run_worker
    from tether.stores import database_of
    from tether.telemetry import telemetry_from_settings

    agents = served_agents(settings, args.agent, model=args.model, cwd=str(args.cwd) if args.cwd else None)
    check_models(agents)  # a key this machine lacks fails here, not in every job it takes
    dispatcher = open_dispatcher(settings)
    db = database_of(settings)
    assert db is not None
    worker = Worker(
        home=settings.home, agents=agents, db=db, telemetry=telemetry_from_settings(settings), name=args.name
    )
    concurrency = args.concurrency or settings.dispatch.concurrency or 8
    queue = settings.dispatch.queue or DEFAULT_QUEUE
    print(
        f"tether worker {worker.name}: {concurrency} at once from queue {queue}; agents: {', '.join(agents)}",
        file=sys.stderr,
        flush=True,
    )
    keep = settings.dispatch.keep_events_days
    run_worker(
        worker,
        dispatcher.app,
        queue=queue,
        concurrency=concurrency,
        **({"keep_events_days": float(keep)} if keep is not None else {}),
    )
    return 0

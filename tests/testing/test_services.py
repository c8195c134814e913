"""The services tests start: a RabbitMQ that is stopped leaves no broker process behind."""

from __future__ import annotations

import os
import time

import pytest

from tether.testing.services import RabbitServer


def _brokers_of(port: int) -> list[int]:
    """Pids of the processes started for the broker: their environment names its node."""
    node = f"RABBITMQ_NODENAME=tether{port}@localhost".encode()
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if node in f.read().split(b"\0"):
                    found.append(int(pid))
        except OSError:
            continue
    return found


@pytest.mark.skipif(not RabbitServer.available(), reason="needs Debian's rabbitmq-server (.ci/run installs it)")
def test_a_stopped_broker_leaves_no_process_behind() -> None:
    broker = RabbitServer()
    try:
        assert len(_brokers_of(broker.port)) >= 2  # the script and the Erlang VM, at least
    finally:
        broker.stop()
    deadline = time.monotonic() + 10
    while _brokers_of(broker.port) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _brokers_of(broker.port) == []
    assert not broker.dir.exists()

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


def _listening(port: int) -> bool:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), 0.5):
            return True
    except OSError:
        return False


@pytest.mark.skipif(not RabbitServer.available(), reason="needs Debian's rabbitmq-server (.ci/run installs it)")
def test_the_broker_registers_with_an_epmd_of_its_own_that_stops_with_it() -> None:
    """Left to itself the broker starts `epmd -daemon` on 4369, which detaches from every process
    group and was still running after the tests (issue 27)."""
    import subprocess

    broker = RabbitServer()
    try:
        names = subprocess.run(
            ["epmd", "-port", str(broker.epmd_port), "-names"], capture_output=True, text=True, timeout=10
        ).stdout
        assert f"tether{broker.port}" in names  # the node is registered with its own epmd
    finally:
        broker.stop()
    assert not _listening(broker.epmd_port)
    assert _brokers_of(broker.port) == []

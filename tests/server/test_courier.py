"""Events cross from a run's loop to the server's loop in order, in batches (one wake-up of the
server's loop per batch, not per event); a late HTTP loop makes the runs give way to it."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tether.server import runs
from tether.server.events import EventLog
from tether.server.runs import Lateness, _Courier


def test_events_arrive_in_order_and_share_wakeups() -> None:
    got: list[int] = []
    wakeups: list[int] = []
    batches: list[int] = []

    async def go() -> None:
        loop = asyncio.get_running_loop()
        real = loop.call_soon_threadsafe

        def counted(*args: Any) -> Any:
            wakeups.append(1)
            return real(*args)

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign]

        def deliver(batch: list[tuple[str, dict[str, Any]]]) -> None:
            batches.append(len(batch))
            got.extend(data["n"] for _, data in batch)

        courier = _Courier(loop, deliver, Lateness(lambda: True))
        sender = threading.Thread(target=lambda: [courier.send("e", {"n": i}) for i in range(5000)])
        sender.start()
        while len(got) < 5000:
            await asyncio.sleep(0.001)
        sender.join()

    asyncio.run(go())
    assert got == list(range(5000))
    assert len(wakeups) < 5000
    assert len(wakeups) == len(batches)


class _RunLoopClock:
    """``time`` as ``tether.server.runs`` sees it: a run loop's clock that moves only when told to
    (or by a sleep), and its sleeps, counted. The HTTP loop's ticks keep the real clock."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_a_late_http_loop_makes_the_runs_give_way_and_an_idle_one_stops_ticking(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    live = [True]
    lateness = Lateness(lambda: live[0], every_s=0.005, late_s=0.002, cede_s=0.001)
    seen: list[Any] = []
    clock = _RunLoopClock()

    async def until(want: bool) -> bool:  # ticks on a busy machine may run late now and then
        deadline = time.monotonic() + 30  # a hang guard only: one tick on time is enough
        while time.monotonic() < deadline:
            if lateness.late is want:
                return True
            await asyncio.sleep(0.002)
        return False

    held_up = asyncio.Event()
    tick = lateness._tick

    def first_tick_after_the_hold_up(loop: asyncio.AbstractEventLoop, due: float) -> None:
        tick(loop, due)
        if not held_up.is_set() and blocked:
            held_up.set()  # wakes the test before the next tick: what this one said still holds

    lateness._tick = first_tick_after_the_hold_up  # type: ignore[method-assign]
    blocked = False

    async def go() -> None:
        nonlocal blocked
        loop = asyncio.get_running_loop()
        lateness.wake(loop)
        lateness.wake(loop)  # one tick chain, not two
        seen.append(await until(False))  # on time: no one waits
        blocked = True
        time.sleep(0.05)  # the HTTP loop held up (by the interpreter lock, say)
        # Not a count of loop turns: on a loaded machine the late tick's successor could come on
        # time and say so before the test looked (session 17 saw False here, one run in 20).
        await asyncio.wait_for(held_up.wait(), 30)  # a hang guard only
        seen.append(lateness.late)  # the tick that came 45 ms late says so
        monkeypatch.setattr(runs, "time", clock)  # the run loop's side, on a clock of the test's own
        lateness.cede()  # a run's emit, while the loop is late: it gives way once
        seen.append(list(clock.slept))
        for _ in range(1000):  # a burst of tokens right after: it gave way a moment ago
            lateness.cede()
        seen.append(len(clock.slept))  # not 1,000 sleeps: none
        clock.now += 0.002  # the run loop's own time: past cede_s later, it gives way again
        lateness.cede()
        seen.append(len(clock.slept))
        monkeypatch.undo()
        seen.append(await until(False))  # caught up
        live[0] = False
        await asyncio.sleep(0.05)
        seen.append(lateness._ticking)

    asyncio.run(go())
    assert seen == [True, True, [0.001], 1, 2, True, False]


def test_a_follower_gets_what_came_at_once_as_one_batch(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "r.log")
    log.live = True
    log.extend([("text", {"n": 1}), ("text", {"n": 2}), ("text", {"n": 3})])
    got: list[list[int]] = []

    async def go() -> None:
        follow = log.follow(0)
        got.append([n for n, _, _ in await follow.__anext__()])
        log.append("done", {"n": 4})
        log.live = False
        got.append([n for n, _, _ in await follow.__anext__()])

    asyncio.run(go())
    assert got == [[1, 2, 3], [4]]
    assert EventLog.load(tmp_path / "r.log").items == log.items  # one write of three lines, read back whole


def test_a_new_runs_log_planted_after_it_was_found_absent_is_checked_as_any_other(tmp_path: Path) -> None:
    """A log found absent is made with O_EXCL (no torn tail to look for); a file that appeared at
    its name since is opened as an old one, its torn last line cut, and a link there refused."""
    torn = EventLog.load(tmp_path / "torn.log")
    (tmp_path / "torn.log").write_text('1\tstarted\t{"a": 1}\n2\ttext\t{"cut')  # made since: a torn line
    torn.append("text", {"n": 1})
    assert [n for n, _, _ in EventLog.load(tmp_path / "torn.log").items] == [1]  # its line starts a line
    assert (tmp_path / "torn.log").read_text() == '1\tstarted\t{"a": 1}\n1\ttext\t{"n":1}\n'

    outside = tmp_path / "outside.txt"
    outside.write_text("theirs\n")
    linked = EventLog.load(tmp_path / "linked.log")
    (tmp_path / "linked.log").symlink_to(outside)
    assert linked.append("text", {"n": 1}) == 1  # the stream goes on from memory
    assert outside.read_text() == "theirs\n" and linked.items[0][0] == 1

    fresh = EventLog.load(tmp_path / "fresh.log")
    fresh.append("started", {"n": 1})
    fresh.append("text", {"n": 2})
    assert [n for n, _, _ in EventLog.load(tmp_path / "fresh.log").items] == [1, 2]
    assert (tmp_path / "fresh.log").stat().st_mode & 0o777 == 0o600

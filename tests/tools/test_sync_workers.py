"""The threads sync tools run on: reused, one more whenever all are busy, and left behind by a Stop."""

from __future__ import annotations

import asyncio
import threading

from tether.tools.base import _WORKERS, _in_thread


def test_a_blocked_tool_holds_up_no_other_and_idle_threads_are_reused() -> None:
    release = threading.Event()

    async def main() -> tuple[set[str], int]:
        blocked = asyncio.ensure_future(_in_thread(release.wait, {"timeout": 30}))
        await asyncio.sleep(0)
        # 20 at once beside the blocked one: each gets a thread (none waits for the blocked one)
        names = set(await asyncio.gather(*(_in_thread(lambda: threading.current_thread().name, {}) for _ in range(20))))
        # then one at a time: the threads there serve them, none is started
        started = _WORKERS._count
        for _ in range(50):
            await _in_thread(threading.get_ident, {})
        release.set()
        assert await blocked is True
        return names, _WORKERS._count - started

    names, more = asyncio.run(asyncio.wait_for(main(), 20))
    assert all(n.startswith("tether-tool-") for n in names)  # and done while the blocked one waits
    assert more == 0  # reused, not one thread per call
    assert all(t.daemon for t in threading.enumerate() if t.name.startswith("tether-tool-"))


def test_an_exception_and_the_context_reach_the_caller() -> None:
    import contextvars

    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")

    def boom() -> None:
        raise ValueError(f"from the tool, seeing {var.get()}")

    async def main() -> str:
        var.set("the caller's value")
        try:
            await _in_thread(boom, {})
        except ValueError as exc:
            return str(exc)
        return "no error"

    assert asyncio.run(main()) == "from the tool, seeing the caller's value"


def test_after_a_burst_the_spare_threads_end_and_the_rest_still_serve() -> None:
    """500 blocking calls at once are 500 threads; a server's process must not keep them for good."""
    from tether.tools.base import _DaemonWorkers

    workers = _DaemonWorkers(keep=3, idle_s=0.05)
    release = threading.Event()
    done: list[int] = []
    lock = threading.Lock()

    def job(i: int) -> None:
        release.wait(10)
        with lock:
            done.append(i)

    for i in range(40):
        workers.submit(lambda i=i: job(i))
    assert workers.alive == 40  # a blocked job holds up no other: one thread each
    release.set()
    for _ in range(400):
        if len(done) == 40 and workers.alive == 3:
            break
        threading.Event().wait(0.01)
    assert sorted(done) == list(range(40))
    assert workers.alive == 3  # the spares ended, three kept for the next calls
    # and the kept ones (and new ones, when all are busy) still serve a burst
    again = threading.Event()
    for i in range(10):
        workers.submit(lambda i=i: (again.wait(10), done.append(100 + i)))
    again.set()
    for _ in range(400):
        if len(done) == 50:
            break
        threading.Event().wait(0.01)
    assert sorted(done)[40:] == list(range(100, 110))

"""Run one piece of work (a model call, a tool, a middleware hook) as a task and yield, in order,
the events it puts into the run's sink, until it ends or the cancellation signal fires.

The sink (:class:`~tether.harness.context.EventSink`) is the run's one path for events: the work
puts, this takes, the loop yields. The work may put from another thread."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from tether.cancel import CancelSignal
from tether.errors import RunCancelled

if TYPE_CHECKING:
    from tether.harness.context import EventSink

__all__ = ["ABANDON_S", "STOP_GRACE_S", "Finished", "Internal", "late_events", "pump"]

R = TypeVar("R")

# How long work that ends by itself on Stop (a sub-agent saving its own stop) may take to do so.
STOP_GRACE_S = 5.0
# How long cancelled work is waited for (it cleans up: kills its subprocess, closes a stream)
# before it is abandoned: work that swallows its cancellation does not hold up a Stop longer.
ABANDON_S = 1.0


@dataclass(slots=True)
class Finished(Generic[R]):
    value: R


class Internal:
    """A sink item for the loop's own bookkeeping (a parallel call that finished): the step that
    put it reads it; it is never yielded to the run's caller, not even as a late event."""

    __slots__ = ()


class _End:
    """This pump's own marker in the sink: the work ended (``failed`` or not), or Stop fired."""

    __slots__ = ("exc", "owner", "stop", "value")

    def __init__(self, owner: object, value: Any = None, exc: BaseException | None = None, stop: bool = False) -> None:
        self.owner, self.value, self.exc, self.stop = owner, value, exc, stop


async def pump(
    work: Callable[[], Awaitable[R]],
    sink: EventSink,
    signal: CancelSignal,
    *,
    cancel_work: bool = True,
    grace_s: float = STOP_GRACE_S,
) -> AsyncIterator[Any]:
    """Yield what ``work()`` puts into ``sink``, then ``Finished(result)``.

    Raises what the work raised, or :class:`RunCancelled` as soon as ``signal`` fires (the work's
    task is cancelled first, so its sleeps, requests and subprocesses stop with it). Work that
    ends by itself on Stop (``cancel_work=False``) is given ``grace_s`` to do so.
    """
    signal.raise_if_cancelled()
    loop = asyncio.get_running_loop()
    sink.bind(loop)
    me = object()

    async def run() -> None:
        try:
            sink.put(_End(me, value=await work()))
        except BaseException as exc:
            sink.put(_End(me, exc=exc))

    def on_cancel(_reason: str) -> None:
        sink.put(_End(me, stop=True))

    signal.add_callback(on_cancel)
    task = loop.create_task(run())
    try:
        cut_at: float | None = None
        while True:
            item = await _get(sink.queue, cut_at, signal)
            if not isinstance(item, _End):
                yield item
                continue
            if item.owner is not me:
                continue  # a marker of earlier work that was abandoned
            if item.stop:
                if task.done():
                    continue  # the work ended as Stop came: its end is next in the sink, and counts
                if not cancel_work:  # the work listens to the signal itself: let it end its own way
                    cut_at = loop.time() + grace_s  # ... within a bound, then it is cut from outside
                    continue
                raise RunCancelled(signal.reason or "cancelled")
            if item.exc is not None:
                raise item.exc
            yield Finished(item.value)
            return
    finally:
        signal.remove_callback(on_cancel)
        await _abandon(task)


def late_events(sink: EventSink) -> list[Any]:
    """Events put into ``sink`` after their step ended (by work that was abandoned): the end of
    the run yields them before ``done``."""
    return [item for item in sink.take_all() if not isinstance(item, _End | Internal)]


async def _abandon(task: asyncio.Task[None]) -> None:
    """Cancel the work's task and wait for it, at most ``ABANDON_S``: work that swallows its
    cancellation is left behind rather than holding up the Stop (one bound for every kind of
    work, a tool in a plain run as a tool in a sub-agent)."""
    if task.done():
        return
    task.cancel()
    with contextlib.suppress(BaseException):  # abandoned on purpose
        await asyncio.wait_for(asyncio.shield(task), ABANDON_S)


async def _get(queue: asyncio.Queue[Any], cut_at: float | None, signal: CancelSignal) -> Any:
    """The next item; after a Stop, only until ``cut_at`` (then the work is cut from outside)."""
    if cut_at is None:
        return await queue.get()
    try:
        return await asyncio.wait_for(queue.get(), max(0.0, cut_at - asyncio.get_running_loop().time()))
    except TimeoutError:
        raise RunCancelled(signal.reason or "cancelled") from None

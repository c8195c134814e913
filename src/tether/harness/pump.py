"""Run one piece of work (a model call, a tool) as a task and stream what it emits, until it ends
or the cancellation signal fires. The work may emit from another thread."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from tether.cancel import CancelSignal
from tether.errors import RunCancelled

__all__ = ["Finished", "pump"]

R = TypeVar("R")


@dataclass(slots=True)
class Finished(Generic[R]):
    value: R


class _Failed:
    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


_CANCEL = object()


async def pump(
    work: Callable[[Callable[[Any], None]], Awaitable[R]],
    signal: CancelSignal,
    *,
    cancel_work: bool = True,
    grace_s: float = 5.0,
) -> AsyncIterator[Any]:
    """Yield what ``work(emit)`` emits, then ``Finished(result)``.

    Raises what the work raised, or :class:`RunCancelled` as soon as ``signal`` fires (the work's
    task is cancelled first, so its sleeps, requests and subprocesses stop with it).
    """
    signal.raise_if_cancelled()
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Any] = asyncio.Queue()
    owner = threading.get_ident()

    def emit(item: Any) -> None:
        if threading.get_ident() == owner:
            queue.put_nowait(item)
        else:
            loop.call_soon_threadsafe(queue.put_nowait, item)

    async def run() -> None:
        try:
            queue.put_nowait(Finished(await work(emit)))
        except BaseException as exc:
            queue.put_nowait(_Failed(exc))

    def on_cancel(_reason: str) -> None:
        queue.put_nowait(_CANCEL)

    signal.add_callback(on_cancel)
    task = loop.create_task(run())
    try:
        cut_at: float | None = None
        while True:
            item = await _get(queue, cut_at, signal)
            if item is _CANCEL:
                if not cancel_work:  # the work listens to the signal itself: let it end its own way
                    cut_at = loop.time() + grace_s  # ... within a bound, then it is cut from outside
                    continue
                raise RunCancelled(signal.reason or "cancelled")
            if isinstance(item, _Failed):
                raise item.exc
            yield item
            if isinstance(item, Finished):
                return
    finally:
        signal.remove_callback(on_cancel)
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):  # abandoned on purpose
                await task


async def _get(queue: asyncio.Queue[Any], cut_at: float | None, signal: CancelSignal) -> Any:
    """The next item; after a Stop, only until ``cut_at`` (then the work is cut from outside)."""
    if cut_at is None:
        return await queue.get()
    try:
        return await asyncio.wait_for(queue.get(), max(0.0, cut_at - asyncio.get_running_loop().time()))
    except TimeoutError:
        raise RunCancelled(signal.reason or "cancelled") from None

"""One cancellation signal for a run: the provider call, every tool and every wait listen to it.

``CancelSignal`` is the asyncio counterpart of an AbortSignal. ``cancel(reason)`` may be called
from the event loop or, through :meth:`cancel_threadsafe`, from any thread. A child signal (for a
sub-agent or a tool's own work) is cancelled when its parent is.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from tether.errors import RunCancelled

__all__ = ["CancelSignal"]

T = TypeVar("T")


class CancelSignal:
    """One Stop for a whole run: the provider call, every tool, sub-agents and retries' waits listen
    to it. Pass one as ``signal=`` to :func:`~tether.run_sync` (or ``run``, ``run_stream``) and fire it
    with :meth:`cancel_threadsafe` from another thread (:meth:`cancel` on the run's own event loop):
    the run ends ``interrupted`` (reason ``cancelled: <reason>``) and can be resumed. ``cancelled`` and
    ``reason`` say whether and why it fired. A child made with ``parent`` fires with its parent."""

    def __init__(self, parent: CancelSignal | None = None) -> None:
        self._reason: str | None = None
        self._futures: list[asyncio.Future[None]] = []
        self._callbacks: list[Callable[[str], None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        if parent is not None:
            if parent.cancelled:
                self._reason = parent.reason
            else:
                parent.add_callback(self.cancel)

    @property
    def cancelled(self) -> bool:
        return self._reason is not None

    @property
    def reason(self) -> str | None:
        return self._reason

    def cancel(self, reason: str = "cancelled") -> None:
        """Fire the signal. Later calls keep the first reason."""
        if self._reason is not None:
            return
        self._reason = reason
        for fut in self._futures:
            _wake(fut)
        self._futures.clear()
        for cb in list(self._callbacks):
            try:
                cb(reason)
            except Exception:  # one failing listener must not keep the Stop from the others (the run's)
                logging.getLogger("tether").exception("a cancellation callback failed")

    def cancel_threadsafe(self, reason: str = "cancelled") -> None:
        """:meth:`cancel` from another thread (a UI's Stop button, a timer): safe while the run's
        event loop is busy."""
        if self._loop is not None and self._loop.is_running():
            self._loop.call_soon_threadsafe(self.cancel, reason)
        else:
            self.cancel(reason)

    def add_callback(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(reason)`` when the signal fires (a tool stopping work it started)."""
        self._callbacks.append(callback)

    def remove_callback(self, callback: Callable[[str], None]) -> None:
        if callback in self._callbacks:
            self._callbacks.remove(callback)

    def raise_if_cancelled(self) -> None:
        """Raise :class:`~tether.errors.RunCancelled` if the signal has fired (a check between steps)."""
        if self._reason is not None:
            raise RunCancelled(self._reason)

    def _future(self) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        self._loop = loop
        fut: asyncio.Future[None] = loop.create_future()
        if self._reason is not None:
            fut.set_result(None)
        else:
            self._futures.append(fut)
        return fut

    async def wait(self) -> str:
        """Wait until the signal fires; return its reason."""
        await self._future()
        assert self._reason is not None
        return self._reason

    async def sleep(self, seconds: float) -> None:
        """Sleep, or raise :class:`RunCancelled` as soon as the signal fires."""
        self.raise_if_cancelled()
        fut = self._future()
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout=seconds)
        except TimeoutError:
            self._discard(fut)
            return
        self.raise_if_cancelled()

    async def race(self, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable`` unless the signal fires first; then cancel it and raise."""
        self.raise_if_cancelled()
        task = asyncio.ensure_future(awaitable)
        fut = self._future()
        try:
            await asyncio.wait((task, fut), return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            # Nobody will await it now: retrieve its outcome when it ends, so an exception it ends
            # with is not logged later from a finalizer ("Task exception was never retrieved").
            task.add_done_callback(_retrieve)
            raise
        finally:
            self._discard(fut)
        if task.done():
            return task.result()
        task.cancel()
        with contextlib.suppress(BaseException):  # abandoned on purpose
            await task
        raise RunCancelled(self._reason or "cancelled")

    def _discard(self, fut: asyncio.Future[None]) -> None:
        if fut in self._futures:
            self._futures.remove(fut)


def _wake(fut: asyncio.Future[None]) -> None:
    """Resolve a waiter, from any thread: a child's waiters are reached through its parent's
    ``cancel``, which may run on another thread (``cancel_threadsafe`` before the parent knew its
    loop), and a future is only safe to touch on its own loop's thread."""
    loop = fut.get_loop()
    try:
        here = asyncio.get_running_loop() is loop
    except RuntimeError:
        here = False
    if here:
        _resolve(fut)
    else:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(_resolve, fut)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()

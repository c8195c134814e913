"""Events cross from a run's loop to the server's loop in order, in batches (one wake-up of the
server's loop per batch, not per event)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from tether.server.runs import _Courier


def test_events_arrive_in_order_and_share_wakeups() -> None:
    got: list[int] = []
    wakeups: list[int] = []

    async def go() -> None:
        loop = asyncio.get_running_loop()
        real = loop.call_soon_threadsafe

        def counted(*args: Any) -> Any:
            wakeups.append(1)
            return real(*args)

        loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
        courier = _Courier(loop, lambda kind, data: got.append(data["n"]))
        sender = threading.Thread(target=lambda: [courier.send("e", {"n": i}) for i in range(5000)])
        sender.start()
        while len(got) < 5000:
            await asyncio.sleep(0.001)
        sender.join()

    asyncio.run(go())
    assert got == list(range(5000))
    assert len(wakeups) < 5000

"""Micro-batching: concurrent requests' orchestrations share forward passes.

Every request puts its items on one queue, each with a future. One loop takes the first
waiting item, lets others join until `max_batch_size` items are there or `max_wait_s` has
passed since it started the batch, and runs the batch function in its single worker
thread (the event loop keeps serving meanwhile); each future then gets its item's result.
Items that arrive while a batch runs form the next one, so under load batches fill up
without waiting. `max_batch_size=1` turns batching off (one item per forward pass).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any


class BatcherClosed(RuntimeError):
    """The service is shutting down and takes no new work."""


class MicroBatcher:
    """Collects items from concurrent callers into batches for `run_batch` (a blocking
    function from a list of items to a list of results, same order), one batch at a time
    in a worker thread. `on_batch(size, seconds)` is called after each batch."""

    def __init__(
        self,
        run_batch: Callable[[list[Any]], list[Any]],
        max_batch_size: int,
        max_wait_s: float,
        on_batch: Callable[[int, float], None] = lambda size, seconds: None,
    ):
        self.run_batch = run_batch
        self.max_batch_size = max_batch_size
        self.max_wait_s = max_wait_s
        self.on_batch = on_batch
        self._pending: deque[tuple[Any, asyncio.Future]] = deque()
        self._arrived = asyncio.Event()
        self._closing = False
        self._task: asyncio.Task | None = None
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="orchrm-rm")

    def start(self) -> None:
        """Start the batching loop (on the running event loop)."""
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def submit(self, items: list[Any]) -> list[Any]:
        """The results of `items`, in order, once the batches holding them have run."""
        if self._closing:
            raise BatcherClosed("the service is shutting down")
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in items]
        self._pending.extend(zip(items, futures, strict=True))
        self._arrived.set()
        return list(await asyncio.gather(*futures))

    async def run_in_worker(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run `fn(*args)` in the worker thread, between batches (for a warm-up)."""
        return await asyncio.get_running_loop().run_in_executor(self._worker, fn, *args)

    async def close(self) -> None:
        """Take no new items, run every queued one, then stop the worker thread."""
        self._closing = True
        self._arrived.set()
        if self._task is not None:
            await self._task
        self._worker.shutdown(wait=True)

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            while not self._pending:
                if self._closing:
                    return
                self._arrived.clear()
                await self._arrived.wait()
            deadline = loop.time() + self.max_wait_s
            while len(self._pending) < self.max_batch_size and not self._closing:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                self._arrived.clear()
                try:
                    await asyncio.wait_for(self._arrived.wait(), remaining)
                except TimeoutError:
                    break
            size = min(len(self._pending), self.max_batch_size)
            batch = [self._pending.popleft() for _ in range(size)]
            await self._run(batch)

    async def _run(self, batch: list[tuple[Any, asyncio.Future]]) -> None:
        start = time.perf_counter()
        items = [item for item, _ in batch]
        try:
            results = await asyncio.get_running_loop().run_in_executor(
                self._worker, self.run_batch, items
            )
        except Exception as err:  # every caller of this batch gets the error
            for _, future in batch:
                if not future.done():
                    future.set_exception(err)
            return
        self.on_batch(len(batch), time.perf_counter() - start)
        for (_, future), result in zip(batch, results, strict=True):
            if not future.done():  # done: its caller went away (cancelled)
                future.set_result(result)

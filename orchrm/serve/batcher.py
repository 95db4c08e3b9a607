"""Micro-batching: concurrent requests' orchestrations share forward passes.

Every request puts its items in its own queue, each item with a future. One loop takes
the first waiting item, lets others join until `max_batch_size` items are there or
`max_wait_s` has passed since it started the batch, and runs the batch function in its
single worker thread (the event loop keeps serving meanwhile); each future then gets its
item's result. A batch takes one item from each waiting request in turn, so a request of
many items shares the passes with small ones instead of going first for all of them.
Items whose caller has gone (cancelled: over its budget, or disconnected) are dropped
unscored. When a batch fails, its items run again one at a time, so only the item that
fails gets the error. Items that arrive while a batch runs form the next one, so under
load batches fill up without waiting. `max_batch_size=1` turns batching off.
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
        self._requests: deque[deque[tuple[Any, asyncio.Future]]] = deque()
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
        if not items:
            return []
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in items]
        self._requests.append(deque(zip(items, futures, strict=True)))
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
            while not self._requests:
                if self._closing:
                    return
                self._arrived.clear()
                await self._arrived.wait()
            deadline = loop.time() + self.max_wait_s
            while self._waiting() < self.max_batch_size and not self._closing:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                self._arrived.clear()
                try:
                    await asyncio.wait_for(self._arrived.wait(), remaining)
                except TimeoutError:
                    break
            batch = self._take()
            if batch:
                await self._run(batch)

    def _waiting(self) -> int:
        """Items queued, up to `max_batch_size` (counting further is not needed)."""
        n = 0
        for request in self._requests:
            n += len(request)
            if n >= self.max_batch_size:
                break
        return n

    def _take(self) -> list[tuple[Any, asyncio.Future]]:
        """The next batch: one live item from each waiting request in turn."""
        batch: list[tuple[Any, asyncio.Future]] = []
        while self._requests and len(batch) < self.max_batch_size:
            request = self._requests.popleft()
            while request and request[0][1].done():  # its caller has gone
                request.popleft()
            if request:
                batch.append(request.popleft())
            if request:
                self._requests.append(request)
        return batch

    async def _run(self, batch: list[tuple[Any, asyncio.Future]]) -> None:
        start = time.perf_counter()
        items = [item for item, _ in batch]
        try:
            results = await asyncio.get_running_loop().run_in_executor(
                self._worker, self.run_batch, items
            )
        except Exception as err:
            if len(batch) > 1:  # find the item that fails: only its caller gets the error
                for one in batch:
                    if not one[1].done():
                        await self._run([one])
            elif not batch[0][1].done():
                batch[0][1].set_exception(err)
            return
        self.on_batch(len(batch), time.perf_counter() - start)
        for (_, future), result in zip(batch, results, strict=True):
            if not future.done():  # done: its caller went away (cancelled)
                future.set_result(result)

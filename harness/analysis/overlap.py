"""A further backend's steps on a worker thread, beside the first backend's and torch's work.

A second backend's costly steps are native calls that release the GIL (OpenVINO's
`compile_model` and `infer`, onnxruntime's session load and run): on a worker thread they run
while the main thread computes torch's values, the first backend's runs and their comparisons,
instead of after them. Each step computes what it computes sequentially: the production run is
the model as given, loaded with the user's settings; the results, their notes and their order
are the same. An error on the worker is raised where the step's result is taken, as if the
step had run there, and a block that ends (returns or raises) first waits for the worker's
steps, so no session outlives the verification.

    with overlap.worker(enabled) as worker:
        later = worker.submit(step, argument)   # starts now on the worker
        ...                                     # the main thread's own steps
        value = later.result()                  # the step's value, or its exception

With `OVERLAP = False` (the default) or `enabled=False` each step runs where its result is first
taken, which is where the verification runs it sequentially. It is off by default because, on
this project's 2-core machine under load, it was not measured to pay: resnet18's two-backend
verification took 8.20 s with it and 9.17 s without at load 5.4-5.8 (medians of 5), but 9.72 s
and 7.97 s at load 4.1-4.7 (medians of 3), and its CPU seconds are never fewer (torch's and the
backends' threads then share the cores). `bench/bench_backends.py` times both ways on every run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Generic, TypeVar

T = TypeVar("T")

OVERLAP = False
"""Whether a verification on several backends runs the further backends' steps on a worker
thread (a CPU verification only: a CUDA one keeps each session alone on the device)."""


class Deferred(Generic[T]):
    """A step's value: computed on the worker (a future), or where `result()` is first called."""

    def __init__(self, future: Future[T] | None, step: Callable[..., T], args: tuple[Any, ...]) -> None:
        self._future = future
        self._step: Callable[..., T] | None = step if future is None else None
        self._args = args
        self._value: T | None = None

    def result(self) -> T:
        """The step's value; its exception, raised here, when it failed."""
        if self._future is not None:
            return self._future.result()
        if self._step is not None:
            step, self._step = self._step, None
            self._value = step(*self._args)
            self._args = ()
        return self._value  # type: ignore[return-value]


class Worker:
    """Runs steps on its thread (`pool`), or defers them to their result when it has none."""

    def __init__(self, pool: ThreadPoolExecutor | None) -> None:
        self._pool = pool

    @property
    def overlapping(self) -> bool:
        return self._pool is not None

    def submit(self, step: Callable[..., T], *args: Any) -> Deferred[T]:
        return Deferred(self._pool.submit(step, *args) if self._pool is not None else None, step, args)


@contextlib.contextmanager
def worker(enabled: bool = True) -> Iterator[Worker]:
    """A worker thread for the block when `enabled` and `OVERLAP`; the block ends only once the
    worker's running step has (steps not yet started are cancelled)."""
    if not (enabled and OVERLAP):
        yield Worker(None)
        return
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="roundtrip-backend")
    try:
        yield Worker(pool)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)

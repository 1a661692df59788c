"""A small thread pool: `Pool(workers)`, `submit` → `Task` (`done`, `result`), `map`,
`first_done`, `shutdown` — what the views asked of `concurrent.futures`, without it.

SPEC 7: `concurrent.futures` imports `logging` (with `traceback`, `textwrap`, `string`,
`tokenize`), about a quarter of `python -c pass`, for `unit status --all`, `scope` and
`watch`, which only run git processes side by side. A task's exception is raised again, the
same object, by `result()` in the caller's thread, as `Future.result()` does. Worker threads
start as tasks arrive (at most `workers`), are daemons and end at `shutdown`, which waits for
every started task; `shutdown(cancel_pending=True)` drops what has not started. Nothing but
`threading` and `collections`.
"""

from __future__ import annotations

import threading
from collections import deque

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any, Generic, TypeVar

    _T = TypeVar("_T")
    _R = TypeVar("_R")
else:

    class Generic:
        def __class_getitem__(cls, item: object) -> object:
            return cls

    _T = None


class Cancelled(Exception):
    """The task was dropped by `shutdown(cancel_pending=True)` before it started."""


class Task(Generic[_T]):
    """One submitted call: `done()` without waiting, `result()` waiting for it."""

    __slots__ = ("_action", "_args", "_error", "_finished", "_keywords", "_pool", "_value")

    def __init__(
        self,
        pool: Pool,
        action: Callable[..., _T],
        args: tuple[Any, ...],
        keywords: dict[str, Any],
    ) -> None:
        self._pool = pool
        self._action = action
        self._args = args
        self._keywords = keywords
        self._finished = False
        self._value: Any = None
        self._error: BaseException | None = None

    def done(self) -> bool:
        return self._finished

    def result(self) -> _T:
        if not self._finished:
            with self._pool._changed:
                while not self._finished:
                    self._pool._changed.wait()
        if self._error is not None:
            raise self._error
        value: _T = self._value
        return value

    def _run(self) -> None:
        try:
            self._value = self._action(*self._args, **self._keywords)
        except BaseException as error:  # raised again by result(), in the caller's thread
            self._error = error
        self._action = self._args = self._keywords = None  # type: ignore[assignment]


class Pool:
    """At most `workers` threads running submitted tasks in submission order."""

    def __init__(self, workers: int) -> None:
        self._workers = max(1, workers)
        self._queue: deque[Task[Any]] = deque()
        self._changed = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._closed = False

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *_: object) -> None:
        self.shutdown()

    def submit(self, action: Callable[..., _R], /, *args: Any, **keywords: Any) -> Task[_R]:
        task: Task[_R] = Task(self, action, args, keywords)
        with self._changed:
            if self._closed:
                raise RuntimeError("submit after shutdown")
            self._queue.append(task)
            if self._idle:
                self._changed.notify_all()
            if len(self._queue) > self._idle and len(self._threads) < self._workers:
                thread = threading.Thread(target=self._work, daemon=True)
                self._threads.append(thread)
                thread.start()
        return task

    def map(self, action: Callable[[_T], _R], items: Iterable[_T]) -> list[_R]:
        """`action` over `items`, the answers in order (the first failure raised)."""
        tasks = [self.submit(action, item) for item in items]
        return [task.result() for task in tasks]

    def first_done(self, waiting: set[Task[Any]]) -> tuple[set[Task[Any]], set[Task[Any]]]:
        """(done, not done) once at least one of `waiting` has finished (at once when empty)."""
        with self._changed:
            while waiting and not any(task._finished for task in waiting):
                self._changed.wait()
        done = {task for task in waiting if task._finished}
        return done, waiting - done

    def shutdown(self, *, cancel_pending: bool = False) -> None:
        """Wait for every started task (and, unless `cancel_pending`, every queued one)."""
        with self._changed:
            self._closed = True
            if cancel_pending:
                while self._queue:
                    task = self._queue.popleft()
                    task._error = Cancelled()
                    task._finished = True
            self._changed.notify_all()
        for thread in self._threads:
            thread.join()

    def _work(self) -> None:
        while True:
            with self._changed:
                while not self._queue and not self._closed:
                    self._idle += 1
                    self._changed.wait()
                    self._idle -= 1
                if not self._queue:
                    return
                task = self._queue.popleft()
            task._run()
            with self._changed:
                task._finished = True
                self._changed.notify_all()

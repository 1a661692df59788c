"""The lead supervisor's connection to the Ray cluster (SPEC 4.3, 7): import `ray`, connect.

`import ray` is most of a Ray turn's start (references/benchmarks.md, "Where a Ray turn's start
goes"). `begin()` starts it on a thread as soon as the supervisor has proved it owns a Ray
turn, so it overlaps the work that needs no Ray (taking the marker, the session's signature
check, the actor's name, the prompt); `connect` joins it and calls `ray.init` — nothing is
contacted before the session and the runner choice are verified. Three packages Ray imports
at its own import but a driver that only calls actors never uses — `requests`, `jsonschema` and
`yaml`, a third of the import's CPU (measured) — are deferred while it imports: each is a
stand-in module that imports the real one at its first attribute read, so whatever does need
one gets it, only later.

`ray.init` runs from `/` with a neutral `sys.argv[0]`: Ray puts the driver's working directory
(and its script's directory, when on `sys.path`) at the front of the path of every worker the
job starts — the actor's, on the node — and the supervisor's working directory is the pair's
state dir, which an executor can write (SPEC 8) and which means nothing on another machine.

Only the supervisor of a Ray turn (`pair.supervisor`, `pair.runners.ray`) and `RayRunner.release`
use it: `send`, `status` and the views never import `ray`. It never starts a cluster and never
stops one.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import sys
import threading
import types
from typing import Any

NAMESPACE = "unitmgr"
# Imported by `import ray` (its TPU probe, its runtime_env schema check, its label files) and
# used only inside functions a driver that calls actors does not call (ray 2.40-2.60).
DEFERRED = ("requests", "jsonschema", "yaml")

_lock = threading.Lock()
_import: dict[str, Any] = {}


class Deferred(types.ModuleType):
    """Stands for a module not imported yet: the first attribute read imports the real one."""

    def __getattr__(self, attribute: str) -> Any:
        with _lock:
            real = self.__dict__.get("_deferred_real")
            if real is None:
                if sys.modules.get(self.__name__) is self:
                    del sys.modules[self.__name__]
                real = importlib.import_module(self.__name__)
                self.__dict__["_deferred_real"] = real
        return getattr(real, attribute)


def defer(names: tuple[str, ...] = DEFERRED) -> list[str]:
    """Put a stand-in for each of `names` not imported yet in `sys.modules`; which were."""
    deferred = []
    for name in names:
        if name in sys.modules:
            continue
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            continue  # not installed: Ray's own import says so, as it would have
        stand_in = Deferred(name)
        # A real spec (`_initializing` false): a second `import name` finds the stand-in
        # without reading an attribute, so it loads nothing either.
        stand_in.__spec__ = spec
        sys.modules[name] = stand_in
        deferred.append(name)
    return deferred


def _import_ray() -> None:
    try:
        # Read once, at Ray's import: a driver run by `uv run` would otherwise replicate the
        # lead's environment into the job's workers — the lead never sends its environment
        # (SPEC 4.3) — after walking this process's ancestors to find out (~20 ms).
        os.environ["RAY_ENABLE_UV_RUN_RUNTIME_ENV"] = "0"
        defer()
        import ray

        _import["ray"] = ray
    except BaseException as error:  # the joining thread raises it
        _import["error"] = error


def begin() -> None:
    """Start importing `ray` on a thread, `DEFERRED` deferred (once; a no-op when it is
    imported already). Only the supervisor of a Ray turn calls it: a short-lived process."""
    with _lock:
        if "thread" in _import or "ray" in sys.modules:
            return
        thread = threading.Thread(target=_import_ray, name="import-ray", daemon=True)
        _import["thread"] = thread
    thread.start()


def imported() -> Any:
    """`ray`, once the import `begin` started has ended — or imported here, plainly, without
    one: a long-lived library caller (`RayRunner.release` in `unit`) gets no stand-ins."""
    thread = _import.get("thread")
    if thread is not None:
        thread.join()
    if "error" in _import:
        raise _import["error"]
    import ray

    return ray


def connect(address: str | None) -> Any:
    """`ray`, connected to the cluster at `address` as a driver (once per process)."""
    import signal

    ray = imported()
    if not ray.is_initialized():
        ours = signal.getsignal(signal.SIGTERM)
        cwd, argv = os.getcwd(), sys.argv
        # Only where no other thread could read the cwd meanwhile: the supervisor (a caller
        # with threads — `release` from a library — starts no worker of its own job).
        neutral = threading.active_count() == 1
        if neutral:
            os.chdir("/")
            sys.argv = ["pair-supervise"]
        try:
            ray.init(
                address=address or "auto",
                namespace=NAMESPACE,
                log_to_driver=False,
                logging_level=40,  # logging.ERROR
                include_dashboard=False,
                _skip_env_hook=True,  # no `RAY_RUNTIME_ENV_HOOK` of the lead's rewrites the job
            )
        finally:
            if neutral:
                sys.argv = argv
                with contextlib.suppress(OSError):
                    os.chdir(cwd)
            signal.signal(signal.SIGTERM, ours)  # a driver's own handler would end the process
    return ray


def disconnect() -> None:
    """Leave the cluster, if connected (a forked supervisor leaves by `os._exit`: no atexit)."""
    ray = sys.modules.get("ray")
    if ray is not None and getattr(ray, "is_initialized", lambda: False)():
        with contextlib.suppress(Exception):
            ray.shutdown()

"""The suite's child processes as jobs on both cores, the costliest first.

Most of the suite's time goes to child processes: a tree's probe, a check on
a tree, a child pytest. A fixture that needs such runs names them as a group:
``@group(NAME)`` on a function of a fixture's ``request`` (it reads session
fixtures only) that returns ``{key: Job}``, each job one call that runs one
child and returns what the fixture reads (``Job.cost``: its CPU seconds, as
measured). ``Jobs`` runs the jobs on ``SLOTS`` threads, the costliest first.
Before the first test, conftest queues every group a selected test reads and
runs first the tests that read none, beside the jobs; a fixture's
``results(NAME)`` waits for its group (a job not started yet goes next). Each
job runs once a session; nothing outlives the run.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

# Jobs at once: one per core of the CI host (the probes ran the trees in
# pairs before, each pair alone).
SLOTS = 2

# group name (its fixture's) -> its jobs, from a fixture's request
GROUPS: dict[str, Callable] = {}


def group(name: str):
    """Register ``spec(request) -> {key: Job}`` as the jobs of fixture ``name``."""

    def register(spec):
        GROUPS[name] = spec
        return spec

    return register


@dataclass
class Job:
    """``fn(*args)`` run once, on a thread of its own; ``cost``: CPU seconds."""

    fn: Callable
    args: tuple = ()
    cost: float = 1.0
    future: Future = field(default_factory=Future, repr=False)


class Jobs:
    """Runs jobs on ``SLOTS`` threads, the costliest waiting job next, one core
    left to the tests while they run (``SLOTS - 1`` jobs at once), every core
    while a test waits for a group; a job someone waits for goes next."""

    def __init__(self, slots: int = SLOTS):
        self.cond = threading.Condition()
        self.queue: list = []  # (-priority, order, job)
        self.order = itertools.count()
        self.running, self.slots, self.waiting = 0, slots, 0
        self.specs: dict[str, tuple] = {}  # group -> (jobs, None) or (None, exception)
        for _ in range(slots):
            threading.Thread(target=self._work, daemon=True).start()

    def jobs(self, name: str, request) -> dict:
        """Group ``name``'s jobs (its spec runs once, on the first caller's
        ``request``; what it raised, each time)."""
        if name not in self.specs:
            try:
                self.specs[name] = (GROUPS[name](request), None)
            except BaseException as exc:  # a missing tree, a skip: raised to each test
                self.specs[name] = (None, exc)
        jobs, error = self.specs[name]
        if error is not None:
            raise error
        return jobs

    def start(self, names, request) -> None:
        """Queue the jobs of the groups ``names``, each group as soon as its
        spec has run (the first jobs run while the later specs do)."""
        for name in names:
            try:
                jobs = self.jobs(name, request)
            except BaseException:
                continue  # the fixture raises it
            with self.cond:
                for job in jobs.values():
                    self._queue(job, job.cost)

    def results(self, name: str, request) -> dict:
        """``{key: what the job returned}`` of group ``name``, once all ran."""
        jobs = self.jobs(name, request)
        with self.cond:
            for job in jobs.values():
                if not job.future.running() and not job.future.done():
                    self._queue(job, float("inf"))  # someone waits: next
            self.waiting += 1  # the test's core is free meanwhile
            self.cond.notify_all()
        try:
            return {key: job.future.result() for key, job in jobs.items()}
        finally:
            with self.cond:
                self.waiting -= 1

    def _queue(self, job: Job, priority: float) -> None:
        heapq.heappush(self.queue, (-priority, next(self.order), job))
        self.cond.notify()

    def _work(self) -> None:
        while True:
            with self.cond:
                while not self.queue or self.running >= self.slots - (not self.waiting):
                    self.cond.wait()
                _, _, job = heapq.heappop(self.queue)
                if job.future.running() or job.future.done():
                    continue  # queued twice (someone waited), or run
                job.future.set_running_or_notify_cancel()
                self.running += 1
            try:
                result = job.fn(*job.args)
            except BaseException as exc:  # pytest.skip / pytest.fail too
                job.future.set_exception(exc)
            else:
                job.future.set_result(result)
            with self.cond:
                self.running -= 1
                self.cond.notify_all()

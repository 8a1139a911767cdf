"""Task dependencies: which of a job's active tasks may be scheduled, and which wait for others."""

from __future__ import annotations

from .jobs import Job
from .tasks import ACTIVE, Task


def queue(job: Job, task: Task) -> None:
    """A new active task goes to the ready queue, or waits for the tasks it depends on."""
    if dependencies_met(job, task):
        job.ready.append(task)
    else:
        job.waiting[task.key] = task


def dependencies_met(job: Job, task: Task) -> bool:
    ids, ranges = task.dependency_ids()
    for dep in ids:
        other = job.tasks.get(str(dep).lower())
        if other is None or not other.dependency_satisfied():
            return False
    for start, end in ranges:
        for number in range(start, end + 1):
            # Like explicit ids, a range waits for tasks that have not been added yet.
            other = job.tasks.get(str(number))
            if other is None or not other.dependency_satisfied():
                return False
    return True


def release_waiting(job: Job) -> None:
    """After a task completed or went: waiting tasks whose dependencies are now met become ready."""
    for key, task in list(job.waiting.items()):
        if task.state != ACTIVE:
            del job.waiting[key]
        elif dependencies_met(job, task):
            del job.waiting[key]
            job.ready.append(task)

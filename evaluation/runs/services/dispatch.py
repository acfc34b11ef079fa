"""Where a run's next piece of work goes: a Celery message sent when the current transaction
commits, or, inside `inline_work()`, a local queue that `inline_drain` works through in this
process (the demo loader and tests drive whole runs that way, with the same service code)."""
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.db import transaction

# Kinds of work and the Celery task that does each (evaluation/runs/tasks.py).
TASKS = {"start": "run_start", "episodes": "run_episodes_play", "finish": "trial_finish", "sweep": "run_sweep",
         "curve": "feedback_curve_step"}

_inline: ContextVar[deque | None] = ContextVar("evaluation_runs_inline", default=None)


def work_send(kind: str, *, countdown: float | None = None, **kwargs) -> None:
    """Queue work of `kind` (see TASKS). Delayed work (the watchdog) has no inline meaning:
    an inline driver stops when its queue is empty."""
    local = _inline.get()
    if local is not None:
        if countdown is None:
            local.append((kind, kwargs))
        return
    from evaluation.runs import tasks

    task = getattr(tasks, TASKS[kind])
    transaction.on_commit(lambda: task.apply_async(kwargs=kwargs, countdown=countdown))


def inline_active() -> bool:
    return _inline.get() is not None


@contextmanager
def inline_work() -> Iterator[deque]:
    token = _inline.set(deque())
    try:
        yield _inline.get()
    finally:
        _inline.reset(token)


def inline_drain(work: deque, handlers: dict[str, Callable[..., object]]) -> int:
    """Do the queued work (and whatever it queues) until none is left; returns how many items ran."""
    done = 0
    while work:
        kind, kwargs = work.popleft()
        handlers[kind](**kwargs)
        done += 1
    return done

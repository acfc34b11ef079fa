"""Which episode turn an LLM call was made for: a trace set while an episode plays.

The call log (memweb.models.LLMCall) sits below the apps that play episodes, so it cannot point
at an episode. Instead the player opens a trace with its own id, moves it from turn to turn, and
stores the same id on the episode; every call made meanwhile is written with the trace's id and
turn. A context variable carries it, so the roles' backends need no extra argument.
Django-free: settings and the offline players may import it.
"""
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field


@dataclass
class LLMTrace:
    trace_id: uuid.UUID | None = field(default_factory=uuid.uuid4)  # None: calls recorded untraced
    turn: int | None = None  # None: outside any turn (feedback on the finished episode, say)

    def at_turn(self, turn: int | None) -> None:
        self.turn = turn


_current: ContextVar[LLMTrace | None] = ContextVar("memweb_llm_trace", default=None)


@contextmanager
def llm_traced(trace: LLMTrace) -> Iterator[LLMTrace]:
    """LLM calls made inside the block are recorded under `trace`."""
    token = _current.set(trace)
    try:
        yield trace
    finally:
        _current.reset(token)


def llm_trace_current() -> LLMTrace | None:
    return _current.get()

"""A lock that serves its waiters in the order they came."""
import threading
from collections import deque


class FairLock:
    """A lock handed to waiting threads first come, first served. threading.Lock lets the thread
    that releases it take it straight back, so a long embed taking the lock batch by batch could
    starve a one-text request; here a release hands the lock to the longest waiter."""

    def __init__(self):
        self._guard = threading.Lock()
        self._held = False
        self._waiters: deque[threading.Lock] = deque()

    def acquire(self) -> None:
        with self._guard:
            if not self._held:
                self._held = True
                return
            turn = threading.Lock()
            turn.acquire()
            self._waiters.append(turn)
        try:
            turn.acquire()  # released by the holder that hands the lock over; _held stays True
        except BaseException:  # interrupted while waiting: leave the queue, or pass on a lock already handed over
            with self._guard:
                handed_over = turn not in self._waiters
                if not handed_over:
                    self._waiters.remove(turn)
            if handed_over:
                self.release()
            raise

    def release(self) -> None:
        with self._guard:
            if self._waiters:
                self._waiters.popleft().release()
            else:
                self._held = False

    def waiting(self) -> int:
        """How many threads wait for the lock."""
        with self._guard:
            return len(self._waiters)

    __enter__ = acquire

    def __exit__(self, *exc_info) -> None:
        self.release()

"""One long embed holds the shared model for one batch at a time: a request that embeds one text
meanwhile gets the model between two batches, not after the whole call."""
import threading

import numpy as np

from memweb import embeddings
from memweb.embeddings import MINILM, Embedder
from memweb.fairlock import FairLock
from tests.support.processes import wait_until


class RecordingEmbedder(Embedder):
    """Records the batches the model is given; the long call's first batch waits until the short
    call queues for the model, so the test decides the order of events, not the clock."""

    def __init__(self):
        super().__init__(model_name=MINILM, path="")
        self.batches: list[tuple[str, ...]] = []
        self.first_batch_running = threading.Event()

    def _encode(self, texts):
        self.batches.append(tuple(texts))
        if texts[0] == "long 0":
            self.first_batch_running.set()
            wait_until(lambda: embeddings._lock.waiting() == 1, timeout=30, message="the short call to queue")
        return np.ones((len(texts), self.dimension), dtype=np.float32)


def test_a_short_embed_gets_the_model_between_the_batches_of_a_long_one(settings):
    settings.EMBEDDING_BATCH_SIZE = 2
    model = RecordingEmbedder()
    long_call = threading.Thread(target=model.embed, args=([f"long {i}" for i in range(5)],))
    long_call.start()
    model.first_batch_running.wait(timeout=30)
    short = model.embed(["short"])  # queues while the long call's first batch runs
    long_call.join(timeout=30)
    assert model.batches == [("long 0", "long 1"), ("short",), ("long 2", "long 3"), ("long 4",)]
    assert short.shape == (1, 384)


def test_the_lock_serves_waiters_in_the_order_they_came():
    lock, order = FairLock(), []
    lock.acquire()
    waiters = [threading.Thread(target=lambda n=n: (lock.acquire(), order.append(n), lock.release()))
               for n in range(3)]
    for count, waiter in enumerate(waiters, start=1):
        waiter.start()
        wait_until(lambda count=count: lock.waiting() == count, timeout=30, message=f"waiter {count} to queue")
    lock.release()
    for waiter in waiters:
        waiter.join(timeout=30)
    assert order == [0, 1, 2] and lock.waiting() == 0
    with lock:  # free again
        assert lock.waiting() == 0

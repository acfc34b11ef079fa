"""Query vectors: the bounded per-process cache and the micro-batcher that coalesces concurrent callers."""
import threading
from dataclasses import dataclass, field

import numpy as np
import pytest

from memweb.embeddings import (
    MINILM,
    TORCH,
    Embedder,
    EmbeddingBatcher,
    QueryVectorCache,
    embedder,
    encode_in_one_pass,
    model_weights_path,
    query_embed,
    query_vector_cache,
)


def _rows_of(texts: list[str]) -> np.ndarray:
    """A stand-in for the model: each text's row says which text it came from."""
    return np.array([[float(text.split()[-1]), len(text)] for text in texts], dtype=np.float32)


@dataclass
class CountingModel:
    """Just enough of an Embedder for query_embed, counting the texts it is asked to encode."""
    model_name: str
    encoded: list[str] = field(default_factory=list)

    def embed(self, texts: list[str]) -> np.ndarray:
        self.encoded.extend(texts)
        return _rows_of(texts)


def _concurrently(callers: int, call) -> list:
    """Runs call(i) in `callers` threads at once; each slot holds its return value or its exception."""
    results: list = [None] * callers

    def run(i: int) -> None:
        try:
            results[i] = call(i)
        except Exception as error:  # what the caller would see
            results[i] = error

    threads = [threading.Thread(target=run, args=(i,)) for i in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


# --- the cache -------------------------------------------------------------------------------

def test_a_cache_hit_returns_the_stored_vector():
    cache = QueryVectorCache(size=4)
    cache.put("model-a", "where is my parcel?", [0.6, 0.8])
    assert cache.get("model-a", "where is my parcel?").tolist() == pytest.approx([0.6, 0.8])
    assert cache.get("model-a", "something else") is None


def test_the_cache_is_keyed_by_model_as_well_as_text():
    cache = QueryVectorCache(size=4)
    cache.put("model-a", "refund", [1.0, 0.0])
    cache.put("model-b", "refund", [0.0, 1.0])
    assert cache.get("model-a", "refund").tolist() == [1.0, 0.0]
    assert cache.get("model-b", "refund").tolist() == [0.0, 1.0]
    assert cache.get("model-c", "refund") is None


def test_a_full_cache_evicts_the_least_recently_used_vector():
    cache = QueryVectorCache(size=2)
    cache.put("m", "one", [1.0])
    cache.put("m", "two", [2.0])
    cache.get("m", "one")  # now "two" is the least recently used
    cache.put("m", "three", [3.0])
    assert len(cache) == 2
    assert cache.get("m", "two") is None
    assert cache.get("m", "one") is not None and cache.get("m", "three") is not None


def test_a_cache_of_size_zero_keeps_nothing():
    cache = QueryVectorCache(size=0)
    cache.put("m", "one", [1.0])
    assert len(cache) == 0 and cache.get("m", "one") is None


def test_cached_vectors_cannot_be_changed_by_a_caller():
    cache = QueryVectorCache(size=1)
    cache.put("m", "one", [1.0, 2.0])
    with pytest.raises(ValueError):
        cache.get("m", "one")[0] = 5.0


def test_query_embed_asks_the_model_once_for_a_repeated_query():
    model = CountingModel("counting-model-repeat")
    first = query_embed(model, "order 7")
    again = query_embed(model, "order 7")
    assert again == first == pytest.approx([7.0, 7.0])
    assert model.encoded == ["order 7"]


def test_query_embed_does_not_share_vectors_between_models():
    a, b = CountingModel("counting-model-a"), CountingModel("counting-model-b")
    query_embed(a, "order 3")
    query_embed(b, "order 3")
    assert a.encoded == b.encoded == ["order 3"]


def test_query_embed_gives_the_models_own_vector():
    model = embedder()
    text = "My parcel has not arrived yet, where is it? (query cache test)"
    vector = query_embed(model, text)
    assert np.allclose(vector, model.embed_one(text), atol=1e-5)
    assert query_vector_cache().get(model.model_name, text) is not None


def test_one_pass_encoding_gives_flagembeddings_vectors_in_the_callers_order():
    model = Embedder(model_name=MINILM, path=model_weights_path(MINILM), backend=TORCH)  # the torch path's own pass
    texts = ["hi", "The dishwasher shows fault code E24 after the rinse cycle, what now?", "Where is my parcel?"]
    ours = encode_in_one_pass(model._model, texts, batch_size=2)
    ours /= np.linalg.norm(ours, axis=1, keepdims=True)  # Embedder.embed normalises; FlagModel does it itself
    theirs = model._model.encode(texts, batch_size=2, max_length=512)
    assert ours.shape == (3, 384)
    assert np.allclose(ours, theirs, atol=1e-5)


# --- the micro-batcher ---------------------------------------------------------------------------

def test_concurrent_callers_share_one_model_call_and_each_gets_its_own_row():
    calls = []

    def encode(texts):
        calls.append(list(texts))
        return _rows_of(texts)

    callers = 6
    # A window far longer than the test: the batch closes because it is full, not because time passed.
    batcher = EmbeddingBatcher(encode, window=600, max_texts=callers)
    rows = _concurrently(callers, lambda i: batcher.embed([f"text {i}"]))
    assert len(calls) == 1 and sorted(calls[0]) == sorted(f"text {i}" for i in range(callers))
    for i, row in enumerate(rows):
        assert row.tolist() == [[float(i), len(f"text {i}")]]


def test_a_caller_with_several_texts_gets_its_rows_in_order():
    batcher = EmbeddingBatcher(_rows_of, window=600, max_texts=5)
    results = _concurrently(2, lambda i: batcher.embed([f"a {10 * i + 1}", f"b {10 * i + 2}"] if i else
                                                       [f"a {1}", f"b {2}", f"c {3}"]))
    assert results[0][:, 0].tolist() == [1.0, 2.0, 3.0]
    assert results[1][:, 0].tolist() == [11.0, 12.0]


def test_a_failed_model_call_reaches_every_waiting_caller():
    def encode(texts):
        raise RuntimeError("the model is gone")

    callers = 4
    batcher = EmbeddingBatcher(encode, window=600, max_texts=callers)
    results = _concurrently(callers, lambda i: batcher.embed([f"text {i}"]))
    assert all(isinstance(result, RuntimeError) and str(result) == "the model is gone" for result in results)


def test_callers_after_a_failure_start_a_fresh_batch():
    failing = [True]

    def encode(texts):
        if failing.pop() if failing else False:
            raise RuntimeError("once")
        return _rows_of(texts)

    batcher = EmbeddingBatcher(encode, window=0, max_texts=8)
    with pytest.raises(RuntimeError):
        batcher.embed(["text 1"])
    assert batcher.embed(["text 2"]).tolist() == [[2.0, 6.0]]


def test_a_lone_caller_is_served_without_other_callers():
    batcher = EmbeddingBatcher(_rows_of, window=0, max_texts=64)
    assert batcher.embed(["text 4", "text 5"])[:, 0].tolist() == [4.0, 5.0]
    assert batcher.embed([]).shape[0] == 0

"""The embedding layer with the real all-MiniLM-L6-v2 weights."""
import numpy as np

from memweb.embeddings import embedder


def test_it_reports_model_name_and_dimension():
    model = embedder()
    assert model.model_name == "all-MiniLM-L6-v2"
    vectors = model.embed(["Where is my order?"])
    assert vectors.shape == (1, model.dimension) == (1, 384)


def test_it_returns_unit_vectors_in_batches():
    vectors = embedder().embed([f"customer question number {i} about a refund" for i in range(70)])
    assert vectors.shape == (70, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_it_scores_a_paraphrase_closer_than_an_unrelated_sentence():
    anchor, paraphrase, unrelated = embedder().embed([
        "My parcel has not arrived yet, where is it?",
        "The package I ordered still hasn't been delivered.",
        "The dishwasher shows fault code E24 after the rinse cycle.",
    ])
    assert anchor @ paraphrase > anchor @ unrelated + 0.3


def test_it_is_loaded_once_per_process():
    assert embedder() is embedder()


def test_it_counts_tokens_offline():
    assert embedder().count_tokens("") == 0
    assert 3 <= embedder().count_tokens("Where is my parcel?") <= 8


def test_a_text_embedded_again_comes_from_the_recent_texts(monkeypatch):
    model = embedder()
    first = model.embed_one("Is my washer still under warranty? (recent-texts test)")
    monkeypatch.setattr(model, "_encode", lambda texts: (_ for _ in ()).throw(AssertionError("embedded again")))
    assert model.embed_one("Is my washer still under warranty? (recent-texts test)") == first
    assert np.isclose(np.linalg.norm(first), 1.0, atol=1e-5)

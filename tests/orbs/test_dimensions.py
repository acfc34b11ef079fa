"""Banks on a second vector dimension (1024, bge-m3's) beside the default 384 (all-MiniLM-L6-v2).

bge-m3's weights cannot be installed here (no package ships them), so the 1024-d bank embeds with
`HashedBgeM3`: a stand-in encoder that the test supplies, giving deterministic 1024-d vectors
(hashed words). Everything after the encoder is the product's own path: ingest, the vector column,
the per-dimension HNSW indexes, retrieval, DMRM learning and retrieval, export and import. The
real MiniLM encoder is covered by the rest of the suite (tests/memweb/test_embeddings.py and every
Orb test)."""
import hashlib
import json
import re

import numpy as np
import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from memweb import embeddings
from memweb.embeddings import (
    BGE_M3,
    MINILM,
    Embedder,
    EmbeddingModelUnavailable,
    VectorDimensionError,
    embedder,
    model_weights_path,
)
from orbs.dmrm.models import Experience
from orbs.dmrm.services import experience_append, experiences_retrieve
from orbs.models import Orb
from orbs.services import bank_export, bank_get_or_create, bank_import, orbs_retrievable, orbs_retrieve
from orbs.services.search import vectors_nearest, vectors_nearest_query
from tests.orbs.conftest import success_trajectory

WIDE = 1024


class HashedBgeM3(Embedder):
    """Stands in for bge-m3 (test-supplied vectors): each word adds ±1 to a bucket chosen by its
    SHA-256, so texts sharing words are near. Tokens are counted by MiniLM's real tokenizer."""

    def __init__(self, tokenizer_model: Embedder):
        super().__init__(model_name=BGE_M3, path="(vectors supplied by the test)")
        self._tokenizer_model = tokenizer_model

    def _encode(self, texts: list[str]):
        return np.stack([self._hashed(text) for text in texts])

    @staticmethod
    def _hashed(text: str) -> np.ndarray:
        vector = np.zeros(WIDE, dtype=np.float32)
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            digest = hashlib.sha256(word.encode()).digest()
            vector[int.from_bytes(digest[:4], "big") % WIDE] += 1.0 if digest[4] % 2 else -1.0
        return vector

    def count_tokens(self, text: str) -> int:
        return self._tokenizer_model.count_tokens(text)


@pytest.fixture
def serve_with(db, settings, monkeypatch):
    """Installs HashedBgeM3 as this process's bge-m3; `serve_with(model)` makes `model` the server's."""
    monkeypatch.setitem(embeddings._instances, BGE_M3, HashedBgeM3(embedder()))

    def serve(model: str) -> None:
        settings.EMBEDDING_MODEL = model

    return serve


@pytest.fixture
def wide_bank(serve_with):
    serve_with(BGE_M3)
    return bank_get_or_create(name="Wide shop")


def _orb(bank, text: str, *, approve: bool = True) -> Orb:
    from orbs.services import orb_approve, orb_from_episode

    orb = orb_from_episode(bank=bank, trajectory=success_trajectory(text)).orb
    if approve:
        orb = orb_approve(orb_id=orb.pk, expected_version=orb.version, actor=None)
    return orb


def _plan(query) -> str:
    sql, params = query.query.sql_with_params()
    with transaction.atomic(), connection.cursor() as cursor:
        # A tiny table would rather be scanned and sorted; forbid that to see which plan the query allows.
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute(f"EXPLAIN {sql}", params)
        return "\n".join(row[0] for row in cursor.fetchall())


def _dims(model, pk: int) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT vector_dims(vector) FROM {model._meta.db_table} WHERE id = %s", [pk])
        return cursor.fetchone()[0]


def test_a_bge_m3_bank_stores_and_retrieves_1024_dimension_orbs(wide_bank):
    assert (wide_bank.embedding_model, wide_bank.embedding_dimension) == (BGE_M3, WIDE)
    washer = _orb(wide_bank, "My washing machine leaks water from the door seal every cycle")
    _orb(wide_bank, "The sofa delivery was scheduled for the wrong weekday")
    pending = _orb(wide_bank, "washing machine leaks water door seal cycle again", approve=False)

    assert washer.embedding_model == BGE_M3 and _dims(Orb, washer.pk) == WIDE
    result = orbs_retrieve(bank=wide_bank, query="washing machine leaks water", context={}, k=3)
    assert [hit.orb.pk for hit in result.hits][0] == washer.pk
    assert pending.pk not in [hit.orb.pk for hit in result.hits]  # the bank serves approved Orbs only
    assert pending.status == Orb.Status.PENDING


def test_a_1024_dimension_search_walks_its_own_hnsw_index(wide_bank):
    _orb(wide_bank, "The kettle switches itself off before the water boils")
    vector = embedder().embed_one("kettle switches off")
    query = vectors_nearest_query(queryset=orbs_retrievable(bank=wide_bank, approved_only=True), vector=vector, k=5)
    plan = _plan(query)
    assert "orb_vector_half1024" in plan and "orb_vector_half384" not in plan


def test_dmrm_experiences_of_a_bge_m3_bank_are_1024_dimensional(wide_bank):
    steps = [("refund the broken kettle", "customer sent a photo of the broken kettle", "issue_refund"),
             ("change the delivery address", "customer moved to a new flat", "update_address")]
    for step, (goal, observation, action) in enumerate(steps):
        entry = experience_append(bank=wide_bank, trajectory_id="t1", step=step, goal=goal, observation=observation,
                                  action=action, reward=1.0)
        assert entry.embedding_model == BGE_M3 and _dims(Experience, entry.pk) == WIDE

    result = experiences_retrieve(bank=wide_bank, goal="refund the broken kettle", observation="a broken kettle")
    assert result.hits[0].experience.action == "issue_refund"
    vector = embedder().embed_one("broken kettle")
    assert "experience_vector_half1024" in _plan(
        vectors_nearest_query(queryset=Experience.objects.filter(bank=wide_bank), vector=vector, k=5))


def test_a_minilm_bank_beside_a_bge_m3_bank_keeps_384_dimensions(serve_with, make_orb, bank):
    kept = make_orb("The fridge light flickers when the door opens")
    serve_with(BGE_M3)
    _orb(bank_get_or_create(name="Wide shop"), "The fridge light flickers when the door opens")
    serve_with(MINILM)
    assert (bank.embedding_dimension, _dims(Orb, kept.pk)) == (384, 384)

    query_vector = embedder().embed_one("fridge light flickers")
    # One search over every Orb compares only vectors of the query's dimension.
    assert [orb.pk for orb, _ in vectors_nearest(queryset=Orb.objects.all(), vector=query_vector, k=5)] == [kept.pk]
    assert orbs_retrieve(bank=bank, query="fridge light flickers", context={}).hits[0].orb.pk == kept.pk
    plan = _plan(vectors_nearest_query(queryset=orbs_retrievable(bank=bank, approved_only=True),
                                       vector=query_vector, k=5))
    assert "orb_vector_half384" in plan and "orb_vector_half1024" not in plan


def test_a_vector_of_another_dimension_is_refused(bank):
    with pytest.raises(VectorDimensionError, match="vector has 768 dimensions; stored vectors have 384 or 1024"):
        vectors_nearest(queryset=Orb.objects.all(), vector=[0.1] * 768, k=3)

    class WrongWidth(Embedder):
        def _encode(self, texts):
            return np.ones((len(texts), WIDE), dtype=np.float32)

    with pytest.raises(VectorDimensionError, match="vector has 1024 dimensions, but all-MiniLM-L6-v2 vectors have 384"):
        WrongWidth(model_name=MINILM, path="").embed(["hello"])

    # The model's validation and the database refuse it too: a MiniLM row may not hold a 1024-d vector.
    with pytest.raises(ValidationError, match="the vector's dimension is not the one its embedding model gives"):
        Orb(bank=bank, embedding_model=MINILM, vector=[0.1] * WIDE).validate_constraints()
    Orb(bank=bank, embedding_model=MINILM, vector=[0.1] * 384).validate_constraints()
    with pytest.raises(IntegrityError, match="orb_vector_fits_model"), transaction.atomic():
        Orb.objects.create(bank=bank, content_hash="0" * 64, obs="o", emotion="calm", outcome="x",
                           vector=[0.1] * WIDE, embedding_model=MINILM)


def test_an_import_whose_vectors_do_not_fit_the_model_is_refused(bank, make_orb):
    make_orb("The lawnmower will not start after the winter")
    header, line = [json.loads(text) for text in bank_export(bank=bank)][:2]  # the history lines end the file
    assert (header["embedding_model"], header["embedding_dimension"]) == (MINILM, 384)
    line["vector"] = line["vector"] + [0.0] * (WIDE - 384)

    report = bank_import(lines=[json.dumps(header), json.dumps(line)], name="Copy")
    assert report.errors == [{"line": 2, "field": "vector",
                              "message": "vector has 1024 dimensions, but all-MiniLM-L6-v2 vectors have 384"}]
    header["embedding_dimension"] = WIDE
    report = bank_import(lines=[json.dumps(header)], name="Copy")
    assert report.errors == [{"line": 1, "field": "embedding_dimension",
                              "message": "all-MiniLM-L6-v2 gives 384 dimensions, not 1024"}]
    assert not Orb.objects.filter(bank__name="Copy").exists()


def test_a_bge_m3_bank_round_trips_through_export_and_import(wide_bank):
    orb = _orb(wide_bank, "The blender jar cracked on the first use")
    lines = list(bank_export(bank=wide_bank))
    assert json.loads(lines[0])["embedding_dimension"] == WIDE

    report = bank_import(lines=lines, name="Wide copy")
    assert report.ok, report.errors
    copied = Orb.objects.get(bank__name="Wide copy")
    assert copied.embedding_model == BGE_M3 and np.allclose(copied.vector, orb.vector)


def test_a_bank_keeps_the_model_it_was_created_with(bank):
    bank.embedding_model = BGE_M3
    with pytest.raises(ValidationError) as error:
        bank.full_clean()
    assert error.value.message_dict["embedding_model"] == [
        "fixed at all-MiniLM-L6-v2 when the bank was created; create a new bank for another embedding model"]


def test_bge_m3_without_its_weights_is_refused_naming_them(settings, tmp_path, monkeypatch):
    monkeypatch.delitem(embeddings._instances, BGE_M3, raising=False)
    settings.EMBEDDING_MODEL, settings.EMBEDDING_MODEL_PATH = BGE_M3, str(tmp_path)
    with pytest.raises(EmbeddingModelUnavailable) as error:
        embedder()  # never a MiniLM embedder in its place
    assert str(error.value) == (f"bge-m3 cannot be loaded: {tmp_path} lacks config.json, model.safetensors or "
                                "pytorch_model.bin; its weights come from the folder MEMWEB_EMBEDDING_MODEL_PATH "
                                "(no package ships them)")

    settings.EMBEDDING_MODEL = MINILM  # the path is MiniLM's now: bge-m3 has none on this server
    with pytest.raises(EmbeddingModelUnavailable, match="bge-m3 has no weights on this server: they come from"):
        model_weights_path(BGE_M3)


def test_the_migration_keeps_existing_384_dimension_vectors(bank, make_orb):
    orb = make_orb("The printer jams on every second page")
    before = list(Orb.objects.get(pk=orb.pk).vector)
    executor = MigrationExecutor(connection)
    # Inside the test's transaction (PostgreSQL's DDL is transactional), so the rollback undoes both steps;
    # ALTER TABLE waits for no deferred foreign-key checks of the rows written above.
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    executor.migrate([("orbs", "0004_orb_flag")])
    with connection.cursor() as cursor:
        cursor.execute("SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                       "WHERE attrelid = 'orbs_orb'::regclass AND attname = 'vector'")
        assert cursor.fetchone()[0] == "vector(384)"
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    assert np.allclose(Orb.objects.get(pk=orb.pk).vector, before) and _dims(Orb, orb.pk) == 384
    assert orbs_retrieve(bank=bank, query="printer jams", context={}).hits[0].orb.pk == orb.pk

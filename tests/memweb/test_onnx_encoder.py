"""all-MiniLM-L6-v2 through ONNX Runtime: exported here from the shipped weights, compared with the torch
reference on real texts, chosen only while its check passed, shown on /health."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from django.urls import reverse

from memweb import celery as memweb_celery
from memweb import embeddings
from memweb.embeddings import MINILM, ONNX, TORCH, Embedder, EmbeddingModelUnavailable, long_runs_split
from memweb.models import ApiKey
from memweb.onnx_encoder import (
    CHECK_FILE,
    MIN_COSINE,
    RUN_TEXTS,
    RUN_TOKENS,
    export_folder,
    runs_of_similar_length,
)
from memweb.onnx_export import export_and_check, export_is_current, main, neighbour_overlap, reference_texts
from tests.support.processes import ROOT, subprocess_env

# Lines the export's own check did not pick, as well as lines it did: 300 spread over the docs.
COMPARED_TEXTS = 300
ODD_TEXTS = ["", " ", "é" * 50, "日本語のテキストです", "emoji 🤖🚀 in a line", "a" * 18_822, "nul\x00inside",
             "tab\tand\nnewline", "İstanbul ﬁ ǅ", "\u200b zero width", "Where is my parcel?"]


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    """A real export of the shipped weights, made here; (the folder above it, its check)."""
    onnx_dir = tmp_path_factory.mktemp("onnx")
    check = export_and_check(embeddings.model_weights_path(MINILM), onnx_dir / MINILM)
    return onnx_dir, check


@pytest.fixture(scope="module")
def checked_export(tmp_path_factory) -> Path:
    """The folder above a current export that passed its check: the install's (scripts/bootstrap.sh
    makes it with this code), else one made here. An export takes half a minute of a core in every
    test process this module's tests land on, so only the test of the export itself makes its own."""
    weights, installed = embeddings.model_weights_path(MINILM), export_folder(MINILM)
    if export_is_current(weights, installed) and json.loads((installed / CHECK_FILE).read_text())["passed"]:
        return installed.parent
    onnx_dir = tmp_path_factory.mktemp("onnx")
    export_and_check(weights, onnx_dir / MINILM)
    return onnx_dir


@pytest.fixture
def exported(checked_export, settings, monkeypatch):
    """This process's settings point at a checked export; the next embedder() is built afresh."""
    settings.ONNX_DIR = str(checked_export)
    monkeypatch.setattr(embeddings, "_instances", {})
    return checked_export / MINILM


@pytest.fixture
def no_export(tmp_path, settings, monkeypatch):
    settings.ONNX_DIR = str(tmp_path)
    monkeypatch.setattr(embeddings, "_instances", {})
    return tmp_path / MINILM


def test_the_export_passes_its_check_on_real_texts(export):
    check = export[1]
    assert check["passed"] and check["reason"] == "", check
    assert check["texts"] == 256 and check["min_cosine"] >= MIN_COSINE and check["top5_overlap"] == 1.0


def test_onnx_vectors_match_the_torch_reference_on_real_texts(exported):
    texts = reference_texts(COMPARED_TEXTS)
    weights = embeddings.model_weights_path(MINILM)
    reference = Embedder(model_name=MINILM, path=weights, backend=TORCH).embed(texts)
    onnx = Embedder(model_name=MINILM, path=weights, backend=ONNX, onnx_folder=exported)
    vectors = onnx.embed(texts)
    one_at_a_time = np.concatenate([onnx.embed([text]) for text in texts[:20]])

    assert len(texts) == COMPARED_TEXTS
    assert (vectors * reference).sum(axis=1).min() >= MIN_COSINE
    assert (one_at_a_time * reference[:20]).sum(axis=1).min() >= MIN_COSINE
    assert neighbour_overlap(vectors, reference, k=5) == 1.0


def test_onnx_counts_tokens_exactly_as_the_torch_paths_tokenizer(exported):
    from transformers import AutoTokenizer

    texts = reference_texts(1000) + ODD_TEXTS
    onnx = embeddings.embedder()
    tokenizer = AutoTokenizer.from_pretrained(onnx.path)
    expected = [len(tokenizer(long_runs_split(text), add_special_tokens=False)["input_ids"]) for text in texts]

    assert onnx.backend == ONNX
    assert [onnx.count_tokens(text) for text in texts] == expected


def test_texts_run_longest_first_in_small_groups_of_similar_length():
    lengths = [12, RUN_TOKENS + 40, 12, 30, *[10] * (RUN_TEXTS + 3)]
    runs = runs_of_similar_length(lengths, batch_size=64)
    assert runs[0] == [1]  # longer than a run's tokens: alone
    assert sorted(i for run in runs for i in run) == list(range(len(lengths)))
    assert all(len(run) <= RUN_TEXTS and len(run) * lengths[run[0]] <= RUN_TOKENS for run in runs[1:])
    assert runs_of_similar_length([10] * 5, batch_size=2) == [[0, 1], [2, 3], [4]]


def test_auto_picks_onnx_when_the_checked_export_is_there(exported):
    model = embeddings.embedder()
    assert (model.backend, model.onnx_folder, model.backend_note) == (ONNX, exported, "")


def test_auto_falls_back_to_torch_without_an_export(no_export):
    model = embeddings.embedder()
    assert model.backend == TORCH
    assert model.backend_note == f"no ONNX export in {no_export} (made by `python -m memweb.onnx_export`)"


def test_auto_falls_back_to_torch_when_the_export_failed_its_check(no_export):
    no_export.mkdir()
    (no_export / CHECK_FILE).write_text(json.dumps({"passed": False, "reason": "min cosine 0.971 on 256 texts"}))
    model = embeddings.embedder()
    assert model.backend == TORCH
    assert model.backend_note == f"the ONNX export in {no_export} failed its check: min cosine 0.971 on 256 texts"


def test_a_failed_export_keeps_its_reason(no_export, tmp_path_factory):
    weights = tmp_path_factory.mktemp("weights-without-a-model")
    (weights / "config.json").write_text("{}")
    check = export_and_check(str(weights), no_export)
    assert not check["passed"] and check["reason"].startswith("the export failed: ")
    assert json.loads((no_export / CHECK_FILE).read_text())["reason"] == check["reason"]


def test_an_export_of_other_weights_or_runtime_is_out_of_date(exported, settings, tmp_path):
    check = json.loads((exported / CHECK_FILE).read_text())
    check["made_from"]["onnxruntime"] = "0.0.1"
    stale = tmp_path / MINILM
    stale.mkdir()
    for name in ("model.onnx", "tokenizer.json"):
        (stale / name).symlink_to(exported / name)
    (stale / CHECK_FILE).write_text(json.dumps(check))
    settings.ONNX_DIR = str(tmp_path)

    model = embeddings.embedder()
    assert model.backend == TORCH and "is out of date" in model.backend_note
    assert not export_is_current(model.path, stale) and export_is_current(model.path, exported)


def test_the_export_step_does_nothing_while_its_check_is_current(exported):
    written = (exported / CHECK_FILE).stat().st_mtime_ns
    assert main([]) == 0
    assert (exported / CHECK_FILE).stat().st_mtime_ns == written


def test_the_export_step_names_missing_weights_and_lets_the_install_go_on(no_export, settings, capsys, tmp_path):
    settings.EMBEDDING_MODEL_PATH = str(tmp_path / "no-weights")
    assert main([]) == 0
    assert capsys.readouterr().err == (f"memweb: no ONNX export: {MINILM} cannot be loaded: {tmp_path / 'no-weights'} "
                                       "lacks config.json, model.safetensors or pytorch_model.bin; its weights come "
                                       f"from {embeddings.MODELS[MINILM].weights}\n")
    assert not no_export.exists()


def test_onnx_refuses_clearly_without_an_export(no_export, settings):
    settings.EMBEDDING_BACKEND = "onnx"
    with pytest.raises(EmbeddingModelUnavailable) as error:
        embeddings.embedder()
    assert str(error.value) == (f"MEMWEB_EMBEDDING_BACKEND=onnx, but no ONNX export in {no_export} "
                                "(made by `python -m memweb.onnx_export`)")


def test_torch_is_used_when_asked_even_with_an_export(exported, settings):
    settings.EMBEDDING_BACKEND = "torch"
    model = embeddings.embedder()
    assert (model.backend, model.backend_note) == (TORCH, "MEMWEB_EMBEDDING_BACKEND=torch")


def test_a_process_embedding_with_onnx_never_imports_torch(exported):
    """Importing torch costs seconds per process start (web and worker processes, test runs)."""
    script = ("import django, sys; django.setup()\n"
              "from memweb.embeddings import cores_share, embedder\n"
              "cores_share(1); model = embedder(); model.embed(['a query']); model.count_tokens('a query')\n"
              "print(model.backend, 'torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300,
                            env=subprocess_env(DJANGO_SETTINGS_MODULE="memweb.settings",
                                               MEMWEB_ONNX_DIR=str(exported.parent)))
    assert result.stdout.split() == ["onnx", "False"], result.stderr[-2000:]


def test_a_worker_pool_process_loads_the_model_as_it_starts(exported, settings):
    settings.EMBEDDING_WARMUP = True
    loading = memweb_celery._load_the_embedding_model()
    loading.join()
    assert "_model" in vars(embeddings.embedder())


@pytest.mark.django_db
def test_the_health_page_names_the_onnx_backend(client, reviewer_user, exported):
    client.force_login(reviewer_user)
    page = client.get(reverse("health")).content.decode()
    assert "<dt>Runs on</dt><dd>ONNX Runtime" in page and "Not on ONNX Runtime" not in page


@pytest.mark.django_db
def test_the_health_page_says_why_minilm_runs_on_torch(client, reviewer_user, no_export):
    client.force_login(reviewer_user)
    page = client.get(reverse("health")).content.decode()
    assert "<dt>Runs on</dt><dd>torch (FlagEmbedding)</dd>" in page
    assert f"Not on ONNX Runtime: no ONNX export in {no_export}" in page


@pytest.mark.django_db
def test_the_health_page_shows_a_refused_backend_instead_of_failing(client, reviewer_user, no_export, settings):
    settings.EMBEDDING_BACKEND = "onnx"
    client.force_login(reviewer_user)
    page = client.get(reverse("health")).content.decode()
    assert '<span class="badge badge-failed">unavailable</span>' in page
    assert f"MEMWEB_EMBEDDING_BACKEND=onnx, but no ONNX export in {no_export}" in page


@pytest.mark.django_db
def test_the_api_health_details_name_the_backend(client, reviewer_user, exported):
    secret = ApiKey.issue(user=reviewer_user, name="monitor")[1]
    report = client.get("/api/health/details", headers={"X-API-Key": secret}).json()
    assert report["embedding"] == {"model": MINILM, "dimension": 384, "loaded": False, "backend": "onnx",
                                   "backend_note": "", "error": ""}

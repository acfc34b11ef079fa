"""Exports all-MiniLM-L6-v2 from the weights on disk to ONNX and checks it against the torch reference.

    python -m memweb.onnx_export [--force]

scripts/bootstrap.sh runs it after installing the requirements. It does nothing while the export in
MEMWEB_ONNX_DIR was made from the same weights and onnxruntime (its check.json says so), else it
exports (dynamic batch and sequence axes), compares the graph's vectors with those of the torch path
on real texts (lines of this repository's docs) and writes the comparison beside the graph. An export
whose vectors differ (cosine below MIN_COSINE for any text) is kept with its reason but never used:
memweb embeds with torch then, and /health says why. Nothing is downloaded. torch is imported only
when an export is due, so a current export costs bootstrap about a second.
"""
import argparse
import json
import os
import sys
import time
import warnings
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from django.conf import settings

from memweb.embeddings import MINILM, Embedder, EmbeddingModelUnavailable, model_weights_path
from memweb.onnx_encoder import (
    CHECK_FILE,
    GRAPH_FILE,
    MIN_COSINE,
    TOKENIZER_FILE,
    OnnxEncoder,
    export_folder,
    export_state,
    weights_fingerprint,
)

CHECK_TEXTS = 256
# Queries are embedded one at a time: the check runs this many texts alone, besides the batches.
CHECK_SINGLE_TEXTS = 16
MIN_LINE_CHARS = 20
OPSET = 17
GRAPH_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def reference_texts(count: int = CHECK_TEXTS) -> list[str]:
    """`count` distinct lines of this repository's docs, spread evenly over them: real prose, tables
    and commands, from a few words to long paragraphs."""
    lines: list[str] = []
    seen: set[str] = set()
    for path in sorted((Path(settings.BASE_DIR) / "docs").glob("*.md")):
        for line in path.read_text(encoding="utf-8").splitlines():
            text = line.strip()
            if len(text) >= MIN_LINE_CHARS and text not in seen:
                seen.add(text)
                lines.append(text)
    if len(lines) <= count:
        return lines
    step = len(lines) / count
    return [lines[int(i * step)] for i in range(count)]


def neighbour_overlap(vectors: np.ndarray, reference: np.ndarray, k: int = 5) -> float:
    """The mean share of each text's k nearest other texts under `reference` that `vectors` finds too."""
    def nearest(rows: np.ndarray) -> np.ndarray:
        scores = rows @ rows.T
        np.fill_diagonal(scores, -np.inf)
        return np.argsort(-scores, axis=1)[:, :k]
    found, expected = nearest(vectors), nearest(reference)
    return float(np.mean([len(set(a) & set(b)) / k for a, b in zip(found, expected)]))


def export_is_current(weights_folder: str, folder: Path) -> bool:
    """The check in `folder` was made from these weights and this onnxruntime (passed or not)."""
    try:
        check = json.loads((folder / CHECK_FILE).read_text())
    except (OSError, ValueError):
        return False
    return check.get("made_from") == weights_fingerprint(weights_folder)


def export_and_check(weights_folder: str, folder: Path) -> dict:
    """Exports into `folder`, checks the export and writes check.json (last, so a half-written export
    is never trusted). Returns the check."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / CHECK_FILE).unlink(missing_ok=True)
    started = time.monotonic()
    try:
        graph_write(weights_folder, folder)
        check = vectors_compare(weights_folder, folder)
    except Exception as error:  # a failed export is recorded with its reason; memweb then embeds with torch
        check = {"passed": False, "reason": f"the export failed: {error.__class__.__name__}: {error}"}
    check |= {"made_from": weights_fingerprint(weights_folder), "seconds": round(time.monotonic() - started, 1),
              "checked_at": datetime.now(UTC).isoformat(timespec="seconds")}
    temporary = folder / (CHECK_FILE + ".tmp")
    temporary.write_text(json.dumps(check, indent=2) + "\n")
    os.replace(temporary, folder / CHECK_FILE)
    return check


def graph_write(weights_folder: str, folder: Path) -> None:
    """The model's last hidden state as an ONNX graph with dynamic batch and sequence axes, and the
    tokenizer transformers builds for these weights (the ONNX path tokenises with it, without torch)."""
    import torch
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # bootstrap's output stays a few lines

    class LastHiddenState(torch.nn.Module):
        """The model taking its three inputs by position and returning one tensor, as the graph does."""

        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    tokenizer = AutoTokenizer.from_pretrained(weights_folder)
    # Eager attention: plain matrix products in the graph. The SDPA path traces a Python branch on the
    # inputs' shapes into a constant, and its graph ran slower in batches here.
    model = AutoModel.from_pretrained(weights_folder, attn_implementation="eager").eval()
    sample = tokenizer(["a sample text to trace the graph with", "another"], padding=True, return_tensors="pt")
    axes = {name: {0: "batch", 1: "sequence"} for name in (*GRAPH_INPUTS, "last_hidden_state")}
    with torch.inference_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on Python conditionals; the check judges the result
        torch.onnx.export(LastHiddenState(model), tuple(sample[name] for name in GRAPH_INPUTS),
                          str(folder / GRAPH_FILE), input_names=list(GRAPH_INPUTS),
                          output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=OPSET, dynamo=False)
    (folder / TOKENIZER_FILE).write_text(tokenizer.backend_tokenizer.to_str())


def vectors_compare(weights_folder: str, folder: Path) -> dict:
    """The export's vectors against the torch path's on real texts, in batches and one text at a time."""
    texts = reference_texts()
    if len(texts) < CHECK_SINGLE_TEXTS:
        return {"passed": False, "reason": f"only {len(texts)} texts to check with in docs/*.md"}
    reference = Embedder(model_name=MINILM, path=weights_folder, backend="torch").embed(texts)
    encoder = OnnxEncoder(folder, threads=os.cpu_count() or 1)
    batched = encoder.encode(texts, batch_size=settings.EMBEDDING_BATCH_SIZE)
    alone = np.concatenate([encoder.encode([text], batch_size=1) for text in texts[:CHECK_SINGLE_TEXTS]])
    cosines = np.concatenate([(batched * reference).sum(axis=1), (alone * reference[:CHECK_SINGLE_TEXTS]).sum(axis=1)])
    worst = float(cosines.min())
    passed = worst >= MIN_COSINE
    reason = "" if passed else (f"the ONNX vectors differ from torch's: min cosine {worst:.6f} "
                                f"on {len(texts)} texts, {MIN_COSINE} needed")
    return {"passed": passed, "reason": reason, "texts": len(texts), "min_cosine": round(worst, 7),
            "mean_cosine": round(float(cosines.mean()), 7), "top5_overlap": neighbour_overlap(batched, reference)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memweb.onnx_export", description=__doc__.split("\n\n")[0])
    parser.add_argument("--force", action="store_true", help="export and check again even when current")
    args = parser.parse_args(argv)
    if settings.EMBEDDING_MODEL != MINILM:
        print(f"memweb: no ONNX export for {settings.EMBEDDING_MODEL} (it embeds with FlagEmbedding)")
        return 0
    try:
        weights_folder = model_weights_path(MINILM)
    except EmbeddingModelUnavailable as error:  # memweb refuses to embed with the same message
        print(f"memweb: no ONNX export: {error}", file=sys.stderr)
        return 0
    folder = export_folder(MINILM)
    if not args.force and export_is_current(weights_folder, folder):
        return 0
    print(f"memweb: exporting {MINILM} to ONNX in {folder} and checking it against torch")
    check = export_and_check(weights_folder, folder)
    if check["passed"]:
        print(f"memweb: ONNX export checked: min cosine {check['min_cosine']} on {check['texts']} texts "
              f"({check['seconds']} s); memweb embeds with onnxruntime")
    else:
        print(f"memweb: {export_state(MINILM, weights_folder).reason}; memweb embeds with torch", file=sys.stderr)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memweb.settings")
    sys.exit(main())

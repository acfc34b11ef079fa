"""all-MiniLM-L6-v2 through ONNX Runtime: the same vectors as the torch reference, without torch.

`python -m memweb.onnx_export` (run by scripts/bootstrap.sh) writes three files into one folder per
model under MEMWEB_ONNX_DIR: the exported graph, the tokenizer that transformers uses for these
weights, and the result of comparing the graph's vectors with torch's on real texts. memweb/embeddings.py
runs the graph only while that comparison passed and still describes the weights and the runtime on
disk; this module reads those files and never imports torch (it costs seconds per process start).
"""
import json
import os
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np
from django.conf import settings

GRAPH_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
CHECK_FILE = "check.json"
# The export's check passes when every real text's vector is this close (cosine) to torch's.
MIN_COSINE = 0.9999
# Bumped when the export changes what it writes: older exports are then redone, not trusted.
EXPORT_FORMAT = 2
MAX_TOKENS = 512
# One run of the graph takes texts of similar length, padded, up to about RUN_TOKENS tokens in all and at
# most RUN_TEXTS texts: on CPU a large padded batch costs more per text than several small runs
# (docs/PERFORMANCE.md, "ONNX Runtime encoder"); a long text runs alone.
RUN_TOKENS = 256
RUN_TEXTS = 8
# onnxruntime's graph optimisation levels by the names the benchmark takes; memweb runs "all".
OPTIMIZATION_LEVELS = {"disabled": "DISABLE_ALL", "basic": "ENABLE_BASIC", "extended": "ENABLE_EXTENDED",
                       "all": "ENABLE_ALL"}
EXPORT_COMMAND = "python -m memweb.onnx_export"


def export_folder(model_name: str) -> Path:
    return Path(settings.ONNX_DIR) / model_name


def weights_fingerprint(weights_folder: str) -> dict:
    """What the export was made from: the weights folder's files (name, size, modification time) and
    the runtime that ran the check. Any change makes the export out of date."""
    folder = Path(weights_folder)
    files = {entry.name: [entry.stat().st_size, entry.stat().st_mtime_ns]
             for entry in sorted(folder.iterdir()) if entry.is_file()}
    return {"format": EXPORT_FORMAT, "weights": str(folder.resolve()), "files": files,
            "onnxruntime": _installed_version("onnxruntime")}


def _installed_version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return ""


@dataclass(frozen=True)
class ExportState:
    """Whether the export in `folder` may serve vectors; `reason` says why not."""
    folder: Path
    usable: bool
    reason: str
    check: dict


def export_state(model_name: str, weights_folder: str) -> ExportState:
    """Reads the export's check; cheap (no model is loaded)."""
    folder = export_folder(model_name)
    check_path = folder / CHECK_FILE
    if not check_path.is_file():
        return ExportState(folder, False, f"no ONNX export in {folder} (made by `{EXPORT_COMMAND}`)", {})
    try:
        check = json.loads(check_path.read_text())
    except (OSError, ValueError) as error:
        return ExportState(folder, False, f"the ONNX export's check {check_path} cannot be read: {error}", {})
    return ExportState(folder, *_check_verdict(check, folder, weights_folder), check)


def _check_verdict(check: dict, folder: Path, weights_folder: str) -> tuple[bool, str]:
    if not check.get("passed"):
        return False, f"the ONNX export in {folder} failed its check: {check.get('reason') or 'no reason recorded'}"
    missing = [name for name in (GRAPH_FILE, TOKENIZER_FILE) if not (folder / name).is_file()]
    if missing:
        return False, f"the ONNX export in {folder} lacks {', '.join(missing)} (redo it: `{EXPORT_COMMAND}`)"
    if check.get("made_from") != weights_fingerprint(weights_folder):
        return False, (f"the ONNX export in {folder} is out of date: the weights in {weights_folder} or onnxruntime "
                       f"changed since (redo it: `{EXPORT_COMMAND}`)")
    return True, ""


def threads_default() -> int:
    """Threads of one process's ONNX session: OMP_NUM_THREADS when the server set it (each web worker
    gets its share of the cores), else every core."""
    configured = os.environ.get("OMP_NUM_THREADS", "").strip()
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    return os.cpu_count() or 1


class OnnxEncoder:
    """One ONNX Runtime session and the model's fast tokenizer: tokenised as transformers does for the
    torch path (truncated at MAX_TOKENS, padded to the longest text of a run), mean-pooled over the
    attention mask and unit-normalised."""

    def __init__(self, folder: Path, *, threads: int, optimization: str = "all"):
        import onnxruntime
        from tokenizers import Tokenizer

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1  # one graph at a time: the operators' own threads do the work
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = getattr(onnxruntime.GraphOptimizationLevel,
                                                   f"ORT_{OPTIMIZATION_LEVELS[optimization]}")
        # Idle threads sleep instead of spinning: on a shared machine spinning takes cores from other processes.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(str(folder / GRAPH_FILE), options,
                                                    providers=["CPUExecutionProvider"])
        self._inputs = {entry.name for entry in self.session.get_inputs()}
        # Truncated as the torch path truncates; padded per run with the tokenizer's own padding token.
        self.tokenizer = Tokenizer.from_file(str(folder / TOKENIZER_FILE))
        self._pad_id = (self.tokenizer.padding or {}).get("pad_id", 0)
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()
        # Counting reads whole texts: no truncation, no padding.
        self.counting_tokenizer = Tokenizer.from_file(str(folder / TOKENIZER_FILE))
        self.counting_tokenizer.no_truncation()
        self.counting_tokenizer.no_padding()

    def count_tokens(self, text: str) -> int:
        return len(self.counting_tokenizer.encode(text, add_special_tokens=False).ids)

    def encode(self, texts: list[str], *, batch_size: int) -> np.ndarray:
        """Unit vectors in the order of `texts`. Texts are tokenised once, sorted by length and run in
        small groups of similar length (see RUN_TOKENS), at most `batch_size` at a time."""
        encodings = self.tokenizer.encode_batch(texts)
        runs = runs_of_similar_length([len(encoding.ids) for encoding in encodings], batch_size=batch_size)
        vectors = [self._run([encodings[i] for i in run]) for run in runs]
        rows = np.empty((len(texts), vectors[0].shape[1]), dtype=np.float32)
        for run, run_vectors in zip(runs, vectors):
            rows[run] = run_vectors
        return rows

    def _run(self, encodings: list) -> np.ndarray:
        """One pass of the graph over texts padded to the longest of them, as transformers pads."""
        longest = max(len(encoding.ids) for encoding in encodings)
        feed = {name: np.zeros((len(encodings), longest), dtype=np.int64) for name in self._inputs}
        feed["input_ids"][:] = self._pad_id
        for row, encoding in enumerate(encodings):
            length = len(encoding.ids)
            feed["input_ids"][row, :length] = encoding.ids
            feed["attention_mask"][row, :length] = encoding.attention_mask
            if "token_type_ids" in feed:
                feed["token_type_ids"][row, :length] = encoding.type_ids
        hidden = self.session.run(None, feed)[0]
        return mean_pooled(hidden, feed["attention_mask"])


def runs_of_similar_length(lengths: list[int], *, batch_size: int) -> list[list[int]]:
    """Indexes of the texts, longest first, cut into runs of at most RUN_TOKENS padded tokens (a run is
    as long as its first text), RUN_TEXTS texts and `batch_size` texts; a text over RUN_TOKENS runs alone."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    runs, start = [], 0
    while start < len(order):
        size = max(1, min(batch_size, RUN_TEXTS, RUN_TOKENS // max(1, lengths[order[start]])))
        runs.append(order[start:start + size])
        start += size
    return runs


def mean_pooled(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The mean of each text's token vectors over its attention mask, unit-normalised."""
    weights = mask[..., None].astype(np.float32)
    means = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    norms = np.linalg.norm(means, axis=1, keepdims=True)
    return means / np.where(norms == 0, 1, norms)

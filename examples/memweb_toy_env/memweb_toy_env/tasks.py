"""The five built-in tasks and the validator: structure, then the gold replay."""
from memweb_toy_env.library import TOOL_SCHEMAS, gold_replay, library_fresh, reward_compute, state_hash

_TOOL_NAMES = {schema["function"]["name"] for schema in TOOL_SCHEMAS}
INTENT_KINDS = ("availability", "place_hold")


def _task(number: int, member: tuple[str, str, str], intents: list[tuple[str, str]], *, lookups: list, actions: list,
          outputs: list, difficulty: str = "easy") -> dict:
    member_id, name, email = member
    return {"id": f"lib-{number:03d}", "domain": "library", "split": "test", "difficulty": difficulty,
            "error_kinds": ["wrong_arguments"] if actions else [], "customer_id": member_id,
            "persona": {"name": name, "emotion": "neutral", "patience": 3, "trust": "high"},
            "intents": [{"kind": kind, "slots": {"title": title}} for kind, title in intents],
            "known": {"email": email}, "unknown": [],
            "instructions": " Then ".join(f"Ask {'for a hold on' if k == 'place_hold' else 'whether there is a copy of'} "
                                          f"'{t}'." for k, t in intents),
            "gold_lookups": lookups, "gold_actions": actions,
            "required_outputs": [{"label": label, "value": value} for label, value in outputs]}


ADA, BEN = ("M1", "Ada Brook", "ada@example.org"), ("M2", "Ben Cole", "ben@example.org")


def _search(title: str) -> dict:
    return {"name": "search_books", "arguments": {"query": title}}


def _member(email: str) -> dict:
    return {"name": "find_member", "arguments": {"email": email}}


def _hold(member_id: str, book_id: str) -> dict:
    return {"name": "place_hold", "arguments": {"member_id": member_id, "book_id": book_id}}


def builtin_tasks() -> list[dict]:
    return [
        _task(1, ADA, [("availability", "Emma")], lookups=[_search("Emma")], actions=[],
              outputs=[("copies on the shelf", "2 copies")]),
        _task(2, ADA, [("place_hold", "Dune")], lookups=[_member(ADA[2]), _search("Dune")],
              actions=[_hold("M1", "B1")], outputs=[("hold number", "H1")]),
        _task(3, BEN, [("place_hold", "Beloved")], lookups=[_member(BEN[2]), _search("Beloved")],
              actions=[_hold("M2", "B4")], outputs=[("hold number", "H1")]),
        _task(4, BEN, [("availability", "Ulysses")], lookups=[_search("Ulysses")], actions=[],
              outputs=[("copies on the shelf", "1 copy")]),
        _task(5, BEN, [("availability", "Dune"), ("place_hold", "Dune")], lookups=[_member(BEN[2]), _search("Dune")],
              actions=[_hold("M2", "B1")], outputs=[("copies on the shelf", "no copy"), ("hold number", "H1")],
              difficulty="medium"),
    ]


_FIELDS = {"id": str, "domain": str, "split": str, "difficulty": str, "error_kinds": list, "customer_id": str,
           "persona": dict, "intents": list, "known": dict, "instructions": str, "gold_lookups": list,
           "gold_actions": list, "required_outputs": list}
_CHOICES = {"domain": ("library",), "split": ("train", "dev", "test"), "difficulty": ("easy", "medium", "hard")}


def spec_errors(raw: dict) -> tuple[dict | None, list[str]]:
    spec = {"unknown": [], **raw}
    problems = _structure_problems(spec)
    return (None, problems) if problems else (spec, _replay_problems(spec))


def _structure_problems(spec: dict) -> list[str]:
    problems = [f"{name}: Field required" if name not in spec else f"{name}: must be a {kind.__name__}"
                for name, kind in _FIELDS.items() if not isinstance(spec.get(name), kind)]
    problems += [f"{name}: must be one of {', '.join(values)}" for name, values in _CHOICES.items()
                 if isinstance(spec.get(name), str) and spec[name] not in values]
    if problems:
        return problems
    if spec["customer_id"] not in library_fresh()["members"]:
        problems.append(f"customer_id: no member {spec['customer_id']!r}")
    if not spec["intents"] or any(i.get("kind") not in INTENT_KINDS or "title" not in i.get("slots", {})
                                  for i in spec["intents"]):
        problems.append(f"intents: each needs a kind ({', '.join(INTENT_KINDS)}) and a title slot")
    problems += [f"{field}: unknown tool {call.get('name')!r}" for field in ("gold_lookups", "gold_actions")
                 for call in spec[field] if call.get("name") not in _TOOL_NAMES]
    return problems


def _replay_problems(spec: dict) -> list[str]:
    replay = gold_replay(spec)
    problems = [f"gold call fails on a fresh library: {failure}" for failure in replay.failures]
    if spec["gold_actions"] and state_hash(replay.state) == state_hash(library_fresh()):
        problems.append("the gold actions do not change the library")
    told = [" ".join(o["value"] for o in spec["required_outputs"])]
    calls = [{**call, "ok": True} for call in spec["gold_lookups"] + spec["gold_actions"]]
    if not reward_compute(task=spec, final_state=replay.state, calls=calls, replies=told).success:
        problems.append("the gold solution does not earn success")
    if reward_compute(task=spec, final_state=library_fresh(), calls=[], replies=[]).success:
        problems.append("an agent that does nothing would succeed")
    return problems

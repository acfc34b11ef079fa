"""How a JSON role hands its schema to the server, and what to try when the server refuses.

Django-free. Passing the schema to the server lets it constrain decoding, which small local
models need (measured against llama-cpp-python: 1-2 of 10 answers valid with the schema only in
the prompt, 10 of 10 with it passed to the server). Servers disagree on the form.
"""
from memweb.llm.config import JsonMode

FALLBACK = (JsonMode.JSON_SCHEMA, JsonMode.JSON_OBJECT_SCHEMA, JsonMode.OLLAMA_FORMAT, JsonMode.PROMPT_ONLY)
PROBE_TITLE = "memweb_capability_probe"
PROBE_VALUE = "memweb-probe-ok-2718"
# One allowed value no model would write by chance: an answer holding it proves enforcement.
PROBE_SCHEMA = {"title": PROBE_TITLE, "type": "object", "required": ["probe"],
                "properties": {"probe": {"type": "string", "enum": [PROBE_VALUE]}}}
_FORMAT_WORDS = ("response_format", "json_schema", "json_object", "schema", "format")
_REFUSING_STATUSES = (400, 422, 500, 501)


def structured_params(*, mode: str, name: str, schema: dict) -> dict:
    """The create() keywords that carry `schema` in `mode`'s form."""
    if mode == JsonMode.JSON_SCHEMA:
        return {"response_format": {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}}
    if mode == JsonMode.JSON_OBJECT_SCHEMA:
        return {"response_format": {"type": "json_object", "schema": schema}}
    if mode == JsonMode.OLLAMA_FORMAT:
        return {"extra_body": {"format": schema}}
    return {}


_GRAMMAR_UNFRIENDLY = ("maxLength", "maxItems")


def server_schema(schema):
    """`schema` without upper length bounds. Grammar-constrained servers expand a bound into one
    rule per character (llama.cpp gave up on a maxLength of 2000 and broke off every answer); the
    bounds stay in the prompt and pydantic still enforces them on the answer."""
    if isinstance(schema, dict):
        return {key: server_schema(value) for key, value in schema.items() if key not in _GRAMMAR_UNFRIENDLY}
    if isinstance(schema, list):
        return [server_schema(value) for value in schema]
    return schema


def next_mode(mode: str) -> str:
    return FALLBACK[min(FALLBACK.index(mode) + 1, len(FALLBACK) - 1)]


def refuses_format(status: int | None, message: str) -> bool:
    """A server's answer to a form it does not support. llama-cpp-python answers the json_schema
    form with a 500 carrying its validation error, so a 5xx naming the format counts too: retrying
    it as a transient failure would only repeat it."""
    lowered = message.lower()
    return status in _REFUSING_STATUSES and any(word in lowered for word in _FORMAT_WORDS)

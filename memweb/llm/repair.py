"""Turning a model's JSON answer into a schema instance, repairing the common slips locally.

Django-free so it can be tested on its own; the round trip to the model lives in client.py.
"""
import json
import re

from pydantic import BaseModel, ValidationError

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


class InvalidJSON(ValueError):
    """The answer could not be read as the schema; the message says why, naming fields."""


def repair_json_text(text: str) -> str:
    """Undo what chat models typically wrap around JSON: code fences, prose, trailing commas."""
    fenced = _FENCE.search(text)
    if fenced:
        text = fenced.group(1)
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        text = text[start : end + 1]
    # Applied only after a strict parse failed, so a ",}" inside a string value is an accepted risk.
    return _TRAILING_COMMA.sub(r"\1", text)


def describe_validation_error(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors(include_url=False):
        field = ".".join(str(part) for part in error["loc"]) or "(whole object)"
        parts.append(f"{field}: {error['msg']}")
    return "; ".join(parts)


def load_json(text: str) -> tuple[object, bool]:
    """Parse `text`, falling back to a local repair; returns (data, repaired)."""
    try:
        return json.loads(text), False
    except ValueError as strict_error:
        try:
            return json.loads(repair_json_text(text)), True
        except ValueError:
            # The strict parser's message points at the model's own text, not at our rewrite.
            raise InvalidJSON(f"not valid JSON ({strict_error})") from None


def parse_model(text: str | None, schema: type[BaseModel]) -> tuple[BaseModel, bool]:
    """Validate an answer against `schema`; returns (instance, repaired locally)."""
    data, repaired = load_json(text or "")
    try:
        return schema.model_validate(data), repaired
    except ValidationError as exc:
        raise InvalidJSON(describe_validation_error(exc)) from None

"""One shape for bad input, from the services to the API.

Services describe what is wrong as (field path, message) pairs: a dotted path such as
"transitions.1.reward" (the whole value when the path is empty) and a sentence for the person who
sent it. The API answers them as a 422 with `{"detail": [{"loc": [...], "msg": ...}]}`, the shape
django-ninja gives its own validation errors, so a client reads every 422 the same way; refusals
that are not about a field (404, 409, 403) answer `{"detail": "<sentence>"}`.

Every 422 the API sends passes through `validation_body` (memweb.api), so a route that refuses with a
sentence, a line-numbered list (an import) or a report of its own still answers that one shape: the
sentence becomes an entry located at the field it starts by naming ("customer_key: …"), else at the
body; each line an entry located at its line; a report's other fields stay beside `detail`.
"""
import re
from collections.abc import Callable, Mapping

import pydantic

Problem = tuple[str, str]


def problems_of(exc: pydantic.ValidationError, *, whole: str,
                message: Callable[[dict], str] | None = None) -> list[Problem]:
    """(dotted field path, message) for each error of `exc`; `whole` names an error of the whole value,
    and `message` may word an error better than pydantic's "msg"."""
    return [(".".join(str(part) for part in error["loc"]) or whole, message(error) if message else error["msg"])
            for error in exc.errors(include_url=False)]


def problems_text(problems: list[Problem]) -> str:
    return "; ".join(f"{field}: {message}" for field, message in problems)


def location(path: str, *, prefix: tuple = ("body",)) -> list:
    """"transitions[1].reward" -> [*prefix, "transitions", 1, "reward"], as django-ninja locates fields."""
    parts = [part for part in path.replace("[", ".").replace("]", "").split(".") if part]
    return [*prefix, *(int(part) if part.isdigit() else part for part in parts)]


def field_errors(problems: list[Problem], *, prefix: tuple = ("body",)) -> dict:
    """The body of a 422 naming each field."""
    return {"detail": [{"loc": location(path, prefix=prefix), "msg": message} for path, message in problems]}


WHOLE_BODY = ["body"]
# "customer_key: name the customer" - the services' way to name the field a sentence is about.
FIELD_SENTENCE = re.compile(r"^(?P<path>[A-Za-z_][\w.\[\]]*): \S")


def _sentence_entry(sentence: str) -> dict:
    """A sentence located at the field it names first (as the services word them), else at the body."""
    named = FIELD_SENTENCE.match(sentence)
    return {"loc": location(named["path"], prefix=("body", "payload")) if named else WHOLE_BODY, "msg": sentence}


def _entry(item) -> dict:
    if not isinstance(item, Mapping):
        return _sentence_entry(str(item))
    if "loc" in item and "msg" in item:
        return dict(item)
    extra = {key: value for key, value in item.items() if key not in ("loc", "msg", "reason")}
    loc = [*WHOLE_BODY, "line", item["line"]] if "line" in item else WHOLE_BODY
    return {"loc": item.get("loc", loc), "msg": str(item.get("msg") or item.get("reason") or ""), **extra}


def validation_body(data) -> dict:
    """A 422 answer's body in the one shape: `detail` a list of {"loc", "msg"} entries (an entry may carry
    more, e.g. an import's `line`), any other fields of the answer kept beside it."""
    if not isinstance(data, Mapping):
        return {"detail": [_entry(data)]}
    detail = data.get("detail", data.get("error") or "the request was refused")
    if isinstance(detail, list):
        entries = [_entry(item) for item in detail]
    elif isinstance(data.get("field"), str) and data["field"]:  # a refusal that names its field beside the sentence
        entries = [{"loc": location(data["field"], prefix=("body", "payload")), "msg": str(detail)}]
    else:
        entries = [_entry(detail)]
    return {**data, "detail": entries}

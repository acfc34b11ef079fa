"""One shape for bad input, from the services to the API.

Services describe what is wrong as (field path, message) pairs: a dotted path such as
"transitions.1.reward" (the whole value when the path is empty) and a sentence for the person who
sent it. The API answers them as a 422 with `{"detail": [{"loc": [...], "msg": ...}]}`, the shape
django-ninja gives its own validation errors, so a client reads every 422 the same way; refusals
that are not about a field (404, 409, 403) answer `{"detail": "<sentence>"}`.
"""
from collections.abc import Callable

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

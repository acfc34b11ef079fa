"""Compares memweb_client's routes, request TypedDicts and answer dataclasses with an OpenAPI document.
Each check returns the problems it found as sentences, so one test can list every drift at once."""
import dataclasses
import string
import typing
from collections.abc import Iterator
from typing import Any, Union

from memweb_client.routes import Route


def _resolve(document: dict, schema: dict) -> dict:
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _nullable(schema: dict) -> bool:
    return any(option.get("type") == "null" for option in schema.get("anyOf", ()))


def _non_null(document: dict, schema: dict) -> dict:
    """The schema a value has when it is not null: anyOf [X, null] read as X."""
    options = [option for option in schema.get("anyOf", ()) if option.get("type") != "null"]
    return _resolve(document, options[0] if len(options) == 1 else schema)


def _optional(hint: Any) -> bool:
    return typing.get_origin(hint) is Union and type(None) in typing.get_args(hint)


def _inner(hint: Any) -> Any:
    """X for Optional[X] and for list[X]; the hint itself otherwise."""
    if _optional(hint):
        hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
    if typing.get_origin(hint) is list:
        hint = typing.get_args(hint)[0]
    return hint


def _is_typed_dict(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, dict) and hasattr(hint, "__total__")


def _items_schema(document: dict, schema: dict) -> dict:
    schema = _non_null(document, schema)
    return _resolve(document, schema["items"]) if schema.get("type") == "array" else schema


def answer_problems(document: dict, kind: type, schema: dict, where: str) -> Iterator[str]:
    """A dataclass against an object schema: each field is a property, a field without a default is
    required, a nullable property is Optional, and nested dataclasses recurse."""
    properties, required = schema.get("properties", {}), set(schema.get("required", ()))
    hints = typing.get_type_hints(kind)
    for field in dataclasses.fields(kind):
        if field.name not in properties:
            yield f"{where}: {kind.__name__}.{field.name} is not in the schema's {sorted(properties)}"
            continue
        has_default = field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING
        if not has_default and field.name not in required:
            yield f"{where}: {kind.__name__}.{field.name} has no default but the schema may leave it out"
        if _nullable(properties[field.name]) and not _optional(hints[field.name]):
            yield f"{where}: {kind.__name__}.{field.name} can be null but is not Optional"
        inner = _inner(hints[field.name])
        if dataclasses.is_dataclass(inner):
            yield from answer_problems(document, inner, _items_schema(document, properties[field.name]),
                                       f"{where}.{field.name}")


def body_problems(document: dict, kind: type, schema: dict, where: str) -> Iterator[str]:
    """A request TypedDict against an object schema: every key is a property (the API refuses unknown
    fields), every required property a key, nested ones recursing. A new optional property is no drift:
    the client works without it until it offers it."""
    properties, required = schema.get("properties", {}), set(schema.get("required", ()))
    hints = typing.get_type_hints(kind)
    if set(hints) - set(properties):
        yield f"{where}: {kind.__name__} has {sorted(set(hints) - set(properties))}, which the schema lacks"
    if required - set(hints):
        yield f"{where}: {kind.__name__} lacks {sorted(required - set(hints))}, which the schema requires"
    for name in set(hints) & set(properties):
        inner = _inner(hints[name])
        if _is_typed_dict(inner):
            yield from body_problems(document, inner, _items_schema(document, properties[name]), f"{where}.{name}")


def _answer_schema(document: dict, operation: dict, status: int) -> dict:
    content = operation["responses"][str(status)].get("content", {})
    return content.get("application/json", {}).get("schema", {})


def route_problems(document: dict, route: Route) -> Iterator[str]:
    where = f"{route.method} {route.path}"
    operation = document["paths"].get(route.path, {}).get(route.method.lower())
    if operation is None:
        yield f"{where}: no such operation in the schema"
        return
    parameters = {(p["in"], p["name"]) for p in operation.get("parameters", ())}
    path_names = {name for place, name in parameters if place == "path"}
    wanted = {name for _, name, _, _ in string.Formatter().parse(route.path) if name}
    if wanted != path_names:
        yield f"{where}: path parameters {sorted(wanted)}, the schema's {sorted(path_names)}"
    for name in route.query:
        if ("query", name) not in parameters:
            yield f"{where}: query parameter {name!r} is not in the schema"
    yield from _request_problems(document, route, operation, where)
    for status, kind in route.answers.items():
        if str(status) not in operation["responses"]:
            yield f"{where}: the schema declares no {status} answer"
        elif kind is not None:
            schema = _items_schema(document, _answer_schema(document, operation, status))
            yield from answer_problems(document, _inner(kind), schema, f"{where} {status}")


def _request_problems(document: dict, route: Route, operation: dict, where: str) -> Iterator[str]:
    body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    if route.body is None and body is not None:
        yield f"{where}: the schema takes a JSON body the client never sends"
    elif route.body is not None and body is None:
        yield f"{where}: the client sends a JSON body the schema does not take"
    elif route.body is not None and _is_typed_dict(route.body):
        yield from body_problems(document, route.body, _resolve(document, body), f"{where} body")

"""Metadata filters on an Orb's `context`, and the bound on a context's size.

A filter is one node of this grammar (docs/RETRIEVAL_FILTERS.md):

    node      := condition | {"and": [node, ...]} | {"or": [node, ...]}
    condition := {"field": NAME, "eq": SCALAR}
               | {"field": NAME, "in": [SCALAR, ...]}
               | {"field": NAME, RANGE: NUMBER, ...}     RANGE one or more of gt, gte, lt, lte

NAME is a top-level key of the context; SCALAR a string, number or boolean. `eq` and `in` compare
by JSON value (1 equals 1.0, "1" does not); a range matches numbers only, so a string or a
boolean under that key never matches. A context without the key matches no condition on it.

The filter compiles to one SQL/JSON path predicate, `context @@ '<path>'`, in strict mode (no
unwrapping of arrays: `eq` never matches a list that merely contains the value). The GIN index on
`context` (jsonb_path_ops) answers its equality parts; the whole predicate sits in the WHERE of
the nearest-neighbour search, so top-k is taken among matching Orbs.

Filters and contexts are bounded so that neither a request nor a stored Orb can grow without limit:
a context is returned with every hit and embedded with its Orb.
"""
import json
import math

from django.conf import settings
from django.db.models import Lookup

from orbs.errors import OrbsError

FILTER_MAX_BYTES = 4096  # the filter as compact JSON
FILTER_MAX_DEPTH = 4  # nested and/or levels, the outermost counting as one
FILTER_MAX_CONDITIONS = 32
FILTER_MAX_IN_VALUES = 100
FIELD_NAME_MAX_CHARS = 64
RANGE_OPERATORS = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
VALUE_OPERATORS = ("eq", "in")
GROUP_OPERATORS = {"and": "&&", "or": "||"}


class InvalidFilter(OrbsError):
    """A filter outside the grammar or its bounds; the message starts with the offending part's path."""

    def __init__(self, path: str, reason: str):
        self.path = path
        super().__init__(f"{path}: {reason}")


def compact_json_bytes(value) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def context_size_problem(context) -> str | None:
    """Why this context may not be stored (too large), or None when it may."""
    limit = settings.ORBS_CONTEXT_MAX_BYTES
    size = compact_json_bytes(context)
    if size > limit:
        return (f"the context is {size} bytes as JSON, over the limit of {limit}: keep metadata short "
                "(ids, labels, numbers) and leave documents out")
    return None


def _literal(value, path: str) -> str:
    """A scalar as a jsonpath literal: JSON's spelling, which jsonpath reads the same way."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise InvalidFilter(path, "must be a finite number")
        return json.dumps(value)
    if isinstance(value, str):
        if "\x00" in value:
            raise InvalidFilter(path, "holds a NUL character, which no stored context can hold")
        return json.dumps(value)
    raise InvalidFilter(path, f"must be a string, number or boolean, not {type(value).__name__}")


def _number(value, path: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidFilter(path, "a range bound must be a number")
    return _literal(value, path)


def _field_accessor(condition: dict, path: str) -> str:
    name = condition.get("field")
    if not isinstance(name, str) or not name:
        raise InvalidFilter(f"{path}.field", "name the context key to compare (a non-empty string)")
    if len(name) > FIELD_NAME_MAX_CHARS or "\x00" in name:
        raise InvalidFilter(f"{path}.field", f"a context key of at most {FIELD_NAME_MAX_CHARS} characters, no NUL")
    return f"$.{json.dumps(name)}"


def _condition(condition: dict, path: str) -> str:
    accessor = _field_accessor(condition, path)
    operators = [key for key in condition if key != "field"]
    unknown = [key for key in operators if key not in VALUE_OPERATORS and key not in RANGE_OPERATORS]
    if unknown:
        raise InvalidFilter(f"{path}.{unknown[0]}", "unknown operator; use eq, in, gt, gte, lt or lte "
                                                     "(and/or only group conditions)")
    if not operators:
        raise InvalidFilter(path, "give an operator: eq, in, gt, gte, lt or lte")
    value_operators = [key for key in operators if key in VALUE_OPERATORS]
    if value_operators and len(operators) > 1:
        raise InvalidFilter(path, f"{value_operators[0]} stands alone in its condition; combine conditions with and")
    if "eq" in condition:
        return f"{accessor} == {_literal(condition['eq'], f'{path}.eq')}"
    if "in" in condition:
        return _membership(accessor, condition["in"], f"{path}.in")
    bounds = [f"{accessor} {RANGE_OPERATORS[key]} {_number(condition[key], f'{path}.{key}')}" for key in operators]
    return " && ".join(bounds)


def _membership(accessor: str, values, path: str) -> str:
    if not isinstance(values, list) or not values:
        raise InvalidFilter(path, "must be a non-empty list of values")
    if len(values) > FILTER_MAX_IN_VALUES:
        raise InvalidFilter(path, f"{len(values)} values, over the limit of {FILTER_MAX_IN_VALUES}")
    return " || ".join(f"{accessor} == {_literal(value, f'{path}.{i}')}" for i, value in enumerate(values))


class _Compiler:
    """Walks the filter once, counting conditions, and writes the jsonpath predicate."""

    def __init__(self):
        self.conditions = 0

    def node(self, node, path: str, depth: int) -> str:
        if not isinstance(node, dict):
            raise InvalidFilter(path, "must be an object: a condition or {\"and\": [...]} / {\"or\": [...]}")
        groups = [key for key in node if key in GROUP_OPERATORS]
        if groups:
            return self.group(node, groups[0], path, depth)
        self.conditions += 1
        if self.conditions > FILTER_MAX_CONDITIONS:
            raise InvalidFilter(path, f"more than {FILTER_MAX_CONDITIONS} conditions in one filter")
        return f"({_condition(node, path)})"

    def group(self, node: dict, operator: str, path: str, depth: int) -> str:
        if len(node) != 1:
            raise InvalidFilter(path, f"an {operator} group has no other keys")
        if depth > FILTER_MAX_DEPTH:
            raise InvalidFilter(path, f"and/or nested more than {FILTER_MAX_DEPTH} levels deep")
        members = node[operator]
        if not isinstance(members, list) or not members:
            raise InvalidFilter(f"{path}.{operator}", "must be a non-empty list of conditions or groups")
        parts = [self.node(member, f"{path}.{operator}.{i}", depth + 1) for i, member in enumerate(members)]
        return "(" + f" {GROUP_OPERATORS[operator]} ".join(parts) + ")"


def context_filter_path(raw: dict, *, field: str = "filter") -> str:
    """The filter as a strict jsonpath predicate for `context @@ path`; InvalidFilter naming the part
    (e.g. "filter.and.1.gte") when it is outside the grammar or its bounds."""
    size = compact_json_bytes(raw)
    if size > FILTER_MAX_BYTES:
        raise InvalidFilter(field, f"{size} bytes as JSON, over the limit of {FILTER_MAX_BYTES}")
    return "strict " + _Compiler().node(raw, field, depth=1)


class ContextMatches(Lookup):
    """`<jsonb column> @@ <jsonpath>`: the row's JSON satisfies the predicate (a GIN-indexable operator).
    Used as an expression: `queryset.filter(ContextMatches(F("context"), path))`."""

    lookup_name = "context_matches"
    prepare_rhs = False  # the jsonpath text goes to the database as it is, not as a JSON value

    def as_sql(self, compiler, connection):
        lhs, lhs_params = self.process_lhs(compiler, connection)
        rhs, rhs_params = self.process_rhs(compiler, connection)
        return f"{lhs} @@ ({rhs})::jsonpath", [*lhs_params, *rhs_params]

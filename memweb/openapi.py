"""The error answers every operation can give, declared in the OpenAPI document so that what a
code generator or a test tool reads is what the API does: django-ninja declares only the answers an
operation lists itself, while authentication, the body parser and the URL resolver add others.
django-ninja keys an operation's answers by int status; so does this module."""
from memweb.idempotency import HEADER as IDEMPOTENCY_HEADER
from memweb.idempotency import WRITE_METHODS

ERROR_DETAIL = {
    "title": "ErrorDetail", "type": "object", "required": ["detail"],
    "properties": {"detail": {"type": "string", "description": "What went wrong, in a sentence."}},
}
VALIDATION_ERRORS = {
    "title": "ValidationErrors", "type": "object", "required": ["detail"],
    "properties": {"detail": {"type": "array", "description": "One entry per refused field.", "items": {
        "type": "object", "required": ["loc", "msg"],
        "properties": {"loc": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                               "description": "Where the field is, e.g. [\"body\", \"payload\", \"k\"]."},
                       "msg": {"type": "string"}, "type": {"type": "string"}}}}},
}
IDEMPOTENCY_KEY_PARAMETER = {
    "in": "header", "name": IDEMPOTENCY_HEADER, "required": False,
    "description": "Makes a retry safe: a repeat with the same key and request is answered with the first "
                   "answer (header `Idempotent-Replayed: true`) and writes nothing. The same key with another "
                   "request is a 422; keys are kept a day (MEMWEB_IDEMPOTENCY_TTL_SECONDS).",
    "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[!-~]+$"},
}
_REF = {"ErrorDetail": "#/components/schemas/ErrorDetail", "ValidationErrors": "#/components/schemas/ValidationErrors"}


def _answer(description: str, schema: dict) -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors_of(path: str, operation: dict, *, body_limit_kb: int) -> dict[int, str]:
    errors = {}
    if operation.get("security"):
        errors |= {401: "No credentials, or an invalid or revoked API key",
                   403: "The key's user lacks the role this operation needs",
                   429: "Too many failed attempts from this address; the Retry-After header says when to retry"}
    if "requestBody" in operation:
        errors |= {400: "The body is not valid JSON",
                   413: f"The body is larger than {body_limit_kb} KB"}
    if "{" in path:
        errors[404] = "Nothing with this id or slug"
    return errors


def _also_answers(responses: dict, status: int, description: str, schema: dict) -> None:
    """Declare `schema` for `status`; where the operation declares an answer of its own shape for
    that status, it answers one or the other."""
    declared = responses.get(status)
    if declared is None:
        responses[status] = _answer(description, schema)
        return
    own = declared["content"]["application/json"]["schema"]
    if own != schema:
        declared["content"]["application/json"]["schema"] = {"anyOf": [schema, own]}


def _properties(schema: dict, components: dict) -> dict:
    """The properties an object schema (a $ref into `components`, or anyOf such) declares."""
    if "$ref" in schema:
        return _properties(components.get(schema["$ref"].rsplit("/", 1)[-1], {}), components)
    found = dict(schema.get("properties", {}))
    for option in schema.get("anyOf", []):
        found |= _properties(option, components)
    return found


def _validation_answer(responses: dict, components: dict) -> None:
    """Every 422 is a list of refused fields (memweb.errors.validation_body makes it so at run time). An
    operation whose own 422 carries more (an import's report, a failed reflection) keeps those fields,
    optional, beside `detail`."""
    declared = responses.get(422)
    description = declared["description"] if declared else "A field is missing, of the wrong type, or out of range"
    schema = {"$ref": _REF["ValidationErrors"]}
    if declared:
        own = declared["content"]["application/json"]["schema"]
        extra = {name: value for name, value in _properties(own, components).items() if name != "detail"}
        if extra:
            schema = {"allOf": [schema, {"type": "object", "properties": extra}]}
    responses[422] = _answer(description, schema)


def _idempotency_declare(operation: dict) -> None:
    """The optional Idempotency-Key header of every write (memweb.idempotency), and its 409."""
    operation.setdefault("parameters", []).append(IDEMPOTENCY_KEY_PARAMETER)
    _also_answers(operation["responses"], 409, "A request with this Idempotency-Key is still in progress; "
                  "the Retry-After header says when to retry", {"$ref": _REF["ErrorDetail"]})


def errors_declare(schema: dict, *, body_limit_kb: int) -> dict:
    """Add the undeclared error answers (each `{"detail": ...}`) to every operation of `schema`."""
    schema.setdefault("components", {}).setdefault("schemas", {}).update(
        ErrorDetail=ERROR_DETAIL, ValidationErrors=VALIDATION_ERRORS)
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            if method.upper() in WRITE_METHODS:
                _idempotency_declare(operation)
            responses = operation["responses"]
            for status, description in _errors_of(path, operation, body_limit_kb=body_limit_kb).items():
                responses.setdefault(status, _answer(description, {"$ref": _REF["ErrorDetail"]}))
            if "requestBody" in operation or operation.get("parameters") or 422 in responses:
                _validation_answer(responses, schema["components"]["schemas"])
    return schema

"""The MCP server's way into memweb's API, in-process, against a stand-in ASGI application: what it
sends (the caller's key and address) and how a refusal reads to an agent."""
import json

import pytest

from memweb.mcp.gateway import ApiRefused, MemwebApi, bearer
from tests.support.event_loop import run_to_end


def asgi_answering(status: int, body: dict, seen: list):
    async def app(scope, receive, send):
        seen.append(scope)
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": json.dumps(body).encode()})

    return app


def test_a_call_carries_the_callers_key_and_address():
    seen = []
    api = MemwebApi(base_url="https://localhost", app=asgi_answering(200, {"ok": True}, seen))
    answer = run_to_end(api.call("POST", "/orbs/banks/shop/retrieve", credentials=bearer("mw_secret"), json={"query": "q"},
                                  client_address="203.0.113.9"))
    headers = dict(seen[0]["headers"])
    assert answer == {"ok": True}
    assert (seen[0]["path"], seen[0]["client"][0]) == ("/api/orbs/banks/shop/retrieve", "203.0.113.9")
    assert headers[b"authorization"] == b"Bearer mw_secret"


def test_a_refusal_reads_as_the_apis_own_words_naming_each_field():
    problems = {"detail": [{"loc": ["body", "payload", "query"], "msg": "String should have at least 1 character"},
                           {"loc": ["body", "payload", "k"], "msg": "Input should be less than or equal to 50"}]}
    api = MemwebApi(base_url="https://localhost", app=asgi_answering(422, problems, []))
    with pytest.raises(ApiRefused) as refused:
        run_to_end(api.call("POST", "/orbs/banks/shop/retrieve", credentials=bearer("k")))
    assert refused.value.status == 422
    assert str(refused.value) == ("memweb refused the call (422): query: String should have at least 1 character; "
                                  "k: Input should be less than or equal to 50")

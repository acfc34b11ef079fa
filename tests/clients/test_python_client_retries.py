"""What memweb_client retries and what it raises, against scripted answers (httpx.MockTransport):
the answers a healthy memweb rarely gives (429, 503, an Idempotency-Key still in progress). Which
route answers a stale 409 is the server's business (today only reviewers' session routes); any
write stands in for one here, since the client tells the kinds apart by the answer alone."""

import uuid

import httpx
import pytest
from memweb_client import (
    AsyncClient,
    Client,
    Conflict,
    MemwebConnectionError,
    NotFound,
    RateLimited,
    RequestInProgress,
    RetryPolicy,
    ServerError,
    StaleVersion,
    ValidationFailed,
)

from tests.support.event_loop import run_to_end

FAST = RetryPolicy(max_retries=3, backoff=0.001, max_wait=5)
ORB_409_STALE = (409, {}, {"detail": "Orb #4 changed", "orb_id": 4, "current_version": 3, "current_status": "approved"})
IN_PROGRESS = (409, {"Retry-After": "0"}, {"detail": "A request with Idempotency-Key 'k' is still in progress"})
RECORDED = (200, {}, {"detail": "recorded"})


class Script:
    """Answers each request with the next (status, headers, body), the last one for ever after."""

    def __init__(self, *answers):
        self.answers, self.requests = list(answers), []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        status, headers, body = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(body, Exception):
            raise body
        return httpx.Response(status, headers=headers, json=body)


def sync_client(script: Script, retry: RetryPolicy = FAST) -> Client:
    return Client("http://memweb.test", "key", retry=retry, transport=httpx.MockTransport(script))


def test_an_in_progress_409_is_retried_with_the_same_idempotency_key_until_answered():
    script = Script(IN_PROGRESS, IN_PROGRESS, RECORDED)
    assert sync_client(script).retrieval_outcome(7, success=True) is None
    keys = {request.headers["Idempotency-Key"] for request in script.requests}
    assert len(script.requests) == 3 and len(keys) == 1


def test_a_request_still_in_progress_after_every_retry_raises_request_in_progress():
    script = Script(IN_PROGRESS)
    with pytest.raises(RequestInProgress) as raised:
        sync_client(script, RetryPolicy(max_retries=2, backoff=0.001)).retrieval_outcome(7, success=True)
    assert len(script.requests) == 3 and raised.value.status == 409
    assert not isinstance(raised.value, StaleVersion)


def test_a_stale_version_is_its_own_error_and_is_not_retried():
    script = Script(ORB_409_STALE)
    with pytest.raises(StaleVersion) as raised:
        sync_client(script).remember("support", "Offer a return label at once.")
    assert len(script.requests) == 1 and raised.value.current_version == 3
    assert not isinstance(raised.value, RequestInProgress)


def test_a_dmrm_stale_version_said_in_words_is_a_stale_version_too():
    words = "experience #9 was changed after you loaded it (you saw version 1, it is now version 2, approved)"
    with pytest.raises(StaleVersion):
        sync_client(Script((409, {}, {"detail": words}))).transitions("support", [])


def test_a_409_of_the_object_s_state_is_a_plain_conflict():
    with pytest.raises(Conflict) as raised:
        sync_client(Script((409, {}, {"detail": "The bank 'support' is deleted"}))).retrieve("support", "hi")
    assert type(raised.value) is Conflict


@pytest.mark.parametrize("status", [429, 503])
def test_what_the_server_asks_to_retry_is_retried(status):
    script = Script((status, {"Retry-After": "0"}, {"detail": "later"}), RECORDED)
    sync_client(script).retrieval_outcome(7, success=False, reward=0.0)
    assert len(script.requests) == 2
    assert script.requests[0].headers["Idempotency-Key"] == script.requests[1].headers["Idempotency-Key"]


def test_the_wait_before_a_retry_is_the_retry_after_the_server_asked_for():
    asked = httpx.Response(429, headers={"Retry-After": "2"}, json={"detail": "slow down"})
    assert RetryPolicy(backoff=0.001, max_wait=5).wait_before_retry(0, asked) == 2


def test_each_write_gets_its_own_random_idempotency_key():
    script = Script(RECORDED)
    client = sync_client(script)
    client.retrieval_outcome(7, success=True)
    client.retrieval_outcome(7, success=True)
    keys = [request.headers["Idempotency-Key"] for request in script.requests]
    assert len(set(keys)) == 2 and all(uuid.UUID(key).version == 4 for key in keys)


def test_retries_are_bounded_and_the_last_answer_raised():
    script = Script((503, {}, {"detail": "down"}))
    with pytest.raises(ServerError):
        sync_client(script, RetryPolicy(max_retries=2, backoff=0.001)).me()
    assert len(script.requests) == 3


def test_a_retry_after_longer_than_the_client_will_wait_is_raised_at_once():
    script = Script((429, {"Retry-After": "300"}, {"detail": "blocked"}))
    with pytest.raises(RateLimited) as raised:
        sync_client(script, RetryPolicy(max_wait=10)).me()
    assert len(script.requests) == 1 and raised.value.retry_after == 300


def test_a_404_and_a_422_are_not_retried_and_name_the_problem():
    refused = {"detail": [{"loc": ["body", "payload", "k"], "msg": "must be at least 1"}]}
    script = Script((404, {}, {"detail": "No memory bank 'nope'"}), (422, {}, refused))
    client = sync_client(script)
    with pytest.raises(NotFound) as missing:
        client.retrieve("nope", "hi")
    with pytest.raises(ValidationFailed) as invalid:
        client.retrieve("support", "hi", k=0)
    assert missing.value.detail == "No memory bank 'nope'"
    assert [problem.loc for problem in invalid.value.problems] == [("body", "payload", "k")]
    assert len(script.requests) == 2


def test_a_connection_error_is_retried_then_raised():
    script = Script((0, {}, httpx.ConnectError("refused")))
    with pytest.raises(MemwebConnectionError):
        sync_client(script, RetryPolicy(max_retries=1, backoff=0.001)).me()
    assert len(script.requests) == 2


def test_the_async_client_retries_and_raises_the_same_way():
    script = Script(IN_PROGRESS, (200, {}, {"username": "agent", "roles": ["operator"]}))

    async def ask():
        async with AsyncClient("http://memweb.test", "key", retry=FAST,
                               transport=httpx.MockTransport(script)) as client:
            me = await client.me()
            script.answers = [ORB_409_STALE]
            with pytest.raises(StaleVersion):
                await client.remember("support", "Offer a return label at once.")
            return me

    assert run_to_end(ask()).roles == ["operator"]


def test_reads_send_no_idempotency_key_and_only_the_query_given():
    script = Script((200, {}, {"items": [], "count": 0}))
    sync_client(script).orbs(bank="support", status="pending")
    request = script.requests[0]
    assert "Idempotency-Key" not in request.headers
    assert dict(request.url.params) == {"bank": "support", "status": "pending", "page": "1"}

"""Idempotency-Key: a retried API write changes nothing and gets the first answer back."""
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import close_old_connections, connection, connections
from django.http import JsonResponse
from django.test import Client
from django.urls import path
from django.utils import timezone
from ninja import NinjaAPI

from memweb.api import api
from memweb.auth import api_auth
from memweb.idempotency import HEADER
from memweb.models import ApiKey, AuthFailure, IdempotentRequest, Job
from orbs.dmrm.models import Experience
from orbs.models import EpisodeRecord, MemoryBank, Orb
from orbs.schemas import TrajectoryIn
from orbs.services import episode_submit
from orbs.vocabulary import OrbsScope
from tests.orbs.conftest import make_orb, success_trajectory, trajectory  # noqa: F401  (make_orb: fixture)
from tests.orbs.dmrm.conftest import bank, dmrm  # noqa: F401  (fixtures)

EPISODES = "/api/orbs/banks/{slug}/episodes"

# This module doubles as a URLconf (pytest.mark.urls) with probe routes: one fails once, then succeeds;
# one writes an episode, then fails once; one waits until the test lets it finish.
probe_api = NinjaAPI(urls_namespace="idempotency-probe", docs_url=None, openapi_url=None)
probe_runs = []
slow_started, slow_release = threading.Event(), threading.Event()
WAIT = 120  # seconds: generous, for a busy machine; the tests wait on events, never on a clock


@probe_api.post("/flaky", auth=api_auth())
def flaky(request):
    probe_runs.append(request.body)
    if len(probe_runs) == 1:
        raise RuntimeError("the first attempt meets a server fault")
    return JsonResponse({"run": len(probe_runs)}, status=201)


@probe_api.post("/writes-then-fails", auth=api_auth())
def writes_then_fails(request):
    probe_runs.append(request.body)
    record = episode_submit(bank=MemoryBank.objects.get(), trajectory=TrajectoryIn.model_validate(trajectory()),
                            queue=False)
    if len(probe_runs) == 1:
        raise RuntimeError("the first attempt fails after its write")
    return JsonResponse({"ingest_id": record.pk}, status=201)


@probe_api.post("/slow", auth=api_auth())
def slow(request):
    slow_started.set()
    assert slow_release.wait(WAIT)
    return JsonResponse({"finished": True}, status=201)


urlpatterns = [path("api/probe/", probe_api.urls)]


def _secret_of(user) -> str:
    return ApiKey.issue(user=user, name="agent")[1]


@pytest.fixture
def secret(operator_user):
    return _secret_of(operator_user)


def post(client, url, payload, *, secret=None, key=None, **extra):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {secret}"} if secret else {}
    if key is not None:
        headers["HTTP_IDEMPOTENCY_KEY"] = key
    return client.post(url, json.dumps(payload), content_type="application/json", **headers, **extra)


def test_a_retried_episode_is_stored_once_and_answered_as_the_first_time(client, bank, secret):
    """Old code reflected the retry again and answered 200 'not created', which reads as another write."""
    url = EPISODES.format(slug=bank.slug) + "?sync=true"
    episode = {"trajectory": trajectory()}
    first = post(client, url, episode, secret=secret, key="episode-1")
    again = post(client, url, episode, secret=secret, key="episode-1")
    assert first.status_code == 201, first.content
    assert (again.status_code, again.json()) == (201, first.json())
    assert again["Idempotent-Replayed"] == "true" and not first.has_header("Idempotent-Replayed")
    assert EpisodeRecord.objects.count() == 1 and Orb.objects.count() == 1


def test_a_replay_carries_the_first_answers_location(client, bank, secret):
    url = EPISODES.format(slug=bank.slug)
    episode = {"trajectory": trajectory()}
    first = post(client, url, episode, secret=secret, key="queued")
    again = post(client, url, episode, secret=secret, key="queued")
    assert first.status_code == again.status_code == 202
    assert again["Location"] == first["Location"] == first.json()["status_url"]
    assert EpisodeRecord.objects.count() == 1


def test_a_replayed_transition_batch_moves_no_q_value(client, dmrm, secret):
    url = f"/api/orbs/experiences/banks/{dmrm.bank.slug}/transitions"
    batch = {"transitions": [{"trajectory_id": "t1", "step": 0, "goal": "return the jacket", "observation": "s0",
                              "action": "a0", "reward": 1.0, "next_observation": "s1", "done": True,
                              "success": True}]}
    first = post(client, url, batch, secret=secret, key="batch-1")
    learned = list(Experience.objects.values_list("q_value", "visits"))
    again = post(client, url, batch, secret=secret, key="batch-1")
    assert first.status_code == 201, first.content
    assert (again.status_code, again.json(), again["Idempotent-Replayed"]) == (201, first.json(), "true")
    assert list(Experience.objects.values_list("q_value", "visits")) == learned


@pytest.mark.parametrize("body_limit", [None, 1000], ids=["small upload", "upload over the body limit"])
def test_a_retried_upload_imports_once(client, bank, make_orb, operator_user, settings, body_limit,
                                       django_capture_on_commit_callbacks):
    """Django reads an upload over DATA_UPLOAD_MAX_MEMORY_SIZE only through its multipart parser. The
    import is a background job (run eagerly here): a retry gets the same job back, with its Location."""
    make_orb("The blender is too loud.")
    client.force_login(operator_user)
    exported = b"".join(client.get(f"/api/orbs/banks/{bank.slug}/export").streaming_content)
    if body_limit:
        settings.DATA_UPLOAD_MAX_MEMORY_SIZE = body_limit
        assert len(exported) > body_limit

    def upload(content: bytes):
        return client.post("/api/orbs/banks/import", {"file": SimpleUploadedFile("bank.jsonl", content), "name": "Copy"},
                           HTTP_IDEMPOTENCY_KEY="import-1")

    with django_capture_on_commit_callbacks(execute=True):
        first, again = upload(exported), upload(exported)
    assert first.status_code == 202, first.content
    assert (again.status_code, again.json(), again["Idempotent-Replayed"]) == (202, first.json(), "true")
    assert again["Location"] == first["Location"]
    assert upload(exported + b"\n").status_code == 422  # another file under the same key
    assert MemoryBank.objects.filter(name="Copy").count() == 1 and Job.objects.count() == 1


def test_a_json_body_labelled_multipart_is_answered_as_without_a_key(client, bank, secret):
    """Old code parsed such a body as an upload, and Django answered an HTML 400 for the boundary."""
    url = f"/api/orbs/banks/{bank.slug}/retrieve"
    answers = [client.post(url, json.dumps({"query": "parcel"}), content_type="multipart/form-data",
                           HTTP_AUTHORIZATION=f"Bearer {secret}", **key) for key in ({}, {"HTTP_IDEMPOTENCY_KEY": "k"})]
    assert answers[1].status_code == answers[0].status_code == 200
    assert answers[1].json()["hits"] == answers[0].json()["hits"]


@pytest.mark.parametrize("change", ["body", "query"])
def test_a_key_reused_for_another_request_is_refused(client, bank, secret, change):
    url = EPISODES.format(slug=bank.slug) + "?sync=true"
    episode = {"trajectory": trajectory()}
    post(client, url, episode, secret=secret, key="once")
    if change == "body":
        response = post(client, url, {"trajectory": trajectory()}, secret=secret, key="once")
    else:
        response = post(client, EPISODES.format(slug=bank.slug), episode, secret=secret, key="once")
    assert response.status_code == 422
    [problem] = response.json()["detail"]
    assert problem["loc"] == ["header", HEADER]
    assert problem["msg"].startswith(f"{HEADER} 'once' was used with a different request (first POST {url}")
    assert EpisodeRecord.objects.count() == 1


def test_users_have_their_own_keys(client, bank, user_for_role):
    url = EPISODES.format(slug=bank.slug) + "?sync=true"
    answers = [post(client, url, {"trajectory": success_trajectory(text)}, secret=_secret_of(user_for_role("operator")),
                    key="same-key")
               for text in ("My kettle broke.", "Where is my parcel?")]
    assert [answer.status_code for answer in answers] == [201, 201]
    assert not any(answer.has_header("Idempotent-Replayed") for answer in answers)
    assert Orb.objects.count() == 2


def test_a_signed_in_users_retry_is_replayed_too(client, bank, operator_user):
    client.force_login(operator_user)
    url = EPISODES.format(slug=bank.slug) + "?sync=true"
    episode = {"trajectory": trajectory()}
    first = post(client, url, episode, key="from-the-browser")
    again = post(client, url, episode, key="from-the-browser")
    assert (again.json(), again["Idempotent-Replayed"]) == (first.json(), "true")
    assert IdempotentRequest.objects.get().user == operator_user


def test_a_request_without_valid_credentials_gets_the_routes_401_and_leaves_no_key(client, bank, settings):
    settings.MEMWEB_AUTH_MAX_FAILURES = 2
    url = EPISODES.format(slug=bank.slug)
    assert post(client, url, {"trajectory": trajectory()}, key="anonymous").status_code == 401
    assert post(client, url, {"trajectory": trajectory()}, secret="mw_wrong", key="bad-key").status_code == 401
    # The route counted the bad key once (its address's counter); a second count would have reached the limit of 2.
    assert list(AuthFailure.objects.filter(scope="api", kind="address").values_list("count", flat=True)) == [1]
    assert not IdempotentRequest.objects.exists() and not EpisodeRecord.objects.exists()


@pytest.mark.parametrize("key", ["", "has space", "é", "k" * 256])
def test_a_malformed_key_is_refused_naming_the_header(client, bank, secret, key):
    response = post(client, EPISODES.format(slug=bank.slug), {"trajectory": trajectory()}, secret=secret, key=key)
    assert response.status_code == 422
    [problem] = response.json()["detail"]
    assert problem["loc"] == ["header", HEADER] and "1 to 255 visible ASCII characters" in problem["msg"]
    assert not EpisodeRecord.objects.exists()


def _in_a_thread(call):
    """Run `call` on another thread, as another server thread would: its own database connection."""
    def run():
        try:
            return call()
        finally:
            connection.close()
    return ThreadPoolExecutor(max_workers=1).submit(run)


@pytest.mark.urls(__name__)
@pytest.mark.django_db(transaction=True)
def test_a_retry_while_the_first_request_runs_is_told_to_wait(operator_user):
    slow_started.clear(), slow_release.clear()
    secret = _secret_of(operator_user)
    first = _in_a_thread(lambda: post(Client(), "/api/probe/slow", {}, secret=secret, key="running"))
    assert slow_started.wait(WAIT)
    waiting = post(Client(), "/api/probe/slow", {}, secret=secret, key="running")
    slow_release.set()
    assert first.result(WAIT).status_code == 201
    assert waiting.status_code == 409 and waiting["Retry-After"] == "1"
    assert waiting.json()["detail"] == f"A request with {HEADER} 'running' is still in progress; " \
                                       "retry after it has finished"
    replayed = post(Client(), "/api/probe/slow", {}, secret=secret, key="running")
    assert (replayed.status_code, replayed["Idempotent-Replayed"]) == (201, "true")


class _DatabaseSessionDiesOnce:
    """Stands between the route and the idempotency middleware: after the route's write, the request's
    database session is terminated from another connection, as in a database crash or a failover."""

    deaths = []

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if self.deaths:
            self.deaths.pop()
            _terminate_session(connection)
        return response


def _terminate_session(victim) -> None:
    with victim.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s, %s)", [pid, WAIT * 1000])
    finally:
        other.close()


@pytest.mark.django_db(transaction=True)
def test_a_write_whose_database_session_dies_before_its_key_is_recorded_leaves_nothing_behind(
        bank, operator_user, settings):
    """Old code committed the key "in progress" and the write apart: the retry was refused with 409 for
    ten minutes, then ran the write a second time (two episodes for one key)."""
    idempotency = settings.MIDDLEWARE.index("memweb.idempotency.IdempotencyKeys")
    settings.MIDDLEWARE = [*settings.MIDDLEWARE[:idempotency + 1], f"{__name__}._DatabaseSessionDiesOnce",
                           *settings.MIDDLEWARE[idempotency + 1:]]
    _DatabaseSessionDiesOnce.deaths[:] = ["once"]
    client, secret, url = Client(raise_request_exception=False), _secret_of(operator_user), EPISODES.format(slug=bank.slug)
    episode = {"trajectory": trajectory()}
    cut = post(client, url, episode, secret=secret, key="crash")
    close_old_connections()  # what the server does at the end of every request
    assert cut.status_code == 500 and not _DatabaseSessionDiesOnce.deaths
    assert not EpisodeRecord.objects.exists() and not IdempotentRequest.objects.exists()
    retried = post(client, url, episode, secret=secret, key="crash")
    replayed = post(client, url, episode, secret=secret, key="crash")
    assert retried.status_code == 202, retried.content
    assert (replayed.status_code, replayed.json(), replayed["Idempotent-Replayed"]) == (202, retried.json(), "true")
    assert EpisodeRecord.objects.count() == 1


@pytest.mark.urls(__name__)
def test_a_write_that_fails_after_its_effect_is_rolled_back_so_its_retry_writes_once(bank, operator_user):
    """Old code kept the first attempt's episode and released the key: the retry wrote a second one."""
    probe_runs.clear()
    client, secret = Client(raise_request_exception=False), _secret_of(operator_user)
    failed = post(client, "/api/probe/writes-then-fails", {}, secret=secret, key="half")
    assert failed.status_code == 500 and not EpisodeRecord.objects.exists()
    retried = post(client, "/api/probe/writes-then-fails", {}, secret=secret, key="half")
    replayed = post(client, "/api/probe/writes-then-fails", {}, secret=secret, key="half")
    assert (retried.status_code, replayed.json()) == (201, retried.json())
    assert EpisodeRecord.objects.count() == 1 and len(probe_runs) == 2


@pytest.mark.django_db(transaction=True)
def test_eight_concurrent_first_uses_of_a_key_write_once(bank, operator_user):
    secret, url = _secret_of(operator_user), EPISODES.format(slug=bank.slug)
    episode = {"trajectory": trajectory()}
    start = threading.Barrier(8)

    def send():
        start.wait(WAIT)
        return post(Client(), url, episode, secret=secret, key="race")

    answers = [future.result(WAIT) for future in [_in_a_thread(send) for _ in range(8)]]
    ran = [a for a in answers if a.status_code == 202 and not a.has_header("Idempotent-Replayed")]
    replayed = [a for a in answers if a.status_code == 202 and a.has_header("Idempotent-Replayed")]
    assert len(ran) == 1 and len(ran) + len(replayed) + sum(a.status_code == 409 for a in answers) == 8
    assert all(a.json() == ran[0].json() for a in replayed)
    assert EpisodeRecord.objects.count() == 1 and IdempotentRequest.objects.count() == 1


def test_a_key_of_the_same_user_without_the_routes_scope_gets_no_replay(client, bank, operator_user):
    """Old code replayed the first key's answer to a read-only key, whose scopes refuse the route."""
    url = EPISODES.format(slug=bank.slug)
    writer = _secret_of(operator_user)
    reader = ApiKey.issue(user=operator_user, name="reader", scopes=[OrbsScope.MEMORY_READ])[1]
    episode = {"trajectory": trajectory()}
    assert post(client, url, episode, secret=writer, key="shared").status_code == 202
    refused = post(client, url, episode, secret=reader, key="shared")
    assert refused.status_code == 403 and not refused.has_header("Idempotent-Replayed")
    assert "lacks the scope 'memory:write'" in refused.json()["detail"]
    assert EpisodeRecord.objects.count() == 1


def test_a_session_gets_no_replay_of_an_answer_its_api_key_got(client, bank, operator_user):
    url = EPISODES.format(slug=bank.slug)
    episode = {"trajectory": trajectory()}
    by_key = post(client, url, episode, secret=_secret_of(operator_user), key="shared")
    client.force_login(operator_user)
    by_session = post(client, url, episode, key="shared")
    assert by_key.status_code == by_session.status_code == 202
    assert not by_session.has_header("Idempotent-Replayed") and EpisodeRecord.objects.count() == 2


def test_an_expired_key_runs_the_request_again(client, bank, secret, settings):
    settings.MEMWEB_IDEMPOTENCY_TTL_SECONDS = 60
    url = EPISODES.format(slug=bank.slug) + "?sync=true"
    episode = {"trajectory": trajectory()}
    post(client, url, episode, secret=secret, key="old")
    IdempotentRequest.objects.update(created_at=timezone.now() - timedelta(seconds=61))
    again = post(client, url, episode, secret=secret, key="old")
    assert again.status_code == 200 and again.json()["created"] is False  # the route ran: same Orb found
    assert not again.has_header("Idempotent-Replayed")
    assert IdempotentRequest.objects.get().created_at > timezone.now() - timedelta(seconds=60)


@pytest.mark.urls(__name__)
def test_a_server_fault_is_not_kept_so_the_retry_runs_again(operator_user):
    probe_runs.clear()
    client = Client(raise_request_exception=False)
    secret = _secret_of(operator_user)
    failed = post(client, "/api/probe/flaky", {"n": 1}, secret=secret, key="flaky")
    retried = post(client, "/api/probe/flaky", {"n": 1}, secret=secret, key="flaky")
    replayed = post(client, "/api/probe/flaky", {"n": 1}, secret=secret, key="flaky")
    assert (failed.status_code, retried.status_code, replayed.status_code) == (500, 201, 201)
    assert replayed.json() == retried.json() == {"run": 2} and len(probe_runs) == 2
    assert IdempotentRequest.objects.count() == 1


def test_the_schema_declares_the_header_on_every_write():
    schema = api.get_openapi_schema()
    for operations in schema["paths"].values():
        for method, operation in operations.items():
            names = {parameter["name"] for parameter in operation.get("parameters", [])}
            assert (HEADER in names) == (method in {"post", "put", "patch", "delete"}), (method, operation["operationId"])
            if method == "post":
                assert 409 in operation["responses"]

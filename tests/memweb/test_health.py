"""The health page and /api/health: database with pgvector, broker, workers,
probe round trip, embedding model and LLM roles."""
import re
from dataclasses import replace
from datetime import timedelta

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from memweb import embeddings
from memweb.models import ApiKey, LLMCall, TaskProbe, WorkerHeartbeat
from memweb.roles import Role

pytestmark = pytest.mark.django_db


def _pgvector_version() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        return cursor.fetchone()[0]


@pytest.fixture
def one_role_online(settings):
    """Every LLM role offline except the rewriter, whatever the environment says."""
    roles = {name: replace(config, base_url="") for name, config in settings.LLM_ROLES.items()}
    roles["rewriter"] = replace(roles["rewriter"], base_url="http://127.0.0.1:9/v1", model="rewrite-model")
    settings.LLM_ROLES = roles
    return roles


def test_it_answers_liveness_without_credentials(client):
    response = client.get("/api/health")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_it_reports_details_to_authenticated_callers(client, reviewer_user, one_role_online):
    assert client.get("/api/health/details").status_code == 401
    secret = ApiKey.issue(user=reviewer_user, name="monitor")[1]
    report = client.get("/api/health/details", headers={"X-API-Key": secret}).json()
    assert report["database"]["ok"] and report["database"]["pgvector"] == _pgvector_version()
    assert re.match(r"\d+\.\d+", report["database"]["postgres"])
    assert report["broker"]["ok"] and report["broker"]["error"] == ""
    embedding = report["embedding"]
    assert embedding == {"model": "all-MiniLM-L6-v2", "dimension": 384, "loaded": embedding["loaded"],
                         "backend": embeddings.embedder().backend, "backend_note": embeddings.embedder().backend_note,
                         "error": ""}
    roles = {role["role"]: role for role in report["llm_roles"]}
    assert set(roles) == {"actor", "user_simulator", "rewriter", "reflector", "scorer"}
    assert all(roles[name]["offline"] for name in roles if name != "rewriter")
    rewriter = roles["rewriter"]
    assert (rewriter["offline"], rewriter["model"], rewriter["base_url"]) == (False, "rewrite-model", "http://127.0.0.1:9/v1")
    assert rewriter["backend"] == "rewrite-model @ http://127.0.0.1:9/v1" and rewriter["last_status"] is None


def test_it_shows_the_health_page(client, reviewer_user, one_role_online):
    client.force_login(reviewer_user)
    page = client.get(reverse("health")).content.decode()
    assert f"<dt>pgvector</dt><dd>{_pgvector_version()}</dd>" in page
    assert "<dt>Model</dt><dd>all-MiniLM-L6-v2</dd>" in page and "<dt>Dimension</dt><dd>384</dd>" in page
    assert page.count('<span class="badge badge-scripted">offline · scripted</span>') == 4
    assert "http://127.0.0.1:9/v1" in page
    assert "No live workers" in page
    assert "Send a probe task" not in page  # probes are for operators


def test_it_shows_each_roles_last_call(client, reviewer_user, one_role_online):
    LLMCall.objects.create(role="rewriter", model="rewrite-model", base_url="http://127.0.0.1:9/v1",
                           status=LLMCall.Status.ERROR, error="HTTP 500 <b>from</b> server")
    client.force_login(reviewer_user)
    page = client.get(reverse("health")).content.decode()
    assert '<span class="badge badge-failed">error</span>' in page
    assert "HTTP 500 &lt;b&gt;from&lt;/b&gt; server" in page


def test_it_lists_live_workers_only(client, reviewer_user):
    now = timezone.now()
    WorkerHeartbeat.objects.create(hostname="celery@alive", instance="a1b2", pid=41, processes=[43, 44],
                                   started_at=now, seen_at=now)
    WorkerHeartbeat.objects.create(hostname="celery@gone", instance="c3d4", pid=42, started_at=now,
                                   seen_at=now - timedelta(hours=1))
    client.force_login(reviewer_user)
    page = client.get(reverse("health")).content.decode()
    assert "celery@alive" in page and "celery@gone" not in page and "1 live" in page
    assert "a1b2" in page and "43, 44" in page  # the instance and its pool processes, which claims name


def test_it_reports_an_unreachable_broker(client, reviewer_user, settings):
    settings.CELERY_BROKER_URL = "redis://:hunter2@127.0.0.1:1/0"
    client.force_login(reviewer_user)
    page = client.get(reverse("health")).content.decode()
    assert '<span class="badge badge-failed">unreachable</span>' in page
    assert "127.0.0.1:1" in page and "hunter2" not in page


def test_it_does_not_load_the_embedding_model(client, reviewer_user, monkeypatch):
    monkeypatch.setattr(embeddings, "_instances", {})
    client.force_login(reviewer_user)
    assert "load on first use" in client.get(reverse("health")).content.decode()
    assert "_model" not in embeddings.embedder().__dict__


def test_it_times_a_probe_round_trip(client, operator_user, django_capture_on_commit_callbacks):
    client.force_login(operator_user)
    with django_capture_on_commit_callbacks(execute=True):
        queued = client.post(reverse("probe_send"), headers={"HX-Request": "true"}).content.decode()
    probe = TaskProbe.objects.get()
    assert f'hx-get="{reverse("probe_status", args=[probe.pk])}"' in queued and "<html" not in queued
    assert probe.done_at is not None  # the eager task ran on commit
    done = client.get(reverse("probe_status", args=[probe.pk])).content.decode()
    assert "Round trip" in done and "hx-get" not in done


def test_it_says_when_no_worker_answers_a_probe(client, operator_user):
    probe = TaskProbe.objects.create(token="stalled", queued_at=timezone.now() - timedelta(minutes=2))
    client.force_login(operator_user)
    page = client.get(reverse("probe_status", args=[probe.pk])).content.decode()
    assert "no worker has run it yet" in page and 'hx-trigger="every 5s"' in page


def test_it_queues_a_probe_without_htmx_too(client, user_for_role):
    client.force_login(user_for_role(Role.ADMIN))
    response = client.post(reverse("probe_send"), follow=True)
    assert response.redirect_chain[-1][0] == reverse("health") and "Probe task queued" in response.content.decode()
    assert TaskProbe.objects.count() == 1


def test_it_shows_each_roles_reported_model_capabilities_and_last_error(client, reviewer_user, one_role_online):
    from memweb.llm.capabilities import capabilities_note

    capabilities_note(base_url="http://127.0.0.1:9/v1", model="rewrite-model", reported_model="gemma-3-270m.gguf",
                      tools=True, streaming=False, json_mode="json_object_schema",
                      json_probe="json_schema: refused (HTTP 500); json_object_schema: enforced")
    LLMCall.objects.create(role="rewriter", model="rewrite-model", base_url="http://127.0.0.1:9/v1",
                           status=LLMCall.Status.ERROR, error="HTTP 400: context too long")
    LLMCall.objects.create(role="rewriter", model="rewrite-model", base_url="http://127.0.0.1:9/v1",
                           status=LLMCall.Status.OK)
    client.force_login(reviewer_user)
    page = client.get(reverse("health")).content.decode()
    assert 'server reports <span class="mono">gemma-3-270m.gguf</span>' in page
    assert "tool calls seen" in page and "no: plain answers" in page
    assert 'yes, as <span class="mono">json_object_schema</span>' in page and "json_object_schema: enforced" in page
    assert "HTTP 400: context too long" in page  # the last error stays visible after a later success
    assert page.count("not probed yet") == 0 and page.count("offline · scripted") == 4

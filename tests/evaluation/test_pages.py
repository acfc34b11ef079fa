"""The task, import/export and episode pages."""
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from evaluation.models import Episode, TaskSet
from evaluation.services import episode_run, tasks_export_jsonl, tasks_import_jsonl

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def operator(client, operator_user):
    client.force_login(operator_user)
    return client


def test_it_keeps_the_pages_for_operators(client, reviewer_user, db):
    url = reverse("evaluation:task_list")
    assert client.get(url).status_code == 302
    client.force_login(reviewer_user)
    assert client.get(url).status_code == 403


def test_it_offers_to_load_the_built_in_tasks_when_there_are_none(operator):
    page = operator.get(reverse("evaluation:task_list")).content.decode()
    assert "Load the built-in tasks" in page
    response = operator.post(reverse("evaluation:tasks_load_builtin"), follow=True)
    assert "Loaded the built-in task set shop-130 (130 tasks)" in response.content.decode()
    assert response.context["page"].paginator.count == 130


def test_it_filters_searches_and_pages_the_task_list(operator, builtin):
    url = reverse("evaluation:task_list")
    response = operator.get(url, {"domain": "clothing", "error_kind": "result_unused"})
    tasks = response.context["page"].object_list
    expected = [t for t in builtin.tasks.all() if t.domain == "clothing" and "result_unused" in t.spec["error_kinds"]]
    assert response.context["page"].paginator.count == len(expected) > 25
    assert all(t.domain == "clothing" and "result_unused" in t.error_kinds for t in tasks)
    partial = operator.get(url, {"q": "shop-app-00", "page": 1}, **HTMX)
    assert [t.external_id for t in partial.context["page"].object_list] == [f"shop-app-00{i}" for i in range(1, 10)]
    assert "<html" not in partial.content.decode()
    second = operator.get(url, {"page": 2})
    assert second.context["page"].number == 2 and 'rel="prev"' in second.content.decode()


def test_it_shows_a_task_and_plays_an_episode_from_it(operator, builtin):
    task = builtin.tasks.get(external_id="shop-app-006")
    page = operator.get(reverse("evaluation:task_detail", args=[task.pk])).content.decode()
    assert "list_customer_orders" in page and task.spec["persona"]["name"] in page
    response = operator.post(reverse("evaluation:task_play", args=[task.pk]),
                             {"agent": "scripted", "customer": "agenda", "seed": 2, "max_turns": 12,
                              "wrong_tool": 1, "wrong_arguments": 0, "result_unused": 0, "bank": ""})
    episode = Episode.objects.get()
    assert response.status_code == 302 and response["Location"] == episode.get_absolute_url()
    assert episode.agent_config["error_rates"] == {"wrong_tool": 1.0} and not episode.success


def test_it_explains_why_an_episode_could_not_be_played(operator, builtin):
    task = builtin.tasks.first()
    response = operator.post(reverse("evaluation:task_play", args=[task.pk]),
                             {"agent": "scripted", "customer": "agenda", "seed": 0, "max_turns": 12,
                              "wrong_tool": 3, "wrong_arguments": 0, "result_unused": 0, "bank": "missing"})
    assert response.status_code == 422
    assert "Ensure this value is less than or equal to 1" in response.content.decode()
    response = operator.post(reverse("evaluation:task_play", args=[task.pk]),
                             {"agent": "scripted", "customer": "agenda", "seed": 0, "max_turns": 12,
                              "wrong_tool": 0, "wrong_arguments": 0, "result_unused": 0, "bank": "missing"})
    assert response.status_code == 422 and "memory bank &#x27;missing&#x27; does not exist" in response.content.decode()
    assert not Episode.objects.exists()


def test_the_transcript_shows_messages_tool_calls_reward_and_scripted_badges(operator, builtin):
    task = builtin.tasks.get(external_id="shop-app-006")
    episode = episode_run(task=task, agent_config={"error_rates": {"wrong_tool": 1.0}}, seed=0)
    page = operator.get(reverse("evaluation:episode_detail", args=[episode.pk])).content.decode()
    assert "scripted agent" in page and "scripted customer" in page and 'badge badge-scripted' in page
    assert "search_products(query=" in page and "Never told:" in page and "wrong_tool" in page
    assert episode.transcript[0]["content"].replace('"', "&quot;").split(".")[0] in page
    listing = operator.get(reverse("evaluation:episode_list"), {"outcome": "failure"}).content.decode()
    assert f"#{episode.pk}" in listing


def test_the_transcript_escapes_what_customers_and_models_wrote(operator, builtin):
    task = builtin.tasks.first()
    episode = episode_run(task=task, seed=0)
    episode.transcript[0]["content"] = "<script>alert('x')</script>"
    episode.save(update_fields=["transcript"])
    page = operator.get(reverse("evaluation:episode_detail", args=[episode.pk])).content.decode()
    assert "<script>alert" not in page and "&lt;script&gt;alert" in page


def test_the_import_page_reports_bad_lines_and_imports_good_files(operator, builtin):
    lines = tasks_export_jsonl(task_set=builtin).splitlines()
    bad = SimpleUploadedFile("tasks.jsonl", ("\n".join(lines[:2]) + "\nnot json\n").encode())
    response = operator.post(reverse("evaluation:task_import"), {"task_set": "upload", "file": bad})
    assert response.status_code == 422
    body = response.content.decode()
    assert "<strong>Nothing was imported:</strong> 1 problem in 1 record" in body and "task on line 3" in body
    assert "not valid JSON" in body and not TaskSet.objects.filter(name="upload").exists()
    good = SimpleUploadedFile("tasks.jsonl", "\n".join(lines[:2]).encode())
    response = operator.post(reverse("evaluation:task_import"), {"task_set": "upload", "file": good})
    assert response.status_code == 200 and "2 tasks created, 0 updated" in response.content.decode()
    pasted = operator.post(reverse("evaluation:task_import"), {"task_set": "pasted", "text": json.dumps(json.loads(lines[5]))})
    assert pasted.status_code == 200 and TaskSet.objects.get(name="pasted").tasks.count() == 1


def test_the_import_form_names_missing_fields(operator, db):
    response = operator.post(reverse("evaluation:task_import"), {"task_set": ""})
    body = response.content.decode()
    assert response.status_code == 422 and "This field is required." in body


def test_a_sets_name_cannot_add_to_the_download_header(operator, builtin):
    tasks_import_jsonl(text=tasks_export_jsonl(task_set=builtin).splitlines()[0], task_set_name='x"; filename="a.html')
    response = operator.get(reverse("evaluation:task_export"), {"task_set": 'x"; filename="a.html'})
    assert response["Content-Disposition"] == 'attachment; filename="x-filename-a.html.jsonl"'


def test_the_export_downloads_a_set(operator, builtin):
    response = operator.get(reverse("evaluation:task_export"), {"task_set": builtin.name})
    assert response["Content-Disposition"] == 'attachment; filename="shop-130.jsonl"'
    assert len(response.content.decode().splitlines()) == 130
    assert operator.get(reverse("evaluation:task_export"), {"task_set": "nope"}).status_code == 404

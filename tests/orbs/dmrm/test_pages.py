"""DMRM pages: the browser with filters, chart data and review; settings; the source builder."""
import pytest

from orbs.dmrm.models import DMRMSettings, Experience, SourceMemory
from orbs.dmrm.services import experience_append, experience_review, experiences_retrieve

GOAL = "return the jacket"


@pytest.fixture
def entries(dmrm):
    experience_append(bank=dmrm.bank, trajectory_id="t1", step=0, goal=GOAL, observation="order delivered",
                      action="return_item(W7)", reward=1.0, domain="clothing")
    experience_append(bank=dmrm.bank, trajectory_id="t2", step=0, goal=GOAL, observation="order lost",
                      action="cancel_order(W7)", reward=-1.0, domain="appliances")
    return Experience.objects.order_by("reward")


def test_it_filters_experiences_and_charts_their_q_values(client, reviewer_user, entries):
    client.force_login(reviewer_user)
    page = client.get("/orbs/experiences/", {"min_q": "0", "domain": "clothing"})
    assert page.status_code == 200
    assert b"return_item(W7)" in page.content and b"cancel_order(W7)" not in page.content
    assert sum(page.context["chart"]["counts"]) == 1
    chart = client.get("/orbs/experiences/").context["chart"]  # Q-values -0.5 and 0.5
    assert chart["counts"] == [1] + [0] * 8 + [1] and chart["labels"][0] == "-0.50–-0.40"
    partial = client.get("/orbs/experiences/", {"memory": "source"}, HTTP_HX_REQUEST="true")
    assert b"No experiences match" in partial.content and b"<html" not in partial.content


def test_it_approves_and_requires_a_reason_to_reject(client, reviewer_user, entries):
    client.force_login(reviewer_user)
    bad = entries[0]
    refused = client.post(f"/orbs/experiences/{bad.pk}/review/", {"decision": "rejected", "version": bad.version},
                          HTTP_HX_REQUEST="true")
    assert refused.status_code == 422 and b"a reason is required" in refused.content
    done = client.post(f"/orbs/experiences/{bad.pk}/review/",
                       {"decision": "rejected", "version": bad.version, "note": "cancels instead of returning"})
    assert done.status_code == 302
    bad.refresh_from_db()
    assert bad.status == "rejected" and bad.reviewer == reviewer_user and bad.version == 2


def test_it_saves_settings_and_names_bad_fields(client, operator_user, dmrm):
    client.force_login(operator_user)
    url = f"/orbs/banks/{dmrm.bank.slug}/dmrm/"
    experiences_retrieve(bank=dmrm.bank, goal=GOAL, observation="order delivered", client="agent-7")
    shown = client.get(url)
    assert shown.status_code == 200 and b"agent-7" in shown.content and b"0 of 0" in shown.content
    fields = {"alpha": "0.3", "gamma": "0.8", "c_max": "256", "n_success": "3", "suppression_mode": "down_weight",
              "source_weight": "0.25", "scan_limit": "40", "min_similarity": "0.45", "state_match": "similar",
              "state_similarity": "0.85"}
    bad = client.post(f"{url}save/", fields | {"alpha": "1.5"})
    assert bad.status_code == 422 and "alpha" in bad.context["form"].errors
    assert client.post(f"{url}save/", fields).status_code == 302
    saved = DMRMSettings.objects.get(pk=dmrm.pk)
    assert (saved.alpha, saved.c_max, saved.n_success, saved.suppression_mode) == (0.3, 256, 3, "down_weight")
    assert (saved.min_similarity, saved.state_match, saved.state_similarity) == (0.45, "similar", 0.85)
    assert client.post(f"{url}save/", fields | {"min_similarity": "1.5"}).context["form"].errors["min_similarity"]
    experiences_retrieve(bank=dmrm.bank, goal=GOAL, observation="order delivered", client="agent-8")
    assert "<td>0.45</td>" in client.get(url).content.decode()  # the minimum in force, per retrieval


def test_it_previews_then_builds_a_source_memory_from_finished_episodes(client, operator_user, dmrm,
                                                                       django_capture_on_commit_callbacks):
    from evaluation.models import Domain
    from evaluation.services import episode_run, taskset_builtin_load

    task = taskset_builtin_load().tasks.filter(domain=Domain.CLOTHING).order_by("external_id").first()
    episode = episode_run(task=task, seed=0)
    client.force_login(operator_user)
    url = f"/orbs/banks/{dmrm.bank.slug}/dmrm/source/"
    params = {"source_domain": "clothing", "min_reward": "-100", "min_q": "-100", "gamma": "0.9"}
    preview = client.get(url, params)
    assert preview.status_code == 200 and preview.context["episodes"] == 1
    kept = preview.context["kept"]
    assert kept == episode.tool_calls > 0
    assert client.post(f"{url}build/", params).status_code == 422  # no name
    with django_capture_on_commit_callbacks(execute=True):  # the build's job runs (eagerly) once queued
        assert client.post(f"{url}build/", params | {"name": "clothing runs"}).status_code == 302
    memory = SourceMemory.objects.get()
    assert memory.experiences.count() == kept and memory.episodes_read == 1
    # The build is the review: every kept step approved at once, naming the builder; one can be rejected.
    assert set(memory.experiences.values_list("memory", "status", "reviewer").distinct()) == {
        ("source", "approved", operator_user.pk)}
    assert memory.approved_at and operator_user.get_username() in memory.approval_note
    assert all(e.review_note == memory.approval_note for e in memory.experiences.all())
    first = memory.experiences.first()
    experience_review(experience_id=first.pk, expected_version=first.version, status="rejected", actor=operator_user,
                      note="wrong order id")
    assert memory.experiences.filter(status="rejected").count() == 1

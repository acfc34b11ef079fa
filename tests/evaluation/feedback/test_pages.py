"""Operator pages: calibration, profiles, the feedback browser and the transcript partial."""
import json

import pytest
from django.template.loader import render_to_string
from django.urls import reverse

from evaluation.feedback.models import CalibrationSetting, EpisodeFeedback, FeedbackProfile
from evaluation.feedback.services import feedback_for_episode
from tests.evaluation.feedback.conftest import CONTRADICTORY, PEOPLE, make_run, plant_campaign, play_many

HTMX = {"HTTP_HX_REQUEST": "true"}
HOSTILE = "<script>alert('owned')</script>"
ESCAPED = "&lt;script&gt;alert(&#x27;owned&#x27;)&lt;/script&gt;"


@pytest.fixture
def operator(client, operator_user):
    client.force_login(operator_user)
    return client


def calibration_post(**changes) -> dict:
    data = {"s0_like": 7.5, "s0_dislike": 4.5, "k_like": 1.5, "k_dislike": 1.5, "like_rate": 0.0559,
            "dislike_rate": 0.0091, "distribution": "0.02, 0.93, 3.06, 1.93, 0.40, 2.56, 17.5, 32.12, 41.05, 0.43",
            "like_shift": 0, "score_sigma": 0, "metric": "shop", "use_llm": "on",
            "calibrate_on": "realised", "binary_low_share": 0.433}
    return {**data, **changes}


def test_it_keeps_every_page_for_operators(client, reviewer_user, failed_episode):
    gets = [reverse(f"evaluation:feedback_{name}")
            for name in ("calibration", "calibration_fit", "browser", "profiles", "profile_new")]
    posts = [reverse("evaluation:feedback_calibration_update"), reverse("evaluation:feedback_recalibrate"),
             reverse("evaluation:feedback_calibration_refit"),
             reverse("evaluation:feedback_generate", args=[failed_episode.pk])]
    for url in gets:
        assert client.get(url)["Location"].startswith(reverse("login"))
    for url in posts:
        assert client.post(url)["Location"].startswith(reverse("login"))
    client.force_login(reviewer_user)
    for url in gets:
        assert client.get(url).status_code == 403
    for url in posts:
        assert client.post(url, calibration_post()).status_code == 403
    assert not EpisodeFeedback.objects.exists() and not CalibrationSetting.objects.exists()


def test_the_calibration_page_shows_the_table_curves_and_target_rates(operator):
    response = operator.get(reverse("evaluation:feedback_calibration"))
    page = response.content.decode()
    assert response.status_code == 200 and 'id="calibration-table"' in page
    table = response.context["table"]
    assert f"{table.global_like:.6f}" == "0.055900" and "0.055900" in page and "0.009100" in page
    curves = json.loads(page.split('id="curves-data" type="application/json">')[1].split("</script>")[0])
    assert curves["score"] == list(range(1, 11)) and curves["p_like"] == [r["p_like"] for r in table.rows]
    assert "evaluation/feedback/calibration.js" in page and "vendor/chart.js/chart.umd.min.js" in page
    assert "No feedback yet" in page


def test_it_saves_valid_parameters_and_names_the_field_of_bad_ones(operator):
    url = reverse("evaluation:feedback_calibration_update")
    response = operator.post(url, calibration_post(like_rate=0.07, like_shift=-1, score_sigma=0.5))
    assert response.status_code == 302
    setting = CalibrationSetting.current()
    assert (setting.like_rate, setting.like_shift, setting.score_sigma) == (0.07, -1.0, 0.5)
    assert setting.updated_by is not None and setting.distribution_source == "edited on the calibration page"
    short = operator.post(url, calibration_post(distribution="1, 2, 3", like_rate=0.2))
    assert short.status_code == 422 and short.context["form"].errors["distribution"] == \
        ["Give exactly 10 weights (S = 1..10), got 3."]
    infeasible = operator.post(url, calibration_post(dislike_rate=0.6))
    assert infeasible.status_code == 422
    assert "calibration is infeasible: at S=" in infeasible.context["form"].non_field_errors()[0]
    negative = operator.post(url, calibration_post(k_like=-1))
    assert negative.status_code == 422 and "k_like" in negative.context["form"].errors
    assert CalibrationSetting.current().like_rate == 0.07


def test_it_shows_realised_rates_and_recalibrates_on_the_chosen_episodes(operator, builtin):
    for episode in play_many(builtin, 12):
        feedback_for_episode(episode=episode, seed=1)
    url = reverse("evaluation:feedback_calibration")
    partial = operator.get(url, {"latest": "50", "domain": "appliances"}, **HTMX)
    assert "<html" not in partial.content.decode() and partial.context["rates"].n == 12
    assert 'id="histogram-data"' in partial.content.decode()
    none = operator.get(url, {"domain": "clothing"}).context["rates"]
    assert none.n == 0
    refused = operator.post(reverse("evaluation:feedback_recalibrate"), {"latest": "50", "domain": "clothing"},
                            follow=True)
    assert "Not recalibrated: none of the selected episodes" in refused.content.decode()
    done = operator.post(reverse("evaluation:feedback_recalibrate"), {"latest": "50", "domain": "appliances"},
                         follow=True)
    assert "Recalibrated: recalibrated from 12 realised scores" in done.content.decode()
    assert done.context["rates"].expected["like"] == pytest.approx(0.0559, abs=1e-12)


def test_it_explains_how_to_get_campaigns_when_none_has_peoples_actions(operator):
    page = operator.get(reverse("evaluation:feedback_calibration")).content.decode()
    assert "Recalibrate from people's judgments" in page and "No campaign has people's actions yet" in page
    assert "Demo: feedback comparison (scripted)" in page and 'id="people-fit"' not in page
    assert "manage.py load_demo" in page


def test_while_the_demo_loads_it_says_the_demo_campaign_is_coming_instead_of_how_to_load_it(operator):
    from memweb.demo_loading import demo_loading_start

    demo_loading_start(parts_total=3)
    page = operator.get(reverse("evaluation:feedback_calibration")).content.decode()
    assert "is still loading" in page and "manage.py load_demo" not in page


def test_it_previews_the_fit_to_a_campaigns_people_and_applies_it(operator, operator_user):
    campaign = plant_campaign("Planted <people>", PEOPLE, writer=None)
    page = operator.get(reverse("evaluation:feedback_calibration")).content.decode()
    assert "Planted &lt;people&gt; (18 conversations)" in page and 'id="people-fit-table"' not in page
    preview = operator.get(reverse("evaluation:feedback_calibration_fit"), {"campaign": campaign.pk}, **HTMX)
    fragment = preview.content.decode()
    assert "<html" not in fragment and 'id="people-fit-table"' in fragment and "Apply this fit" in fragment
    fit = preview.context["fit"]
    assert fit.n == 18 and f"{fit.rows[8]['fit_like']:.4f}" in fragment and "0.8000" in fragment
    assert operator.get(reverse("evaluation:feedback_calibration_fit"), {"campaign": campaign.pk})["Location"] == \
        f"{reverse('evaluation:feedback_calibration')}?campaign={campaign.pk}"
    applied = operator.post(reverse("evaluation:feedback_calibration_refit"), {"campaign": campaign.pk}, follow=True)
    text = applied.content.decode()
    assert "Recalibrated: refitted to people&#x27;s actions in campaign “Planted &lt;people&gt;”" in text
    assert "The active calibration is this fit." in text and "Apply this fit" not in text
    setting = CalibrationSetting.current()
    assert setting.params() == fit.params and setting.updated_by == operator_user


def test_it_names_why_a_campaign_cannot_recalibrate_and_changes_nothing(operator):
    contradictory = plant_campaign("Contradictory", CONTRADICTORY, writer=None)
    few = plant_campaign("Few", PEOPLE[:4], writer=None)
    preview = operator.get(reverse("evaluation:feedback_calibration_fit"), {"campaign": contradictory.pk}, **HTMX)
    fragment = preview.content.decode()
    assert "This fit cannot become the calibration: like_rate + dislike_rate must not exceed 1" in fragment
    assert 'id="people-fit-table"' in fragment and "Apply this fit" not in fragment
    too_few = operator.get(reverse("evaluation:feedback_calibration_fit"), {"campaign": few.pk}, **HTMX)
    assert "No fit: campaign “Few” has 4 conversations" in too_few.content.decode()
    refused = operator.post(reverse("evaluation:feedback_calibration_refit"), {"campaign": contradictory.pk},
                            follow=True)
    assert "Not recalibrated: the fit to people cannot be used: like_rate + dislike_rate must not exceed 1. " \
           "Nothing was changed." in refused.content.decode()
    unknown = operator.post(reverse("evaluation:feedback_calibration_refit"), {"campaign": 0}, follow=True)
    assert "Not recalibrated: choose one of the listed campaigns" in unknown.content.decode()
    assert CalibrationSetting.current().distribution_source == "MemoryBench reference distribution"


def test_profiles_are_listed_edited_and_escaped(operator):
    listing = operator.get(reverse("evaluation:feedback_profiles"))
    assert [p.key for p in listing.context["profiles"]] == ["appliances", "clothing"]
    profile = FeedbackProfile.objects.get(key="clothing")
    url = reverse("evaluation:feedback_profile_edit", args=[profile.pk])
    data = {"key": "hijacked", "name": "Picky", "persona": HOSTILE, "domain_expertise": "Knows fabrics.",
            "evaluation_criteria": "Fit.", "behaviour_rules": "Reason first.", "language": "German", "long_output": ""}
    assert operator.post(url, data).status_code == 302
    profile.refresh_from_db()
    assert (profile.key, profile.persona, profile.language) == ("clothing", HOSTILE, "German")
    assert not profile.long_output
    for page in (operator.get(reverse("evaluation:feedback_profiles")), operator.get(url)):
        text = page.content.decode()
        assert HOSTILE not in text and ESCAPED in text
    duplicate = operator.post(reverse("evaluation:feedback_profile_new"), {**data, "key": "clothing"})
    assert duplicate.status_code == 422 and "key" in duplicate.context["form"].errors
    created = operator.post(reverse("evaluation:feedback_profile_new"), {**data, "key": "garden"})
    assert created.status_code == 302 and FeedbackProfile.objects.filter(key="garden").exists()


def test_the_browser_filters_pages_links_and_escapes(operator, builtin):
    episodes = play_many(builtin, 30)
    rows = [feedback_for_episode(episode=e, seed=5) for e in episodes]
    EpisodeFeedback.objects.filter(pk=rows[-1].pk).update(response=HOSTILE, critique_backend="scripted (LLM failed)")
    url = reverse("evaluation:feedback_browser")
    first = operator.get(url)
    page = first.content.decode()
    assert first.context["page"].paginator.count == 30 and len(first.context["page"].object_list) == 25
    assert HOSTILE not in page and "&lt;script&gt;" in page
    assert episodes[-1].get_absolute_url() in page and 'rel="next"' in page
    low = operator.get(url, {"score_min": 1, "score_max": 6}, **HTMX)
    assert "<html" not in low.content.decode()
    assert {f.score for f in low.context["page"].object_list} <= {1, 2, 3, 4, 5, 6}
    assert low.context["page"].paginator.count == sum(r.score <= 6 for r in rows) > 0
    fallback = operator.get(url, {"backend": "fallback"}).context["page"]
    assert [f.pk for f in fallback.object_list] == [rows[-1].pk]
    liked = operator.get(url, {"action": "none"}).context["page"]
    assert liked.paginator.count == sum(r.action == "none" for r in rows)
    bad = operator.get(url, {"score_min": 8, "score_max": 3})
    assert "Must not be below" in bad.content.decode()


def test_the_transcript_partial_shows_the_feedback_escaped_or_offers_to_generate(operator, failed_episode):
    empty = render_to_string("evaluation/feedback/_episode_feedback.html", {"episode": failed_episode})
    assert "No simulated feedback for this episode yet" in empty
    response = operator.post(reverse("evaluation:feedback_generate", args=[failed_episode.pk]))
    assert response.status_code == 302 and response["Location"] == failed_episode.get_absolute_url()
    feedback = EpisodeFeedback.objects.get(episode=failed_episode)
    EpisodeFeedback.objects.filter(pk=feedback.pk).update(
        reasoning=HOSTILE, errors=[{"stage": "critique", "error": f"LLM role 'user_simulator': {HOSTILE}"}])
    failed_episode.refresh_from_db()
    html = render_to_string("evaluation/feedback/_episode_feedback.html", {"episode": failed_episode})
    assert HOSTILE not in html and html.count("&lt;script&gt;") == 2
    assert "S = 5" in html and '<span class="badge badge-scripted"' in html and ">scripted</span>" in html
    assert "continues the conversation" in html and "That is not what I asked for." in html
    assert "answered by the offline backend instead" in html


def test_a_run_can_be_chosen_for_rates_recalibration_and_browsing(operator, builtin):
    episodes = play_many(builtin, 12)
    for episode in episodes:
        feedback_for_episode(episode=episode, seed=1)
    run = make_run("MemOrb k=5", episodes[:10])
    rates = operator.get(reverse("evaluation:feedback_calibration"), {"run": run.pk, "latest": "50"}, **HTMX)
    assert rates.context["rates"].n == 10 and "run “MemOrb k=5”" in rates.content.decode()
    done = operator.post(reverse("evaluation:feedback_recalibrate"), {"run": run.pk}, follow=True)
    assert "recalibrated from 10 realised scores (run “MemOrb k=5”)" in done.content.decode()
    browsed = operator.get(reverse("evaluation:feedback_browser"), {"run": run.pk}).context["page"]
    assert sorted(f.episode_id for f in browsed.object_list) == sorted(e.pk for e in episodes[:10])

"""The demo's feedback modes: an on-policy feedback run with two rounds, and its off-policy curve."""
import io

from evaluation.feedback.models import EpisodeFeedback
from evaluation.runs.demo import FEEDBACK_DEMO_RUN, load_demo
from evaluation.runs.models import EvaluationRun, FeedbackCurve


def test_the_demo_plays_an_on_policy_feedback_run_and_measures_its_learning_curve(db, client, operator_user):
    out = io.StringIO()
    load_demo(stdout=out, run_tasks=2, run_trials=2)
    run = EvaluationRun.objects.get(name=FEEDBACK_DEMO_RUN)
    assert (run.status == "completed" and run.scripted and run.memory_layer.feedback_into_memory(run)
            and run.run_spec.feedback_rounds == 2)
    assert EpisodeFeedback.objects.filter(episode__run_episode__run=run).count() == 4
    curve = FeedbackCurve.objects.get(run=run)
    assert curve.status == "completed" and [p["batches"] for p in curve.points] == [0, 1, 2]
    assert f"demo learning curve #{curve.pk}" in out.getvalue()
    client.force_login(operator_user)
    page = client.get(curve.get_absolute_url()).content.decode()
    assert "3 of 3 points measured" in page and "badge-scripted" in page
    run_page = client.get(run.get_absolute_url()).content.decode()
    assert "on-policy: each trial&#x27;s Orbs carry its users&#x27; feedback" in run_page and "2 rounds" in run_page
    load_demo(stdout=out, run_tasks=2, run_trials=2)
    assert FeedbackCurve.objects.count() == 1

"""Episodes an LLM failure cut short were stored with 0 turns though their page drew the turns
they played: recount them with the one definition (evaluation.shop.episode.exchanges_count)."""
from django.db import migrations

from evaluation.shop.episode import exchanges_count


def recount(apps, schema_editor):
    Episode = apps.get_model("evaluation", "Episode")
    RunEpisode = apps.get_model("evaluation", "RunEpisode")
    for episode in Episode.objects.filter(status="error").only("pk", "transcript").iterator():
        turns = exchanges_count(episode.transcript)
        Episode.objects.filter(pk=episode.pk).update(turns=turns)
        RunEpisode.objects.filter(episode_id=episode.pk, turns__isnull=False).update(turns=turns)


class Migration(migrations.Migration):

    dependencies = [
        ("evaluation", "0014_episode_trace"),
    ]

    operations = [
        migrations.RunPython(recount, migrations.RunPython.noop),
    ]

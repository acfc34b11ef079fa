"""When an episode's reflection task was last sent, so that the worker beat sends it again when the
message never left (a crash after the commit, a broker down) or was lost (orbs.services.ingest)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("orbs", "0017_memorybank_workspace"),
    ]

    operations = [
        migrations.AddField(
            model_name="episoderecord",
            name="message_sent_at",
            field=models.DateTimeField(
                blank=True, null=True,
                help_text="When its reflection task was last handed to the broker (orbs.services.ingest): an "
                          "episode left waiting without a recent one is sent again by the worker beat."),
        ),
    ]

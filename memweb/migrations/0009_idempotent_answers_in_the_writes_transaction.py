"""An idempotent answer is written in the transaction of its write (memweb.idempotency): no row is
ever "in progress" (a running request holds its key with a transaction lock), and each row names the
credential that got the answer, the only one it is replayed to. Rows stored before cannot say which
credential that was, so they are forgotten: a retry of such a request runs again, as after expiry."""

from django.conf import settings
from django.db import migrations, models


def forget_unattributed_answers(apps, schema_editor):
    apps.get_model("memweb", "IdempotentRequest").objects.all().delete()


class Migration(migrations.Migration):

    dependencies = [
        ("memweb", "0008_workspaces"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunPython(forget_unattributed_answers, migrations.RunPython.noop),
        migrations.RemoveConstraint(model_name="idempotentrequest", name="idempotent_request_unique_key"),
        migrations.RemoveField(model_name="idempotentrequest", name="state"),
        migrations.AddField(
            model_name="idempotentrequest",
            name="caller",
            field=models.CharField(default="", help_text="The credential that sent it: 'key:<API key id>', or "
                                                         "'session:<workspace id>'; only it gets the replay.",
                                   max_length=40),
            preserve_default=False,
        ),
        migrations.AlterField(
            model_name="idempotentrequest",
            name="status_code",
            field=models.PositiveSmallIntegerField(),
        ),
        migrations.AddConstraint(
            model_name="idempotentrequest",
            constraint=models.UniqueConstraint(fields=("user", "caller", "key"), name="idempotent_request_unique_key"),
        ),
    ]

import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memweb', '0013_worker_instances'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='queued_at',
            field=models.DateTimeField(default=django.utils.timezone.now, help_text='When its message was last sent.'),
        ),
        migrations.AlterField(
            model_name='job',
            name='worker',
            field=models.CharField(blank=True, help_text='The worker process that claimed it.', max_length=255),
        ),
    ]

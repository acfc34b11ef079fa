"""Feedback calibration becomes a run setting (reference by default) and copy a task family's rule.

Runs stored before it keep what they did: they were calibrated as the one calibration setting
said (realised since migration 0009), so they take its value. A profile left on the old per-reply
600-token rule becomes a short-output family: a customer-service reply never reached 600 tokens.
"""
from django.db import migrations, models

CHOICES = [('reference', "the reference distribution (by default MemoryBench's)"),
           ('realised', "variant: the run's own realised scores (the reference when too few)")]


def runs_keep_their_calibration(apps, schema_editor):
    setting = apps.get_model('evaluation', 'CalibrationSetting').objects.filter(pk=1).first()
    used = setting.calibrate_on if setting else 'realised'
    apps.get_model('evaluation', 'EvaluationRun').objects.update(feedback_calibration=used)


def per_reply_rule_to_short_family(apps, schema_editor):
    apps.get_model('evaluation', 'FeedbackProfile').objects.filter(long_output__isnull=True).update(long_output=False)


class Migration(migrations.Migration):

    dependencies = [
        ('evaluation', '0021_run_status_preparing'),
    ]

    operations = [
        migrations.AddField(
            model_name='evaluationrun',
            name='feedback_calibration',
            field=models.CharField(choices=CHOICES, default='realised', max_length=10),
        ),
        migrations.RunPython(runs_keep_their_calibration, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='evaluationrun',
            name='feedback_calibration',
            field=models.CharField(choices=CHOICES, default='reference', max_length=10),
        ),
        migrations.RemoveField(
            model_name='calibrationsetting',
            name='calibrate_on',
        ),
        migrations.RunPython(per_reply_rule_to_short_family, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='feedbackprofile',
            name='long_output',
            field=models.BooleanField(default=False, help_text="Whether this task family's outputs are long (MemoryBench: answers that run past 600 tokens, e.g. writing): every reply of a long-output family may be copied (P(copy|S) = 4·P(like|S)), none of a short-output one. Customer-service replies are short."),
        ),
    ]

import django.core.validators
from django.db import migrations, models

OLD_DEFAULT = 600
# Frozen here: the figures of orbs.budget when this migration was written (header 13, entry 386 tokens).
HEADER_TOKENS, ENTRY_MAX_TOKENS, MAX_BUDGET = 13, 386, 8000


def budgets_that_hold_k(apps, schema_editor):
    """Banks still at the old default were cutting k to about two LLM-length Orbs: give them the budget
    that holds their k. A budget someone chose (any other value) stays."""
    MemoryBank = apps.get_model("orbs", "MemoryBank")
    for bank in MemoryBank.objects.filter(prompt_token_budget=OLD_DEFAULT):
        bank.prompt_token_budget = min(HEADER_TOKENS + bank.retrieval_k * ENTRY_MAX_TOKENS, MAX_BUDGET)
        bank.save(update_fields=["prompt_token_budget"])


class Migration(migrations.Migration):

    dependencies = [
        ('orbs', '0007_dialogue_vectors_of_any_supported_dimension'),
    ]

    operations = [
        migrations.AlterField(
            model_name='memorybank',
            name='prompt_token_budget',
            field=models.PositiveIntegerField(default=1943, help_text='Upper bound on the tokens of the prompt block returned to agents; the default holds k Orbs of the longest reflection the reflector writes.', validators=[django.core.validators.MinValueValidator(50), django.core.validators.MaxValueValidator(8000)]),
        ),
        migrations.RunPython(budgets_that_hold_k, migrations.RunPython.noop),
    ]

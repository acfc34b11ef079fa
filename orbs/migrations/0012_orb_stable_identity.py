"""Stable Orb identity: every revision of an Orb names its lineage (the first revision, whose id is the
Orb's stable id) and its revision number. Existing Orbs get both from their `supersedes` chain."""
from django.db import migrations, models

# Walks each supersedes chain from its first revision (the one that supersedes nothing) in one
# statement, so a bank of a million Orbs migrates as fast as a small one.
CHAINS_SQL = """
WITH RECURSIVE chain(id, lineage_id, revision) AS (
    SELECT id, id, 1 FROM orbs_orb WHERE supersedes_id IS NULL
    UNION ALL
    SELECT orb.id, chain.lineage_id, chain.revision + 1 FROM orbs_orb orb JOIN chain ON orb.supersedes_id = chain.id
)
UPDATE orbs_orb SET lineage_id = chain.lineage_id, revision = chain.revision FROM chain WHERE orbs_orb.id = chain.id
"""


def lineages_from_supersedes_chains(apps, schema_editor):
    # Checked now, not at commit: the NOT NULL step below cannot alter a table with pending checks.
    schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    schema_editor.execute(CHAINS_SQL)
    schema_editor.execute("SET CONSTRAINTS ALL DEFERRED")


class Migration(migrations.Migration):

    dependencies = [
        ('orbs', '0011_bank_customer_scope_and_remembered_source'),
    ]

    operations = [
        migrations.AddField(
            model_name='orb',
            name='lineage',
            field=models.ForeignKey(null=True, on_delete=models.deletion.RESTRICT, related_name='lineage_revisions',
                                    to='orbs.orb', help_text="The first revision: its id is the Orb's stable id."),
        ),
        migrations.AddField(
            model_name='orb',
            name='revision',
            field=models.PositiveIntegerField(default=1, help_text='1 for the Orb as created, then one per edit.'),
        ),
        migrations.RunPython(lineages_from_supersedes_chains, migrations.RunPython.noop, elidable=False),
        migrations.AlterField(
            model_name='orb',
            name='lineage',
            field=models.ForeignKey(on_delete=models.deletion.RESTRICT, related_name='lineage_revisions',
                                    to='orbs.orb', help_text="The first revision: its id is the Orb's stable id."),
        ),
        migrations.AddConstraint(
            model_name='orb',
            constraint=models.UniqueConstraint(fields=('lineage', 'revision'), name='orb_unique_revision'),
        ),
    ]

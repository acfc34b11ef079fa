"""Models of the raw-dialogue memory (registered with the orbs app by OrbsConfig.import_models).

MemoryBench's naive retrieval baselines keep past dialogues as they were said, with no reflection:
a Dialogue is one finished conversation of a bank, a DialogueMessage one customer or agent message
of it. Both carry a vector of the bank's embedding model for the embedder baselines; the BM25
baselines read their text.
"""
from django.db import models
from django.utils import timezone
from pgvector.django import VectorField

from memweb.scoping import AllWorkspacesManager, WorkspaceManager
from memweb.vectors import vector_hnsw_indexes, vector_model_constraint
from orbs.models import HNSW_EF_CONSTRUCTION, HNSW_M

__all__ = ["Dialogue", "DialogueMessage"]


class Dialogue(models.Model):

    WORKSPACE_PATH = "bank__workspace"  # memweb.workspaces
    objects = WorkspaceManager()
    all_workspaces = AllWorkspacesManager()

    bank = models.ForeignKey("orbs.MemoryBank", on_delete=models.CASCADE, related_name="dialogues")
    dialogue_ref = models.CharField(max_length=200, help_text="Where it came from, e.g. evaluation-episode:12.")
    task_ref = models.CharField(max_length=200, blank=True)
    customer_key = models.CharField(max_length=200, blank=True, db_index=True,
                                    help_text="Whose dialogue it is (the trajectory's customer), for erasure.")
    domain = models.CharField(max_length=64, blank=True)
    success = models.BooleanField(null=True, blank=True)
    reward = models.FloatField(null=True, blank=True)
    opening = models.TextField(help_text="The customer's first message: what dialogue retrieval matches a query to.")
    text = models.TextField(help_text="The whole dialogue, one 'customer: …' or 'agent: …' line per message.")
    vector = VectorField()  # of its model's dimension (memweb/vectors.py)
    embedding_model = models.CharField(max_length=100)
    source_label = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["pk"]
        constraints = [models.UniqueConstraint(fields=["bank", "dialogue_ref"], name="dialogue_unique_ref"),
                       vector_model_constraint("dialogue")]
        indexes = vector_hnsw_indexes("dialogue", m=HNSW_M, ef_construction=HNSW_EF_CONSTRUCTION)

    def __str__(self) -> str:
        return f"dialogue {self.dialogue_ref}"


class DialogueMessage(models.Model):
    class Role(models.TextChoices):
        CUSTOMER = "customer", "customer"
        AGENT = "agent", "agent"

    dialogue = models.ForeignKey(Dialogue, on_delete=models.CASCADE, related_name="messages")
    # The bank again, so the nearest-neighbour scan filters on one table.
    bank = models.ForeignKey("orbs.MemoryBank", on_delete=models.CASCADE, related_name="dialogue_messages")
    position = models.PositiveIntegerField(help_text="0-based among the dialogue's customer and agent messages.")
    role = models.CharField(max_length=8, choices=Role.choices)
    text = models.TextField()
    vector = VectorField()  # of its model's dimension (memweb/vectors.py)
    embedding_model = models.CharField(max_length=100)

    class Meta:
        ordering = ["pk"]
        constraints = [models.UniqueConstraint(fields=["dialogue", "position"], name="dialogue_message_unique_position"),
                       vector_model_constraint("dialogue_msg")]
        indexes = vector_hnsw_indexes("dialogue_msg", m=HNSW_M, ef_construction=HNSW_EF_CONSTRUCTION)

    def __str__(self) -> str:
        return f"{self.role} message {self.position} of {self.dialogue.dialogue_ref}"

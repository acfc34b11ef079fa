"""The three configurations of an episode (agent, simulated customer, memory), validated, and
the closed sets of names they choose from.

Plain pydantic models: the API uses them as request bodies, services accept them or dicts.
"""
from typing import Literal

from django.db import models
from pydantic import Field, field_validator, model_validator

from evaluation.environments import ERROR_KINDS
from evaluation.memory_layers.registry import memory_layer, memory_layer_validate
from memweb.schemas import StrictBody


class AgentBackend(models.TextChoices):
    SCRIPTED = "scripted", "scripted agent"
    LLM = "llm", "LLM agent (actor role)"


class CustomerBackend(models.TextChoices):
    AGENDA = "agenda", "agenda-based customer (scripted)"
    LLM = "llm", "LLM customer (user simulator role)"


class MemoryKind(models.TextChoices):
    """The built-in memory layers' names (evaluation.memory_layers); a layer an installed package
    registers is as valid a kind. What a kind does is its layer's: nothing here branches on one."""

    NONE = "none", "no memory"
    MEMORB = "memorb", "MemOrb"
    DMRM = "dmrm", "DMRM"
    BOTH = "both", "MemOrb + DMRM"
    # MemoryBench's naive retrieval baselines: raw past dialogues, no reflection (memory_layers/naive_rag.py).
    BM25_MESSAGE = "bm25_message", "naive RAG: BM25 over past messages"
    BM25_DIALOG = "bm25_dialog", "naive RAG: BM25 over past dialogues"
    EMBEDDER_MESSAGE = "embedder_message", "naive RAG: embeddings over past messages"
    EMBEDDER_DIALOG = "embedder_dialog", "naive RAG: embeddings over past dialogues"


class ReflectionInput(models.TextChoices):
    """What a reflector (and so memory) is shown of an episode. Runs stored before the choice existed
    were reflected with the answer key: oracle."""
    TRAJECTORY = "trajectory", "trajectory: the dialogue, the tool calls with their results, the reward components"
    ORACLE = "oracle", "oracle: besides, a diagnosis against the task's gold answer (leaks the answer key)"


class _Config(StrictBody):
    """Unknown fields and coerced scalars refused (memweb.schemas)."""


class AgentConfig(_Config):
    backend: AgentBackend = AgentBackend.SCRIPTED
    # Scripted agent only: probability (per episode) of making each error kind.
    error_rates: dict[Literal[ERROR_KINDS], float] = Field(default_factory=dict)
    # LLM agent only: model calls allowed per customer turn (tool rounds included).
    max_steps: int = Field(default=8, ge=1, le=30)
    max_tokens: int | None = Field(default=None, ge=1, le=32768,
                                   description="LLM agent only: cap per answer; the actor role's setting when empty")
    context_tokens: int | None = Field(
        default=None, ge=1024, le=1_000_000,
        description="LLM agent only: the context window its prompt and answer must fit (oldest turns are dropped, the "
                    "system prompt kept); empty: no cap, except that a run's LLM agent gets the paper's 4096, "
                    "with memory or without")

    @model_validator(mode="after")
    def _rates_are_probabilities(self):
        for kind, rate in self.error_rates.items():
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"error_rates.{kind} must be between 0 and 1, got {rate}")
        return self


class CustomerConfig(_Config):
    backend: CustomerBackend = CustomerBackend.AGENDA
    max_tokens: int | None = Field(default=None, ge=1, le=32768,
                                   description="LLM customer only: cap per turn; the user simulator role's when empty")


class MemoryConfig(_Config):
    kind: str = Field(default=MemoryKind.NONE, max_length=64, description="A registered memory layer's name")
    bank: str = Field(default="", max_length=200, description="Memory bank name or slug (MemOrb Orbs, DMRM experiences)")
    k: int | None = Field(default=None, ge=1, le=50, description="Top-k; the bank's own k when empty")
    approved_only: bool = True
    same_customer_only: bool = Field(
        default=False, description="Only Orbs from this customer's own episodes: a same-customer filter, not the paper's "
                                   "no-cross-user ablation (that is k = 1)")
    same_domain_only: bool = False
    min_score: float | None = Field(default=None, ge=-1.0, le=1.0)
    per_turn: bool = Field(default=True, description="Retrieve before every agent turn, or once per episode")
    withhold_probability: float = Field(
        default=0.0, ge=0.0, le=1.0,
        description="Chance that a retrieved Orb is kept out of the prompt, decided once per (episode, Orb)")
    withhold_key: str = Field(default="", max_length=200,
                              description="The episode's key for the withholding draw (the same key draws the same)")
    namespace: str = Field(default="", max_length=200,
                           description="An external memory layer: the run's own memory on its service")

    @field_validator("kind")
    @classmethod
    def _registered(cls, kind: str) -> str:
        return memory_layer_validate(kind)

    @model_validator(mode="after")
    def _bank_for_memory(self):
        if memory_layer(self.kind).has_bank and not self.bank.strip():
            raise ValueError(f"bank is required when kind is {self.kind}")
        return self

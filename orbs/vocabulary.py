"""The words orbs adds to memweb's shared vocabulary (declared on OrbsConfig, read by memweb.registry):
the API scopes its routes ask for, the webhook events it announces, the LLM roles its backends call."""
from django.db.models import TextChoices


class OrbsScope(TextChoices):
    # No scope reviews memories: approve, edit and reject take a reviewer's session.
    MEMORY_READ = "memory:read", "memory:read — read banks, Orbs and experiences; retrieve"
    MEMORY_WRITE = "memory:write", "memory:write — create, import, copy, delete banks; write episodes and lessons"

    @property
    def ticked_for_new_keys(self) -> bool:
        """Reading memory is the least a new agent needs, so the API-keys page offers it ticked."""
        return self is OrbsScope.MEMORY_READ


class OrbsEvent(TextChoices):
    EPISODE_INGESTED = "episode.ingested", "episode ingested (its Orb stored)"
    ORB_PENDING_REVIEW = "orb.pending_review", "Orb awaiting review"


# Room for each role's longest honest answer: local servers generate until their context is full
# when a request sets no limit, so every call carries one (MEMWEB_LLM_<ROLE>_MAX_TOKENS overrides it).
_MAX_TOKENS = {"reflector": 512, "rewriter": 128}


class OrbsLLMRole(TextChoices):
    REFLECTOR = "reflector", "reflector — writes an Orb's reflection; tags a trajectory's emotion"
    REWRITER = "rewriter", "rewriter — turns a customer's message into a retrieval query"

    @property
    def max_tokens(self) -> int:
        return _MAX_TOKENS[self.value]

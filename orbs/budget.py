"""How long an Orb's entry in the agent's prompt can be, and so the prompt budget that fits k of them.

MemOrb concatenates the top-k reflections into the prompt; a bank's token budget smaller than k
entries of the longest reflection the reflector is asked for silently serves fewer than k. The
figures are counted with the embedding model's tokenizer (memweb.embeddings.Embedder.count_tokens),
the one the prompt block is measured with. Django-free, so the model's default can use it.
"""
import math

DEFAULT_K = 5  # the paper's top-k
# The reflector asks for at most this many words (orbs.backends.reflector).
REFLECTION_MAX_WORDS = 120
# MiniLM's WordPiece splits tool names and ids (`return_delivered_order_items`, W2378156) into
# many pieces: 1.8 tokens per word measured on a 90-word reflection naming three tools, 2.04 on a
# 120-word one dense with tool names and order ids; 2.25 leaves room above both.
TOKENS_PER_WORD = 2.25
REFLECTION_MAX_TOKENS = math.ceil(REFLECTION_MAX_WORDS * TOKENS_PER_WORD)
# An entry's situation is the customer's words clipped to this many characters (orbs.services.retrieval);
# at least 3.5 characters per token measured on customer turns with ids and an email, 3 bounds it.
SITUATION_MAX_CHARS = 300
SITUATION_MAX_TOKENS = math.ceil(SITUATION_MAX_CHARS / 3)
# "[k] Situation: … Customer felt: <label> … Lesson: " around them: 11 tokens measured, 16 with a long label.
ENTRY_FRAME_TOKENS = 16
HEADER_TOKENS = 13  # PROMPT_HEADER, measured
ENTRY_MAX_TOKENS = SITUATION_MAX_TOKENS + ENTRY_FRAME_TOKENS + REFLECTION_MAX_TOKENS
MAX_PROMPT_TOKEN_BUDGET = 8000


def prompt_budget_for(k: int) -> int:
    """Tokens that hold the header and k entries of the longest reflection, capped at the
    largest budget a bank accepts."""
    return min(HEADER_TOKENS + k * ENTRY_MAX_TOKENS, MAX_PROMPT_TOKEN_BUDGET)


def orbs_that_fit(budget: int) -> int:
    """How many longest-length entries a budget holds for certain (shorter ones may fit more)."""
    return max(0, (budget - HEADER_TOKENS) // ENTRY_MAX_TOKENS)


DEFAULT_PROMPT_TOKEN_BUDGET = prompt_budget_for(DEFAULT_K)

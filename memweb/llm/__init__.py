"""The LLM layer: one OpenAI-compatible client per role, with retries, JSON repair and a call log.

Exports resolve lazily because settings.py imports memweb.llm.config before Django's apps
(and so the LLMCall model) are ready.
"""
_EXPORTS = (
    "ChatReply", "LLMError", "ToolCall", "llm_chat", "llm_json", "role_config", "role_statuses",
)
__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        from memweb.llm import client

        return getattr(client, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

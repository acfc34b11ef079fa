"""The three language steps of an Orb's life (emotion tag, reflection, query
rewrite), each with an LLM path and an honest offline backend.

The offline backends are deterministic rules and are labelled "scripted"
wherever their results are shown. When a role has an endpoint but the call
fails for good, the offline backend answers instead and the error is kept.
"""
from collections.abc import Callable
from dataclasses import dataclass

from memweb.llm.backends import TextBackend


@dataclass(frozen=True)
class BackendResult:
    value: str
    backend: str
    error: str = ""

    @property
    def is_scripted(self) -> bool:
        return TextBackend.is_scripted(self.backend)


def run_with_fallback(*, role: str, llm: Callable[[], str], offline: Callable[[], str]) -> BackendResult:
    from memweb.llm import LLMError, role_config

    config = role_config(role)
    if config.is_offline:
        return BackendResult(offline(), TextBackend.SCRIPTED)
    try:
        return BackendResult(llm(), TextBackend.of_llm(config.model))
    except LLMError as exc:
        return BackendResult(offline(), TextBackend.FALLBACK, str(exc))

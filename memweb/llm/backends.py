"""Who produced a piece of text a role is responsible for (a reflection, a rewrite, an emotion tag,
a critique, a score): an LLM, stored as `llm:<model>`, or the role's offline backend, labelled
"scripted" wherever it is shown, and "scripted (LLM failed)" when the LLM was asked and failed for good.
Stored values carry the model name, so the fields that hold them keep no `choices`."""
from django.db import models


class TextBackend(models.TextChoices):
    LLM = "llm", "LLM"
    SCRIPTED = "scripted", "scripted"
    FALLBACK = "scripted (LLM failed)", "scripted (LLM failed)"

    @classmethod
    def of_llm(cls, model: str) -> str:
        return f"{cls.LLM.value}:{model}"

    @classmethod
    def is_scripted(cls, stored: str) -> bool:
        """True for both offline values (they share the SCRIPTED prefix)."""
        return str(stored).startswith(cls.SCRIPTED.value)

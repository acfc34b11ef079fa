"""The benchmarks' questions for a model, answered by memweb's LLM roles when one is configured:
τ²-bench's natural-language assertions (the scorer role) and ECom-Bench's image tool (the actor
role, the agent's own model, which must then read images). Without an endpoint the assertions stay
"not judged" and the image tool says no description is available; neither is ever made up."""
from pydantic import BaseModel, Field

from evaluation.environments.ecom_bench.tools import OFFLINE_IMAGE_ANSWER
from evaluation.vocabulary import EvaluationLLMRole
from memweb.llm import llm_chat, llm_json, role_config

ASSERTIONS_PROMPT = (
    "You check a customer-service agent's replies against statements about what the agent should have "
    "done or said. For each numbered statement, answer whether the replies show it is met.")
IMAGE_PROMPT = ("Describe what the customer's image shows, answering the question asked about it. Say so when the "
                "conversation holds no image you can read.")


class AssertionVerdicts(BaseModel):
    met: list[bool] = Field(description="One verdict per statement, in their order")


def assertions_judge(assertions: list[str], replies: list[str]) -> list[bool] | None:
    """One verdict per assertion from the scorer role; None offline, or when it answers another number
    of verdicts than there are assertions (then nothing is counted as judged)."""
    if role_config(EvaluationLLMRole.SCORER).is_offline:
        return None
    statements = "\n".join(f"{n}. {text}" for n, text in enumerate(assertions, start=1))
    said = "\n\n".join(replies) or "(the agent said nothing)"
    answer = llm_json(role=EvaluationLLMRole.SCORER, schema=AssertionVerdicts, messages=[
        {"role": "system", "content": ASSERTIONS_PROMPT},
        {"role": "user", "content": f"Statements:\n{statements}\n\nThe agent's replies:\n{said}"}])
    return answer.met if len(answer.met) == len(assertions) else None


def image_describe(*, summarized_query: str, needed_query: str, history_messages: str) -> str:
    """ECom-Bench's get_image_info, asked of the actor role's model."""
    if role_config(EvaluationLLMRole.ACTOR).is_offline:
        return OFFLINE_IMAGE_ANSWER
    reply = llm_chat(role=EvaluationLLMRole.ACTOR, messages=[
        {"role": "system", "content": IMAGE_PROMPT},
        {"role": "user", "content": f"Conversation:\n{history_messages}\n\nSummary: {summarized_query}\n"
                                    f"Question about the image: {needed_query}"}])
    return reply.content or OFFLINE_IMAGE_ANSWER

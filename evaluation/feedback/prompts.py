"""Prompts of the LLM-as-user judge (MemoryBench-style): a profile prompt that sets who the
simulated customer is, a test prompt that hands it the conversation and the ground truth, and the
scorer's prompt. Plain functions of plain data, so they are easy to read and test.
"""
import hashlib
import json

STANDARD_RULES = (
    "Stay on your initial request: do not bring up new wishes or topics.",
    "Never repeat a question you have already asked; if it was ignored, say so instead.",
    "Reason first, then decide whether to continue the conversation and what to say.",
)

_COMMON_CRITERIA = (
    "Was the request actually carried out, not just promised?\n"
    "Are all facts the customer needs (amounts, dates, statuses, ids) stated and correct?\n"
    "Did the agent invent anything (orders, prices, policies) that the shop does not have?\n"
    "Was the answer clear, polite and no longer than needed?"
)

DEFAULT_PROFILES = {
    "appliances": {
        "name": "Household-appliances customer",
        "persona": "A customer of an online shop for household appliances (ovens, dishwashers, washing "
                   "machines). Busy, practical, expects the shop to sort things out in one conversation.",
        "domain_expertise": "Knows their own orders and appliances, and roughly how deliveries, installations, "
                            "repairs, warranties and refunds work; does not know the shop's internal tools.",
        "evaluation_criteria": _COMMON_CRITERIA
        + "\nFor bookings (installation, repair): is the date confirmed exactly as asked?",
    },
    "clothing": {
        "name": "Clothing customer",
        "persona": "A customer of an online clothing shop. Cares about fit, material and getting refunds "
                   "or exchanges done without fuss.",
        "domain_expertise": "Knows their sizes, measurements and orders, and how returns and exchanges usually "
                            "work; does not know the shop's internal tools.",
        "evaluation_criteria": _COMMON_CRITERIA
        + "\nFor exchanges and size advice: is the size or colour exactly the one asked for?",
    },
}


def profile_defaults(key: str) -> dict:
    """Field values for a new profile of task family `key` (a generic one for unknown families)."""
    base = DEFAULT_PROFILES.get(key) or {
        "name": f"{key} customer",
        "persona": f"A customer of an online shop asking for help with a {key} request.",
        "domain_expertise": "Knows their own orders and what they asked for; does not know the shop's internal tools.",
        "evaluation_criteria": _COMMON_CRITERIA,
    }
    return {**base, "behaviour_rules": "\n".join(STANDARD_RULES), "language": "English"}


def profile_prompt(*, persona: str, domain_expertise: str, evaluation_criteria: str, behaviour_rules: str) -> str:
    """The system message: who the simulated user is and how it judges."""
    return (
        "You play a customer who has just been helped by a shop's customer-service agent, and you judge "
        "the agent's latest reply as that customer would.\n\n"
        f"# Persona\n{persona}\n\n# Domain expertise\n{domain_expertise}\n\n"
        f"# Evaluation criteria\n{evaluation_criteria}\n\n# Behaviour rules\n{behaviour_rules}"
    )


def history_text(turns: list[tuple[str, str]]) -> str:
    return "\n".join(f"{speaker}: {text}" for speaker, text in turns) or "(no messages)"


def test_prompt(*, history: list[tuple[str, str]], response: str, task_description: str,
                evaluation_context: dict, language: str) -> str:
    """The user message: the conversation, the task, what the customer knows of it (its requests and
    the facts it wants told: never the gold answer, since a critique goes into memory), language and
    output format."""
    return (
        f"# Conversation so far\n{history_text(history)}\n\n"
        f"# The agent's reply to judge\n{response or '(the agent never replied)'}\n\n"
        f"# Your task as the customer\n{task_description}\n\n"
        "# What you asked for (the agent did not see this list)\n"
        f"{json.dumps(evaluation_context, ensure_ascii=False, indent=1)}\n\n"
        f"# Language\nWrite `reasoning` and `response` in {language}.\n\n"
        "# Output\nReply with strict JSON only: "
        '{"reasoning": "<your judgement of the reply, against the criteria and what you asked for>", '
        '"behavior": "continue_conversation" | "end_conversation", '
        '"response": "<what you say next to the agent>" | null}. '
        "Use end_conversation when you are satisfied or see no point going on, and then response must be null; "
        "with continue_conversation, response is your next message."
    )


# The bands tell the scorer what each part of the scale means, as MemoryBench's scoring prompt does;
# they follow the offline shop scale (docs/FEEDBACK_MODEL.md) so both backends mean the same by S.
SCORE_BANDS = (
    ("1-2", "harmful or invented: the agent made up orders, prices or policies, or did damage"),
    ("3-4", "failed: the request was not carried out, or carried out wrongly"),
    ("5-6", "partly helped: some of the request was done, or facts the customer needed are missing"),
    ("7-8", "mostly satisfied: the request was carried out, with small flaws (a detour, an unclear answer)"),
    ("9-10", "fully satisfied: carried out correctly, every needed fact stated, clear and concise"),
)

SCORER_SYSTEM = (
    "You rate how satisfied a shop's customer is with a customer-service conversation, on an integer scale "
    "from 1 (very dissatisfied) to 10 (completely satisfied). Weigh whether the request was carried out "
    "correctly against the ground truth, whether the customer was told the facts they needed, and whether "
    "anything was invented. Use these bands:\n"
    + "\n".join(f"{band}: {meaning}" for band, meaning in SCORE_BANDS)
    + "\nReply with strict JSON only: {\"score\": <integer 1-10>}."
)


def scorer_prompt(*, history: list[tuple[str, str]], response: str, evaluation_context: dict) -> str:
    return (
        f"# Conversation\n{history_text(history)}\n\n# Final reply of the agent\n{response or '(none)'}\n\n"
        "# Evaluation context (ground truth)\n"
        f"{json.dumps(evaluation_context, ensure_ascii=False, indent=1)}"
    )


REVISION_SYSTEM = (
    "You are an online shop's customer-service assistant. The conversation's actions are finished and no "
    "tools are available any more. The customer has just given feedback on your last reply: answer it in "
    "words, correcting or completing what you told them with facts from the conversation only. Do not claim "
    "to make changes or invent orders, prices or policies."
)


def _frames() -> dict[str, str]:
    """The fixed text of each part's prompts, rendered around placeholders: what a release can change.
    A profile's persona, expertise, criteria and rules are data of the profile, not of the template."""
    fields = {name: f"{{{name}}}" for name in ("persona", "domain_expertise", "evaluation_criteria", "behaviour_rules")}
    return {
        "critique": profile_prompt(**fields) + test_prompt(history=[], response="", task_description="{task}",
                                                           evaluation_context={}, language="{language}"),
        "scorer": SCORER_SYSTEM + scorer_prompt(history=[], response="", evaluation_context={}),
        "revision": REVISION_SYSTEM,
    }


FEEDBACK_PARTS = ("critique", "scorer", "revision")


def feedback_prompt_hash(*, part: str) -> str:
    """SHA-256 of the prompt templates of the simulated user's `part` (critique, scorer or revision), to
    pin with a run as the agent's prompt template is (evaluation.llm_backends.prompt_template_hash)."""
    return hashlib.sha256(_frames()[part].encode()).hexdigest()

"""Emotion of the customer's last utterance, over a fixed label set.

Offline: weighted lexical cues (a small lexicon in the spirit of rule-based
sentiment taggers such as VADER), with negated praise counted as frustration
and shouting (a run of all-caps words) as anger. Courtesy inside a complaint
("thanks, but this is useless", "thanks for nothing", "oh great, late again")
is not gratitude: once a message complains, its thanks and praise count for nothing.
"""
import re
from typing import Literal

from pydantic import BaseModel

from orbs.backends import BackendResult, run_with_fallback
from orbs.vocabulary import OrbsLLMRole

LABELS = ("angry", "frustrated", "anxious", "confused", "neutral", "satisfied", "grateful")
EmotionLabel = Literal["angry", "frustrated", "anxious", "confused", "neutral", "satisfied", "grateful"]
ROLE = OrbsLLMRole.REFLECTOR  # the role that reads whole trajectories also tags their last utterance

# On equal scores the earlier label wins: a complaint outweighs a polite "thanks".
_CUES: dict[str, tuple[str, ...]] = {
    "angry": (
        r"unacceptable", r"ridiculous", r"outrageous", r"furious", r"angry", r"worst", r"scam", r"disgust\w*",
        r"useless", r"terrible", r"awful", r"incompetent", r"(?:speak|talk) to (?:a|your) (?:manager|supervisor)",
        r"i demand", r"what the hell", r"pathetic", r"never (?:again|shop)", r"rip[- ]?off", r"lawyer",
        r"(?:i want|give me) my money back", r"a joke", r"right now", r"(?:really|so|very) annoyed",
        r"not good enough",
    ),
    "frustrated": (
        r"frustrat\w*", r"annoy\w*", r"still (?:not|no|hasn'?t|haven'?t|doesn'?t|isn'?t|waiting)",
        r"(?:broke|broken|failed|happened|wrong|late|missing|cancell?ed) again",
        r"already (?:told|said|gave|sent)", r"(?:second|third|fourth) time", r"how many times", r"waste of time",
        r"(?:doesn'?t|does not|isn'?t|is not|won'?t|not) work\w*", r"keeps? (?:failing|breaking|happening)",
        r"seriously", r"ugh+", r"fed up", r"come on", r"not (?:happy|good|great|helpful|ok)", r"disappoint\w*",
        # sarcasm: thanks and praise said about a failure
        r"thanks? (?:a lot )?for nothing", r"thank you for (?:nothing|wasting)", r"wast\w* (?:my|of)",
        r"(?:oh|just|how) (?:great|perfect|wonderful|lovely|brilliant)", r"yeah,? right",
        r"(?:lost|late|wrong|missing|broken) again",
    ),
    "anxious": (
        r"worried", r"worry", r"nervous", r"anxious", r"urgent\w*", r"asap", r"as soon as possible", r"afraid",
        r"scared", r"concern\w*", r"deadline", r"in time", r"need it (?:by|before)", r"what if", r"panick?\w*",
        r"hope (?:it|this|that|so)", r"will it (?:arrive|come|be)",
    ),
    "confused": (
        r"confus\w*", r"(?:don'?t|do not) (?:understand|get it)", r"not sure", r"what do you mean", r"unclear",
        r"which one", r"doesn'?t make sense", r"i thought", r"i'?m lost", r"wait,? what", r"huh",
    ),
    "grateful": (r"thanks?", r"thank you", r"appreciate\w*", r"grateful", r"cheers", r"lifesaver", r"kind of you"),
    "satisfied": (
        r"great", r"perfect", r"excellent", r"awesome", r"wonderful", r"sounds good", r"that works",
        r"works (?:now|fine)",
        r"(?:that'?s|that is) (?:fine|all|it)", r"problem solved", r"resolved", r"happy with", r"exactly what",
        r"good", r"love it", r"nice",
    ),
}
_PATTERNS = {label: re.compile(r"\b(?:" + "|".join(cues) + r")\b") for label, cues in _CUES.items()}
_NEGATED_PRAISE = re.compile(r"\bnot (?:\w+ )?(?:great|good|happy|perfect|fine|nice|helpful)\b")
_SHOUTED_RUN = re.compile(r"\b[A-Z]{2,}(?:[ ,]+[A-Z]{2,}){2,}\b")  # "THIS IS RIDICULOUS", not "the USB SKU"
_SHOUTED_WORD = re.compile(r"\b(?:NOW|NEVER|STILL|AGAIN|WHY|WHERE)\b")  # one shouted word of impatience
_GREETING = re.compile(r"\bgood (?:morning|afternoon|evening|day)\b")
# A conversation's polite last line ("Thank you. ###STOP###") says nothing of how the customer felt.
_CLOSING = re.compile(r"^(?:(?:thanks?|thank you|ok(?:ay)?|fine|never mind(?: then)?|goodbye|bye|that'?s all"
                      r"(?: i needed)?)[\s,.!]*)+$")
_STOP_TOKEN = re.compile(r"#+\s*STOP\s*#+")


def emotion_scores(text: str) -> dict[str, float]:
    lowered = _GREETING.sub(" ", text.lower())
    scores = {label: float(len(pattern.findall(lowered))) for label, pattern in _PATTERNS.items()}
    negated = len(_NEGATED_PRAISE.findall(lowered))
    scores["satisfied"] = max(0.0, scores["satisfied"] - negated)
    if _SHOUTED_RUN.search(text) or _SHOUTED_WORD.search(text) or ("!!" in text and scores["frustrated"]):
        scores["angry"] += 1.5
    if scores["angry"] or scores["frustrated"]:
        scores["grateful"] = scores["satisfied"] = 0.0
    return scores


def tag_offline(text: str) -> str:
    scores = emotion_scores(text)
    best = max(scores.values(), default=0.0)
    if best <= 0:
        return "neutral"
    return next(label for label in _CUES if scores[label] == best)


def emotion_text(utterances: list[str]) -> str:
    """The customer utterance whose emotion the Orb records: the last one, unless it is only a closing
    formula after earlier lines that carried a feeling (an angry customer who ends with "Thank you."
    when transferred is not grateful); then the latest line that did."""
    spoken = [_STOP_TOKEN.sub("", utterance).strip() for utterance in utterances]
    last = spoken[-1] if spoken else ""
    if not _CLOSING.match(last.lower()):
        return last
    felt = [utterance for utterance in spoken[:-1] if any(emotion_scores(utterance).values())]
    return felt[-1] if felt else last


class EmotionOut(BaseModel):
    label: EmotionLabel


def _tag_with_llm(text: str) -> str:
    from memweb.llm import llm_json

    messages = [
        {"role": "system", "content": (
            "You label the emotion of a customer's message to an online shop's support agent. "
            f"Choose exactly one label from: {', '.join(LABELS)}."
        )},
        {"role": "user", "content": text},
    ]
    return llm_json(role=ROLE, messages=messages, schema=EmotionOut).label


def emotion_tag(*, text: str) -> BackendResult:
    return run_with_fallback(role=ROLE, llm=lambda: _tag_with_llm(text), offline=lambda: tag_offline(text))

"""Annotation operations over the JSON API, as the campaign pages offer them. Operators: the
campaign's roster, the items annotators flagged (clear the flag or withdraw the item), the
disagreements and the lead's final labels with their history. Annotators: skip or flag the item in
hand, judging or writing feedback, by the same opaque tokens as the other annotator routes; the
answers say nothing about which side of a pair is human."""
from uuid import UUID

from django.shortcuts import get_object_or_404
from ninja import Router
from ninja.responses import Status

from annotation import services
from annotation.models import Adjudication, Assignment, Campaign, FeedbackTask, Flag, Item
from annotation.schemas import (
    AdjudicationIn,
    DecisionHistoryOut,
    DecisionOut,
    DisagreementOut,
    FieldErrorOut,
    FlagIn,
    FlagsClearedOut,
    FlagsOut,
    PassedOut,
    RosterIn,
    RosterOut,
    SkipIn,
)
from annotation.vocabulary import AnnotationScope
from memweb.auth import api_auth
from memweb.roles import Role
from memweb.schemas import ErrorOut

router = Router(tags=["annotation"])
OPERATORS = api_auth(Role.OPERATOR, scope=AnnotationScope.ANNOTATION)
ANNOTATORS = api_auth(Role.ANNOTATOR, scope=AnnotationScope.ANNOTATION)
# The services name the page's form fields; the API bodies call them `reason` and `note`.
API_FIELDS = {"skip_reason": "reason", "flag_reason": "reason", "flag_note": "note"}
PASSED = {"skip": "skipped; the item goes to another annotator",
          "flag": "flagged for the campaign's lead; the item waits for their decision"}


# --- operators: the roster ---
@router.get("/campaigns/{campaign_id}/roster", response=RosterOut, auth=OPERATORS)
def roster_detail(request, campaign_id: int):
    """Who may work on the campaign; an empty roster admits every annotator of the workspace."""
    return roster_payload(get_object_or_404(Campaign, pk=campaign_id))


@router.put("/campaigns/{campaign_id}/roster", response={200: RosterOut, 400: FieldErrorOut}, auth=OPERATORS)
def roster_replace(request, campaign_id: int, payload: RosterIn):
    """The roster becomes exactly `annotators` (usernames; [] opens the campaign to every annotator).
    Whoever is left out gives back their unfinished items; `released` counts them. All or nothing."""
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    try:
        released = services.roster_set(campaign=campaign, usernames=payload.annotators, set_by=request.auth)
    except services.RosterError as error:
        return Status(400, {"detail": str(error), "field": "annotators"})
    return Status(200, roster_payload(campaign, released=released))


def roster_payload(campaign: Campaign, *, released: int = 0) -> dict:
    members = [{"annotator": member.annotator.get_username(), "annotator_id": member.annotator_id,
                "added_by": _username(member.added_by), "added_at": member.added_at}
               for member in services.roster_members(campaign=campaign)]
    candidates = [user.get_username() for user in services.roster_candidates(campaign=campaign)]
    return {"open_to_all": not members, "members": members, "candidates": candidates, "released": released}


# --- operators: flagged items ---
@router.get("/campaigns/{campaign_id}/flags", response=FlagsOut, auth=OPERATORS)
def flag_list(request, campaign_id: int):
    """Open flags, oldest first: each holds its item back from everyone until it is cleared or the
    item is withdrawn (`withdrawable` false, with the reason, once the item has been judged)."""
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    return {"flags": [flag_payload(flag) for flag in services.flags_open(campaign=campaign)],
            "skips": services.skips_count(campaign=campaign)}


def flag_payload(flag: Flag) -> dict:
    locked = services.item_lock_reason(item=flag.item) or ""
    return {"id": flag.pk, "item_id": flag.item_id, "source_ref": flag.item.source_ref, "stage": flag.stage,
            "reason": flag.reason, "reason_label": flag.get_reason_display(), "note": flag.note,
            "flagged_by": _username(flag.flagged_by), "created_at": flag.created_at,
            "withdrawable": not locked, "locked_reason": locked}


@router.post("/campaigns/{campaign_id}/items/{item_id}/clear-flags", response=FlagsClearedOut, auth=OPERATORS)
def item_flags_clear(request, campaign_id: int, item_id: int):
    """Keep a flagged item: its open flags are cleared (who and when are kept) and it goes back to
    the annotators. `cleared` is 0 when it had no open flag."""
    item = get_object_or_404(Item, pk=item_id, campaign_id=campaign_id)
    return {"item_id": item.pk, "cleared": services.flags_clear(item=item, cleared_by=request.auth)}


@router.delete("/campaigns/{campaign_id}/items/{item_id}", response={204: None, 409: ErrorOut}, auth=OPERATORS)
def item_withdraw(request, campaign_id: int, item_id: int):
    """Take an item nobody has judged out of the campaign (409 naming why not, once judged)."""
    item = get_object_or_404(Item, pk=item_id, campaign_id=campaign_id)
    try:
        services.item_withdraw(item=item)
    except services.ItemLocked as locked:
        return Status(409, {"detail": f"not withdrawn: {locked}"})
    return Status(204, None)


# --- operators: disagreements and final labels ---
@router.get("/campaigns/{campaign_id}/disagreements", response=list[DisagreementOut], auth=OPERATORS)
def disagreement_list(request, campaign_id: int):
    """Scored items whose counted votes differ, most split first: every vote per criterion and the
    lead's final label where they set one."""
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    return [disagreement_payload(row) for row in services.disagreements_adjudicated(campaign=campaign)]


def disagreement_payload(row: dict) -> dict:
    criteria = [{"key": criterion["key"], "label": criterion["label"], "split": criterion["split"],
                 "votes": [{"annotator": name, "label": label} for name, label in criterion["votes"]],
                 "final": decision_payload(criterion["final"]) if criterion["final"] else None}
                for criterion in row["criteria"]]
    return {key: row[key] for key in ("item_id", "source_ref", "judgments", "split", "adjudicated")} | {
        "criteria": criteria}


@router.post("/campaigns/{campaign_id}/items/{item_id}/adjudications",
             response={201: list[DecisionOut], 400: FieldErrorOut}, auth=OPERATORS)
def item_adjudicate(request, campaign_id: int, item_id: int, payload: AdjudicationIn):
    """The lead's final label per criterion (`labels`: criterion key -> human, simulated or tie;
    criteria left out keep their decision) with a `note` saying why. The final label replaces the
    item's majority in the campaign's win rates; agreement stays on the annotators' votes."""
    item = get_object_or_404(Item.objects.select_related("campaign"), pk=item_id, campaign_id=campaign_id)
    try:
        decided = services.adjudicate(item=item, labels=payload.labels, note=payload.note, decided_by=request.auth)
    except services.AdjudicationError as error:
        field = error.field if error.field in ("note", "item", "labels") else f"labels.{error.field}"
        return Status(400, {"detail": f"{field}: {error.reason}", "field": field})
    return Status(201, [decision_payload(decision) for decision in decided])


@router.get("/campaigns/{campaign_id}/adjudications", response=list[DecisionHistoryOut], auth=OPERATORS)
def adjudication_history(request, campaign_id: int, item_id: int | None = None):
    """Every decision the lead made, newest first (of one item with `item_id`); `current` marks the
    final label of its item and criterion, the others are its history."""
    campaign = get_object_or_404(Campaign, pk=campaign_id)
    current = {decision.pk for decided in services.final_labels(campaign=campaign).values()
               for decision in decided.values()}
    decisions = Adjudication.objects.filter(campaign=campaign).select_related("item", "decided_by").order_by("-pk")
    if item_id is not None:
        decisions = decisions.filter(item_id=item_id)
    return [decision_payload(decision) | {"source_ref": decision.item.source_ref, "current": decision.pk in current}
            for decision in decisions]


def decision_payload(decision: Adjudication) -> dict:
    return {"id": decision.pk, "item_id": decision.item_id, "criterion": decision.criterion,
            "label": decision.label, "note": decision.note, "decided_by": _username(decision.decided_by),
            "decided_at": decision.decided_at}


# --- annotators: skip or flag the item in hand ---
TRIAGE_ANSWERS = {200: PassedOut, 400: FieldErrorOut, 409: ErrorOut}


@router.post("/assignments/{token}/skip", response=TRIAGE_ANSWERS, auth=ANNOTATORS)
def assignment_skip(request, token: UUID, payload: SkipIn):
    """Pass on the pair you were given (an optional `reason`); it goes to another annotator, never back to you."""
    _own(Assignment, request, token, "annotator")
    return _triage(lambda: services.assignment_skip(token=token, annotator=request.auth, reason=payload.reason),
                   "skip")


@router.post("/assignments/{token}/flag", response=TRIAGE_ANSWERS, auth=ANNOTATORS)
def assignment_flag(request, token: UUID, payload: FlagIn):
    """Report the pair to the campaign's lead: `reason` one of broken, offensive, unclear, other (which
    needs a `note`). Nobody gets the item until the lead clears the flag."""
    _own(Assignment, request, token, "annotator")
    return _triage(lambda: services.assignment_flag(token=token, annotator=request.auth, reason=payload.reason,
                                                    note=payload.note), "flag")


@router.post("/feedback-tasks/{token}/skip", response=TRIAGE_ANSWERS, auth=ANNOTATORS)
def feedback_task_skip(request, token: UUID, payload: SkipIn):
    """Pass on the conversation you were given to write feedback on; it goes to another writer."""
    _own(FeedbackTask, request, token, "writer")
    return _triage(lambda: services.feedback_task_skip(token=token, writer=request.auth, reason=payload.reason),
                   "skip")


@router.post("/feedback-tasks/{token}/flag", response=TRIAGE_ANSWERS, auth=ANNOTATORS)
def feedback_task_flag(request, token: UUID, payload: FlagIn):
    """Report the conversation to the campaign's lead, with a `reason` as for a pair."""
    _own(FeedbackTask, request, token, "writer")
    return _triage(lambda: services.feedback_task_flag(token=token, writer=request.auth, reason=payload.reason,
                                                       note=payload.note), "flag")


def _own(model, request, token: UUID, holder: str) -> None:
    """Someone else's token is a 404, the same as a token that never existed."""
    get_object_or_404(model, token=token, **{holder: request.auth})


def _triage(act, kind: str):
    try:
        act()
    except services.SubmitError as error:
        if error.field not in API_FIELDS:  # the item left the caller's hands (done, or handed to others)
            return Status(409, {"detail": error.reason})
        field = API_FIELDS[error.field]
        detail = error.reason + (f" (one of {', '.join(Flag.Reason.values)})" if error.field == "flag_reason" else "")
        return Status(400, {"detail": f"{field}: {detail}", "field": field})
    return Status(200, {"detail": PASSED[kind]})


def _username(user) -> str:
    return user.get_username() if user else ""

"""Campaign and item builders shared by the annotation tests."""
import itertools

import pytest

from annotation.models import Campaign, Item
from memweb.roles import Role

_names = itertools.count(1)


def item_fields(**overrides) -> dict:
    fields = {
        "conversation": [{"role": "user", "content": "My washing machine leaks."},
                         {"role": "assistant", "content": "Please check the door seal."}],
        "task_description": "Customer reports a leaking washing machine.",
        "evaluation_context": "The seal is torn; a replacement is covered by warranty.",
        "human_feedback": "You never asked about my warranty.",
        "simulated_feedback": "The answer ignored the warranty coverage.",
        "language": "en", "task_format": "SiSo", "domain": "appliances",
        "is_attention": False, "simulated_score": None, "simulated_action": "", "simulated_like_probability": None,
        "simulated_scripted": False, "source_label": "", "source_url": "",
    }
    return fields | overrides


@pytest.fixture
def make_campaign(db, operator_user):
    def make(**overrides) -> Campaign:
        fields = {"name": f"Campaign {next(_names)}", "status": Campaign.Status.OPEN, "created_by": operator_user}
        return Campaign.objects.create(**(fields | overrides))

    return make


@pytest.fixture
def make_items():
    def make(campaign: Campaign, count: int, **overrides) -> list[Item]:
        return [Item.objects.create(campaign=campaign, **item_fields(**overrides)) for _ in range(count)]

    return make


@pytest.fixture
def annotators(user_for_role):
    def make(count: int):
        return [user_for_role(Role.ANNOTATOR) for _ in range(count)]

    return make

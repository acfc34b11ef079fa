"""Who the simulated user is: one profile per task family, created with defaults on first use."""
from evaluation.feedback.models import FeedbackProfile
from evaluation.feedback.prompts import profile_defaults

DEFAULT_PROFILE_KEYS = ("appliances", "clothing")


def profile_for(*, key: str) -> FeedbackProfile:
    """The profile of a task family, created with the defaults the first time it is needed."""
    profile, _ = FeedbackProfile.objects.get_or_create(key=key, defaults=profile_defaults(key))
    return profile


def profiles_ensure_defaults() -> list[FeedbackProfile]:
    for key in DEFAULT_PROFILE_KEYS:
        profile_for(key=key)
    return list(FeedbackProfile.objects.all())

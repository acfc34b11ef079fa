"""What the Orbs services raise; the API and pages turn each into a clear message."""


class OrbsError(Exception):
    """A request the services refuse, with a message meant for the person who made it."""


class InvalidTrajectory(OrbsError):
    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems  # (field path, message)
        super().__init__("invalid trajectory: " + "; ".join(f"{field}: {message}" for field, message in problems))


class FieldRequired(OrbsError):
    """A field the bank's policy requires was left empty (a per-customer bank needs the customer)."""

    def __init__(self, field: str, reason: str):
        self.field = field
        super().__init__(f"{field}: {reason}")


class BankModelMismatch(OrbsError):
    """Vectors of two embedding models are never compared."""


class InvalidTransition(OrbsError):
    """The review action does not apply to the Orb's current status."""


class OrbConflict(OrbsError):
    """Someone else changed the Orb after the caller loaded it; nothing was written."""

    def __init__(self, *, orb_id: int, expected_version: int, current_version: int, current_status: str, actor: str):
        self.orb_id, self.expected_version = orb_id, expected_version
        self.current_version, self.current_status = current_version, current_status
        by = f" by {actor}" if actor else ""
        super().__init__(
            f"Orb #{orb_id} was changed{by} after you loaded it (you saw version {expected_version}, it is now "
            f"version {current_version}, {current_status}). Nothing was overwritten: reload it and decide again."
        )


class BankArchived(OrbsError):
    """The bank was deleted (archived): it takes no new memories and serves no retrievals."""

    def __init__(self, slug: str):
        super().__init__(f"bank {slug!r} is deleted (archived): it takes no new memories and serves no "
                         "retrievals; restore it first")


class StaleVersion(OrbsError):
    """A DMRM experience changed after the caller loaded it; nothing was written."""

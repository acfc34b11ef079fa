"""A bank's memory at one moment, compact enough to pin on what was run against it (an evaluation
run pins its starting memory): counts, the latest Orb row and a fingerprint of every Orb's state."""
import hashlib
import json

from django.db.models import Count, Max, Q

from orbs.models import MemoryBank, Orb


def bank_snapshot(*, bank: MemoryBank) -> dict:
    """The bank's id and slug; its Orbs (every revision, any status) and the approved ones; the
    newest Orb row (`latest_revision`: an edit or a new Orb raises it); and a SHA-256 over each
    row's (stable id, revision, status, content hash) in id order, which any review decision, edit
    or new Orb changes."""
    rows = Orb.objects.filter(bank=bank)
    figures = rows.aggregate(orbs=Count("pk"), approved=Count("pk", filter=Q(status=Orb.Status.APPROVED)),
                             latest_revision=Max("pk"))
    digest = hashlib.sha256()
    for row in rows.order_by("pk").values_list("lineage_id", "revision", "status", "content_hash").iterator():
        digest.update(json.dumps(row).encode())
    return {"bank": bank.pk, "slug": bank.slug, **figures, "fingerprint": digest.hexdigest()}

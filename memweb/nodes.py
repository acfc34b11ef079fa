"""Nodes of one deployment share one signing key.

Sessions, CSRF tokens and password-reset links are signed with SECRET_KEY. Two nodes behind one load
balancer with two keys refuse each other's sessions at random, so a node started with a key other
than the one the database already knows refuses to start and names the setting. The database keeps
an HMAC fingerprint of the key, never the key.
"""
import hashlib
import hmac

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import ProgrammingError, transaction
from django.utils import timezone

FINGERPRINT_CONTEXT = b"memweb: signing-key fingerprint"


def signing_key_fingerprint() -> str:
    return hmac.new(settings.SECRET_KEY.encode(), FINGERPRINT_CONTEXT, hashlib.sha256).hexdigest()


def node_signing_key_check() -> None:
    """Record this key's fingerprint on the first start; refuse a key that differs from it."""
    from memweb.models import SigningKeyFingerprint

    mine = signing_key_fingerprint()
    try:
        with transaction.atomic():
            known, _ = SigningKeyFingerprint.objects.get_or_create(pk=1, defaults={"fingerprint": mine})
    except ProgrammingError:  # not migrated yet: `migrate` comes first, and the next start checks
        return
    if not hmac.compare_digest(known.fingerprint, mine):
        raise ImproperlyConfigured(
            "SECRET_KEY differs from the key the other nodes of this database sign sessions with "
            f"(recorded {known.recorded_at:%Y-%m-%d %H:%M} UTC). Set the same SECRET_KEY on every node; "
            + ("this node uses a node-local key from its data folder (SECRET_KEY is unset). "
               if settings.SECRET_KEY_IS_NODE_LOCAL else "")
            + "After a deliberate key rotation run `manage.py signing_key_adopt` once.")


def node_signing_key_adopt() -> None:
    """Make this node's key the deployment's key (after a deliberate rotation)."""
    from memweb.models import SigningKeyFingerprint

    SigningKeyFingerprint.objects.update_or_create(
        pk=1, defaults={"fingerprint": signing_key_fingerprint(), "recorded_at": timezone.now()})

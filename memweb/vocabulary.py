"""memweb's own words in the vocabulary every app contributes to (memweb.registry): the scope of
its webhook routes. Its test event (memweb.models.Webhook.TEST_EVENT) is sent on request only and
is nobody's subscription, so it is no declared event."""
from django.db.models import TextChoices


class MemwebScope(TextChoices):
    # What each API route needs is declared on the route (memweb.auth.api_auth); docs/SECURITY.md lists them.
    WEBHOOKS = "webhooks", "webhooks — manage webhooks and their deliveries"

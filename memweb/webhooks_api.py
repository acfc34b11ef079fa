"""The webhooks JSON API (operators): register, list and delete webhooks, read deliveries page by page,
send a test event, redeliver. The signing secret is answered once, by the create call."""

from ninja import Router
from ninja.errors import HttpError
from ninja.pagination import paginate
from ninja.responses import Status

from memweb.auth import api_auth
from memweb.errors import field_errors
from memweb.listing import ApiPagination
from memweb.models import Webhook, WebhookDelivery
from memweb.roles import Role
from memweb.schemas import WebhookCreatedOut, WebhookDeliveryOut, WebhookIn, WebhookOut, WebhookSwitchIn
from memweb.vocabulary import MemwebScope
from memweb.webhooks import (
    DeliveryErased,
    WebhookInvalid,
    deliveries_of,
    delivery_redeliver,
    webhook_create,
    webhook_switch,
    webhook_test_send,
    webhooks_list,
)

router = Router(tags=["webhooks"])
OPERATORS = api_auth(Role.OPERATOR, scope=MemwebScope.WEBHOOKS)
DELIVERIES_PER_PAGE = 50


def _webhook(request, webhook_id: int) -> Webhook:
    webhook = Webhook.objects.filter(pk=webhook_id).first()
    if webhook is None:
        raise HttpError(404, f"No webhook #{webhook_id}")
    return webhook


@router.get("", response=list[WebhookOut], auth=OPERATORS)
def webhook_list(request):
    return webhooks_list(workspace=request.workspace)


@router.post("", response={201: WebhookCreatedOut, 422: dict}, auth=OPERATORS)
def webhook_register(request, payload: WebhookIn):
    """Register a webhook. The answer carries its signing secret, which no later call shows again."""
    try:
        webhook, _secret = webhook_create(**payload.dict(), user=request.auth, workspace=request.workspace)
    except WebhookInvalid as invalid:
        return Status(422, field_errors([(invalid.field, str(invalid))], prefix=("body", "payload")))
    return Status(201, webhook)  # WebhookCreatedOut reads the secret from it; WebhookOut never does


@router.patch("/{int:webhook_id}", response={200: WebhookOut, 404: dict}, auth=OPERATORS)
def webhook_pause(request, webhook_id: int, payload: WebhookSwitchIn):
    """Pause (`active: false`) or resume a webhook. The events it misses while paused are recorded; on resume
    they are sent (or, with `replay_missed: false`, given up), and deliveries that came due go out."""
    return webhook_switch(_webhook(request, webhook_id), active=payload.active, replay_missed=payload.replay_missed)


@router.delete("/{int:webhook_id}", response={204: None, 404: dict}, auth=OPERATORS)
def webhook_delete(request, webhook_id: int):
    """Delete the webhook and its deliveries; nothing more is sent to it."""
    _webhook(request, webhook_id).delete()
    return Status(204, None)


@router.get("/deliveries", response=list[WebhookDeliveryOut], auth=OPERATORS)
@paginate(ApiPagination, page_size=DELIVERIES_PER_PAGE)
def delivery_list(request, webhook: int | None = None):
    """The deliveries, newest first, a page at a time (`page`, `page_size`), as every list of the API;
    `webhook` keeps one webhook's."""
    return deliveries_of(workspace=request.workspace, webhook_id=webhook)


@router.post("/{int:webhook_id}/test", response={202: WebhookDeliveryOut, 404: dict}, auth=OPERATORS)
def webhook_test(request, webhook_id: int):
    """Queue a `webhook.test` event to this webhook, whatever it subscribes to."""
    return Status(202, webhook_test_send(_webhook(request, webhook_id)))


@router.post("/deliveries/{int:delivery_id}/redeliver", response={202: WebhookDeliveryOut, 404: dict, 409: dict},
             auth=OPERATORS)
def delivery_resend(request, delivery_id: int):
    """Send the delivery again under the same id, with a fresh round of retries. A delivery that held an
    erased customer's data is refused (409): it is never sent again."""
    delivery = WebhookDelivery.objects.filter(pk=delivery_id).first()
    if delivery is None:
        raise HttpError(404, f"No webhook delivery #{delivery_id}")
    try:
        return Status(202, delivery_redeliver(delivery))
    except DeliveryErased as erased:
        raise HttpError(409, str(erased)) from None

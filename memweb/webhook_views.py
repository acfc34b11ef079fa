"""The Webhooks page (operators): register a webhook (its secret shown once), send a test event,
delete it; recent deliveries with their attempts, and redelivery."""
from django import forms
from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_GET, require_POST

from memweb.models import Webhook, WebhookDelivery
from memweb.roles import Role, role_required
from memweb.views import render_uncached
from memweb.webhooks import (
    MAX_ATTEMPTS,
    DeliveryErased,
    WebhookInvalid,
    deliveries_recent,
    delivery_redeliver,
    webhook_create,
    webhook_event_choices,
    webhook_switch,
    webhook_test_send,
    webhooks_list,
)

DELIVERIES_SHOWN = 50


def _max_length(field: str) -> int:
    return Webhook._meta.get_field(field).max_length


class WebhookForm(forms.Form):
    url = forms.CharField(max_length=_max_length("url"), label="Payload URL",
                          help_text="memweb POSTs JSON here (http:// or https://; redirects are not followed).")
    events = forms.MultipleChoiceField(choices=webhook_event_choices, widget=forms.CheckboxSelectMultiple,
                                       label="Events")
    bank = forms.CharField(max_length=_max_length("bank"), required=False, label="Memory bank (slug)",
                           help_text="Only this bank's events, runs using it included. Empty: every event.")
    description = forms.CharField(max_length=_max_length("description"), required=False, label="Description")


def _page(request, *, form, new_secret: str = "", status: int = 200):
    context = {"webhooks": webhooks_list(workspace=request.workspace), "form": form,
               "deliveries": deliveries_recent(workspace=request.workspace, limit=DELIVERIES_SHOWN),
               "new_secret": new_secret, "max_attempts": MAX_ATTEMPTS}
    return render_uncached(request, "memweb/webhooks.html", context, status=status)


@require_GET
@role_required(Role.OPERATOR)
def webhooks(request):
    return _page(request, form=WebhookForm())


@require_POST
@role_required(Role.OPERATOR)
def webhook_add(request):
    form = WebhookForm(request.POST)
    if not form.is_valid():
        return _page(request, form=form, status=400)
    try:
        webhook, secret = webhook_create(**form.cleaned_data, user=request.user, workspace=request.workspace)
    except WebhookInvalid as invalid:
        form.add_error(invalid.field, str(invalid))
        return _page(request, form=form, status=400)
    messages.success(request, f"Webhook to {webhook.url} created. Copy its secret now: it is shown only once.")
    return _page(request, form=WebhookForm(), new_secret=secret)


@require_POST
@role_required(Role.OPERATOR)
def webhook_test(request, webhook_id: int):
    delivery = webhook_test_send(get_object_or_404(Webhook, pk=webhook_id))
    messages.info(request, f"Test event queued for {delivery.webhook.url}; its delivery is listed below.")
    return redirect("webhooks")


@require_POST
@role_required(Role.OPERATOR)
def webhook_toggle(request, webhook_id: int):
    webhook = get_object_or_404(Webhook, pk=webhook_id)
    webhook = webhook_switch(webhook, active=request.POST.get("active") == "on")
    state = ("resumed: the events it missed and its waiting deliveries go out" if webhook.active
             else "paused: nothing is sent to it; the events it misses wait for its resume")
    messages.success(request, f"Webhook to {webhook.url} {state}.")
    return redirect("webhooks")


@require_POST
@role_required(Role.OPERATOR)
def webhook_remove(request, webhook_id: int):
    """Delete a webhook once the operator confirms: the first post only asks, naming what goes with it."""
    webhook = get_object_or_404(Webhook, pk=webhook_id)
    if request.POST.get("confirm") != "yes":
        deliveries = WebhookDelivery.objects.filter(webhook=webhook).count()
        return render_uncached(request, "memweb/webhook_delete.html", {"webhook": webhook, "deliveries": deliveries})
    webhook.delete()
    messages.success(request, f"Webhook to {webhook.url} deleted; nothing more is sent to it.")
    return redirect("webhooks")


@require_POST
@role_required(Role.OPERATOR)
def delivery_resend(request, delivery_id: int):
    try:
        delivery = delivery_redeliver(get_object_or_404(WebhookDelivery, pk=delivery_id))
    except DeliveryErased as erased:
        messages.error(request, f"Not sent: {erased}.")
        return redirect("webhooks")
    messages.info(request, f"Delivery {delivery.uuid} queued again.")
    return redirect("webhooks")

"""memweb_client's answers decode from a live memweb's real ones: the async client walks the routes an
operator's script uses (Orbs, DMRM, webhooks, runs, erasure as a job) in one round."""

import pytest
from memweb_client import AsyncClient, NotFound, OrbDetail, RunPage, WebhookCreated

from orbs.models import Orb
from orbs.services import bank_get_or_create, orb_approve, orb_from_episode
from tests.orbs.conftest import success_trajectory
from tests.support.event_loop import run_to_end

GOAL = "return the jacket from order W7"


@pytest.fixture
def customers_orb(db) -> Orb:
    bank = bank_get_or_create(name="support")
    orb = orb_from_episode(bank=bank, trajectory=success_trajectory("My kettle leaks", customer_key="cust-7")).orb
    return orb_approve(orb_id=orb.pk, expected_version=orb.version, actor=None)


async def operator_round(url: str, key: str, orb_id: int) -> dict:
    seen = {}
    async with AsyncClient(url, key, poll_interval=0.05) as memweb:
        seen["me"], seen["banks"] = await memweb.me(), await memweb.banks()
        seen["page"] = await memweb.orbs(bank="support", status="approved")
        seen["orb"], seen["revisions"] = await memweb.orb(orb_id), await memweb.orb_revisions(orb_id)

        seen["written"] = await memweb.transitions("support", [
            {"trajectory_id": "t1", "step": 0, "goal": GOAL, "observation": "s0", "action": "get_order",
             "reward": 1.0, "done": True, "success": True}])
        seen["steps"] = await memweb.experiences_retrieve("support", GOAL, "s0", client="script")
        seen["settings"] = await memweb.dmrm_settings_update("support", {"c_max": 600})
        seen["experiences"] = await memweb.experiences("support")
        seen["experience"] = await memweb.experience("support", seen["experiences"].items[0].id)

        hook = await memweb.webhook_create("http://127.0.0.1:9/hook", ["orb.pending_review"], bank="support")
        seen["hook"], seen["paused"] = hook, await memweb.webhook_set_active(hook.id, False)
        seen["hooks"], seen["deliveries"] = await memweb.webhooks(), await memweb.deliveries(webhook=hook.id)
        await memweb.webhook_delete(hook.id)
        seen["runs"] = await memweb.runs(limit=5)

        job = await memweb.erase_customer("support", "cust-7", reason="the customer asked")
        seen["erased"] = await memweb.wait_for_job(job.id)
        try:
            await memweb.orb(orb_id)
        except NotFound as gone:
            seen["after"] = gone
    return seen


@pytest.mark.django_db(transaction=True)  # the live server's thread reads what the test wrote
def test_an_operator_s_script_round_decodes_every_answer(live_server, api_key, operator_user, customers_orb, settings):
    settings.MEMWEB_WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]
    seen = run_to_end(operator_round(live_server.url, api_key, customers_orb.lineage_id))

    assert seen["me"].username == operator_user.username and [b.slug for b in seen["banks"]] == ["support"]
    assert seen["page"].count == 1 and seen["page"].items[0].customer_key == "cust-7"
    assert isinstance(seen["orb"], OrbDetail) and seen["orb"].obs == customers_orb.obs
    assert [event.action for event in seen["orb"].history] == [e.action for e in seen["revisions"].revisions[0].events]
    assert seen["revisions"].current_revision == 1 and seen["orb"].reviewed_at is not None

    assert seen["written"].written == 1 and seen["written"].entries[0].action == "get_order"
    assert seen["steps"].c_max > 0 and seen["settings"].c_max == 600
    assert seen["experience"].goal == GOAL and seen["experience"].created_at.tzinfo is not None

    assert isinstance(seen["hook"], WebhookCreated) and seen["hook"].secret
    assert seen["paused"].active is False and [h.id for h in seen["hooks"]] == [seen["hook"].id]
    assert seen["deliveries"].items == [] and seen["deliveries"].count == 0
    assert isinstance(seen["runs"], RunPage) and seen["runs"].count == 0

    assert seen["erased"].status == "succeeded" and seen["erased"].finished
    assert seen["after"].status == 404 and not Orb.objects.filter(customer_key="cust-7").exists()

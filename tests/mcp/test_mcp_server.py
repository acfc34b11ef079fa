"""The MCP server driven by the official MCP SDK's client (`mcp.ClientSession`), over stdio and over
streamable HTTP, each a real `manage.py mcp_serve` process on the test database: the tools, the review
gate (only approved memories come back; a remembered lesson waits for a reviewer's approval through the
normal API), the key's scopes and its workspace."""
import json
import socket
import subprocess
import sys
import threading
from contextlib import contextmanager

import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from orbs.models import EpisodeRecord, Orb, RetrievalLog
from tests.mcp.conftest import APPROVED_TEXT, LESSON, PENDING_TEXT, SITUATION
from tests.orbs.conftest import post, success_trajectory
from tests.support.event_loop import run_to_end
from tests.support.processes import ROOT, free_port, stop_process_group, wait_until, worker_env

pytestmark = pytest.mark.django_db(transaction=True)  # the server process reads what the test wrote
TOOLS = {"list_banks", "retrieve_memories", "remember_lesson", "submit_episode", "episode_status", "report_outcome"}


def structured(result) -> dict:
    assert not result.is_error, result.content
    return result.structured_content


def refusal(result) -> str:
    assert result.is_error
    return " ".join(block.text for block in result.content)


def resource_json(result):
    return json.loads(result.contents[0].text)


async def agent_story(session: ClientSession, bank: str) -> dict:
    """What one agent does in an episode: discover, retrieve, remember, submit, report."""
    seen = {"tools": {tool.name for tool in (await session.list_tools()).tools}}
    seen["retrieval"] = structured(await session.call_tool("retrieve_memories", {"bank": bank, "situation": SITUATION}))
    seen["lesson"] = structured(await session.call_tool("remember_lesson", {"bank": bank, "lesson": LESSON}))
    episode = success_trajectory("The kettle lid is broken, please replace it", task_id="t3")
    seen["episode"] = structured(await session.call_tool("submit_episode", {"bank": bank, "trajectory": episode,
                                                                            "episode_ref": "mcp-1"}))
    seen["status"] = structured(await session.call_tool("episode_status", {"ingest_id": seen["episode"]["ingest_id"]}))
    seen["outcome"] = structured(await session.call_tool("report_outcome", {
        "retrieval_id": seen["retrieval"]["retrieval_id"], "success": True, "reward": 1.0, "episode_ref": "mcp-1"}))
    seen["resource"] = resource_json(await session.read_resource(f"memweb://banks/{bank}/memories"))
    return seen


def assert_story(seen: dict, memory: dict) -> None:
    assert seen["tools"] == TOOLS  # nothing that approves, edits or rejects
    served = {hit["id"] for hit in seen["retrieval"]["memories"]}
    assert served == {memory["approved"].lineage_id}  # the pending one is as similar, and never served
    assert APPROVED_TEXT in seen["retrieval"]["prompt_block"] and PENDING_TEXT not in seen["retrieval"]["prompt_block"]
    lesson = Orb.objects.get(lineage_id=seen["lesson"]["id"], revision=seen["lesson"]["revision"])
    assert (seen["lesson"]["status"], lesson.status, lesson.bank) == ("pending", Orb.Status.PENDING, memory["bank"])
    record = EpisodeRecord.objects.get(pk=seen["episode"]["ingest_id"])
    assert (record.episode_ref, seen["status"]["status"]) == ("mcp-1", record.status)
    log = RetrievalLog.objects.get(pk=seen["retrieval"]["retrieval_id"])
    assert (log.outcome_success, log.outcome_reward, log.outcome_episode_ref) == (True, 1.0, "mcp-1")
    assert [m["id"] for m in seen["resource"]["memories"]] == [memory["approved"].lineage_id]
    assert {m["status"] for m in seen["resource"]["memories"]} == {"approved"}


def run_stdio(key: str, story):
    params = StdioServerParameters(command=sys.executable, args=["manage.py", "mcp_serve", "--stdio"], cwd=str(ROOT),
                                   env=worker_env(MEMWEB_API_KEY=key))

    async def talk():
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await story(session)

    return run_to_end(talk())


def test_an_agent_uses_memory_over_stdio_and_gets_approved_memories_only(memory):
    seen = run_stdio(memory["key"], lambda session: agent_story(session, memory["bank"].slug))
    assert_story(seen, memory)


@contextmanager
def http_server():
    port = free_port()
    process = subprocess.Popen([sys.executable, "manage.py", "mcp_serve", "--http", "--port", str(port)], cwd=ROOT,
                               env=worker_env(), start_new_session=True, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    output = []
    threading.Thread(target=lambda: output.extend(process.stdout), daemon=True).start()
    try:
        wait_until(lambda: _listening(port) or process.poll() is not None, timeout=180, message="the MCP server")
        assert process.poll() is None, "".join(output)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process_group(process)


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def run_http(url: str, key: str | None, story):
    async def talk():
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        async with httpx2.AsyncClient(headers=headers, timeout=120) as http, \
                streamable_http_client(url, http_client=http) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await story(session)

    return run_to_end(talk())


async def call(session: ClientSession, tool: str, arguments: dict):
    return await session.call_tool(tool, arguments)


def test_over_streamable_http_each_request_acts_with_its_own_key(memory, reviewer_user, client):
    slug = memory["bank"].slug
    with http_server() as url:
        seen = run_http(url, memory["key"], lambda session: agent_story(session, slug))
        assert_story(seen, memory)

        # The lesson is served once a reviewer approves it through the normal API, and not before.
        lesson = Orb.objects.get(lineage_id=seen["lesson"]["id"], revision=seen["lesson"]["revision"])
        client.force_login(reviewer_user)
        assert post(client, f"/api/orbs/orbs/{lesson.lineage_id}/approve", {"expected_version": lesson.version}).json()[
            "status"] == "approved"
        again = run_http(url, memory["key"], lambda session: call(session, "retrieve_memories", {
            "bank": slug, "situation": SITUATION, "k": 5}))
        assert lesson.lineage_id in {hit["id"] for hit in structured(again)["memories"]}

        # A key without memory:write may retrieve but not remember; nothing is written.
        refused = run_http(url, memory["read_only_key"], lambda session: call(session, "remember_lesson", {
            "bank": slug, "lesson": "Never refund anything."}))
        assert "memory:write" in refusal(refused)
        assert not Orb.objects.filter(outcome__contains="Never refund").exists()

        # Another workspace's key sees nothing of this bank, neither by tool nor by resource.
        async def stranger(session: ClientSession):
            banks = structured(await session.call_tool("list_banks", {}))["banks"]
            retrieval = await session.call_tool("retrieve_memories", {"bank": slug, "situation": SITUATION})
            try:
                await session.read_resource(f"memweb://banks/{slug}/memories")
            except Exception as error:  # the SDK raises the server's resource error
                return banks, retrieval, str(error)
            return banks, retrieval, None

        banks, retrieval, resource_error = run_http(url, memory["other_key"], stranger)
        assert [bank["slug"] for bank in banks] == ["elsewhere-shop"]
        assert "404" in refusal(retrieval)
        assert resource_error and "404" in resource_error

        # No key at all: refused, naming how to send one.
        anonymous = run_http(url, None, lambda session: call(session, "retrieve_memories", {
            "bank": slug, "situation": SITUATION}))
        assert "Authorization: Bearer" in refusal(anonymous)

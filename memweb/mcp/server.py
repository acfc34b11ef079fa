"""The MCP tools and resources over memweb's memory API.

Each is one API call (`gateway.MemwebApi`) with the caller's key (`Credentials`): the key the
stdio server was started with, or the one each streamable-HTTP request presents. The review gate
holds by construction: retrieval always asks for approved memories only, the resource lists approved
ones only, and no tool reviews (the API lets no key review either).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from pydantic import Field

from memweb.mcp.gateway import ApiRefused, MemwebApi, bearer, path_segment

SERVER_NAME = "memweb"
INSTRUCTIONS = (
    "memweb memory for customer-service agents. Before acting, call retrieve_memories with the customer's "
    "situation and put its prompt_block in your prompt; when the episode ends, report_outcome with the "
    "retrieval_id. Lessons you remember and episodes you submit wait for a human reviewer before any agent "
    "retrieves them.")
# The request headers that can carry an API key; memweb's API reads them, this server only passes them on.
CREDENTIAL_HEADERS = ("authorization", "x-api-key")
MEMORY_FIELDS = ("id", "revision", "status", "obs", "emotion", "outcome", "context", "domain", "reflector_backend")
# A resource read is one document; past this many memories it says it was cut (the API pages further).
RESOURCE_MAX_MEMORIES = 500
RESOURCE_PAGE_SIZE = 100

Credentials = Callable[[Context], Mapping[str, str]]


def fixed_key(key: str) -> Credentials:
    """stdio: one agent process, one key, given when the server starts."""
    return lambda ctx: bearer(key)


def request_credentials(ctx: Context) -> dict[str, str]:
    """streamable HTTP: the key headers of the request being served, never a key the server holds. With
    none, the API's refusal says how to send one."""
    return {name: value for name, value in (ctx.headers or {}).items() if name.lower() in CREDENTIAL_HEADERS}


def caller_address(ctx: Context) -> str | None:
    """The streamable-HTTP caller's address (None over stdio, whose requests carry no HTTP request)."""
    client = getattr(ctx.request_context.request, "client", None)
    return client.host if client else None


def memory(orb: dict) -> dict:
    """An Orb as an agent needs it; `reflector_backend` says whether an LLM or a scripted rule wrote it."""
    return {field: orb.get(field) for field in MEMORY_FIELDS}


def memory_server(api: MemwebApi, credentials_of: Credentials) -> MCPServer:
    server = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS)

    async def call(ctx: Context, method: str, path: str, refused: type[Exception] = ToolError, **kwargs) -> Any:
        try:
            return await api.call(method, path, credentials=credentials_of(ctx), client_address=caller_address(ctx),
                                  **kwargs)
        except ApiRefused as answer:
            raise refused(str(answer)) from None

    @server.tool()
    async def retrieve_memories(
        bank: Annotated[str, Field(description="The memory bank's slug (see list_banks).")],
        situation: Annotated[str, Field(description="The customer's current request or turn, in their words.")],
        ctx: Context,
        context: Annotated[dict[str, Any] | None, Field(description="Facts of the situation, e.g. SKU, budget.")] = None,
        k: Annotated[int | None, Field(ge=1, le=50, description="How many memories; the bank's k when empty.")] = None,
        customer_key: Annotated[str | None, Field(description="Only this customer's memories.")] = None,
        domain: Annotated[str | None, Field(description="Only memories of this domain.")] = None,
        filter: Annotated[dict[str, Any] | None, Field(  # noqa: A002 - the API's own field name
            description='Only memories whose stored context matches, e.g. {"field": "sku", "eq": "W1"} or '
                        '{"and": [...]}, {"or": [...]} (docs/RETRIEVAL_FILTERS.md).')] = None,
    ) -> dict[str, Any]:
        """Approved memories most like this situation, ranked, and a prompt block to put in the agent's
        prompt. Keep retrieval_id to report how the episode ended (report_outcome)."""
        asked = {"query": situation, "context": context or {}, "k": k, "customer_key": customer_key,
                 "domain": domain, "filter": filter, "approved_only": True, "client": "mcp"}
        answer = await call(ctx, "POST", f"/orbs/banks/{path_segment(bank)}/retrieve",
                            json={name: value for name, value in asked.items() if value is not None})
        return {
            "retrieval_id": answer["retrieval_id"], "prompt_block": answer["prompt_block"],
            "rewritten_query": answer["rewritten_query"], "rewriter_backend": answer["rewriter_backend"],
            "memories": [{"rank": hit["rank"], "score": hit["score"], "injected": hit["injected"]} | memory(hit["orb"])
                         for hit in answer["hits"]],
        }

    @server.tool()
    async def remember_lesson(
        bank: Annotated[str, Field(description="The memory bank's slug.")],
        lesson: Annotated[str, Field(description="The lesson, in the words an agent should read.")],
        ctx: Context,
        context: Annotated[dict[str, Any] | None, Field(description="Metadata stored with it, e.g. a SKU.")] = None,
        customer_key: Annotated[str, Field(description="Required by a per-customer bank.")] = "",
        domain: str = "",
        source_label: Annotated[str, Field(description="Where it came from, e.g. a ticket.")] = "",
    ) -> dict[str, Any]:
        """Propose a lesson for the bank. It waits for a human reviewer (status pending) and is retrieved by
        no agent until approved, unless the bank's reviewers set it to approve automatically."""
        orb = await call(ctx, "POST", f"/orbs/banks/{path_segment(bank)}/remember",
                         json={"text": lesson, "context": context or {}, "customer_key": customer_key,
                               "domain": domain, "source_label": source_label})
        return memory(orb)

    @server.tool()
    async def submit_episode(
        bank: Annotated[str, Field(description="The memory bank's slug.")],
        trajectory: Annotated[dict[str, Any], Field(description=(
            "The finished episode: task_id, domain, messages (role, content, tool calls), reward, success, "
            "optionally customer_key, reward_breakdown, errors, metadata (as memweb's POST /episodes)."))],
        ctx: Context,
        source_label: str = "",
        episode_ref: Annotated[str, Field(description="Your own id for the episode.")] = "",
    ) -> dict[str, Any]:
        """Store a finished episode; a memweb worker reflects on it into a memory, which then waits for review.
        Returns the ingest id to follow with episode_status."""
        queued = await call(ctx, "POST", f"/orbs/banks/{path_segment(bank)}/episodes",
                            json={"trajectory": trajectory, "source_label": source_label, "episode_ref": episode_ref})
        return {"ingest_id": queued["ingest_id"], "status": queued["status"]}

    @server.tool()
    async def episode_status(ingest_id: int, ctx: Context) -> dict[str, Any]:
        """Where a submitted episode stands: queued, then its memory (pending review) or the error."""
        record = await call(ctx, "GET", f"/orbs/episodes/{ingest_id}")
        return {"ingest_id": record["ingest_id"], "status": record["status"], "error": record["error"],
                "memory": memory(record["orb"]) if record.get("orb") else None}

    @server.tool()
    async def report_outcome(
        retrieval_id: Annotated[int, Field(description="From retrieve_memories.")],
        success: Annotated[bool, Field(description="Whether the episode that used the memories succeeded.")],
        ctx: Context,
        reward: float | None = None,
        episode_ref: str = "",
    ) -> dict[str, Any]:
        """Tell memweb how the episode that used a retrieval ended; reviewers see it on each memory's page."""
        answer = await call(ctx, "POST", f"/orbs/retrievals/{retrieval_id}/outcome",
                            json={"success": success, "reward": reward, "episode_ref": episode_ref})
        return {"retrieval_id": retrieval_id, "detail": answer["detail"]}

    @server.tool()
    async def list_banks(ctx: Context) -> dict[str, Any]:
        """The memory banks of this API key's workspace, with the URI of each one's approved memories."""
        listed = await call(ctx, "GET", "/orbs/banks")
        return {"banks": [{"slug": bank["slug"], "name": bank["name"], "description": bank["description"],
                           "memories_uri": f"memweb://banks/{bank['slug']}/memories"} for bank in listed]}

    @server.resource("memweb://banks/{slug}/memories", name="approved-memories", mime_type="application/json",
                     description="A bank's approved memories (never pending, rejected or deleted ones).")
    async def approved_memories(slug: str, ctx: Context) -> dict[str, Any]:
        memories, total, page = [], 0, 1
        while len(memories) < RESOURCE_MAX_MEMORIES:
            listed = await call(ctx, "GET", "/orbs/orbs", refused=ResourceError, params={
                "bank": slug, "status": "approved", "page": page, "page_size": RESOURCE_PAGE_SIZE})
            memories += [memory(orb) for orb in listed["items"]]
            total = listed["count"]
            if len(memories) >= total or not listed["items"]:
                break
            page += 1
        return {"bank": slug, "count": total, "memories": memories[:RESOURCE_MAX_MEMORIES],
                "truncated": total > RESOURCE_MAX_MEMORIES}

    return server

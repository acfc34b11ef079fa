"""memweb's memory as an OpenAI Agents SDK tool set (package `openai-agents`).

    from agents import Agent
    from integrations.openai_agents import memweb_tools

    agent = Agent(name="support", instructions="...", tools=memweb_tools(
        base_url="https://memweb.example.com", api_key=os.environ["MEMWEB_API_KEY"], bank="shop"))

The model gets three tools: retrieve approved memories for the situation (with a retrieval id), propose
a lesson (it waits for a human reviewer), and report how the episode ended. Each is one call to
memweb's JSON API with the key given here, so its scopes, workspace and the review gate apply; a
refusal reaches the model as the tool's output, in the API's words. The finished episode is the
program's to submit when the run ends (POST /api/orbs/banks/{bank}/episodes), not the model's.
"""
from __future__ import annotations

import json

from agents import FunctionTool, RunContextWrapper, function_tool
from agents.tool import default_tool_error_function

from memweb.mcp.gateway import ApiRefused, MemwebApi, bearer, path_segment

PENDING_NOTE = "It waits for a human reviewer; no agent retrieves it until it is approved."


def refusal_for_the_model(ctx: RunContextWrapper, error: Exception) -> str:
    """memweb's own words for a refusal (a missing scope, an unknown bank), so the model can act on them;
    anything else as the SDK words it."""
    if isinstance(error, ApiRefused):
        return str(error)
    return default_tool_error_function(ctx, error)


def memweb_tools(*, base_url: str = "", api_key: str, bank: str, api: MemwebApi | None = None) -> list[FunctionTool]:
    """Function tools over one bank of the memweb at `base_url`, acting with `api_key`. Pass `api`
    (`MemwebApi.remote(base_url)`) instead to share its connections between tool sets and close them
    (`await api.aclose()`) when the program ends."""
    if api is None and not base_url:
        raise ValueError("memweb_tools needs base_url (the memweb to call) or api")
    api = api or MemwebApi.remote(base_url)
    bank_path, credentials = f"/orbs/banks/{path_segment(bank)}", bearer(api_key)

    @function_tool(failure_error_function=refusal_for_the_model)
    async def retrieve_memories(situation: str) -> str:
        """Approved memories of past customer-service episodes most like this situation, as a block to
        follow, and the retrieval_id to pass to report_outcome when the episode ends.

        Args:
            situation: The customer's current request, in their words, with any facts that matter.
        """
        answer = await api.call("POST", f"{bank_path}/retrieve", credentials=credentials,
                                json={"query": situation, "approved_only": True, "client": "openai-agents"})
        return json.dumps({"retrieval_id": answer["retrieval_id"], "memories": answer["prompt_block"],
                           "count": len(answer["hits"])})

    @function_tool(failure_error_function=refusal_for_the_model)
    async def remember_lesson(lesson: str) -> str:
        """Propose a lesson learnt in this episode, for future episodes.

        Args:
            lesson: The lesson, in the words a future agent should read.
        """
        orb = await api.call("POST", f"{bank_path}/remember", credentials=credentials, json={"text": lesson})
        return f"Proposed as memory #{orb['id']} ({orb['status']}). " + (PENDING_NOTE if orb["status"] == "pending"
                                                                        else "")

    @function_tool(failure_error_function=refusal_for_the_model)
    async def report_outcome(retrieval_id: int, success: bool) -> str:
        """Say whether the episode that used a retrieval's memories succeeded.

        Args:
            retrieval_id: The id retrieve_memories gave.
            success: Whether the customer's request was resolved.
        """
        answer = await api.call("POST", f"/orbs/retrievals/{retrieval_id}/outcome", credentials=credentials,
                                json={"success": success})
        return answer["detail"]

    return [retrieve_memories, remember_lesson, report_outcome]


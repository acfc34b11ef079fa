"""The world an episode acts on: a state the environment made fresh for the episode, and its tools.
Every call is recorded (the reward and the diagnosis read them) with its time, and becomes the
transcript's assistant and tool messages."""
import time
from collections.abc import Callable

from evaluation.environments.protocol import ToolResult

ToolRunner = Callable[[dict, str, object], ToolResult]


class ToolWorld:
    """`run_tool(state, name, arguments)` executes one call on `state` (write tools change it in
    place); a successful call of `transfer_tool` hands the customer to a human and ends the episode."""

    def __init__(self, state: dict, run_tool: ToolRunner, *, transfer_tool: str = "transfer_to_human"):
        self.state = state
        self.calls: list[dict] = []
        self.pending_messages: list[dict] = []
        self.tool_spans: list[dict] = []  # each call's time, kept out of the transcript (which replays identically)
        self._run_tool, self._transfer_tool = run_tool, transfer_tool
        self._ids = 0

    def use(self, name: str, **arguments) -> ToolResult:
        """One tool call by a scripted agent (one assistant message, one tool message)."""
        return self.execute([(None, name, arguments, "")])[0]

    def execute(self, calls: list[tuple], content: str = "") -> list[ToolResult]:
        """Run (id, name, arguments, argument_error) calls made in one assistant message."""
        entries, results = [], []
        for call_id, name, arguments, argument_error in calls:
            self._ids += 1
            call_id = call_id or f"call_{self._ids}"
            start = time.perf_counter()
            result = self._run_tool(self.state, name, arguments) if not argument_error else \
                ToolResult(ok=False, content=f"Error: invalid arguments: {argument_error}", data=None)
            self.tool_spans.append({"kind": "tool", "call_id": call_id,
                                    "ms": round((time.perf_counter() - start) * 1000, 3)})
            self.calls.append({"id": call_id, "name": name, "arguments": arguments, "ok": result.ok,
                               "content": result.content})
            entry = {"id": call_id, "name": name, "arguments": arguments}
            if argument_error:
                entry["argument_error"] = argument_error
            entries.append(entry)
            results.append(result)
        self.pending_messages.append({"role": "assistant", "content": content, "tool_calls": entries})
        self.pending_messages += [{"role": "tool", "tool_call_id": e["id"], "tool_name": e["name"],
                                   "content": r.content, "ok": r.ok} for e, r in zip(entries, results)]
        return results

    def drain(self) -> list[dict]:
        messages, self.pending_messages = self.pending_messages, []
        return messages

    def drain_tool_spans(self) -> list[dict]:
        spans, self.tool_spans = self.tool_spans, []
        return spans

    def transferred(self) -> bool:
        return any(c["name"] == self._transfer_tool and c["ok"] for c in self.calls)

    def replay(self, transcript: list[dict]) -> None:
        """Run a stored transcript's tool calls again, in order (tools are deterministic, so this
        rebuilds the state the episode ended in)."""
        for message in transcript:
            if message["role"] == "assistant" and message.get("tool_calls"):
                self.execute([(call.get("id"), call["name"], call.get("arguments"), call.get("argument_error", ""))
                              for call in message["tool_calls"]])


def transcript_replies(transcript: list[dict]) -> list[str]:
    """The agent's replies to the customer, in order."""
    return [m["content"] for m in transcript if m["role"] == "assistant" and m.get("content")]

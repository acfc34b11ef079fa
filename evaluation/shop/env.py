"""The shop an episode acts on: tool calls go through here and are recorded, each with its time."""
import time

from evaluation.shop.tools import ToolResult, tool_execute


class ShopEnv:
    """The shop an episode acts on, recording every call and the transcript messages it makes."""

    def __init__(self, state: dict):
        self.state = state
        self.calls: list[dict] = []
        self.pending_messages: list[dict] = []
        self.tool_spans: list[dict] = []  # each call's time, kept out of the transcript (which replays identically)
        self._ids = 0

    def use(self, name: str, **arguments) -> ToolResult:
        """One tool call by the scripted agent (one assistant message, one tool message)."""
        return self.execute([(None, name, arguments, "")])[0]

    def execute(self, calls: list[tuple], content: str = "") -> list[ToolResult]:
        """Run (id, name, arguments, argument_error) calls made in one assistant message."""
        entries, results = [], []
        for call_id, name, arguments, argument_error in calls:
            self._ids += 1
            call_id = call_id or f"call_{self._ids}"
            start = time.perf_counter()
            result = tool_execute(self.state, name, arguments) if not argument_error else \
                ToolResult(ok=False, content=f"Error: invalid arguments: {argument_error}", data=None)
            self.tool_spans.append({"kind": "tool", "call_id": call_id, "ms": round((time.perf_counter() - start) * 1000, 3)})
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
        return any(c["name"] == "transfer_to_human" and c["ok"] for c in self.calls)

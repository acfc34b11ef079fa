"""One model answer, whether it came as a plain completion or as a stream of chunks.

Django-free. Streaming is how a client timeout reaches the server: closing the connection mid-way
makes servers such as llama-cpp-python and vLLM stop generating, where a plain request keeps the
server busy until its answer is complete.
"""
from dataclasses import dataclass, field

from openai.types.chat import ChatCompletion, ChatCompletionChunk

CHARS_PER_TOKEN = 4  # a rough English average, for servers that report no usage


@dataclass
class RawToolCall:
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass
class Answer:
    content: str | None = None
    tool_calls: list[RawToolCall] = field(default_factory=list)
    model: str = ""
    usage: tuple[int, int] | None = None
    streamed: bool = False
    finish_reason: str = ""


def answer_from_completion(completion: ChatCompletion) -> Answer:
    message = completion.choices[0].message
    calls = [RawToolCall(c.id, c.function.name, c.function.arguments or "")
             for c in message.tool_calls or [] if c.type == "function"]
    usage = completion.usage
    return Answer(content=message.content, tool_calls=calls, model=completion.model or "",
                  usage=(usage.prompt_tokens or 0, usage.completion_tokens or 0) if usage else None,
                  finish_reason=completion.choices[0].finish_reason or "")


class StreamAssembler:
    """Adds up chunks: content pieces in order, tool calls by their index, usage from the last chunk."""

    def __init__(self):
        self.answer = Answer(streamed=True)
        self.pieces: list[str] = []
        self.calls: dict[int, RawToolCall] = {}
        self.chunks = 0

    def add(self, chunk: ChatCompletionChunk) -> None:
        self.answer.model = self.answer.model or chunk.model or ""
        if chunk.usage:
            self.answer.usage = (chunk.usage.prompt_tokens or 0, chunk.usage.completion_tokens or 0)
        for choice in chunk.choices or []:
            self.chunks += 1
            self._add_delta(choice.delta)
            self.answer.finish_reason = choice.finish_reason or self.answer.finish_reason

    def _add_delta(self, delta) -> None:
        if delta is None:
            return
        if delta.content:
            self.pieces.append(delta.content)
        for part in delta.tool_calls or []:
            call = self.calls.setdefault(part.index, RawToolCall())
            call.id = part.id or call.id
            if part.function:
                call.name = part.function.name or call.name
                call.arguments += part.function.arguments or ""

    def finish(self) -> Answer:
        self.answer.content = "".join(self.pieces) if self.pieces or not self.calls else None
        self.answer.tool_calls = [self.calls[index] for index in sorted(self.calls)]
        return self.answer


def estimate_tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def estimated_usage(messages: list[dict], answer: Answer) -> tuple[int, int]:
    """Token counts for a server that reports none, so cost pages never show zero for real work."""
    prompt = "".join(str(message.get("content") or "") for message in messages)
    reply = (answer.content or "") + "".join(call.name + call.arguments for call in answer.tool_calls)
    return estimate_tokens(prompt), estimate_tokens(reply)

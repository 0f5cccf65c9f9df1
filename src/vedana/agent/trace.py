"""What happened while answering one question: the filter's selection, every tool call, every
model call with its tokens and cost, and the timings. `to_dict()` is what `--json` prints."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vedana.agent.sources import Source


@dataclass
class FilterTrace:
    enabled: bool
    model: str | None = None
    fallback: bool = False  # True: the full data model was used because the filter failed
    error: str | None = None
    reasoning: str = ""
    selected: dict[str, list[Any]] = field(default_factory=dict)  # anchors, links, ... as kept
    kept: dict[str, int] = field(default_factory=dict)
    total: dict[str, int] = field(default_factory=dict)
    ignored: dict[str, list[Any]] = field(default_factory=dict)  # names the model invented
    dropped_links: list[str] = field(default_factory=list)  # picked, but an end was not kept
    elapsed_s: float = 0.0


@dataclass
class ToolCallTrace:
    index: int  # order in which the model asked for it, over the whole run
    round: int
    name: str
    arguments: dict[str, Any]
    elapsed_s: float = 0.0
    result_chars: int = 0  # size of the text the model received
    error: str | None = None
    thread: str = ""  # worker that ran it (calls of one round run side by side)
    # vector_text_search
    kind: str | None = None
    threshold: float | None = None
    top_n: int | None = None
    hits: list[dict[str, Any]] | None = None  # score and ids per hit, no vectors
    # cypher
    rows: int | None = None
    truncated: bool | None = None
    refused: bool | None = None


@dataclass
class LLMCallTrace:
    purpose: str  # "filter", "agent", "finalize"
    model: str
    elapsed_s: float
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    error: str | None = None


@dataclass
class Trace:
    question: str
    model: str
    filter: FilterTrace
    system_prompt_chars: int = 0  # size of the system prompt (instructions + data model slice)
    prompts_overridden: list[str] = field(default_factory=list)
    history_messages: int = 0  # earlier messages of the conversation the agent saw
    rounds: int = 0
    finalized: bool = False  # the round limit was reached and a finalisation call answered
    no_answer: bool = False  # the model gave nothing; the "not found" reply was used
    tool_calls: list[ToolCallTrace] = field(default_factory=list)
    llm_calls: list[LLMCallTrace] = field(default_factory=list)
    total_s: float = 0.0
    import_s: float = 0.0  # of the time outside the LLM: importing litellm (first run of a process)
    unknown_markers: list[str] = field(default_factory=list)  # [n] in the answer that name no source
    sources_error: str | None = None  # the rows of the sources could not be located

    @property
    def llm_s(self) -> float:
        return sum(c.elapsed_s for c in self.llm_calls)

    def usage_by_model(self) -> dict[str, dict[str, Any]]:
        usage: dict[str, dict[str, Any]] = {}
        for call in self.llm_calls:
            entry = usage.setdefault(
                call.model, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}
            )
            entry["calls"] += 1
            entry["prompt_tokens"] += call.prompt_tokens or 0
            entry["completion_tokens"] += call.completion_tokens or 0
            if call.cost_usd is None or entry["cost_usd"] is None:
                entry["cost_usd"] = None  # unknown for one call means unknown for the sum
            else:
                entry["cost_usd"] = round(entry["cost_usd"] + call.cost_usd, 8)
        return usage

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["tool_calls"] = [_compact(asdict(c)) for c in self.tool_calls]
        data["llm_calls"] = [asdict(c) for c in self.llm_calls]
        data["usage"] = self.usage_by_model()
        data["timings"] = {
            "total_s": round(self.total_s, 4),
            "llm_s": round(self.llm_s, 4),
            "outside_llm_s": round(max(self.total_s - self.llm_s, 0.0), 4),
            "import_s": round(self.import_s, 4),
        }
        del data["total_s"], data["import_s"]
        return redacted(data)


def _compact(call: dict[str, Any]) -> dict[str, Any]:
    """Drop the fields that belong to the other tool."""
    return {k: v for k, v in call.items() if v is not None or k == "error"}


@dataclass
class AskResult:
    answer: str
    trace: Trace
    sources: list[Source] = field(default_factory=list)  # every node the tools returned, numbered

    def to_dict(self) -> dict[str, Any]:
        trace = self.trace.to_dict()
        return {
            "question": trace.pop("question"),
            "answer": redacted(self.answer),
            "sources": redacted([s.to_dict() for s in self.sources]),
            "trace": trace,
        }


def redacted(data: Any) -> Any:
    """`data` with every configured secret masked in its strings (a model may echo one)."""
    from vedana.redaction import known_secrets, redact

    secrets = known_secrets()

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return redact(value, secrets)
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return walk(data)

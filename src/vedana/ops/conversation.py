"""Conversations: `vedana ask --thread` and `vedana chat` over stored threads.

A turn = load the thread's last `PIPELINE_HISTORY_LENGTH` messages → ask the agent with them →
store the question and the answer (with its trace, usage and cost) together. Nothing is stored
when the agent fails, so a provider error leaves the thread usable as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vedana.agent.history import Turn
from vedana.agent.trace import AskResult, redacted

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from vedana.config import Settings
    from vedana.embeddings.base import Embedder
    from vedana.stores.graph import GraphStore

NEW = "new"  # `--thread new` starts a thread
START_EVENT = "/start"  # the ConversationLifecycle event shown when a conversation starts
BUILTIN_START = "Hello! Ask me about {topics}. Type /help for commands."


@dataclass
class ThreadAnswer:
    thread_id: str
    created: bool  # this turn started the thread
    result: AskResult

    def to_dict(self) -> dict[str, Any]:
        return {"thread": self.thread_id, **self.result.to_dict()}


def _engine(settings: Settings, engine: Engine | None) -> Engine:
    if engine is not None:
        return engine
    from vedana.stores.postgres import get_engine

    return get_engine(settings)


def start_message(settings: Settings, engine: Engine | None = None) -> str:
    """The data model's `/start` text from ConversationLifecycle, or a built-in greeting."""
    from vedana.stores.staging import load_data_model

    with _engine(settings, engine).connect() as conn:
        dm = load_data_model(conn)
    for event in dm.lifecycle:
        if event.event.strip() == START_EVENT and event.text.strip():
            return event.text.strip()
    topics = ", ".join(a.noun for a in dm.anchors[:6]) or "the knowledge base"
    return BUILTIN_START.format(topics=topics)


def thread_history(settings: Settings, thread: str, engine: Engine | None = None) -> list[Turn]:
    """What the agent sees of `thread`: its last `PIPELINE_HISTORY_LENGTH` messages ([] for "new")."""
    from vedana.stores.threads import recent_messages, require_thread

    if thread == NEW:
        return []
    engine = _engine(settings, engine)
    require_thread(engine, thread)
    return [Turn(m.role, m.text) for m in recent_messages(engine, thread, settings.pipeline_history_length)]


def record_turn(settings: Settings, thread: str, result: AskResult, engine: Engine | None = None) -> str:
    """Store the question and its answer (trace, usage, cost) in `thread`, creating it for "new";
    the thread's id. Called only once the answer exists, so a failed or cancelled turn stores
    nothing and a failed first turn leaves no empty thread."""
    from vedana.redaction import redact
    from vedana.stores.threads import Message, append_turn, create_thread

    engine = _engine(settings, engine)
    trace = result.trace.to_dict()  # redacted
    usage = trace.get("usage") or {}
    costs = [u.get("cost_usd") for u in usage.values()]
    cost = None if not costs or any(c is None for c in costs) else round(sum(costs), 8)
    thread_id = create_thread(engine) if thread == NEW else thread
    answer = Message(role="assistant", text=redacted(result.answer), trace=trace, usage=usage, cost_usd=cost)
    append_turn(engine, thread_id, redact(result.trace.question), answer)
    return thread_id


def ask_in_thread(
    settings: Settings,
    question: str,
    thread: str = NEW,
    *,
    use_filter: bool | None = None,
    engine: Engine | None = None,
    graph: GraphStore | None = None,
    embedder: Embedder | None = None,
    on_step: Callable[[str], None] | None = None,
) -> ThreadAnswer:
    """Answer `question` as the next turn of `thread` (an id, or "new" to start one); `on_step`
    hears the agent's steps as `ask` reports them."""
    from vedana.agent import ask

    engine = _engine(settings, engine)
    history = thread_history(settings, thread, engine)
    result = ask(settings, question, use_filter=use_filter, graph=graph, engine=engine, embedder=embedder,
                 history=history, on_step=on_step)  # fmt: skip
    thread_id = record_turn(settings, thread, result, engine)
    return ThreadAnswer(thread_id=thread_id, created=thread == NEW, result=result)


def threads_list(settings: Settings, limit: int = 20) -> list[dict[str, Any]]:
    from vedana.stores.threads import list_threads

    return [t.to_dict() for t in list_threads(_engine(settings, None), limit=limit)]


def threads_show(settings: Settings, thread_id: str) -> dict[str, Any]:
    from vedana.stores.threads import get_thread

    return get_thread(_engine(settings, None), thread_id).to_dict()

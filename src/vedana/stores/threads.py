"""Conversation threads: their messages in order, with each answer's trace, usage and cost.

The only module that reads or writes `threads` / `thread_messages`. Texts arrive here already
redacted (the conversation layer masks secrets before anything is stored).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from vedana.errors import UnknownThread

if TYPE_CHECKING:
    from sqlalchemy import Engine


@dataclass
class Message:
    role: str  # user | assistant
    text: str
    created_at: datetime | None = None
    trace: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None
    cost_usd: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "text": self.text,
            "created_at": self.created_at,
            "trace": self.trace,
            "usage": self.usage,
            "cost_usd": self.cost_usd,
        }


@dataclass
class ThreadSummary:
    id: str
    created_at: datetime
    messages: int
    last_question: str | None
    last_at: datetime | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "created_at": self.created_at,
            "messages": self.messages,
            "last_question": self.last_question,
            "last_at": self.last_at,
        }


@dataclass
class Thread:
    id: str
    created_at: datetime
    messages: list[Message] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "created_at": self.created_at,
            "messages": [m.to_dict() for m in self.messages],
        }


def new_thread_id() -> str:
    # Short enough to type, random enough never to collide in one knowledge base.
    return secrets.token_hex(6)


def create_thread(engine: Engine) -> str:
    from vedana.stores import tables as t

    thread_id = new_thread_id()
    with engine.begin() as conn:
        conn.execute(t.threads.insert().values(id=thread_id))
    return thread_id


def require_thread(engine: Engine, thread_id: str) -> None:
    """Raise `UnknownThread` (one line, naming the fix) unless `thread_id` is stored."""
    from sqlalchemy import select

    from vedana.stores import tables as t

    with engine.connect() as conn:
        found = conn.execute(select(t.threads.c.id).where(t.threads.c.id == thread_id)).first()
    if found is None:
        raise UnknownThread(
            f"no thread {thread_id!r}; list them with `vedana threads`, or start one with --thread new"
        )


def recent_messages(engine: Engine, thread_id: str, limit: int) -> list[Message]:
    """The last `limit` messages of the thread, oldest first (texts only: what the agent sees)."""
    from sqlalchemy import select

    from vedana.stores import tables as t

    if limit <= 0:
        return []
    m = t.thread_messages
    query = (
        select(m.c.role, m.c.text, m.c.created_at)
        .where(m.c.thread_id == thread_id)
        .order_by(m.c.id.desc())
        .limit(limit)
    )
    with engine.connect() as conn:
        rows = conn.execute(query).all()
    return [Message(role=r.role, text=r.text, created_at=r.created_at) for r in reversed(rows)]


def append_turn(engine: Engine, thread_id: str, question: str, answer: Message) -> None:
    """Store a question and its answer together: a turn is kept whole or not at all, so a
    provider error mid-conversation leaves the thread as it was."""
    from vedana.stores import tables as t

    # Both rows name every column: an executemany takes its column list from the first row.
    empty: dict[str, Any] = {"trace": None, "usage": None, "cost_usd": None}
    rows: list[dict[str, Any]] = [
        {"thread_id": thread_id, "role": "user", "text": question, **empty},
        {
            "thread_id": thread_id,
            "role": "assistant",
            "text": answer.text,
            "trace": answer.trace,
            "usage": answer.usage,
            "cost_usd": answer.cost_usd,
        },
    ]
    with engine.begin() as conn:
        conn.execute(t.thread_messages.insert(), rows)


def list_threads(engine: Engine, limit: int = 20) -> list[ThreadSummary]:
    """Threads, most recently active first."""
    from sqlalchemy import func, select

    from vedana.stores import tables as t

    m = t.thread_messages
    stats = (
        select(
            m.c.thread_id,
            func.count().label("messages"),
            func.max(m.c.created_at).label("last_at"),
            func.max(m.c.id).filter(m.c.role == "user").label("last_user_id"),
        )
        .group_by(m.c.thread_id)
        .subquery()
    )
    last = m.alias("last")
    query = (
        select(t.threads.c.id, t.threads.c.created_at, stats.c.messages, stats.c.last_at, last.c.text)
        .select_from(
            t.threads.outerjoin(stats, stats.c.thread_id == t.threads.c.id).outerjoin(
                last, last.c.id == stats.c.last_user_id
            )
        )
        .order_by(func.coalesce(stats.c.last_at, t.threads.c.created_at).desc(), t.threads.c.id)
        .limit(limit)
    )
    with engine.connect() as conn:
        rows = conn.execute(query).all()
    return [
        ThreadSummary(
            id=r.id,
            created_at=r.created_at,
            messages=r.messages or 0,
            last_question=r.text,
            last_at=r.last_at,
        )
        for r in rows
    ]


def get_thread(engine: Engine, thread_id: str) -> Thread:
    from sqlalchemy import select

    from vedana.stores import tables as t

    with engine.connect() as conn:
        head = conn.execute(select(t.threads).where(t.threads.c.id == thread_id)).first()
        if head is None:
            raise UnknownThread(f"no thread {thread_id!r}; list them with `vedana threads`")
        m = t.thread_messages
        rows = conn.execute(select(m).where(m.c.thread_id == thread_id).order_by(m.c.id)).all()
    return Thread(
        id=head.id,
        created_at=head.created_at,
        messages=[
            Message(
                role=r.role,
                text=r.text,
                created_at=r.created_at,
                trace=r.trace,
                usage=r.usage,
                cost_usd=r.cost_usd,
            )
            for r in rows
        ],
    )

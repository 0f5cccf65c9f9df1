"""The one retry policy for talking to servers (Grist, a remote embedding model).

Built on tenacity: a bounded number of attempts, exponential backoff with jitter (so parallel
clients do not retry in step), a server's `Retry-After` honoured, and a total deadline per
operation. Each attempt is given only the time left before the deadline as its timeout, so a
server that accepts connections and never answers fails in about the deadline, not in
attempts × timeout.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from vedana.redaction import redact

log = logging.getLogger(__name__)

T = TypeVar("T")

MIN_ATTEMPT_S = 0.5  # never give a last attempt less than this to connect and answer


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try one operation. `timeout_s` bounds each attempt (connect and read);
    `deadline_s` bounds the whole operation, retries and waits included."""

    attempts: int = 5
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0
    timeout_s: float = 20.0
    deadline_s: float = 45.0

    def with_(self, **changes: Any) -> RetryPolicy:
        return replace(self, **changes)


class Clock:
    """The time left for one operation: each attempt's timeout is clamped to it."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        self.started = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def attempt_timeout(self) -> float:
        left = self.policy.deadline_s - self.elapsed()
        return max(min(self.policy.timeout_s, left), MIN_ATTEMPT_S)


def _waiter(policy: RetryPolicy, retry_after: Callable[[BaseException], float | None]) -> Any:
    from tenacity import wait_exponential_jitter

    backoff = wait_exponential_jitter(
        initial=policy.backoff_s, max=policy.max_backoff_s, jitter=policy.backoff_s / 2
    )

    def wait(state: Any) -> float:
        delay = float(backoff(state))
        exc = state.outcome.exception() if state.outcome else None
        asked = retry_after(exc) if exc is not None else None
        return max(delay, asked) if asked is not None else delay

    return wait


def _retrying(
    policy: RetryPolicy,
    *,
    retry_on: Callable[[BaseException], bool],
    retry_after: Callable[[BaseException], float | None],
    what: str,
    sleep: Callable[[float], None],
    on_retry: Callable[[BaseException], None],
) -> Any:
    from tenacity import Retrying, retry_if_exception, stop_after_attempt, stop_before_delay

    def before_sleep(state: Any) -> None:
        exc = state.outcome.exception()
        on_retry(exc)
        wait = state.upcoming_sleep
        log.warning("%s: %s; retrying in %.1f s", what, redact(describe(exc)), wait)

    return Retrying(
        # stop_before_delay also stops when the coming wait would overrun the deadline.
        stop=stop_after_attempt(max(policy.attempts, 1)) | stop_before_delay(policy.deadline_s),
        wait=_waiter(policy, retry_after),
        retry=retry_if_exception(retry_on),
        before_sleep=before_sleep,
        sleep=sleep,
        reraise=True,
    )


def call(
    operation: Callable[[float], T],
    policy: RetryPolicy,
    *,
    retry_on: Callable[[BaseException], bool],
    what: str,
    retry_after: Callable[[BaseException], float | None] = lambda exc: None,
    sleep: Callable[[float], None] = time.sleep,
    on_retry: Callable[[BaseException], None] = lambda exc: None,
) -> T:
    """`operation(timeout_s)` until it succeeds or the policy gives up; the last exception is
    raised as it was (the caller turns it into a one-line error). `timeout_s` is the time the
    attempt may take: the policy's `timeout_s`, shortened near the deadline."""
    clock = Clock(policy)
    retrying = _retrying(
        policy, retry_on=retry_on, retry_after=retry_after, what=what, sleep=sleep, on_retry=on_retry
    )
    return retrying(lambda: operation(clock.attempt_timeout()))


def resume(
    stream: Callable[[], Iterator[T]],
    policy: RetryPolicy,
    *,
    retry_on: Callable[[BaseException], bool],
    what: str,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[T]:
    """Yield from `stream()`, calling it again when it breaks off with a retryable error; the
    caller's stream skips what was already yielded. Attempts and the deadline count from the
    last item received, so a long download that keeps moving is never cut short."""
    retrying = _retrying(
        policy,
        retry_on=retry_on,
        retry_after=lambda exc: None,
        what=what,
        sleep=sleep,
        on_retry=lambda exc: None,
    )
    while True:
        progressed = False
        try:
            for attempt in retrying.copy():
                with attempt:
                    for item in stream():
                        progressed = True
                        yield item
            return
        except BaseException as exc:
            # Progress since the policy's clock started: give the next break a fresh policy.
            if progressed and retry_on(exc):
                log.warning("%s: %s; resuming", what, redact(describe(exc)))
                continue
            raise


def describe(exc: BaseException | None) -> str:
    if exc is None:
        return "no error"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


def refused(exc: BaseException) -> bool:
    """Whether a connection error is a refusal (nothing listens), as opposed to no answer."""
    seen: set[int] = set()
    stack: list[BaseException | None] = [exc]
    while stack:
        cur = stack.pop()
        if cur is None or id(cur) in seen:
            continue
        seen.add(id(cur))
        if isinstance(cur, ConnectionRefusedError) or "refused" in str(cur).lower():
            return True
        stack.extend([cur.__cause__, cur.__context__])
        stack.extend(a for a in getattr(cur, "args", ()) if isinstance(a, BaseException))
        reason = getattr(cur, "reason", None)
        if isinstance(reason, BaseException):
            stack.append(reason)
    return False

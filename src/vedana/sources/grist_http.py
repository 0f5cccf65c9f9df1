"""HTTP to a Grist server: `grist-api`'s client with timeouts, bounded retries and clear errors.

`grist_api.GristDocAPI.call` sends a request with no timeout, no retry and a generic
`HTTPError`; this subclass keeps its interface (`tables()`, `columns()`, `call()`) and adds:
one pooled `requests.Session`, the retry policy of `vedana.retry` for transient failures
(connection drops, timeouts, 429 and 5xx; `GRIST_TIMEOUT_S` per request, `GRIST_DEADLINE_S` per
operation), streaming for downloads, and one-line errors for 401/403/404, for a server that
refuses or never answers, none of which carry the API key.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote

import requests
from grist_api import GristDocAPI

from vedana.errors import GristAuthError, GristError, GristNotFound
from vedana.redaction import known_secrets, redact
from vedana.retry import RetryPolicy, refused
from vedana.retry import call as call_with_retry

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
TRANSIENT_ERRORS = (
    requests.ConnectionError,
    requests.Timeout,
    requests.exceptions.ChunkedEncodingError,
)


class GristClient(GristDocAPI):
    """One document on one Grist server."""

    def __init__(
        self,
        server: str,
        doc_id: str,
        api_key: str | None,
        *,
        timeout_s: float = 20.0,
        deadline_s: float = 45.0,
        retries: int = 4,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
    ) -> None:
        # "https://host/api" and "https://host/" both mean the server at https://host.
        server = server.rstrip("/").removesuffix("/api")
        # An empty key is allowed (public documents); grist-api would look in the environment.
        super().__init__(doc_id, api_key=api_key or "-", server=server)
        self._has_key = bool(api_key)
        self.doc_id = doc_id
        self.server = server
        self.policy = RetryPolicy(
            attempts=retries + 1,
            backoff_s=backoff_s,
            max_backoff_s=max_backoff_s,
            timeout_s=timeout_s,
            deadline_s=deadline_s,
        )
        self.session = requests.Session()
        self.requests_made = 0

    # grist-api calls this for tables()/columns(); we call it for everything else too.
    def call(
        self,
        url: str,
        json_data: Any = None,
        method: str | None = None,
        prefix: str | None = None,
        *,
        params: dict[str, Any] | None = None,
        stream: bool = False,
    ) -> requests.Response:
        if prefix is None:
            prefix = f"/api/docs/{quote(self.doc_id, safe='')}/"
        full_url = self.server + prefix + url
        method = method or ("POST" if json_data is not None else "GET")
        headers = {"Accept": "application/json"}
        if self._has_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        attempts = 0

        def attempt(timeout_s: float) -> requests.Response:
            nonlocal attempts
            attempts += 1
            self.requests_made += 1
            resp = self.session.request(
                method, full_url, params=params, json=json_data, headers=headers,
                timeout=timeout_s, stream=stream,
            )  # fmt: skip
            if resp.status_code in RETRY_STATUSES:
                raise _RetryableStatus(resp)
            return resp

        try:
            resp = call_with_retry(
                attempt,
                self.policy,
                retry_on=lambda exc: isinstance(exc, (*TRANSIENT_ERRORS, _RetryableStatus)),
                retry_after=_retry_after,
                on_retry=lambda exc: exc.response.close() if isinstance(exc, _RetryableStatus) else None,
                what=f"Grist {url.split('?')[0]}",
            )
        except _RetryableStatus as exc:
            raise self._error(exc.response, url, attempts) from None
        except TRANSIENT_ERRORS as exc:
            raise self.unreachable(exc, attempts) from None
        if resp.ok:
            return resp
        raise self._error(resp, url, attempts)

    @property
    def retries(self) -> int:
        return self.policy.attempts - 1

    def unreachable(self, exc: BaseException, attempts: int) -> GristError:
        """The one-line error for a server that refused, or did not answer in time."""
        tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
        if refused(exc):
            return GristError(
                f"Grist at {self.server} refused the connection ({tries}); "
                "check GRIST_SERVER_URL and that the server is running"
            )
        if isinstance(exc, requests.Timeout):
            return GristError(
                f"Grist at {self.server} did not answer within {self.policy.deadline_s:g} s ({tries}, "
                f"{self.policy.timeout_s:g} s each at most); check GRIST_SERVER_URL and the network, "
                "or raise GRIST_TIMEOUT_S / GRIST_DEADLINE_S"
            )
        return GristError(
            f"Grist at {self.server} broke off the connection ({tries}, {type(exc).__name__}); "
            "check GRIST_SERVER_URL and the network"
        )

    def _error(self, resp: requests.Response, url: str, attempts: int) -> GristError:
        error = self._answered_error(resp, url, attempts)
        error.status = resp.status_code
        return error

    def _answered_error(self, resp: requests.Response, url: str, attempts: int) -> GristError:
        message = _server_message(resp, self._api_key if self._has_key else "")
        resp.close()
        status = resp.status_code
        where = f"Grist document {self.doc_id!r} on {self.server}"
        if status == 401:
            return GristAuthError(f"{where} rejected the API key ({status} {message}); check GRIST_API_KEY")
        if status == 403:
            return GristAuthError(
                f"no access to {where} ({status} {message}); "
                "set GRIST_API_KEY to a key of a user who can view it"
            )
        if status == 404:
            if "table" in message.lower():
                return GristNotFound(f"{where}: {message}; check the table name in the document")
            return GristNotFound(f"{where} was not found ({message}); check the document id")
        tried = f" after {attempts} attempts" if attempts > 1 else ""
        return GristError(f"{where} answered {status} to {url.split('?')[0]}{tried} ({message})")

    # --- endpoints ------------------------------------------------------------------------

    def get_json(self, url: str, params: dict[str, Any] | None = None) -> Any:
        resp = self.call(url, params=params)
        try:
            return resp.json()
        except ValueError:
            raise GristError(
                f"Grist at {self.server} sent a non-JSON answer to {url.split('?')[0]}; "
                "check GRIST_SERVER_URL points at a Grist server"
            ) from None

    def table_ids(self) -> list[str]:
        return [t["id"] for t in self.tables().json().get("tables", [])]

    def column_records(self, table: str) -> list[dict[str, Any]]:
        """Every column with its fields, including hidden ones (manualSort, display helpers)."""
        body = self.get_json(f"tables/{quote(table, safe='')}/columns", {"hidden": "true"})
        return list(body.get("columns", []))

    def latest_action_hash(self) -> str | None:
        states = self.state_hashes()
        return states[0] if states else None

    def state_hashes(self) -> list[str]:
        """The document's recent states, newest first (how far back depends on the server)."""
        return [str(s.get("h")) for s in self.get_json("states").get("states") or [] if s.get("h")]

    def compare(self, left: str) -> dict[str, Any]:
        """What changed from state `left` to now (`left` must be one of `state_hashes()`)."""
        # maxRows=1: the row ids always come whole; the inlined cell values are not needed.
        return dict(self.get_json("compare", {"left": left, "right": "HEAD", "maxRows": "1"}))

    def sql(self, query: str, args: list[Any] | None = None) -> list[dict[str, Any]]:
        return self.sql_page(query, args)[0]

    def sql_page(self, query: str, args: list[Any] | None = None) -> tuple[list[dict[str, Any]], bool]:
        """The rows of a `/sql` answer, and whether any cell may hold a NUL character: JSON
        can only carry one escaped, so one scan of the raw answer spares a look at every cell."""
        resp = self.call("sql", json_data={"sql": query, "args": args or []})
        body = resp.json()
        rows = [r.get("fields", {}) for r in body.get("records", [])]
        return rows, b"\\u0000" in resp.content

    def close(self) -> None:
        self.session.close()


class _RetryableStatus(Exception):
    """An answer worth asking again for (429, 5xx): carried through the retry policy."""

    def __init__(self, response: requests.Response) -> None:
        super().__init__(f"HTTP {response.status_code}")
        self.response = response


def _retry_after(exc: BaseException) -> float | None:
    """A server's `Retry-After` in seconds (the HTTP-date form is rare for these servers)."""
    if not isinstance(exc, _RetryableStatus):
        return None
    value = exc.response.headers.get("Retry-After", "")
    return float(value) if value.strip().isdigit() else None


def _server_message(resp: requests.Response, api_key: str) -> str:
    """The server's own error text (`{"error": "..."}`), shortened and with secrets masked."""
    try:
        body = resp.json()
    except ValueError:
        body = None
    text = body["error"] if isinstance(body, dict) and isinstance(body.get("error"), str) else resp.reason
    return redact(str(text or "error"), [api_key, *known_secrets()])[:300]

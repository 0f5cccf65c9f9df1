"""HTTP to a Grist server: `grist-api`'s client with timeouts, bounded retries and clear errors.

`grist_api.GristDocAPI.call` sends a request with no timeout, no retry and a generic
`HTTPError`; this subclass keeps its interface (`tables()`, `columns()`, `call()`) and adds:
one pooled `requests.Session`, a timeout, retries with exponential backoff for transient
failures (connection drops, timeouts, 429 and 5xx), streaming for downloads, and one-line
errors for 401/403/404 that never carry the API key.
"""

from __future__ import annotations

import logging
import time
from typing import Any
from urllib.parse import quote

import requests
from grist_api import GristDocAPI

from vedana.errors import GristAuthError, GristError, GristNotFound
from vedana.redaction import known_secrets, redact

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
        timeout_s: float = 60.0,
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
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
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
        attempt = 0
        while True:
            attempt += 1
            self.requests_made += 1
            try:
                resp = self.session.request(
                    method,
                    full_url,
                    params=params,
                    json=json_data,
                    headers=headers,
                    timeout=self.timeout_s,
                    stream=stream,
                )
            except TRANSIENT_ERRORS as exc:
                if attempt > self.retries:
                    raise GristError(
                        f"Grist at {self.server} did not answer after {attempt} attempts "
                        f"({type(exc).__name__}); check GRIST_SERVER_URL and the network"
                    ) from None
                self._sleep(attempt, None, f"{type(exc).__name__} on {url}")
                continue
            if resp.ok:
                return resp
            if resp.status_code in RETRY_STATUSES and attempt <= self.retries:
                retry_after = resp.headers.get("Retry-After")
                resp.close()
                self._sleep(attempt, retry_after, f"HTTP {resp.status_code} on {url}")
                continue
            raise self._error(resp, url, attempt)

    def _sleep(self, attempt: int, retry_after: str | None, why: str) -> None:
        delay = min(self.backoff_s * 2 ** (attempt - 1), self.max_backoff_s)
        if retry_after and retry_after.isdigit():
            delay = min(max(delay, float(retry_after)), self.max_backoff_s)
        log.warning("Grist: %s; retrying in %.1fs", redact(why), delay)
        time.sleep(delay)

    def _error(self, resp: requests.Response, url: str, attempts: int) -> GristError:
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
        states = self.get_json("states").get("states") or []
        return states[0].get("h") if states else None

    def sql(self, query: str, args: list[Any] | None = None) -> list[dict[str, Any]]:
        body = self.call("sql", json_data={"sql": query, "args": args or []}).json()
        return [r.get("fields", {}) for r in body.get("records", [])]

    def close(self) -> None:
        self.session.close()


def _server_message(resp: requests.Response, api_key: str) -> str:
    """The server's own error text (`{"error": "..."}`), shortened and with secrets masked."""
    try:
        body = resp.json()
    except ValueError:
        body = None
    text = body["error"] if isinstance(body, dict) and isinstance(body.get("error"), str) else resp.reason
    return redact(str(text or "error"), [api_key, *known_secrets()])[:300]

"""A whole graph built at once with FalkorDB's `GRAPH.BULK`, then swapped in for the live one.

`GRAPH.BULK key [BEGIN] <nodes> <edges> <node blocks> <edge blocks> <block>...` creates nodes and
relationships from binary blocks (the format FalkorDB's bulk loader writes). A block starts
with a header — the label (or relationship type) as a NUL-terminated string, a 4-byte property
count, the property names, NUL-terminated — and then holds records: a node record is one value
per property; a relationship record is the source and destination node numbers (8 bytes each:
nodes are numbered 0, 1, 2, … in the order they were sent) and then its values. A value is a
type byte and its bytes: 0 null (nothing stored), 1 bool (1 byte), 2 double (8), 3 string
(UTF-8, NUL-terminated), 4 integer (8), 5 array (an 8-byte length, then its values). Numbers are
in the machine's byte order: the server runs here, on the same machine.

`BEGIN` refuses a key that exists, so a rebuild goes to a scratch key and a `RENAME` puts it in
place of the live graph at once: until then readers see the old graph, and a failed build
leaves it untouched. The scratch graph first gets the live graph's labels, relationship types
and property keys, in their order, from header-only blocks: clients (the `falkordb` client
caches names by number, reading them again only for a number it does not know) keep reading
the right names after the swap.
"""

from __future__ import annotations

import queue
import struct
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from vedana.errors import CypherError
from vedana.handoff import put_unless
from vedana.stores.graph import EncodedRows, GraphBuild, quote_name

_NULL, _BOOL, _DOUBLE, _STRING, _LONG, _ARRAY = (bytes([tag]) for tag in range(6))
_TRUE, _FALSE = _BOOL + b"\x01", _BOOL + b"\x00"
_COUNT = struct.Struct("=I")
_I64 = struct.Struct("=q")
_F64 = struct.Struct("=d")
_ENDPOINTS = struct.Struct("=QQ")
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1

CALL_BYTES = 2 * 2**20  # blocks per GRAPH.BULK call, at most (the server reads a call whole)
_IN_FLIGHT = 1  # encoded calls waiting for the server while the next one is encoded


def encode_value(out: bytearray, value: Any) -> None:
    """Append `value` (None, bool, int, float, str, or a list of those) to `out`. Integers beyond
    64 bits are clamped, as FalkorDB's Cypher parser does with such a literal."""
    kind = type(value)
    if kind is str:
        out += _STRING
        out += value.encode()
        out += b"\x00"  # staging (Postgres text) never holds NUL, so the string ends here
    elif kind is int:
        out += _LONG
        out += _I64.pack(min(max(value, _I64_MIN), _I64_MAX))
    elif kind is float:
        out += _DOUBLE
        out += _F64.pack(value)
    elif kind is bool:
        out += _TRUE if value else _FALSE
    elif value is None:
        out += _NULL
    elif kind is list or kind is tuple:
        out += _ARRAY
        out += _I64.pack(len(value))
        for item in value:
            encode_value(out, item)
    else:
        raise CypherError(f"cannot store a {kind.__name__} value in the graph")


def encode_rows(rows: Iterable[Sequence[Any]], *, ends: bool = False) -> EncodedRows:
    """`rows` of values as node records; with `ends`, as relationship records whose first value
    is the two node numbers, already as record bytes (a row with None there is skipped)."""
    out = bytearray()
    kept = 0
    for row in rows:
        values: Iterable[Any] = row
        if ends:
            if row[0] is None:
                continue
            out += row[0]
            values = row[1:]
        for value in values:
            encode_value(out, value)
        kept += 1
    return EncodedRows(bytes(out), kept)


def block_header(names: Iterable[str], properties: Iterable[str]) -> bytearray:
    """A block's header: its label(s) or type, and the property names its records hold."""
    props = list(properties)
    out = bytearray(":".join(names).encode() + b"\x00")
    out += _COUNT.pack(len(props))
    for name in props:
        out += name.encode() + b"\x00"
    return out


class BulkBuild(GraphBuild):
    """A graph built under `scratch` with GRAPH.BULK and renamed to `target` by `finish()`.

    Nodes must all be added before the relationships between them. Rows may come as records
    encoded already (`EncodedRows`, see `vedana.stores.staging_bulk`): nodes are then numbered
    by the order they come in, and a relationship's record holds its ends' numbers. Calls are sent by a thread
    of their own, so the server builds one call while the next is encoded. `client` is a
    `redis.Redis` on the server; `schema` the live graph's (labels, types, property keys)."""

    def __init__(
        self, client: Any, target: str, scratch: str, schema: tuple[list[str], list[str], list[str]]
    ) -> None:
        self.client, self.target, self.scratch = client, target, scratch
        self.node_numbers: dict[str, dict[str, int]] = {}
        self._next_node = 0
        self._blocks: list[tuple[bool, bytes]] = []  # (is a node block, block)
        self._counts = [0, 0]  # nodes, relationships in the pending call
        self._pending_bytes = 0
        self._first_call = True
        self._indexes: dict[tuple[str, str], None] = {}
        self._sent: queue.Queue[Any] = queue.Queue(maxsize=_IN_FLIGHT)
        self._error: BaseException | None = None
        self._sender = threading.Thread(target=self._send_calls, name="graph-bulk-send", daemon=True)
        client.delete(scratch)  # a scratch graph left by a build that never finished
        self._sender.start()
        labels, types, keys = schema
        if labels:  # (a graph with no label has no node, hence no property worth keeping either)
            self._add(True, bytes(block_header(labels, keys)), 0)
        for name in types:
            self._add(False, bytes(block_header([name], [])), 0)

    # -- what the caller adds --------------------------------------------------------------------
    encoded_rows = True

    def add_nodes(self, label: str, keys: list[str], rows: list[list[Any]] | EncodedRows) -> None:
        """Nodes of `label`; each row `[id, value of keys[0], ...]` (the id becomes property `id`)."""
        out = block_header([label], ["id", *keys])
        if isinstance(rows, EncodedRows):
            out += rows.data
            self._next_node += rows.count
            self._add(True, bytes(out), rows.count)
            return
        numbers = self.node_numbers.setdefault(label, {})
        number = self._next_node
        for row in rows:
            numbers[row[0]] = number
            number += 1
            for value in row:
                encode_value(out, value)
        self._next_node = number
        self._add(True, bytes(out), len(rows))

    def add_edges(
        self,
        rel_type: str,
        from_label: str,
        to_label: str,
        keys: list[str],
        rows: list[list[Any]] | EncodedRows,
    ) -> int:
        """Relationships of `rel_type`; each row `[from id, to id, value of keys[0], ...]`. A row
        whose end is not a node added here is skipped (as a MATCH that finds nothing would);
        returns how many were kept."""
        out = block_header([rel_type], keys)
        if isinstance(rows, EncodedRows):
            if rows.count:
                out += rows.data
                self._add(False, bytes(out), rows.count)
            return rows.count
        sources = self.node_numbers.get(from_label, {})
        targets = self.node_numbers.get(to_label, {})
        kept = 0
        for row in rows:
            source, target = sources.get(row[0]), targets.get(row[1])
            if source is None or target is None:
                continue
            out += _ENDPOINTS.pack(source, target)
            for value in row[2:]:
                encode_value(out, value)
            kept += 1
        if kept:
            self._add(False, bytes(out), kept)
        return kept

    def add_index(self, label: str, prop: str = "id") -> None:
        """A range index on `label.prop`, created on the new graph before it is swapped in."""
        self._indexes[(label, prop)] = None

    def send_pending(self) -> None:
        """Send the blocks added so far as a call of their own (the nodes, while the
        relationships are still being read)."""
        self._flush()

    # -- sending -----------------------------------------------------------------------------------
    def _add(self, node_block: bool, block: bytes, records: int) -> None:
        if self._pending_bytes + len(block) > CALL_BYTES and self._blocks:
            self._flush()
        self._blocks.append((node_block, block))
        self._counts[0 if node_block else 1] += records
        self._pending_bytes += len(block)

    def _flush(self) -> None:
        if not self._blocks:
            return
        node_blocks = [b for is_node, b in self._blocks if is_node]
        edge_blocks = [b for is_node, b in self._blocks if not is_node]
        head: list[Any] = ["BEGIN"] if self._first_call else []
        args = [*head, self._counts[0], self._counts[1], len(node_blocks), len(edge_blocks)]
        self._first_call = False
        self._blocks, self._counts, self._pending_bytes = [], [0, 0], 0
        self._put([*args, *node_blocks, *edge_blocks])

    def _put(self, call: Any) -> None:
        if not put_unless(self._sent, call, lambda: self._error is not None):
            assert self._error is not None
            raise self._error

    def _send_calls(self) -> None:
        while (call := self._sent.get()) is not None:
            if self._error is None:
                try:
                    self.client.execute_command("GRAPH.BULK", self.scratch, *call)
                except BaseException as exc:  # raised to the caller at its next add or finish
                    self._error = exc

    def _stop_sender(self) -> None:
        if self._sender.is_alive():
            self._sent.put(None)
            self._sender.join()

    # -- the end -----------------------------------------------------------------------------------
    def finish(self) -> None:
        """Send what is left, wait for the server, create the indexes, and swap the new graph in."""
        self._flush()
        self._stop_sender()
        if self._error is not None:
            raise self._error
        for label, prop in self._indexes:
            query = f"CREATE INDEX FOR (n:{quote_name(label)}) ON (n.{quote_name(prop)})"
            self.client.execute_command("GRAPH.QUERY", self.scratch, query)
        self.client.rename(self.scratch, self.target)

    def abort(self) -> None:
        """Give up: stop sending and drop the scratch graph; the live one is untouched."""
        self._error = self._error or CypherError("the bulk build was abandoned")
        self._stop_sender()
        self.client.delete(self.scratch)

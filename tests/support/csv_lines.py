"""CSV files as a re-sync's line checksums see them, for the tests of `csv_folder.line_digests`."""

from __future__ import annotations

import random


def data_lines(content: bytes) -> list[bytes]:
    """A file's data lines (past a BOM and the header), each as the sync digests it: without its
    line break, a carriage return before it kept."""
    lines = content.removeprefix(b"\xef\xbb\xbf").split(b"\n")[1:]
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def random_csv(rnd: random.Random, count: int, tag: str, *, longest: int, crlf: float) -> bytes:
    """`count` lines "<i>,<tag>x…" (up to `longest` x's) under an "id,name" header, with or
    without a last line break, CRLF line breaks with chance `crlf`, a BOM with chance 0.2."""
    body = [f"{i},{tag}{'x' * rnd.randint(0, longest)}" for i in range(count)]
    text = "\n".join(["id,name", *body]) + rnd.choice(["\n", ""])
    if rnd.random() < crlf:
        text = text.replace("\n", "\r\n")
    return (b"\xef\xbb\xbf" if rnd.random() < 0.2 else b"") + text.encode()

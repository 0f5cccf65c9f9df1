"""What a name must be to become a graph label, relationship type or property key.

Labels, types and keys are written backtick-quoted, and not every engine can escape a backtick
inside one (FalkorDB cannot), nor take control characters; so such names are refused where they
enter — sync, reading the data model — with the table and row named, instead of failing every
later index.
"""

from __future__ import annotations

import re

MAX_NAME_LENGTH = 255
_UNUSABLE = re.compile(r"[`\x00-\x1f\x7f]")


def graph_name_problem(name: str) -> str | None:
    """Why `name` cannot be a label, relationship type or property key; None when it can."""
    if not name:
        return "it is empty"
    bad = _UNUSABLE.search(name)
    if bad:
        what = "a backtick" if bad.group() == "`" else f"a control character (U+{ord(bad.group()):04X})"
        return f"it holds {what}"
    if len(name) > MAX_NAME_LENGTH:
        return f"it is longer than {MAX_NAME_LENGTH} characters"
    return None

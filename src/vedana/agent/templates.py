"""Prompt templates: built-in `prompts/<name>.md`, overridden by a same-named row of the
`Prompts` table (synced into `DataModel.prompts`).

Placeholders are `{{name}}`; only known names are replaced, so braces and `$params` in Cypher
examples inside user-written templates are left alone.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

from vedana.datamodel import DataModel

TEMPLATE_NAMES = ("instructions", "data_model", "filter", "finalize", "no_answer")
_PLACEHOLDER = re.compile(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}")


@cache
def builtin(name: str) -> str:
    if name not in TEMPLATE_NAMES:
        raise KeyError(f"unknown prompt template {name!r}")
    return (resources.files("vedana.agent") / "prompts" / f"{name}.md").read_text(encoding="utf-8")


def fill(template: str, values: dict[str, object]) -> str:
    def replace(match: re.Match[str]) -> str:
        key = match.group(1)
        return str(values[key]) if key in values else match.group(0)

    return _PLACEHOLDER.sub(replace, template).strip()


class Templates:
    """The templates in force for one data model; `overridden` lists names taken from `Prompts`."""

    def __init__(self, dm: DataModel) -> None:
        # A blank row does not override: the built-in template stays (and is not reported).
        self._overrides = {
            p.name.strip(): p.text for p in dm.prompts if p.name.strip() in TEMPLATE_NAMES and p.text.strip()
        }

    @property
    def overridden(self) -> list[str]:
        return sorted(self._overrides)

    def text(self, name: str) -> str:
        return self._overrides.get(name) or builtin(name)

    def render(self, name: str, **values: object) -> str:
        return fill(self.text(name), values)

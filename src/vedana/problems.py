"""What `vedana check` reports: problems with a severity, a stable code, a place and a fix."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Severity = Literal["error", "warning"]
SectionStatus = Literal["ok", "problems", "failed", "skipped"]

SECTIONS = ("connectivity", "lint", "consistency", "smoke")


@dataclass(frozen=True)
class Problem:
    """One finding. `code` is stable (`lint.undescribed-column`) so CI can grep or allow-list
    it; `where` names the table/column/type/… it is about; `message` says what to fix."""

    severity: Severity
    code: str
    message: str
    where: dict[str, str] = field(default_factory=dict)

    @property
    def section(self) -> str:
        return self.code.split(".", 1)[0]

    def location(self) -> str:
        """`where` as one short text: `Anchor_person.nickname`, `type person`, …"""
        w = self.where
        if "table" in w and "column" in w:
            return f"{w['table']}.{w['column']}"
        parts = [f"{k} {v}" if k not in ("table", "column") else v for k, v in w.items()]
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "severity": self.severity,
            "code": self.code,
            "section": self.section,
            "where": dict(self.where),
            "message": self.message,
        }


def error(code: str, message: str, **where: str) -> Problem:
    return Problem("error", code, message, {k: str(v) for k, v in where.items()})


def warning(code: str, message: str, **where: str) -> Problem:
    return Problem("warning", code, message, {k: str(v) for k, v in where.items()})


@dataclass
class SectionResult:
    """One section of a check: its problems, what it looked at (`details`), or why it was skipped."""

    name: str
    problems: list[Problem] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    skipped: str | None = None  # the reason, when the section did not run
    seconds: float = 0.0

    def status(self) -> SectionStatus:
        if self.skipped is not None:
            return "skipped"
        if any(p.severity == "error" for p in self.problems):
            return "failed"
        return "problems" if self.problems else "ok"

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status(),
            "errors": sum(p.severity == "error" for p in self.problems),
            "warnings": sum(p.severity == "warning" for p in self.problems),
            "skipped": self.skipped,
            "details": self.details,
            "seconds": round(self.seconds, 3),
        }


@dataclass
class CheckReport:
    sections: dict[str, SectionResult] = field(default_factory=dict)
    strict: bool = False
    seconds: float = 0.0

    @property
    def problems(self) -> list[Problem]:
        return [p for s in self.sections.values() for p in s.problems]

    @property
    def errors(self) -> int:
        return sum(p.severity == "error" for p in self.problems)

    @property
    def warnings(self) -> int:
        return sum(p.severity == "warning" for p in self.problems)

    @property
    def ok(self) -> bool:
        """Errors fail; warnings fail only when `strict`."""
        return self.errors == 0 and not (self.strict and self.warnings)

    def codes(self) -> list[str]:
        return [p.code for p in self.problems]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "strict": self.strict,
            "errors": self.errors,
            "warnings": self.warnings,
            "problems": [p.to_dict() for p in self.problems],
            "sections": {name: s.to_dict() for name, s in self.sections.items()},
            "seconds": round(self.seconds, 3),
        }

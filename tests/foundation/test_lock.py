"""The lock file: every installed package pinned with hashes, and a stale lock caught (scripts/lock.py)."""

from __future__ import annotations

import importlib.util
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements.lock"


def _lock_script():
    spec = importlib.util.spec_from_file_location("lock_script", ROOT / "scripts" / "lock.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pinned_with_hashes(lock_text: str) -> dict[str, str]:
    """name → version, for each pin followed by at least one hash line."""
    lock = _lock_script()
    found = {}
    for block in re.split(r"\n(?=\S)", lock_text):
        pin = lock.PIN.match(block)
        if pin and "--hash=sha256:" in block:
            found[lock.normalise(pin.group(1))] = pin.group(2)
    return found


def test_every_installed_package_is_in_the_lock_at_its_version_with_hashes():
    if Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
        pytest.skip("runs in the project's own .venv, the one `make install` builds from the lock")
    lock = _lock_script()
    locked = _pinned_with_hashes(LOCK.read_text())
    installed = {lock.normalise(d.metadata["Name"]): d.version for d in metadata.distributions()}
    outside = {
        name: version
        for name, version in installed.items()
        if name not in {"pip", "vedana"} and locked.get(name) != version
    }
    assert not outside, f"installed but not locked at this version (run `make install`): {outside}"
    assert installed.keys() >= locked.keys() - {"pip"}, (
        "the lock pins packages `make install` did not install"
    )


def test_the_lock_is_current_and_a_changed_dependency_makes_it_stale():
    lock = _lock_script()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    lock_text = LOCK.read_text()
    assert lock.stale(pyproject, lock_text) == []

    pyproject["project"]["dependencies"].append("rich-click>=1.8")
    problems = lock.stale(pyproject, lock_text)
    assert "pyproject.toml's dependencies changed since requirements.lock was written" in problems
    assert "rich-click is not in requirements.lock" in problems


def test_a_pin_outside_its_range_is_reported():
    lock = _lock_script()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pinned = lock.pins(LOCK.read_text())["typer"]
    tampered = re.sub(r"^typer==\S+", "typer==0.1.0", LOCK.read_text(), flags=re.M)
    assert pinned != "0.1.0"
    problems = lock.stale(pyproject, tampered)
    assert any(p.startswith("requirements.lock pins typer==0.1.0, outside") for p in problems), problems

"""Timing and peak memory per benchmark phase, for this process and for the child services.

The Python process: Linux keeps a resident-set high-water mark (`VmHWM`) that can be reset by
writing `5` to `/proc/self/clear_refs`, which gives an exact peak per phase; where that is not
available a sampling thread's maximum stands in. The services (Postgres with its backends,
the FalkorDB server) run as other processes, so a thread samples their proportional set size
(PSS: shared pages are split between the processes that map them, so a sum over Postgres'
backends does not count its shared buffers once per backend).
"""

from __future__ import annotations

import contextlib
import re
import statistics
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MB = 1024 * 1024
_HWM = re.compile(r"^VmHWM:\s+(\d+)\s+kB", re.MULTILINE)
_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


def percentiles(samples: Sequence[float]) -> dict[str, float]:
    """p50 / p95 / max of `samples` (seconds) in milliseconds, linearly interpolated."""
    if not samples:
        return {"n": 0}
    ordered = sorted(samples)
    if len(ordered) == 1:
        p50 = p95 = ordered[0]
    else:
        cuts = statistics.quantiles(ordered, n=100, method="inclusive")
        p50, p95 = cuts[49], cuts[94]
    return {
        "n": len(ordered),
        "p50_ms": round(p50 * 1000, 3),
        "p95_ms": round(p95 * 1000, 3),
        "max_ms": round(ordered[-1] * 1000, 3),
    }


def _high_water_kb() -> int | None:
    try:
        match = _HWM.search(_STATUS.read_text())
    except OSError:
        return None
    return int(match.group(1)) if match else None


def _reset_high_water() -> bool:
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return True


@dataclass
class PhaseMemory:
    """Memory seen during one phase, in bytes."""

    start_rss: int = 0
    peak_rss: int = 0
    services_peak: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "python_peak_mb": round(self.peak_rss / MB, 1),
            "python_growth_mb": round(max(self.peak_rss - self.start_rss, 0) / MB, 1),
            "services_peak_mb": {k: round(v / MB, 1) for k, v in sorted(self.services_peak.items())},
        }


@dataclass
class Phase:
    """What `Meter.phase` hands out: `seconds` and `memory` are filled when the block ends."""

    name: str
    seconds: float = 0.0
    memory: PhaseMemory = field(default_factory=PhaseMemory)

    def to_dict(self) -> dict[str, Any]:
        return {"seconds": round(self.seconds, 3), **self.memory.to_dict()}


class Meter:
    """Samples memory in a background thread while phases run. Use as a context manager."""

    def __init__(self, interval_s: float = 0.1, services_every: int = 3) -> None:
        import psutil

        self._psutil = psutil
        self._me = psutil.Process()
        self._interval = interval_s
        self._services_every = services_every  # service trees cost more to read than our own RSS
        self._services: dict[str, int] = {}  # name -> pid of the service's main process
        self._active: list[Phase] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-meter", daemon=True)
        self.exact_peaks = _high_water_kb() is not None and _reset_high_water()

    def __enter__(self) -> Meter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def watch_services(self, pids: dict[str, int | None]) -> None:
        """Sample these services (name -> main pid; Postgres' backends are its children)."""
        with self._lock:
            self._services = {name: pid for name, pid in pids.items() if pid}

    def services_now(self) -> dict[str, int]:
        """Current PSS of each watched service, in bytes."""
        with self._lock:
            services = dict(self._services)
        return {name: self._tree_pss(pid) for name, pid in services.items()}

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[Phase]:
        phase = Phase(name)
        rss = self._me.memory_info().rss
        phase.memory.start_rss = phase.memory.peak_rss = rss
        parent = self._active[-1] if self._active else None
        if parent is not None:
            self._fold_high_water(parent)  # before the reset below forgets the parent's peak
        with self._lock:
            self._active.append(phase)
        if self.exact_peaks:
            _reset_high_water()
        self._sample_services([phase])
        started = time.perf_counter()
        try:
            yield phase
        finally:
            phase.seconds = time.perf_counter() - started
            self._sample_services([phase])
            self._fold_high_water(phase)
            with self._lock:
                self._active.remove(phase)
            if parent is not None:
                parent.memory.peak_rss = max(parent.memory.peak_rss, phase.memory.peak_rss)
                for service, peak in phase.memory.services_peak.items():
                    parent.memory.services_peak[service] = max(
                        parent.memory.services_peak.get(service, 0), peak
                    )

    def _fold_high_water(self, phase: Phase) -> None:
        kb = _high_water_kb() if self.exact_peaks else None
        if kb is not None:
            phase.memory.peak_rss = max(phase.memory.peak_rss, kb * 1024)

    def _run(self) -> None:
        tick = 0
        while not self._stop.wait(self._interval):
            with self._lock:
                active = list(self._active)
            if not active:
                continue
            try:
                rss = self._me.memory_info().rss
            except self._psutil.Error:
                continue
            for phase in active:
                phase.memory.peak_rss = max(phase.memory.peak_rss, rss)
            tick += 1
            if tick % self._services_every == 0:
                self._sample_services(active)

    def _sample_services(self, phases: list[Phase]) -> None:
        for name, pss in self.services_now().items():
            for phase in phases:
                peaks = phase.memory.services_peak
                peaks[name] = max(peaks.get(name, 0), pss)

    def _tree_pss(self, pid: int) -> int:
        psutil = self._psutil
        try:
            root = psutil.Process(pid)
            processes = [root, *root.children(recursive=True)]
        except psutil.Error:
            return 0
        total = 0
        for process in processes:
            try:
                info = process.memory_full_info()
                total += getattr(info, "pss", 0) or info.rss
            except psutil.Error:  # a backend that just exited, or no permission
                continue
        return total

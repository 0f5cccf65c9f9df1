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
import functools
import os
import re
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Sequence
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


def high_water_kb() -> int | None:
    try:
        match = _HWM.search(_STATUS.read_text())
    except OSError:
        return None
    return int(match.group(1)) if match else None


def reset_high_water() -> bool:
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
    """What `Meter.phase` hands out: `seconds`, `cpu_s` and `memory` are filled when the block ends.

    `cpu_s` is CPU time (user + system) spent during the phase by this process and by each
    service: unlike wall time it hardly moves when other programs compete for the cores, and
    it shows which process did the work."""

    name: str
    seconds: float = 0.0
    cpu_s: dict[str, float] = field(default_factory=dict)
    memory: PhaseMemory = field(default_factory=PhaseMemory)

    def to_dict(self) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds, 3),
            "cpu_s": {k: round(v, 3) for k, v in self.cpu_s.items()},
            **self.memory.to_dict(),
        }


class Meter:
    """Samples memory in a background thread while phases run. Use as a context manager."""

    def __init__(self, interval_s: float = 0.1, services_every: int = 20) -> None:
        import psutil

        self._psutil = psutil
        self._me = psutil.Process()
        self._interval = interval_s
        # Service trees cost far more to read than our own RSS: a PSS reading of Postgres and its
        # backends is ~20-50 ms of this process's CPU. Every 0.3 s it took ~15 % of a core from
        # the runs it measured (a 0.2 s edit re-sync measured 0.3 s); every 2 s it is ~1-2 %.
        # Phases are also read at their start and end, outside their timing.
        self._services_every = services_every
        self._services: dict[str, int] = {}  # name -> pid of the service's main process
        self._active: list[Phase] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-meter", daemon=True)
        self.exact_peaks = high_water_kb() is not None and reset_high_water()

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

    def cpu_now(self) -> dict[str, float]:
        """CPU seconds used so far by this process ("python") and each watched service (its
        live processes plus the children it has reaped, e.g. Postgres backends that ended)."""
        times = self._me.cpu_times()
        out = {"python": times.user + times.system}
        with self._lock:
            services = dict(self._services)
        for name, pid in services.items():
            out[name] = self._tree_cpu(pid)
        return out

    def _tree_cpu(self, pid: int) -> float:
        # Phases read this at every stage change, inside their timing: /proc directly costs
        # ~0.4 ms a tree, where psutil's walk of every process on the machine cost ~2.5 ms (a
        # sync's four stage changes added ~20 ms of this process's CPU to a 0.2 s re-sync).
        total = proc_tree_cpu(pid)
        return self._psutil_tree_cpu(pid) if total is None else total

    def _psutil_tree_cpu(self, pid: int) -> float:
        psutil = self._psutil
        try:
            root = psutil.Process(pid)
            processes = [root, *root.children(recursive=True)]
            reaped = root.cpu_times()
        except psutil.Error:
            return 0.0
        total = reaped.children_user + reaped.children_system
        for process in processes:
            try:
                t = process.cpu_times()
            except psutil.Error:
                continue
            total += t.user + t.system
        return total

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
            reset_high_water()
        self._sample_services([phase])
        cpu_before = self.cpu_now()
        started = time.perf_counter()
        try:
            yield phase
        finally:
            phase.seconds = time.perf_counter() - started
            cpu_after = self.cpu_now()
            phase.cpu_s = {k: max(cpu_after[k] - cpu_before.get(k, 0.0), 0.0) for k in cpu_after}
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
        kb = high_water_kb() if self.exact_peaks else None
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


def proc_tree_cpu(pid: int) -> float | None:
    """CPU seconds of `pid`, its live descendants and the children it has reaped, from Linux's
    /proc (each thread's `children` list); None where /proc cannot tell."""
    per_second = _clock_ticks()
    if not per_second or not Path(f"/proc/{pid}/task/{pid}/children").exists():
        return None
    ticks, todo = 0, [pid]
    while todo:
        process = todo.pop()
        try:
            with open(f"/proc/{process}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            for task in os.listdir(f"/proc/{process}/task"):
                with open(f"/proc/{process}/task/{task}/children") as f:
                    todo.extend(int(child) for child in f.read().split())
        except (OSError, ValueError):
            continue  # a process that just ended
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
        if process == pid:
            ticks += int(fields[13]) + int(fields[14])  # reaped children: cutime, cstime
    return ticks / per_second


@functools.cache
def _clock_ticks() -> int:
    return os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0


class StageClock:
    """Wall and CPU seconds per stage of one phase, told apart by the phase's progress callback:
    each time the (grouped) stage name changes, the previous stage ends. Time before the first
    callback is the stage "setup"."""

    def __init__(self, meter: Meter, group: Callable[[str], str] = lambda stage: stage) -> None:
        self._meter = meter
        self._group = group
        self._stages: dict[str, dict[str, Any]] = {}
        self._current = "setup"
        self._since = time.perf_counter()
        self._cpu = meter.cpu_now()

    def __call__(self, stage: str, done: int, total: int | None) -> None:
        name = self._group(stage)
        if name != self._current:
            self._close()
            self._current = name

    def _close(self) -> None:
        now, cpu = time.perf_counter(), self._meter.cpu_now()
        entry = self._stages.setdefault(self._current, {"seconds": 0.0, "cpu_s": {}})
        entry["seconds"] += now - self._since
        for key, value in cpu.items():
            entry["cpu_s"][key] = entry["cpu_s"].get(key, 0.0) + max(value - self._cpu.get(key, 0.0), 0.0)
        self._since, self._cpu = now, cpu

    def finish(self) -> dict[str, dict[str, Any]]:
        self._close()
        return {
            name: {
                "seconds": round(e["seconds"], 3),
                "cpu_s": {k: round(v, 3) for k, v in e["cpu_s"].items()},
            }
            for name, e in self._stages.items()
        }

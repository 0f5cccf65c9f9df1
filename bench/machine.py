"""What the benchmark ran on, and what else was using the CPU meanwhile (numbers from a busy
2-core machine are not numbers from an idle one, so the results say which it was)."""

from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

_BUSY_PERCENT = 10.0  # a process using more than this share of one core counts as "busy"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def busy_processes(sample_s: float = 1.0, exclude: set[int] | None = None) -> list[dict[str, Any]]:
    """Other processes using the CPU right now: name and % of one core (never command lines,
    which can hold secrets)."""
    import psutil

    exclude = exclude or set()
    procs = []
    for p in psutil.process_iter(["pid", "name"]):
        if p.info["pid"] in exclude:
            continue
        try:
            p.cpu_percent(None)
            procs.append(p)
        except psutil.Error:
            continue
    time.sleep(sample_s)
    busy = []
    for p in procs:
        try:
            percent = p.cpu_percent(None)
        except psutil.Error:
            continue
        if percent >= _BUSY_PERCENT:
            busy.append({"name": p.info["name"], "cpu_percent": round(percent, 1)})
    return sorted(busy, key=lambda b: -b["cpu_percent"])


def own_pids() -> set[int]:
    import psutil

    me = psutil.Process()
    return {me.pid, *(c.pid for c in me.children(recursive=True))}


def machine_info() -> dict[str, Any]:
    import psutil

    return {
        "cpus": os.cpu_count(),
        "cpu_model": cpu_model(),
        "memory_gb": round(psutil.virtual_memory().total / 1024**3, 1),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "load_avg_start": [round(x, 2) for x in os.getloadavg()],
        "busy_processes_start": busy_processes(exclude=own_pids()),
        "_cpu_times_start": list(psutil.cpu_times()),
    }


def machine_end(info: dict[str, Any]) -> None:
    """Add the end-of-run load, and how busy the whole machine was during the run (this
    benchmark, its services and everything else together)."""
    import psutil

    info["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    info["busy_processes_end"] = busy_processes(exclude=own_pids())
    start = psutil.cpu_times().__class__(*info.pop("_cpu_times_start"))
    end = psutil.cpu_times()
    idle = (end.idle - start.idle) + (getattr(end, "iowait", 0) - getattr(start, "iowait", 0))
    total = sum(end) - sum(start)
    info["cpu_busy_percent_during_run"] = round(100 * (1 - idle / total), 1) if total > 0 else None

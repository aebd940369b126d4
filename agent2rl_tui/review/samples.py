"""Reading the vitals samples a run recorded (the supervisor's sampler writes them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent2rl_tui.record.store import RunStore


def latest_samples(run_dir: Path, limit: int = 1) -> list[dict[str, Any]]:
    with RunStore.of_run(run_dir) as store:
        rows = store.conn.execute("SELECT * FROM samples ORDER BY at DESC LIMIT ?", (limit,)).fetchall()
    return [dict(r) | {"gpus": json.loads(r["gpus_json"])} for r in rows]


def summarize_samples(run_dir: Path) -> dict[str, Any]:
    """Peak and mean figures over the run, for the report."""
    with RunStore.of_run(run_dir) as store:
        rows = [dict(r) for r in store.conn.execute("SELECT * FROM samples ORDER BY at")]
    if not rows:
        return {"samples": 0}
    cpu = [r["cpu_pct"] for r in rows if r["cpu_pct"] is not None]
    gpu_peak: dict[int, dict[str, float]] = {}
    for r in rows:
        for g in json.loads(r["gpus_json"]):
            peak = gpu_peak.setdefault(g["index"], {"util_pct_max": 0.0, "mem_used_max": 0, "mem_total": g["mem_total"]})
            peak["util_pct_max"] = max(peak["util_pct_max"], g["util_pct"])
            peak["mem_used_max"] = max(peak["mem_used_max"], g["mem_used"])
    return {
        "samples": len(rows),
        "cpu_pct_mean": sum(cpu) / len(cpu) if cpu else None,
        "cpu_pct_max": max(cpu) if cpu else None,
        "mem_used_max": max(r["mem_used"] for r in rows),
        "mem_total": rows[-1]["mem_total"],
        "disk_free_min": min(r["disk_free"] for r in rows),
        "agent_rss_max": max(r["agent_rss"] for r in rows),
        "agent_procs_max": max(r["agent_procs"] for r in rows),
        "gpus": gpu_peak or rows[-1]["gpu_note"] or "no GPU",
    }


"""The machine over the run: CPU, memory and GPU use as charts, from the vitals samples run.db keeps.

The supervisor samples every few seconds (``run.vitals``); the report's Metrics give the peaks and
means, and these charts the shape: when the agent's training loaded the GPU, whether memory crept
up to the limit before an out-of-memory, how long the machine sat idle.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from agent2rl_tui.record.store import RunStore

GIB = float(1 << 30)


@dataclass
class VitalsSeries:
    cpu_pct: list[tuple[float, float]] = field(default_factory=list)
    mem_gib: list[tuple[float, float]] = field(default_factory=list)
    agent_rss_gib: list[tuple[float, float]] = field(default_factory=list)
    gpu_util: dict[int, list[tuple[float, float]]] = field(default_factory=dict)
    gpu_mem_gib: dict[int, list[tuple[float, float]]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.cpu_pct or self.mem_gib)


def read_vitals(run_dir: Path) -> VitalsSeries:
    """Every sample as points: minutes since the budget's start (the run's creation before it)."""
    out = VitalsSeries()
    with RunStore.of_run(Path(run_dir)) as store:
        run = store.run()
        start = run.budget_start or run.created_at or 0.0
        rows = store.conn.execute("SELECT at, cpu_pct, mem_used, agent_rss, gpus_json FROM samples ORDER BY at")
        for at, cpu, mem, rss, gpus in rows:
            x = (at - start) / 60
            if cpu is not None:
                out.cpu_pct.append((x, float(cpu)))
            if mem is not None:
                out.mem_gib.append((x, mem / GIB))
            if rss is not None:
                out.agent_rss_gib.append((x, rss / GIB))
            try:
                readings = json.loads(gpus or "[]")
            except ValueError:
                readings = []
            for g in readings if isinstance(readings, list) else []:
                if isinstance(g, dict) and isinstance(g.get("index"), int):
                    out.gpu_util.setdefault(g["index"], []).append((x, float(g.get("util_pct") or 0.0)))
                    out.gpu_mem_gib.setdefault(g["index"], []).append((x, float(g.get("mem_used") or 0) / GIB))
    return out


def vitals_charts(v: VitalsSeries) -> list[str]:
    """CPU, memory and (where there are GPUs) GPU use and memory over the run, as SVG."""
    from agent2rl_tui.review.plots import PALETTE, Chart, Series, render

    x_label = "minutes since the budget's start"
    charts = [Chart("CPU use of the machine", x_label, "%", series=[Series(v.cpu_pct, PALETTE[0], "CPU %")],
                    legend=[("CPU %", PALETTE[0])]),
              Chart("memory", x_label, "GiB",
                    series=[Series(v.mem_gib, PALETTE[1], "the machine"), Series(v.agent_rss_gib, PALETTE[2],
                                                                                 "the agent's processes")],
                    legend=[("the machine", PALETTE[1]), ("the agent's processes", PALETTE[2])])]
    if v.gpu_util:
        colours = {i: PALETTE[n % len(PALETTE)] for n, i in enumerate(sorted(v.gpu_util))}
        charts.append(Chart("GPU use", x_label, "%", series=[Series(p, colours[i], f"GPU {i}")
                                                            for i, p in sorted(v.gpu_util.items())],
                            legend=[(f"GPU {i}", colours[i]) for i in sorted(v.gpu_util)]))
        charts.append(Chart("GPU memory", x_label, "GiB", series=[Series(p, colours[i], f"GPU {i}")
                                                                 for i, p in sorted(v.gpu_mem_gib.items())],
                            legend=[(f"GPU {i}", colours[i]) for i in sorted(v.gpu_mem_gib)]))
    return [render(c) for c in charts]

"""Profiles from methods loaded with profile=True: per-op summaries and Chrome / Perfetto
trace files.

    with program.load_method("forward", profile=True) as forward:
        profile = Profile.record(forward, inputs, runs=20)
        print(profile.summary_table())
        profile.write_trace("trace.json")      # open in chrome://tracing or ui.perfetto.dev
"""
from __future__ import annotations

import json
from collections import defaultdict
from typing import Any, Dict, List, NamedTuple, Sequence

from .method import ProfileEvent


class OpSummary(NamedTuple):
    op_name: str
    calls: int
    total_us: float
    mean_us: float
    share: float  # of the profiled time


class Profile:
    """Events of one or more executes of a method."""

    def __init__(self, method_name: str, runs: Sequence[Sequence[ProfileEvent]]) -> None:
        self.method_name = method_name
        self.runs = [list(r) for r in runs]

    @classmethod
    def record(cls, method: Any, inputs: Sequence[Any], runs: int = 1) -> "Profile":
        """Execute `runs` times on `inputs` and keep each run's events."""
        recorded = []
        for _ in range(runs):
            method(*inputs)
            recorded.append(method.profile_events())
        return cls(method.name, recorded)

    def summary(self) -> List[OpSummary]:
        """Time per op type over every run, largest first."""
        totals: Dict[str, List[float]] = defaultdict(lambda: [0, 0.0])
        for events in self.runs:
            for e in events:
                totals[e.op_name][0] += 1
                totals[e.op_name][1] += (e.end_ns - e.start_ns) / 1000.0
        grand = sum(t for _, t in totals.values()) or 1.0
        rows = [OpSummary(op, int(n), t, t / n, t / grand) for op, (n, t) in totals.items()]
        return sorted(rows, key=lambda r: -r.total_us)

    def summary_table(self) -> str:
        runs = max(len(self.runs), 1)
        lines = [f"method '{self.method_name}', {len(self.runs)} run(s)",
                 f"{'op':<20} {'calls/run':>9} {'us/run':>10} {'us/call':>9} {'share':>7}"]
        for r in self.summary():
            lines.append(f"{r.op_name:<20} {r.calls / runs:>9.1f} {r.total_us / runs:>10.1f} "
                         f"{r.mean_us:>9.2f} {r.share:>7.1%}")
        return "\n".join(lines)

    def trace_events(self) -> List[Dict[str, Any]]:
        """Chrome trace "complete" events (microseconds), one per executed instruction."""
        if not any(self.runs):
            return []
        origin = min(e.start_ns for events in self.runs for e in events)
        return [{"name": e.op_name, "cat": "op", "ph": "X", "pid": 1, "tid": 1,
                 "ts": (e.start_ns - origin) / 1000.0, "dur": (e.end_ns - e.start_ns) / 1000.0,
                 "args": {"instruction": e.instruction, "run": run}}
                for run, events in enumerate(self.runs) for e in events]

    def write_trace(self, path: str) -> None:
        with open(path, "w") as f:
            json.dump({"traceEvents": self.trace_events(), "displayTimeUnit": "ms"}, f)

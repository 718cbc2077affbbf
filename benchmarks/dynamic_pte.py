"""Dynamic-shape ExecuTorch programs (tests/data/dynamic_pte): our one converted program per
model against ExecuTorch's own runtime on the same .pte (portable kernels), at each stored shape.

    python benchmarks/dynamic_pte.py                  # every model, one thread -> stdout
    python benchmarks/dynamic_pte.py --only gpt2 bert

Needs executorch and torch, which runtime_py never imports: run it in the side venv of
scripts/export_executorch.py with cffi added (`/tmp/venv-et/bin/pip install cffi`). Both sides'
outputs are checked against the stored torch eager references first, then timed in interleaved
rounds (benchmarks/run.py's time_side_by_side). Our side runs one thread, as ExecuTorch's
portable kernels do. A ratio below 1.0 means ours is faster. A benchmark, never a test.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATA = ROOT / "tests" / "data" / "dynamic_pte"


def bench_entry(entry, min_time: float):
    import numpy as np
    import torch
    from executorch.runtime import Runtime

    import runtime_py as rt
    from benchmarks.run import time_side_by_side
    from runtime_py import executorch as et
    from tests.test_executorch_dynamic import ATOL, case

    path = str(DATA / entry["file"])
    ours = rt.Program.load(et.convert(path)).load_method("forward", num_threads=1)
    theirs = Runtime.get().load_program(Path(path)).load_method("forward")
    rows = []
    for k in range(entry["cases"]):
        inputs, want = case(entry, k)
        tensors = [torch.from_numpy(np.ascontiguousarray(a)) for a in inputs]
        sides = {"ours": lambda: ours(*inputs), "executorch": lambda: theirs.execute(tensors)}
        errors = {}
        for side, fn in sides.items():
            got = [np.asarray(g) for g in fn()]
            errors[side] = max(float(np.max(np.abs(g - w))) for g, w in zip(got, want))
        times = time_side_by_side(sides, min_time)
        rows.append({"file": entry["file"], "shape": [list(a.shape) for a in inputs],
                     "max_error": errors, "ok": all(e <= ATOL for e in errors.values()),
                     "median": {s: t["median"] for s, t in times.items()}})
    ours.close()
    return rows


def render(rows) -> str:
    lines = ["| model | shape | ours | executorch | ours / executorch | max error |",
             "|---|---|---:|---:|---:|---:|"]
    for r in rows:
        m = r["median"]
        shape = " ".join("x".join(str(s) for s in shape) for shape in r["shape"])
        lines.append(f"| {r['file']} | {shape} | {m['ours'] * 1e6:.0f} us | "
                     f"{m['executorch'] * 1e6:.0f} us | {m['ours'] / m['executorch']:.2f} | "
                     f"{max(r['max_error'].values()):.1e}{'' if r['ok'] else ' (MISMATCH)'} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=[], help="model families")
    parser.add_argument("--quick", action="store_true", help="0.3 s per side instead of 1 s")
    args = parser.parse_args()
    with open(DATA / "manifest.json") as f:
        entries = [e for e in json.load(f) if "error" not in e and
                   (not args.only or e["family"] in args.only)]
    rows = []
    for entry in entries:
        rows += bench_entry(entry, 0.3 if args.quick else 1.0)
    print(render(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

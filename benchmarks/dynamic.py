"""Dynamic-axis exports (tests/data/dynamic): our one program per model against onnxruntime,
and against our own program converted for that one shape.

    python benchmarks/dynamic.py                 # every model, one thread -> stdout
    python benchmarks/dynamic.py --only gpt2 bert --threads 2

For each model and each of its reference shapes three sides run the same inputs: `dynamic` (the
program converted once with dynamic_bounds, as users run it), `fixed` (converted with
input_shapes for this very shape: no run-time shape code at all) and onnxruntime on the ONNX
file. Every side's outputs are checked against the stored onnxruntime references first; then
the sides are timed in interleaved rounds (benchmarks/run.py's time_side_by_side). Ratios below
1.0 mean the first side is faster. dynamic / fixed is what the run-time shapes cost; it should
stay near 1.0. Thread counts are set per process, so each count runs in a child process. This
is a benchmark, never a test: nothing here asserts on time.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATA = ROOT / "tests" / "data" / "dynamic"


def entries(only):
    with open(DATA / "manifest.json") as f:
        found = [e for e in json.load(f) if "error" not in e]
    return [e for e in found if not only or e["family"] in only]


def bench_entry(entry, threads: int, min_time: float):
    import numpy as np
    import onnxruntime as ort

    import runtime_py.onnx as ro
    from benchmarks.run import time_side_by_side
    from tests.test_onnx_dynamic import ATOL, _bounds, _case

    path = str(DATA / entry["file"])
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = threads
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    dynamic = ro.load(path, dynamic_bounds=_bounds(entry), num_threads=threads)
    names = [info.name for info in dynamic.method_meta().inputs]
    rows = []
    for k in range(entry["cases"]):
        inputs, want = _case(entry, k)
        fixed = ro.load(path, input_shapes={n: a.shape for n, a in inputs.items()},
                        num_threads=threads)
        args = [inputs[n] for n in names]
        sides = {"dynamic": lambda: dynamic.forward(*args), "fixed": lambda: fixed.forward(*args),
                 "onnxruntime": lambda: session.run(None, inputs)}
        errors = {}
        for side, fn in sides.items():
            got = fn()
            got = got if isinstance(got, (list, tuple)) else [got]
            errors[side] = max(float(np.max(np.abs(np.asarray(g) - w))) for g, w in zip(got, want))
        times = time_side_by_side(sides, min_time)
        rows.append({"file": entry["file"], "shape": [list(inputs[n].shape) for n in names],
                     "max_error": errors, "ok": all(e <= ATOL for e in errors.values()),
                     "median": {s: t["median"] for s, t in times.items()}})
        fixed.close()
    dynamic.close()
    return rows


def child(args) -> None:
    rows = []
    for entry in entries(args.only):
        rows += bench_entry(entry, args.child_threads, args.min_time)
    json.dump(rows, sys.stdout)


def render(results) -> str:
    lines = ["| model | shape | threads | dynamic | fixed | onnxruntime | dynamic / fixed | "
             "dynamic / onnxruntime | max error |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for threads, rows in results:
        for r in rows:
            m = r["median"]
            shape = " ".join("x".join(str(s) for s in shape) for shape in r["shape"])
            lines.append(
                f"| {r['file']} | {shape} | {threads} | {m['dynamic'] * 1e6:.0f} us | "
                f"{m['fixed'] * 1e6:.0f} us | {m['onnxruntime'] * 1e6:.0f} us | "
                f"{m['dynamic'] / m['fixed']:.2f} | {m['dynamic'] / m['onnxruntime']:.2f} | "
                f"{max(r['max_error'].values()):.1e}{'' if r['ok'] else ' (MISMATCH)'} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="*", default=[1])
    parser.add_argument("--only", nargs="*", default=[], help="model families")
    parser.add_argument("--quick", action="store_true", help="0.3 s per side instead of 1 s")
    parser.add_argument("--child-threads", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--min-time", type=float, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_threads:
        child(args)
        return 0
    min_time = 0.3 if args.quick else 1.0
    results = []
    for threads in args.threads:
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        out = subprocess.run([sys.executable, __file__, "--child-threads", str(threads),
                              "--min-time", str(min_time), "--only", *args.only],
                             env=env, check=True, capture_output=True, text=True).stdout
        results.append((threads, json.loads(out)))
    print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())

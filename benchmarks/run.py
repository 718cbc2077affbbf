"""Side-by-side benchmarks: runtime_py against onnxruntime and numpy on the same inputs.

    python benchmarks/run.py                  # everything, 1 and 2 threads -> stdout + results.md
    python benchmarks/run.py --quick          # fewer repetitions
    python benchmarks/run.py --only mlp cnn   # some models

Before anything is timed, every output of every side is checked against a reference
(onnxruntime's outputs for the models, a float64 product for the GEMM); a side whose results
differ is not timed and gets no ratio, and the table says what differed. Each model is then
timed after a warm-up over many repetitions, in interleaved rounds whose order
rotates between our runtime and its peers: median, min and p90 latency. Ratios
are ours / peer (below 1.0: we are faster). Thread counts are set per process (numpy's BLAS
reads its thread count at import), so each count runs in a child process of this script.
This is a benchmark, never a test: nothing here asserts on time.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODELS = ("add", "matmul1024", "mlp", "cnn", "transformer", "mobilenet", "mobilenet_v1")


# Turns per peer, each about min_time / ROUNDS long. This VM has slow periods of seconds (one
# vCPU's FMA rate drops by a quarter or more); short turns spread them over every peer alike,
# where 6 turns of a third of a second each could leave one to a single peer's turn.
ROUNDS = 20
# Pause after each peer's turn: worker threads spin a while after their last job (numpy's
# OpenBLAS for up to ~2^28 cycles, about 0.1 s here; onnxruntime's about 40 ms; ours 1 ms,
# then nap for the worker wait, which child() shortens to less than this), and a peer timed
# while another's threads still spin on the second core loses it.
SETTLE_S = 0.15


def stats(times):
    times = sorted(times)
    return {"median": statistics.median(times), "min": times[0],
            "p90": times[int(0.9 * (len(times) - 1))], "reps": len(times)}


def time_side_by_side(fns, min_time: float, min_reps: int = 20):
    """Latencies (seconds) of each of fns (name -> callable), measured in interleaved rounds
    whose order rotates, with a pause after each turn, so what one peer leaves behind (threads
    still spinning, a warm or cold cache) falls on no peer. Each gets about min_time in all
    after a warm-up."""
    names = list(fns)
    for name in names:
        for _ in range(3):
            fns[name]()
    times = {name: [] for name in names}
    for round_ in range(ROUNDS):
        order = names[round_ % len(names):] + names[:round_ % len(names)]
        for name in order:
            fn, samples = fns[name], times[name]
            start, reps = time.perf_counter(), 0
            while reps < max(1, min_reps // ROUNDS) or \
                    time.perf_counter() - start < min_time / ROUNDS:
                t0 = time.perf_counter()
                fn()
                samples.append(time.perf_counter() - t0)
                reps += 1
                if reps >= 100000 // ROUNDS:
                    break
            time.sleep(SETTLE_S)
    return {name: stats(samples) for name, samples in times.items()}


def model_and_input(name: str):
    import numpy as np
    from onnx import TensorProto, helper

    from tests import onnx_models

    rng = np.random.default_rng(0)
    if name == "add":
        g = helper.make_graph([helper.make_node("Add", ["x", "y"], ["z"])], "add",
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1]) for n in "xy"],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1])])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), \
            {"x": np.ones(1, np.float32), "y": np.ones(1, np.float32)}
    if name == "matmul1024":
        g = helper.make_graph([helper.make_node("MatMul", ["x", "y"], ["z"])], "mm",
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1024, 1024]) for n in "xy"],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1024, 1024])])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), \
            {"x": rng.random((1024, 1024), np.float32), "y": rng.random((1024, 1024), np.float32)}
    if name == "mlp":
        return onnx_models.mlp(batch=32), {"x": rng.standard_normal((32, 256)).astype(np.float32)}
    if name == "cnn":
        return onnx_models.small_cnn(batch=1), {"x": rng.standard_normal((1, 3, 64, 64)).astype(np.float32)}
    if name == "transformer":
        return onnx_models.transformer_block(batch=1), {"x": rng.standard_normal((1, 32, 128)).astype(np.float32)}
    if name == "mobilenet":
        return onnx_models.mobilenet(batch=1), {"x": rng.standard_normal((1, 3, 224, 224)).astype(np.float32)}
    if name == "mobilenet_v1":
        return (onnx_models.mobilenet(batch=1, full_depth=True),
                {"x": rng.standard_normal((1, 3, 224, 224)).astype(np.float32)})
    raise ValueError(name)


# Model outputs must match the reference this closely before they are timed (float32 sums in
# different orders differ by a few units in the last place, times the depth of the model).
RTOL, ATOL = 1e-4, 1e-4


def mismatch(got, want, rtol: float = RTOL, atol: float = ATOL):
    """None when the outputs `got` (a sequence of arrays) match `want`, else what differs:
    the number of outputs, an output's shape or dtype, or its values (the largest difference
    and where it lies)."""
    import numpy as np

    if len(got) != len(want):
        return f"{len(got)} outputs, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"output {i} is {g.dtype}{list(g.shape)}, expected {w.dtype}{list(w.shape)}"
        if not np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True):
            diff = np.abs(g.astype(np.float64) - w.astype(np.float64))
            where = np.unravel_index(int(np.nanargmax(diff)), diff.shape)
            return (f"output {i} differs by up to {float(np.nanmax(diff)):.3g} at "
                    f"{list(map(int, where))}")
    return None


def checked(fns, want, outputs_of, rtol: float = RTOL, atol: float = ATOL):
    """The sides of fns (name -> callable) whose results match `want`, and for each other
    side what differed. outputs_of(name, result) turns a side's return value into a list of
    arrays."""
    ok, wrong = {}, {}
    for name, fn in fns.items():
        try:
            problem = mismatch(outputs_of(name, fn()), want, rtol, atol)
        except Exception as exc:  # a side that cannot run gets no figure either
            problem = f"{type(exc).__name__}: {exc}"
        if problem is None:
            ok[name] = fn
        else:
            wrong[name] = problem
    return ok, wrong


def numpy_peer(name: str, model, feeds):
    """A numpy implementation where one is natural, written as a user who cares about speed
    would (weights transposed once, one fused expression a layer, no temporaries beyond the
    product); None otherwise."""
    import numpy as np
    from onnx import numpy_helper

    if name == "add":
        x, y = feeds["x"], feeds["y"]
        return lambda: np.add(x, y)
    if name == "matmul1024":
        x, y = feeds["x"], feeds["y"]
        return lambda: x @ y
    if name == "mlp":
        inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
        gemms = [n for n in model.graph.node if n.op_type == "Gemm"]
        assert all(a.name != "transB" or a.i == 1 for n in gemms for a in n.attribute)
        layers = [(np.ascontiguousarray(inits[n.input[1]].T), inits[n.input[2]]) for n in gemms]
        x = feeds["x"]

        def run():
            h = x
            for i, (w_t, b) in enumerate(layers):
                h = h @ w_t
                h += b
                if i < len(layers) - 1:
                    np.maximum(h, 0, out=h)
            return h
        return run
    return None


def load_both(model, threads: int):
    """The model in an onnxruntime session and as our method, each on `threads` threads."""
    import onnxruntime as ort

    import runtime_py as rt
    import runtime_py.onnx as ro

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    program = rt.Program.load(ro.convert(model))
    return session, program, program.load_method("forward", num_threads=threads)


def bench_models(threads: int, names, min_time: float):
    import numpy as np

    rows = []
    for name in names:
        model, feeds = model_and_input(name)
        session, program, method = load_both(model, threads)
        args = [feeds[i.name] for i in model.graph.input if i.name in feeds]
        want = session.run(None, feeds)
        ours = [np.asarray(t) for t in method(*args)]
        diff = max((float(np.max(np.abs(o - r))) for o, r in zip(ours, want) if o.size),
                   default=0.0)
        fns = {"ours": lambda: method(*args),
               "onnxruntime": lambda: session.run(None, feeds)}
        peer = numpy_peer(name, model, feeds)
        if peer is not None:
            fns["numpy"] = peer
        # numpy's peers compute the first output; every other side all of them.
        fns, wrong = checked(fns, want, lambda side, out: [out] if side == "numpy" else
                             [np.asarray(t) for t in out])
        row = {"model": name, "threads": threads, "max_abs_diff": diff, "wrong": wrong,
               "has_numpy": peer is not None}
        row.update(time_side_by_side(fns, min_time))
        rows.append(row)
        method.close()
        program.close()
    return rows


def bench_gemm(threads: int, min_time: float):
    import numpy as np

    import runtime_py as rt
    from runtime_py.compiler import ProgramBuilder

    rows = []
    for n in (128, 256, 512, 1024, 2048):
        b = ProgramBuilder()
        m = b.method("forward")
        m.output(m.matmul(m.input("a", "float32", (n, n)), m.input("b", "float32", (n, n))))
        method = rt.Program.load(b.to_bytes()).load_method("forward", num_threads=threads,
                                                           clone_outputs=False)
        a = np.random.default_rng(n).random((n, n), np.float32)
        c = np.random.default_rng(n + 1).random((n, n), np.float32)
        flops = 2.0 * n ** 3
        want = [(a.astype(np.float64) @ c.astype(np.float64)).astype(np.float32)]
        # float32 sums of n products of [0, 1) values: relative error well under 1e-5.
        fns, wrong = checked({"ours": lambda: method(a, c), "numpy": lambda: a @ c}, want,
                             lambda side, out: [np.asarray(out[0] if side == "ours" else out)],
                             rtol=1e-5, atol=0.0)
        timed = time_side_by_side(fns, min_time, 6)
        rows.append({"n": n, "threads": threads, "wrong": wrong,
                     **{f"{side}_gflops": flops / t["median"] / 1e9
                        for side, t in timed.items()}})
        method.close()
    return rows


def bench_load(size_mb: int = 512):
    """Program load time with size_mb of weights (mmap'd: independent of size)."""
    import runtime_py as rt
    from runtime_py.compiler import ProgramBuilder

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for mb in (1, size_mb):
            b = ProgramBuilder()
            m = b.method("forward")
            weights = m.constant(bytes(mb << 20), "uint8", (mb << 20,), name="weights")
            x = m.input("x", "float32", (4,))
            m.output(m.relu(x))
            m.output(weights)  # used, so the builder keeps it
            path = os.path.join(tmp, f"w{mb}.rtp")
            with open(path, "wb") as f:
                f.write(b.to_bytes())
            del b, m

            def load():
                rt.Program.load(path).close()
            results.append({"weights_mb": mb, "load": time_side_by_side({"load": load}, 0.5)["load"]})
    return results


# A model called at a steady rate, as a video stream calls it, with a pause before each call:
# idle workers may have gone to sleep by then, and a call that must wake them pays for it.
PERIODIC_MODEL = "mobilenet"
PERIODIC_PAUSE_S = 0.02
PERIODIC_CALLS = 8  # per turn, ROUNDS // 2 turns per peer


def bench_periodic(threads: int):
    model, feeds = model_and_input(PERIODIC_MODEL)
    session, program, method = load_both(model, threads)
    args = [feeds[i.name] for i in model.graph.input if i.name in feeds]
    import numpy as np

    fns = {"ours": lambda: method(*args), "onnxruntime": lambda: session.run(None, feeds)}
    fns, wrong = checked(fns, session.run(None, feeds),
                         lambda side, out: [np.asarray(t) for t in out])
    times = {name: [] for name in fns}
    for round_ in range(ROUNDS // 2):
        for name in (list(fns) if round_ % 2 == 0 else list(fns)[::-1]):
            for _ in range(PERIODIC_CALLS):
                time.sleep(PERIODIC_PAUSE_S)
                t0 = time.perf_counter()
                fns[name]()
                times[name].append(time.perf_counter() - t0)
            time.sleep(SETTLE_S)
    method.close()
    program.close()
    return {"model": PERIODIC_MODEL, "pause_ms": PERIODIC_PAUSE_S * 1e3, "wrong": wrong,
            **{name: stats(samples) for name, samples in times.items()}}


def child(args) -> None:
    import runtime_py as rt

    # Calls within a turn come back to back, as before; this only lets our workers' naps
    # (default: 1 s) end before the next peer's turn starts. The periodic calls' pause is
    # shorter than this wait.
    rt.set_worker_wait(SETTLE_S / 2)
    out = {"models": bench_models(args.threads, args.only, args.min_time)}
    if PERIODIC_MODEL in args.only:
        out["periodic"] = bench_periodic(args.threads)
    if not args.skip_gemm:
        out["gemm"] = bench_gemm(args.threads, args.min_time)
    json.dump(out, sys.stdout)


def fmt_us(seconds: float) -> str:
    us = seconds * 1e6
    return f"{us:,.1f}" if us < 1000 else f"{us:,.0f}"


def bench_call_overhead():
    """The 1-element Add from every interpreter at hand (this one and PyPy, if installed),
    with array.array inputs: benchmarks/call_overhead.py in a child process each."""
    import shutil

    pythons = [sys.executable] + [p for p in (shutil.which("pypy3"),) if p]
    rows = []
    for python in pythons:
        proc = subprocess.run([python, str(ROOT / "benchmarks" / "call_overhead.py")],
                              capture_output=True, text=True)
        if proc.returncode == 0:
            rows.append(json.loads(proc.stdout))
        else:
            print(f"call overhead under {python} failed: {proc.stderr.strip()[-200:]}",
                  file=sys.stderr)
    return rows


def cpu_description() -> str:
    """The CPU's model, family and model numbers and which GEMM kernels it runs (they differ
    in speed and in which paths the convolutions take), from /proc/cpuinfo where there is one."""
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                info.setdefault(key.strip(), value.strip())
    except OSError:
        return "unknown CPU"
    flags = info.get("flags", "").split()
    kernels = ("AVX-512" if "avx512f" in flags else
               "AVX2 + FMA" if "avx2" in flags and "fma" in flags else "portable")
    return (f"{info.get('model name', 'unknown CPU')} (family {info.get('cpu family', '?')}, "
            f"model {info.get('model', '?')}), {kernels} kernels")


def ratio(row, ours: str, peer: str) -> str:
    """ours / peer of the medians; '-' when either side was not timed (absent, or its results
    differ from the reference)."""
    if ours not in row or peer not in row:
        return "-"
    return f"{row[ours]['median'] / row[peer]['median']:.2f}"


def render(results, loads, calls=()) -> str:
    lines = ["# Benchmarks", "", f"machine: {os.cpu_count()} CPUs, {cpu_description()}; times "
             "in microseconds (median / min / p90); ratio = ours / peer; every output checked "
             "against onnxruntime's (the GEMM against a float64 product) before timing", ""]
    wrongs = []
    for threads, res in sorted(results.items()):
        lines += [f"## {threads} thread(s)", "",
                  "| model | ours | onnxruntime | numpy | ours/ort | ours/numpy | max abs diff |",
                  "|---|---|---|---|---:|---:|---:|"]
        for row in res["models"]:
            wrong = row.get("wrong", {})

            def cell(side):
                if side in wrong:
                    return "WRONG RESULTS"
                if side not in row:
                    return "n/a"
                t = row[side]
                return f"{fmt_us(t['median'])} / {fmt_us(t['min'])} / {fmt_us(t['p90'])}"

            lines.append(f"| {row['model']} | {cell('ours')} | {cell('onnxruntime')} | "
                         f"{cell('numpy')} | {ratio(row, 'ours', 'onnxruntime')} | "
                         f"{ratio(row, 'ours', 'numpy')} | {row['max_abs_diff']:.1e} |")
            for side, problem in wrong.items():
                wrongs.append(f"- {row['model']}, {threads} thread(s), {side}: {problem}")
        if "periodic" in res:
            p = res["periodic"]
            cell = {side: (f"{fmt_us(p[side]['median'])} / {fmt_us(p[side]['min'])} / "
                           f"{fmt_us(p[side]['p90'])}" if side in p else "WRONG RESULTS")
                    for side in ("ours", "onnxruntime")}
            lines += ["", f"{p['model']} called every {p['pause_ms']:.0f} ms (a pause before each "
                      "call, as a video stream calls it):", "",
                      "| ours | onnxruntime | ours/ort |", "|---|---|---:|",
                      f"| {cell['ours']} | {cell['onnxruntime']} | "
                      f"{ratio(p, 'ours', 'onnxruntime')} |"]
            for side, problem in p.get("wrong", {}).items():
                wrongs.append(f"- {p['model']} called periodically, {side}: {problem}")
        if "gemm" in res:
            lines += ["", "| GEMM n | ours GFLOP/s | numpy GFLOP/s | ratio |", "|---:|---:|---:|---:|"]
            for g in res["gemm"]:
                rate = {side: f"{g[side + '_gflops']:.1f}" if side + "_gflops" in g
                        else "WRONG RESULTS" for side in ("ours", "numpy")}
                speed = (f"{g['ours_gflops'] / g['numpy_gflops']:.2f}"
                         if "ours_gflops" in g and "numpy_gflops" in g else "-")
                lines.append(f"| {g['n']} | {rate['ours']} | {rate['numpy']} | {speed} |")
                for side, problem in g.get("wrong", {}).items():
                    wrongs.append(f"- GEMM n={g['n']}, {threads} thread(s), {side}: {problem}")
        lines.append("")
    if wrongs:
        lines += ["## Results that differ from the reference (not timed, no ratio)", "",
                  *wrongs, ""]
    if calls:
        lines += ["## Per-call overhead (1-element Add, array.array inputs, best of 7 x 100k)", "",
                  "| interpreter | us per call |", "|---|---:|"]
        for c in calls:
            lines.append(f"| {c['interpreter']} | {c['us_per_call']:.2f} |")
        lines.append("")
    if loads:
        lines += ["## Program load (mmap)", "", "| weights | load median |", "|---:|---:|"]
        for r in loads:
            lines.append(f"| {r['weights_mb']} MB | {fmt_us(r['load']['median'])} us |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    parser.add_argument("--only", nargs="*", default=list(MODELS), choices=MODELS)
    parser.add_argument("--quick", action="store_true", help="0.3 s per measurement instead of 2 s")
    parser.add_argument("--skip-gemm", action="store_true")
    parser.add_argument("--skip-load", action="store_true")
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "results.md"))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--min-time", type=float, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.min_time = args.min_time or (0.3 if args.quick else 2.0)
    if args.child:
        args.threads = args.threads[0]
        child(args)
        return 0
    results = {}
    for threads in args.threads:
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
                   MKL_NUM_THREADS=str(threads))
        cmd = [sys.executable, __file__, "--child", "--threads", str(threads), "--min-time",
               str(args.min_time), "--only", *args.only] + (["--skip-gemm"] if args.skip_gemm else [])
        print(f"running {threads} thread(s)...", file=sys.stderr, flush=True)
        results[threads] = json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True,
                                                     text=True).stdout)
    loads = [] if args.skip_load else bench_load()
    calls = [] if "add" not in args.only else bench_call_overhead()
    text = render(results, loads, calls)
    print(text)
    Path(args.output).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""GPU benchmark: libruntime's CUDA backend against torch eager on CUDA, side by side.

    python benchmarks/gpu.py [--out results.md] [--quick]

Models (tests/onnx_models.py): mlp (batch 64), small_cnn (batch 16), transformer_block (batch
8) and mobilenet (batch 8, 224x224), plus 4096^3 matmuls in float32 and bfloat16 (ours in
bfloat16 casts to float32 and back around a float32 matmul: there is no bfloat16 matmul op; the
table notes it). Both sides get their input already on the GPU and are timed to completion
(libruntime's execute returns when the results are ready; torch is synchronized after each
call), median of many runs after a warm-up. torch runs the same ONNX graph op by op (eager)
with the same weights; float32 matmuls run without TF32 on both sides (torch's default). Ratios
are ours / torch: below 1.0 we are faster. A benchmark, never a test: nothing asserts on time.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import runtime_py as rt  # noqa: E402
from runtime_py import cuda  # noqa: E402


def timeit(fn, sync, min_time: float, min_reps: int = 10) -> float:
    """Median latency in milliseconds of fn() run to completion, after a warm-up."""
    for _ in range(3):
        fn()
    sync()
    times = []
    start = time.perf_counter()
    while len(times) < min_reps or time.perf_counter() - start < min_time:
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


# ---- torch eager over an ONNX graph ---------------------------------------------------------

def torch_runner(model, device):
    """A function running `model` node by node with torch ops on `device` (torch eager)."""
    import torch
    import torch.nn.functional as F
    from onnx import helper, numpy_helper

    host = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    weights = {k: torch.tensor(v, device=device) for k, v in host.items()}

    def attr(node, name, default=None):
        for a in node.attribute:
            if a.name == name:
                return helper.get_attribute_value(a)
        return default

    def pads2(node):
        p = list(attr(node, "pads", [0, 0, 0, 0]))
        if p[0] != p[2] or p[1] != p[3]:
            raise NotImplementedError("asymmetric padding")
        return (p[0], p[1])

    steps = []  # (function of the input list, input names, output name)
    for n in model.graph.node:
        op = n.op_type
        if op == "Gemm":
            trans_b = bool(attr(n, "transB", 0))
            fn = (lambda trans_b: lambda a, w, b=None: F.linear(a, w, b) if trans_b
                  else (a @ w + b if b is not None else a @ w))(trans_b)
        elif op == "MatMul":
            fn = torch.matmul
        elif op in ("Add", "Mul", "Div", "Sub"):
            fn = {"Add": torch.add, "Mul": torch.mul, "Div": torch.div, "Sub": torch.sub}[op]
        elif op == "Relu":
            fn = torch.relu
        elif op == "Erf":
            fn = torch.erf
        elif op == "Softmax":
            fn = (lambda axis: lambda x: torch.softmax(x, dim=axis))(attr(n, "axis", -1))
        elif op == "Conv":
            fn = (lambda s, p, d, g: lambda x, w, b=None: F.conv2d(x, w, b, s, p, d, g))(
                tuple(attr(n, "strides", [1, 1])), pads2(n), tuple(attr(n, "dilations", [1, 1])),
                attr(n, "group", 1))
        elif op == "MaxPool":
            fn = (lambda k, s, p: lambda x: F.max_pool2d(x, k, s, p))(
                tuple(attr(n, "kernel_shape")), tuple(attr(n, "strides", [1, 1])), pads2(n))
        elif op == "AveragePool":
            fn = (lambda k, s, p, c: lambda x: F.avg_pool2d(x, k, s, p, count_include_pad=c))(
                tuple(attr(n, "kernel_shape")), tuple(attr(n, "strides", [1, 1])), pads2(n),
                bool(attr(n, "count_include_pad", 0)))
        elif op == "GlobalAveragePool":
            fn = lambda x: x.mean(dim=(2, 3), keepdim=True)  # noqa: E731
        elif op == "Flatten":
            fn = (lambda axis: lambda x: torch.flatten(x, axis))(attr(n, "axis", 1))
        elif op == "Reshape":
            shape = [int(s) for s in host[n.input[1]]]
            fn = (lambda shape: lambda x, _: x.reshape(shape))(shape)
        elif op == "Transpose":
            fn = (lambda perm: lambda x: x.permute(perm))(list(attr(n, "perm")))
        elif op == "LayerNormalization":
            axis, eps = attr(n, "axis", -1), attr(n, "epsilon", 1e-5)
            fn = (lambda axis, eps: lambda x, w, b: F.layer_norm(
                x, x.shape[axis:], w, b, eps))(axis, eps)
        elif op == "BatchNormalization":
            fn = (lambda eps: lambda x, w, b, mean, var: F.batch_norm(
                x, mean, var, w, b, False, 0.0, eps))(attr(n, "epsilon", 1e-5))
        elif op == "Clip":
            lo, hi = float(host[n.input[1]]), float(host[n.input[2]])
            fn = (lambda lo, hi: lambda x, *_: torch.clamp(x, lo, hi))(lo, hi)
        else:
            raise NotImplementedError(f"torch runner: no {op}")
        steps.append((fn, [i for i in n.input if i], n.output[0]))
    x_name, y_name = model.graph.input[0].name, model.graph.output[0].name

    def run(x):
        env = dict(weights)
        env[x_name] = x
        with torch.no_grad():
            for fn, inputs, output in steps:
                env[output] = fn(*[env[i] for i in inputs])
        return env[y_name]

    return run


# ---- cases ----------------------------------------------------------------------------------

def model_cases():
    import onnx_models as m

    return [("mlp (batch 64)", m.mlp(batch=64)), ("small_cnn (batch 16)", m.small_cnn(batch=16)),
            ("transformer_block (batch 8)", m.transformer_block(batch=8)),
            ("mobilenet (batch 8, 224)", m.mobilenet(batch=8))]


def bench_model(name, model, torch, min_time, rows):
    import runtime_py.onnx as ro

    program = ro.load(model).program
    shape = program.method_meta("forward").inputs[0].shape
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    with program.load_method("forward", device="cuda", clone_outputs=False) as method:
        method.set_inputs(rt.Tensor.from_host(x))
        ours = timeit(method.execute, lambda: None, min_time)
        (y,) = method.get_outputs()
        y = np.asarray(y.to_host())
    row = {"case": name, "ours_ms": ours, "profile": op_profile(program, x)}
    if torch is not None:
        run = torch_runner(model, "cuda")
        xt = torch.tensor(x, device="cuda")
        row["torch_ms"] = timeit(lambda: run(xt), torch.cuda.synchronize, min_time)
        row["max_abs_diff"] = float(np.abs(run(xt).float().cpu().numpy() - y).max())
    rows.append(row)


def op_profile(program, x, runs: int = 5):
    """Where our time goes: per op, the median over `runs` executes of its summed kernel time
    (profiling synchronizes after each instruction, so each time is that op's own), in ms."""
    per_run = []
    with program.load_method("forward", device="cuda", profile=True) as method:
        method.set_inputs(rt.Tensor.from_host(x))
        for _ in range(runs + 1):
            method.execute()
            per_run.append({(e.instruction, e.op_name): (e.end_ns - e.start_ns) / 1e6
                            for e in method.profile_events()})
    per_run = per_run[1:]  # the first run warms up
    each = {key: statistics.median(t[key] for t in per_run) for key in per_run[0]}
    ops = {}
    for (_, op), ms in each.items():
        ops[op] = ops.get(op, 0.0) + ms
    return {"instructions": len(each), "ops": ops, "each": each}


def _device_bfloat16(a):
    """a (float32, host) as a bfloat16 tensor on cuda:0, converted by our own cast kernel."""
    from runtime_py.compiler import ProgramBuilder

    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.cast(m.input("a", "float32", a.shape), "bfloat16"))
    with rt.Program.load(b.to_bytes()) as p, p.load_method("forward", device="cuda") as f:
        (out,) = f(rt.Tensor.from_host(a))  # cloned: outlives the method
    return out


def bench_matmul(dtype, torch, min_time, rows, n=4096):
    """float32: one matmul. bfloat16: the library has no bfloat16 matmul (the CPU op takes
    float32, float64, int32 and int64, and the CUDA backend follows it), so ours is the honest
    equivalent a program can express: cast both bfloat16 inputs to float32, multiply in float32
    (cuBLAS, no TF32), cast the product back to bfloat16, against torch's native bfloat16
    matmul (tensor cores). The note says so in the table."""
    from runtime_py.compiler import ProgramBuilder

    name = f"matmul {n}^3 {dtype}"
    row = {"case": name}
    b = ProgramBuilder()
    m = b.method("forward")
    x, y = m.input("a", dtype, (n, n)), m.input("b", dtype, (n, n))
    if dtype == "float32":
        m.output(m.matmul(x, y))
    else:
        m.output(m.cast(m.matmul(m.cast(x, "float32"), m.cast(y, "float32")), dtype))
        row["ours_note"] = "cast to float32, float32 matmul, cast back (no bfloat16 matmul op)"
    a = np.random.default_rng(1).standard_normal((n, n)).astype(np.float32)
    try:
        with rt.Program.load(b.to_bytes()) as p, \
                p.load_method("forward", device="cuda", clone_outputs=False) as method:
            dev = rt.Tensor.from_host(a) if dtype == "float32" else _device_bfloat16(a)
            method.set_inputs(dev, dev)
            row["ours_ms"] = timeit(method.execute, lambda: None, min_time)
    except rt.Error as exc:
        row["ours_note"] = str(exc).split(": ")[-1][:80]
    if torch is not None:
        tdt = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype]
        at = torch.tensor(a, device="cuda").to(tdt)
        row["torch_ms"] = timeit(lambda: at @ at, torch.cuda.synchronize, min_time)
        row["torch_tflops"] = 2 * n ** 3 / (row["torch_ms"] * 1e-3) / 1e12
    if "ours_ms" in row:
        row["tflops"] = 2 * n ** 3 / (row["ours_ms"] * 1e-3) / 1e12
    rows.append(row)


def table(rows, header_lines):
    lines = list(header_lines) + ["", "| case | libruntime CUDA (ms) | torch eager CUDA (ms) | "
                                  "ratio ours/torch | note |", "|---|---|---|---|---|"]
    for r in rows:
        ours = f"{r['ours_ms']:.3f}" if "ours_ms" in r else "-"
        theirs = f"{r['torch_ms']:.3f}" if "torch_ms" in r else "-"
        ratio = f"{r['ours_ms'] / r['torch_ms']:.2f}" if "ours_ms" in r and "torch_ms" in r \
            else "-"
        notes = []
        if "max_abs_diff" in r:
            notes.append(f"max |ours - torch| = {r['max_abs_diff']:.2e}")
        if "tflops" in r:
            notes.append(f"ours {r['tflops']:.1f} TFLOP/s")
        if "torch_tflops" in r:
            notes.append(f"torch (cuBLAS) {r['torch_tflops']:.1f} TFLOP/s")
        if "ours_note" in r:
            notes.append(f"ours: {r['ours_note']}")
        lines.append(f"| {r['case']} | {ours} | {theirs} | {ratio} | {'; '.join(notes)} |")
    for r in rows:
        if "profile" not in r:
            continue
        prof = r["profile"]
        busy = sum(prof["ops"].values())
        lines += ["", f"{r['case']}: {prof['instructions']} instructions; kernel time by op "
                  f"(profiled, so each op synchronized): {busy:.3f} ms in all", ""]
        for op, ms in sorted(prof["ops"].items(), key=lambda kv: -kv[1])[:8]:
            lines.append(f"- {op}: {ms:.3f} ms ({100 * ms / busy:.0f}%)")
        slowest = sorted(prof["each"].items(), key=lambda kv: -kv[1])[:6]
        lines.append("- slowest instructions: " + ", ".join(
            f"#{i} {op} {ms:.3f} ms" for (i, op), ms in slowest))
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="also write the table to this file")
    parser.add_argument("--quick", action="store_true", help="shorter timing loops")
    args = parser.parse_args()
    if not cuda.is_available():
        sys.exit(f"benchmarks/gpu.py: no CUDA: {cuda.unavailable_reason()}")
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        import torch

        if not torch.cuda.is_available():
            torch = None
    except ImportError:
        torch = None
    min_time = 0.3 if args.quick else 1.0
    rows = []
    for name, model in model_cases():
        bench_model(name, model, torch, min_time, rows)
    for dtype in ("float32", "bfloat16"):
        bench_matmul(dtype, torch, min_time, rows)
    header = [f"# GPU benchmark ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", "",
              f"- devices: {cuda.device_count()}; torch: "
              f"{torch.__version__ + ' ' + torch.cuda.get_device_name(0) if torch else 'absent'}"]
    text = table(rows, header)
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()

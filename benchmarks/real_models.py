"""Models that PyPI packages ship, as their users run them: ours against onnxruntime, side by
side, at 1 and 2 threads, with each model's per-op profile.

    python benchmarks/real_models.py                 # fetch (once), then every model
    python benchmarks/real_models.py --only det vad --threads 1 --profile

The packages are fetched with `pip download --no-deps` into benchmarks/.models (not committed)
and only their .onnx files are kept: RapidOCR's PP-OCRv4 detector and recognizer and its
direction classifier, Silero VAD (with and without its If). Each model is converted once for a
fixed input shape; outputs are compared with onnxruntime's first (max abs error), then both
sides are timed in interleaved rounds (benchmarks/run.py's time_side_by_side), each thread
count in its own process. Ratios below 1.0 mean we are faster. A benchmark, never a test.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CACHE = ROOT / "benchmarks" / ".models"

# name -> (package, file in the wheel, inputs: name -> (dtype, shape, kind))
MODELS = {
    "det": ("rapidocr-onnxruntime==1.4.4", "ch_PP-OCRv4_det_infer.onnx",
            {"x": ("float32", (1, 3, 320, 320), "uniform")}),
    "rec": ("rapidocr-onnxruntime==1.4.4", "ch_PP-OCRv4_rec_infer.onnx",
            {"x": ("float32", (1, 3, 48, 320), "uniform")}),
    "cls": ("rapidocr-onnxruntime==1.4.4", "ch_ppocr_mobile_v2.0_cls_infer.onnx",
            {"x": ("float32", (1, 3, 48, 192), "uniform")}),
    "vad": ("silero-vad==6.2.3", "silero_vad_16k_op15.onnx",
            {"input": ("float32", (1, 512), "normal"), "state": ("float32", (2, 1, 128), "zeros"),
             "sr": ("int64", (), 16000)}),
    "vad_ifless": ("silero-vad==6.2.3", "silero_vad_op18_ifless.onnx",
                   {"input": ("float32", (1, 512), "normal"),
                    "state": ("float32", (2, 1, 128), "zeros"), "sr": ("int64", (), 16000)}),
}


def fetch(names):
    """The .onnx files of `names`, downloading each package once."""
    CACHE.mkdir(parents=True, exist_ok=True)
    for name in names:
        package, file, _ = MODELS[name]
        if (CACHE / file).exists():
            continue
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d",
                            tmp, package], check=True)
            for wheel in Path(tmp).glob("*.whl"):
                with zipfile.ZipFile(wheel) as z:
                    for info in z.infolist():
                        if info.filename.endswith(".onnx"):
                            (CACHE / os.path.basename(info.filename)).write_bytes(
                                z.read(info))
    return {name: CACHE / MODELS[name][1] for name in names}


def feeds_of(name):
    import numpy as np

    rng = np.random.default_rng(0)
    feeds = {}
    for input_name, (dtype, shape, kind) in MODELS[name][2].items():
        if kind == "uniform":
            feeds[input_name] = rng.random(shape).astype(dtype)
        elif kind == "normal":
            feeds[input_name] = rng.standard_normal(shape).astype(dtype)
        elif kind == "zeros":
            feeds[input_name] = np.zeros(shape, dtype)
        else:
            feeds[input_name] = np.array(kind, dtype)
    return feeds


def bench_model(name, path, threads, min_time, profile):
    import numpy as np
    import onnxruntime as ort

    import runtime_py as rt
    from benchmarks.run import time_side_by_side
    from runtime_py.onnx import convert

    feeds = feeds_of(name)
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = threads
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    data = convert(str(path), input_shapes={k: v.shape for k, v in feeds.items()})
    program = rt.Program.load(data)
    method = program.load_method("forward", num_threads=threads)
    args = [feeds[info.name] for info in method.method_meta.inputs]
    got, want = method(*args), session.run(None, feeds)
    error = max(float(np.max(np.abs(np.asarray(g, np.float64) - w))) for g, w in zip(got, want))
    times = time_side_by_side({"ours": lambda: method(*args),
                               "onnxruntime": lambda: session.run(None, feeds)}, min_time)
    row = {"model": name, "file": path.name, "threads": threads, "max_error": error,
           "median": {side: t["median"] for side, t in times.items()}}
    if profile:
        row["profile"] = top_ops(data, feeds, threads)
    method.close()
    program.close()
    return row


def top_ops(data, feeds, threads, count=5):
    """The ops taking the most time (and their share), from `python -m runtime_py profile`."""
    import numpy as np

    with tempfile.TemporaryDirectory() as tmp:
        rtp = Path(tmp) / "model.rtp"
        rtp.write_bytes(data)
        flags = []
        for name, value in feeds.items():
            np.save(Path(tmp) / f"{name}.npy", value)
            flags += ["--input", f"{name}={Path(tmp) / (name + '.npy')}"]
        out = subprocess.run([sys.executable, "-m", "runtime_py", "profile", str(rtp), "--runs",
                              "20", "--threads", str(threads)] + flags,
                             capture_output=True, text=True, check=True).stdout
    rows = [line.split() for line in out.splitlines()[2:] if line.strip()]
    return [f"{r[0]} {r[-1]}" for r in rows[:count] if len(r) >= 5]


def child(args):
    paths = fetch(args.only)
    rows = [bench_model(name, paths[name], args.child_threads, args.min_time, args.profile)
            for name in args.only]
    json.dump(rows, sys.stdout)


def render(rows):
    lines = ["| model | threads | ours | onnxruntime | ours / onnxruntime | max error | "
             "where our time goes |", "|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        m = r["median"]
        lines.append(f"| {r['model']} ({r['file']}) | {r['threads']} | "
                     f"{m['ours'] * 1e3:.3f} ms | {m['onnxruntime'] * 1e3:.3f} ms | "
                     f"{m['ours'] / m['onnxruntime']:.2f} | {r['max_error']:.1e} | "
                     f"{', '.join(r.get('profile', []))} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    parser.add_argument("--quick", action="store_true", help="0.3 s per side instead of 1 s")
    parser.add_argument("--profile", action="store_true", help="list each model's top ops")
    parser.add_argument("--child-threads", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--min-time", type=float, default=1.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_threads:
        child(args)
        return 0
    fetch(args.only)
    rows = []
    for threads in args.threads:
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        command = [sys.executable, __file__, "--child-threads", str(threads), "--min-time",
                   str(0.3 if args.quick else 1.0), "--only", *args.only]
        if args.profile:
            command.append("--profile")
        out = subprocess.run(command, env=env, check=True, capture_output=True,
                             text=True).stdout
        rows += json.loads(out)
    print(render(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

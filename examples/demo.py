"""The demo: build an MLP and a small CNN with the builder, save them, load them back, run them,
and check every output against a numpy reference.

    python examples/demo.py            # writes examples/out/{mlp,cnn}.rtp
    python demo.py --out DIR           # anywhere, with runtime_py installed from a wheel

An installed runtime_py is preferred; without one, the package of this source tree is used.
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

import numpy as np

if importlib.util.find_spec("runtime_py") is None:  # not installed: use this source tree
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import runtime_py as rt  # noqa: E402
from runtime_py._ffi import get_lib, library_path  # noqa: E402
from runtime_py.compiler import ProgramBuilder  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
rng = np.random.default_rng(0)


def weights(*shape: int) -> np.ndarray:
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
    return (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)


# ---- models -------------------------------------------------------------------------------

def build_mlp():
    """Linear 256->512, ReLU, Linear 512->256, ReLU, Linear 256->10 on a batch of 32."""
    params = [(weights(512, 256), weights(512)), (weights(256, 512), weights(256)),
              (weights(10, 256), weights(10))]
    b = ProgramBuilder()
    m = b.method("forward")
    h = m.input("x", "float32", (32, 256))
    for i, (w, bias) in enumerate(params):
        h = m.linear(h, m.constant(w, name=f"fc{i}.weight"), m.constant(bias, name=f"fc{i}.bias"))
        if i < len(params) - 1:
            h = m.relu(h)
    m.output(h, "logits")

    def reference(x):
        for i, (w, bias) in enumerate(params):
            x = x @ w.T + bias
            if i < len(params) - 1:
                x = np.maximum(x, 0)
        return x

    return b, reference, rng.standard_normal((32, 256)).astype(np.float32)


def conv2d_ref(x, w, bias, pad):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ho, wo = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    cols = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))  # n,c,ho,wo,kh,kw
    return np.einsum("nchwij,ocij->nohw", cols[:, :, :ho, :wo], w) + bias[None, :, None, None]


def build_cnn():
    """Conv 3->16 (3x3, pad 1), ReLU, MaxPool 2, Conv 16->32, ReLU, AvgPool 16, Linear 32->10."""
    w1, b1 = weights(16, 3, 3, 3), weights(16)
    w2, b2 = weights(32, 16, 3, 3), weights(32)
    wf, bf = weights(10, 32), weights(10)
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("image", "float32", (1, 3, 32, 32))
    h = m.relu(m.conv2d(x, m.constant(w1), m.constant(b1), padding=1))
    h = m.max_pool2d(h, 2)
    h = m.relu(m.conv2d(h, m.constant(w2), m.constant(b2), padding=1))
    h = m.avg_pool2d(h, 16)
    h = m.reshape(h, [1, 32])
    m.output(m.linear(h, m.constant(wf), m.constant(bf)), "logits")

    def reference(x):
        h = np.maximum(conv2d_ref(x, w1, b1, 1), 0)
        h = h.reshape(1, 16, 16, 2, 16, 2).max(axis=(3, 5))
        h = np.maximum(conv2d_ref(h, w2, b2, 1), 0)
        h = h.mean(axis=(2, 3))
        return h @ wf.T + bf

    return b, reference, rng.standard_normal((1, 3, 32, 32)).astype(np.float32)


# ---- run ----------------------------------------------------------------------------------

def latency_us(fn, x, repeats: int = 200) -> float:
    for _ in range(10):
        fn(x)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def main() -> int:
    global OUT
    parser = argparse.ArgumentParser(description="build, save, load and run two models")
    parser.add_argument("--out", type=Path, default=OUT, help="where to write the programs")
    OUT = parser.parse_args().out
    OUT.mkdir(parents=True, exist_ok=True)
    get_lib()
    print(f"runtime_py {rt.__version__} from {Path(rt.__file__).parent}, library "
          f"{library_path()}, {sys.implementation.name} {sys.version.split()[0]}")
    ok = True
    for name, make in (("mlp", build_mlp), ("cnn", build_cnn)):
        builder, reference, x = make()
        path = OUT / f"{name}.rtp"
        builder.save(path)
        planned, unplanned = builder.memory_report()["forward"]
        with rt.Program.load(str(path)) as program, program.load_method("forward") as forward:
            meta = program.method_meta("forward")
            (y,) = forward(x)
            got = np.asarray(y)
            want = reference(x.astype(np.float64))
            diff = float(np.max(np.abs(got - want)))
            good = np.allclose(got, want, rtol=1e-4, atol=1e-4)
            ok &= good
            print(f"{name}: {path.stat().st_size} bytes, {meta.num_instructions} instructions, "
                  f"planned memory {planned} B (unplanned sum {unplanned} B)")
            print(f"  input {x.shape} -> output {tuple(y.shape)} {y.dtype}")
            print(f"  max |ours - numpy| = {diff:.2e}  {'OK' if good else 'MISMATCH'}")
            print(f"  latency per call: {latency_us(forward, x):.1f} us (median of 200)")

    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.add(m.input("a", "float32", (1,)), m.input("b", "float32", (1,))))
    with rt.Program.load(b.to_bytes()) as program, program.load_method("forward") as add:
        one = np.ones(1, np.float32)
        us = latency_us(lambda _: add(one, one), None, repeats=20000)
        print(f"add (1 element): {us:.2f} us per call from Python")
    print("demo:", "all outputs match numpy" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

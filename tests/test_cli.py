"""python -m runtime_py: convert, inspect and run on a real model."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import onnx  # noqa: E402

from tests import onnx_models  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runtime_py", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_convert_inspect_run(tmp_path):
    model = onnx_models.mlp(batch="N")
    onnx.save(model, tmp_path / "mlp.onnx")
    x = np.random.default_rng(0).standard_normal((3, 256)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)

    missing = cli("convert", str(tmp_path / "mlp.onnx"), "-o", str(tmp_path / "bad.rtp"))
    assert missing.returncode == 1 and "input 'x' dimension 0 ('N')" in missing.stderr
    assert "Traceback" not in missing.stderr

    done = cli("convert", str(tmp_path / "mlp.onnx"), "-o", str(tmp_path / "mlp.rtp"),
               "--dynamic", "x=0:32")
    assert done.returncode == 0, done.stderr
    shown = cli("inspect", str(tmp_path / "mlp.rtp"))
    assert "input 0 'x': tensor float32 [<=32, 256]" in shown.stdout
    assert "linear_act x2" in shown.stdout
    ran = cli("run", str(tmp_path / "mlp.rtp"), "--input", f"x={tmp_path / 'x.npy'}",
              "-o", str(tmp_path / "out.npz"))
    assert ran.returncode == 0, ran.stderr
    got = np.load(tmp_path / "out.npz")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": x})[0]
    np.testing.assert_allclose(list(got.values())[0], want, rtol=1e-4, atol=1e-4)


def test_bench_and_profile(tmp_path):
    onnx.save(onnx_models.small_cnn(batch=1), tmp_path / "cnn.onnx")
    assert cli("convert", str(tmp_path / "cnn.onnx"), "-o", str(tmp_path / "cnn.rtp")).returncode == 0
    bench = cli("bench", str(tmp_path / "cnn.rtp"), "--runs", "5", "--threads", "1")
    assert bench.returncode == 0 and "threads 1: median" in bench.stdout, bench.stderr
    trace = tmp_path / "trace.json"
    prof = cli("profile", str(tmp_path / "cnn.rtp"), "--runs", "3", "-o", str(trace))
    assert prof.returncode == 0, prof.stderr
    assert "conv2d_act" in prof.stdout and "share" in prof.stdout
    import json

    events = json.loads(trace.read_text())["traceEvents"]
    ops = [e["name"] for e in events if e["args"]["run"] == 0]
    assert ops[0] == "conv2d_act_max_pool2d" and len(events) == 3 * len(ops)
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in events)


def test_convert_over_a_served_program_leaves_its_process_running(tmp_path):
    """convert replaces its output by renaming a new file over it, so a process that has the
    old program mapped keeps running on the old bytes (writing in place truncated the mapping
    under it: SIGBUS at its next execute)."""
    onnx.save(onnx_models.mlp(batch=2), tmp_path / "mlp.onnx")
    out = tmp_path / "mlp.rtp"
    assert cli("convert", str(tmp_path / "mlp.onnx"), "-o", str(out)).returncode == 0
    server = (
        "import sys, numpy as np, runtime_py as rt\n"
        f"p = rt.Program.load({str(out)!r}); f = p.load_method()\n"
        "x = np.ones((2, 256), np.float32); want = np.asarray(f(x)[0]).copy()\n"
        "print('ready', flush=True); sys.stdin.readline()\n"
        "np.testing.assert_array_equal(np.asarray(f(x)[0]), want); print('still serving')\n")
    proc = subprocess.Popen([sys.executable, "-c", server], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        onnx.save(onnx_models.small_cnn(batch=1), tmp_path / "cnn.onnx")  # a smaller file
        assert cli("convert", str(tmp_path / "cnn.onnx"), "-o", str(out)).returncode == 0
        stdout, stderr = proc.communicate("go\n", timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    assert "still serving" in stdout


def test_convert_with_value_bounds(tmp_path):
    """--value-bound NAME=LO:HI bounds the sizes an input's contents give; a malformed flag is
    refused naming it, without a traceback."""
    from onnx import TensorProto, helper

    node = helper.make_node("Reshape", ["x", "shape"], ["y"])
    graph = helper.make_graph([node], "reshape", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
        helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]),
              tmp_path / "reshape.onnx")
    out = tmp_path / "reshape.rtp"
    refused = cli("convert", str(tmp_path / "reshape.onnx"), "-o", str(out))
    assert refused.returncode == 1 and "value_bounds" in refused.stderr
    assert "Traceback" not in refused.stderr
    bad = cli("convert", str(tmp_path / "reshape.onnx"), "-o", str(out), "--value-bound",
              "shape=12")
    assert bad.returncode == 2 and "--value-bound" in bad.stderr and "NAME=LO:HI" in bad.stderr
    done = cli("convert", str(tmp_path / "reshape.onnx"), "-o", str(out), "--value-bound",
               "shape=-1:12")
    assert done.returncode == 0, done.stderr
    import runtime_py as rt

    method = rt.Program.load(str(out)).load_method("forward")
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    (y,) = method(x, np.array([4, -1], np.int64))
    np.testing.assert_array_equal(np.asarray(y), x.reshape(4, 3))

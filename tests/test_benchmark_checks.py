"""benchmarks/run.py checks every output of every side against a reference before timing it,
and prints no time and no ratio for a side whose results differ: a fast wrong answer must not
become a figure. Fake peers stand in for wrong ones here."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "benchmarks" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_only_sides_with_the_reference_results_are_kept(bench):
    want = [np.arange(6, dtype=np.float32).reshape(2, 3), np.array([1, 2], np.int64)]
    right = [w.copy() for w in want]
    off = [want[0].copy(), want[1]]
    off[0][1, 2] += 0.5
    sides = {
        "ours": lambda: right,
        "close": lambda: [want[0] * np.float32(1 + 1e-6), want[1]],  # float rounding only
        "off_by_a_bit": lambda: off,
        "transposed": lambda: [want[0].T, want[1]],
        "as_float64": lambda: [want[0].astype(np.float64), want[1]],
        "first_only": lambda: right[:1],
        "raises": lambda: 1 / 0,
    }
    kept, wrong = bench.checked(sides, want, lambda side, out: out)
    assert list(kept) == ["ours", "close"]
    assert wrong["off_by_a_bit"] == "output 0 differs by up to 0.5 at [1, 2]"
    assert wrong["transposed"] == "output 0 is float32[3, 2], expected float32[2, 3]"
    assert wrong["as_float64"] == "output 0 is float64[2, 3], expected float32[2, 3]"
    assert wrong["first_only"] == "1 outputs, expected 2"
    assert wrong["raises"].startswith("ZeroDivisionError")


def test_a_wrong_peer_gets_no_time_and_no_ratio(bench):
    timing = {"median": 1e-4, "min": 9e-5, "p90": 2e-4, "reps": 10}
    row = {"model": "mlp", "threads": 1, "max_abs_diff": 1e-7, "has_numpy": True,
           "ours": timing, "onnxruntime": dict(timing, median=2e-4),
           "wrong": {"numpy": "output 0 differs by up to 3 at [0, 1]"}}
    gemm = {"n": 128, "threads": 1, "ours_gflops": 90.0,
            "wrong": {"numpy": "output 0 differs by up to 1 at [5, 5]"}}
    text = bench.render({1: {"models": [row], "gemm": [gemm]}}, [])
    (line,) = [l for l in text.splitlines() if l.startswith("| mlp |")]
    assert "| WRONG RESULTS | 0.50 | - |" in line  # ours / ort kept, ours / numpy refused
    (line,) = [l for l in text.splitlines() if l.startswith("| 128 |")]
    assert line == "| 128 | 90.0 | WRONG RESULTS | - |"
    assert "- mlp, 1 thread(s), numpy: output 0 differs by up to 3 at [0, 1]" in text
    assert "- GEMM n=128, 1 thread(s), numpy: output 0 differs by up to 1 at [5, 5]" in text


def test_the_numpy_mlp_peer_computes_the_model(bench):
    pytest.importorskip("onnx")
    import runtime_py as rt
    import runtime_py.onnx as ro

    model, feeds = bench.model_and_input("mlp")
    peer = bench.numpy_peer("mlp", model, feeds)
    with rt.Program.load(ro.convert(model)) as program, program.load_method("forward") as f:
        (ours,) = f(feeds["x"])
        assert bench.mismatch([peer()], [np.asarray(ours)]) is None
        assert bench.mismatch([peer() + 1], [np.asarray(ours)]) is not None

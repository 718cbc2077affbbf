"""Write tests/op_tests.json: for every op of the op list (libruntime/ops/ops.inc), a few of
the tests that run it on the CPU and on CUDA (the emulated driver, tests/cuda_emu), found by
running the op tests with the tests/op_coverage.py plugin. tests/test_op_list.py checks the
index against the list, so an op added without a CPU and a CUDA test fails there.

    python scripts/op_test_index.py --cuda-driver /tmp/emu/libfakecuda.so \
        --cublas /tmp/emu/libfakecublas.so
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CPU_TESTS = ["tests/test_ops.py", "tests/test_ops_unary.py", "tests/test_ops_logic_reduce.py",
             "tests/test_ops_movement.py", "tests/test_ops_norm.py", "tests/test_ops_quant.py",
             "tests/test_ops_attention.py",
             "tests/test_ops_rnn.py", "tests/test_ops_detection.py", "tests/test_conv_pool.py",
             "tests/test_conv_winograd.py",
             "tests/test_fusion.py", "tests/test_control_flow.py"]
CUDA_TESTS = ["tests/gpu"]
KEEP = 3  # tests named per op and device


def covered(paths, env) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "ops.json")
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "tests.op_coverage",
                        "-p", "no:cacheprovider", *paths],
                       cwd=ROOT, env={**env, "RT_OP_COVERAGE_OUT": out}, check=True)
        with open(out) as f:
            return json.load(f)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cuda-driver", required=True, help="the fake libcuda.so (tests/cuda_emu)")
    parser.add_argument("--cublas", required=True, help="the fake cuBLAS")
    args = parser.parse_args()
    ops = re.findall(r'^RT_OP\("(\w+)"', (ROOT / "libruntime/ops/ops.inc").read_text(), re.M)
    cpu = covered(CPU_TESTS, dict(os.environ))
    cuda = covered(CUDA_TESTS, {**os.environ, "RT_CUDA_DRIVER": args.cuda_driver,
                                "RT_CUBLAS": args.cublas})
    index = {}
    for op in ops:
        # Tests that name the op first, then the shortest ids: the plainest tests of it.
        pick = lambda ids: sorted(ids, key=lambda i: (op not in i, len(i), i))[:KEEP]  # noqa
        index[op] = {"cpu": pick(cpu.get(op, {}).get("cpu", [])),
                     "cuda": pick(cuda.get(op, {}).get("cuda", []))}
    (ROOT / "tests" / "op_tests.json").write_text(json.dumps(index, indent=1) + "\n")
    missing = [op for op, by in index.items() if not by["cpu"] or not by["cuda"]]
    print(f"wrote tests/op_tests.json: {len(ops)} ops; without a CPU or CUDA test: {missing}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

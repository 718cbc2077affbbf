"""Per-call overhead of a 1-element Add from this interpreter, with array.array inputs (no
numpy needed, so it runs under PyPy as it comes): prints one JSON object.

    pypy3 benchmarks/call_overhead.py     # run from the repository root
"""
from __future__ import annotations

import array
import json
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import runtime_py as rt  # noqa: E402
from runtime_py.compiler import ProgramBuilder  # noqa: E402


def main() -> None:
    builder = ProgramBuilder()
    m = builder.method("forward")
    m.output(m.add(m.input("x", "float32", (1,)), m.input("y", "float32", (1,))), "z")
    x, y = array.array("f", [1.0]), array.array("f", [2.0])
    with rt.Program.load(builder.to_bytes()) as program, program.load_method("forward") as f:
        assert f(x, y)[0].tolist() == [3.0]
        for _ in range(200_000):  # PyPy's JIT warms up over the first loops
            f(x, y)
        best = float("inf")
        for _ in range(7):
            start = time.perf_counter()
            for _ in range(100_000):
                f(x, y)
            best = min(best, (time.perf_counter() - start) / 100_000)
    print(json.dumps({"interpreter": f"{platform.python_implementation()} "
                      f"{platform.python_version()}", "us_per_call": best * 1e6}))


if __name__ == "__main__":
    main()

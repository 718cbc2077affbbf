"""Run the ONNX backend test suites against the runtime and report the results per op type.

    python -m runtime_py.onnx.conformance                       # node tests, summary table
    python -m runtime_py.onnx.conformance --suite all --markdown report.md --json report.json

Each case is converted, loaded and run on every data set it carries; outputs are compared with
the expected ones at rtol 1e-3 / atol 1e-5 for float32 and float64 (float16: 2e-3 / 1e-3,
bfloat16: 1.6e-2 / 1e-2, about two units in the last place), exact for integers and bool.
A case is
- *passed*;
- *failed*: wrong numbers, shape or dtype, any library error while running it, or one while
  loading the converted program that is not a refusal (see `prepare`: the library refusing
  what the importer wrote is a bug, not a missing feature);
- *unsupported*: a clean refusal by the importer or the library (`prepare`);
- *crashed*: any other exception, or its worker process dying;
- *hung*: no result within the per-case timeout (its worker is killed).
A case the importer refuses is converted again with `value_bounds` stating each numeric input's
lowest and highest value over the case's data sets (sizes given by an input's contents need
them; see docs/onnx.md), as a user states the largest values their model takes.
Cases run one at a time in worker processes, so a crash or a hang is recorded against its case
and the sweep goes on. The node suite's `_expanded` cases run an op's function body (a graph of
other ops), not the op: they are counted apart, so an op the runtime lacks gets no credit for
them. The exit status is 1 when any case failed, crashed or hung (unless --allow-failures).
"""
from __future__ import annotations

import argparse
import collections
import json
import sys
import time
import traceback
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

SUITES = ("node", "simple", "pytorch-converted", "pytorch-operator")
STATUSES = ("passed", "failed", "unsupported", "crashed", "hung")
BAD = ("failed", "crashed", "hung")
TIMEOUT_S = 120.0  # per case: the slowest passing node case takes a few seconds
RTOL, ATOL = 1e-3, 1e-5
# Half-precision results are computed in float32 and rounded once per op, where onnx's reference
# rounds at its own points: allow about two units in the last place of the format.
HALF_TOLERANCE = {"float16": (2e-3, 1e-3), "bfloat16": (1.6e-2, 1e-2)}

def load_cases(suite: str) -> List[Any]:
    import onnx.backend.test.loader as loader

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if suite == "node":
            return list(loader.load_node_model_tests())
        return [c for c in loader.load_model_tests(kind=suite)]


def is_expanded(case: Any) -> bool:
    """A node case that runs an op's function body rather than the op."""
    return "_expanded" in case.name


def op_types(cases: Sequence[Any]) -> List[str]:
    """The op type each case tests: its node's, or for an expanded function body the op of the
    test it expands."""
    single = {c.name: c.model.graph.node[0].op_type for c in cases
              if c.model is not None and len(c.model.graph.node) == 1}
    labels = []
    for c in cases:
        base = c.name.split("_expanded")[0]
        if c.name in single:
            labels.append(single[c.name])
        elif base in single:
            labels.append(single[base])
        elif c.model is not None and c.model.graph.node:
            labels.append(c.model.graph.node[-1].op_type if c.kind == "node" else c.name)
        else:
            labels.append(c.name)
    return labels


def _compare(expected: Any, got: Any) -> Optional[str]:
    import numpy as np

    expected = np.asarray(expected)
    got = np.asarray(got)
    if expected.shape != got.shape:
        return f"shape {got.shape}, expected {expected.shape}"
    if expected.dtype != got.dtype:
        return f"dtype {got.dtype}, expected {expected.dtype}"
    rtol, atol = HALF_TOLERANCE.get(expected.dtype.name, (RTOL, ATOL))
    if expected.dtype.name == "bfloat16":  # ml_dtypes' kind is "V": compare as float32
        expected, got = expected.astype(np.float32), got.astype(np.float32)
    if expected.dtype.kind in "fc":
        if not np.allclose(got, expected, rtol=rtol, atol=atol, equal_nan=True):
            worst = np.nanmax(np.abs(got.astype(np.float64) - expected.astype(np.float64)))
            return f"values differ (max abs difference {worst:.3g})"
    elif not np.array_equal(got, expected):
        return "values differ"
    return None


def _array(x: Any) -> Any:
    """A data set entry as numpy: TensorProtos through onnx.numpy_helper."""
    if hasattr(x, "data_type") and hasattr(x, "dims"):
        from onnx import numpy_helper

        return numpy_helper.to_array(x)
    return x


def _model_and_data(case: Any) -> Tuple[Any, List[Any]]:
    """The model and (inputs, outputs) data sets: in memory for node tests, else read from the
    case's directory (model.onnx and test_data_set_*/{input,output}_*.pb) when it is on disk."""
    if case.model is not None:
        return case.model, case.data_sets
    import glob
    import os

    import onnx

    path = os.path.join(case.model_dir or "", "model.onnx")
    if not case.model_dir or not os.path.exists(path):
        return None, []

    def tensors(directory: str, prefix: str) -> List[Any]:
        files = sorted(glob.glob(os.path.join(directory, f"{prefix}_*.pb")),
                       key=lambda f: int(f.rsplit("_", 1)[1].split(".")[0]))
        out = []
        for name in files:
            tensor = onnx.TensorProto()
            with open(name, "rb") as f:
                tensor.ParseFromString(f.read())
            out.append(onnx.numpy_helper.to_array(tensor))
        return out

    data = [(tensors(d, "input"), tensors(d, "output"))
            for d in sorted(glob.glob(os.path.join(case.model_dir, "test_data_set_*")))]
    return onnx.load(path), data


class Refused(Exception):
    """A clean refusal to take a model: the importer's, or the library's at load."""


def prepare(model: Any, value_bounds: Optional[Dict[str, Tuple[float, float]]] = None) -> Any:
    """The model converted and loaded (a RuntimeBackendRep); Refused when the importer refuses
    it (ConversionError, Unsupported, NotFound, or InvalidArgument for a model it cannot take
    as it is, such as a dimension with neither size nor bound) or the library's load does
    with Unsupported or NotFound. Any other error at load is the library refusing what the
    importer wrote, a bug: it propagates."""
    from ..errors import InvalidArgument, NotFound, Unsupported
    from ..program import Program
    from ._convert import convert
    from .backend import RuntimeBackendRep

    try:
        program = convert(model, value_bounds=value_bounds)
    except (Unsupported, NotFound, InvalidArgument) as e:
        raise Refused(str(e)) from None
    initializers = {i.name for i in model.graph.initializer}
    try:
        return RuntimeBackendRep(Program.load(program),
                                 [i.name for i in model.graph.input if i.name not in initializers],
                                 [o.name for o in model.graph.output], max_steps=10_000_000)
    except (Unsupported, NotFound) as e:
        raise Refused(str(e)) from None


def _value_ranges(model: Any, data_sets: Sequence[Any]) -> Dict[str, Tuple[float, float]]:
    """{input name: (lowest, highest)} over the data sets, for the numeric graph inputs."""
    import numpy as np

    initializers = {i.name for i in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in initializers]
    ranges: Dict[str, Tuple[float, float]] = {}
    for inputs, _ in data_sets:
        for name, x in zip(names, inputs):
            if isinstance(x, (list, tuple, dict)) or x is None:
                continue  # sequences and maps: no sizes come from them
            arr = np.asarray(_array(x))
            if arr.size == 0 or arr.dtype.kind not in "iuf":
                continue
            lo, hi = float(arr.min()), float(arr.max())
            if not (np.isfinite(lo) and np.isfinite(hi)):
                continue
            old = ranges.get(name, (lo, hi))
            ranges[name] = (min(old[0], lo), max(old[1], hi))
    return ranges


def run_case(case: Any) -> Tuple[str, str]:
    """(status, detail) of one case, in this process."""
    import numpy as np

    from ..errors import Error

    model, data_sets = _model_and_data(case)
    if model is None:
        return "unsupported", "no model (needs download)"
    try:
        try:
            rep = prepare(model)
        except Refused:
            # Sizes given by graph inputs' contents: state each input's range as the case's
            # data has it, as a user states the largest values their model takes.
            bounds = _value_ranges(model, data_sets)
            if not bounds:
                raise
            rep = prepare(model, bounds)
    except Refused as e:
        return "unsupported", str(e)
    except Error as e:
        return "failed", f"load: {type(e).__name__}: {e}"
    except Exception as e:  # a converter bug
        return "crashed", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
    try:
        for inputs, expected in data_sets:
            # Cases of special dtypes (bfloat16, float8, ...) carry TensorProtos.
            inputs, expected = [_array(x) for x in inputs], [_array(x) for x in expected]
            try:
                got = rep.run(list(inputs))
            except Error as e:
                return "failed", f"run: {type(e).__name__}: {e}"
            if len(got) != len(expected):
                return "failed", f"{len(got)} outputs, expected {len(expected)}"
            for i, (e_out, g_out) in enumerate(zip(expected, got)):
                problem = _compare(e_out, g_out)
                if problem:
                    return "failed", f"output {i}: {problem}"
    except Exception as e:
        return "crashed", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
    finally:
        rep.method.close()
    del np
    return "passed", ""


def _worker(loader: Callable[[str], List[Any]], suite: str, conn: Any) -> None:
    """A worker process: load the suite's cases once, then run each index it is sent."""
    cases = loader(suite)
    conn.send("ready")
    while True:
        i = conn.recv()
        if i is None:
            return
        conn.send((i, *run_case(cases[i])))


class _Worker:
    """One worker process and the case it is running (with its deadline)."""

    def __init__(self, loader: Callable[[str], List[Any]], suite: str) -> None:
        import multiprocessing

        self.conn, child = multiprocessing.Pipe()
        self.process = multiprocessing.Process(target=_worker, args=(loader, suite, child),
                                               daemon=True)
        self.process.start()
        child.close()
        self.case: Optional[int] = None
        self.deadline = 0.0
        self.ready = False

    def give(self, i: int, timeout: float) -> None:
        self.conn.send(i)
        self.case, self.deadline = i, time.monotonic() + timeout

    def death(self) -> str:
        self.process.join(5)
        code = self.process.exitcode
        return ("the process died" + (f" (signal {-code})" if code is not None and code < 0
                                      else f" (exit status {code})" if code else ""))

    def stop(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.conn.close()


def sweep(suite: str, jobs: int = 2, only_ops: Optional[Sequence[str]] = None,
          timeout: float = TIMEOUT_S,
          loader: Callable[[str], List[Any]] = load_cases) -> List[Dict[str, Any]]:
    """Run every case of a suite (loader(suite) gives them), each in a worker process with
    `timeout` seconds to finish; one record per case."""
    from multiprocessing.connection import wait

    cases = loader(suite)
    labels = op_types(cases)
    todo = collections.deque(i for i, op in enumerate(labels) if not only_ops or op in only_ops)
    selected = list(todo)
    results: Dict[int, Tuple[str, str]] = {}
    workers = [_Worker(loader, suite) for _ in range(max(1, min(jobs, len(todo))))]
    try:
        while len(results) < len(selected):
            for w in workers:
                if w.ready and w.case is None and todo:
                    w.give(todo.popleft(), timeout)
            busy = [w for w in workers if w.case is not None]
            now = time.monotonic()
            wait_for = min((w.deadline - now for w in busy), default=TIMEOUT_S)
            ready = wait([w.conn for w in workers], max(0.0, wait_for))
            for k, w in enumerate(workers):
                replace = None
                if w.conn in ready:
                    try:
                        message = w.conn.recv()
                    except (EOFError, OSError):
                        replace = ("crashed", w.death())
                    else:
                        if message == "ready":
                            w.ready = True
                        else:
                            i, status, detail = message
                            results[i] = (status, detail)
                            w.case = None
                elif w.case is not None and time.monotonic() >= w.deadline:
                    replace = ("hung", f"no result after {timeout:g} s; its process was "
                                       f"killed")
                if replace is not None:
                    if w.case is not None:
                        results[w.case] = replace
                    elif not w.ready:
                        raise RuntimeError(f"a worker could not load the {suite} cases: "
                                           f"{w.death()}")
                    w.stop()
                    workers[k] = _Worker(loader, suite)
    finally:
        for w in workers:
            if w.process.is_alive():
                try:
                    w.conn.send(None)
                except OSError:
                    pass
            w.stop()
    return [{"name": cases[i].name, "op": labels[i], "expanded": is_expanded(cases[i]),
             "status": results[i][0], "detail": results[i][1]} for i in selected]


def summarize(records: Sequence[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """Counts per op type, plus the most common reason its unsupported cases were refused
    (give it the native or the expanded cases, not both: see is_expanded)."""
    table: Dict[str, Dict[str, Any]] = collections.defaultdict(lambda: dict.fromkeys(STATUSES, 0))
    reasons: Dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in records:
        table[r["op"]][r["status"]] += 1
        if r["status"] == "unsupported":
            reasons[r["op"]][_reason(r["detail"])] += 1
    for op, counter in reasons.items():
        table[op]["reason"] = counter.most_common(1)[0][0]
    return dict(sorted(table.items()))


def _reason(detail: str) -> str:
    """The refusal without the node name, for grouping: "node 'x' (Op): why" -> "why"."""
    text = detail.split("\n")[0]
    if "): " in text:
        text = text.split("): ", 1)[1]
    return text[:110]


def markdown(table: Dict[str, Dict[str, Any]], title: str) -> str:
    totals = dict.fromkeys(STATUSES, 0)
    lines = [f"### {title}", "",
             "| op type | " + " | ".join(STATUSES) + " | most common refusal |",
             "|---|" + "---:|" * len(STATUSES) + "---|"]
    for op, counts in table.items():
        reason = counts.get("reason", "").replace("|", "\\|")
        lines.append(f"| {op} | " + " | ".join(str(counts[s]) for s in STATUSES) + f" | {reason} |")
        for s in STATUSES:
            totals[s] += counts[s]
    lines.append("| **total** | " + " | ".join(f"**{totals[s]}**" for s in STATUSES) + " | |")
    return "\n".join(lines) + "\n"


def report(suite: str, records: Sequence[Dict[str, Any]]) -> str:
    """The suite's per-op table of native cases, then (if any) that of its expanded cases."""
    native = [r for r in records if not r["expanded"]]
    expanded = [r for r in records if r["expanded"]]
    text = markdown(summarize(native), f"Suite: {suite} ({len(native)} cases)")
    if expanded:
        text += "\n" + markdown(summarize(expanded), f"Suite: {suite}, expanded function bodies "
                                 f"({len(expanded)} cases: each runs an op's ONNX function, a "
                                 "graph of other ops, not the op itself)")
    return text


def main(argv: Optional[Sequence[str]] = None,
         loader: Callable[[str], List[Any]] = load_cases) -> int:
    parser = argparse.ArgumentParser(description="ONNX backend test conformance of runtime_py")
    parser.add_argument("--suite", choices=SUITES + ("all",), default="node")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--ops", nargs="*", help="only these op types")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S,
                        help="seconds a case may take before it counts as hung "
                             f"(default {TIMEOUT_S:g})")
    parser.add_argument("--json", help="write every case's result here")
    parser.add_argument("--markdown", help="write the per-op table here")
    parser.add_argument("--failures", action="store_true",
                        help="print each failed, crashed or hung case")
    parser.add_argument("--allow-failures", action="store_true",
                        help="exit 0 even when cases failed, crashed or hung")
    args = parser.parse_args(argv)
    suites = SUITES if args.suite == "all" else (args.suite,)
    all_records, text = {}, []
    for suite in suites:
        records = sweep(suite, args.jobs, args.ops, args.timeout, loader)
        all_records[suite] = records
        text.append(report(suite, records))
        if args.failures:
            for r in records:
                if r["status"] in BAD:
                    print(f"{r['status']:8} {r['name']}: {r['detail'][:200]}")
    output = "\n".join(text)
    print(output)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(output)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(all_records, f, indent=1)
    bad = collections.Counter(r["status"] for rs in all_records.values() for r in rs
                              if r["status"] in BAD)
    if bad:
        print("conformance: " + ", ".join(f"{n} {s}" for s, n in sorted(bad.items())) +
              ("" if args.allow_failures else " (exit status 1; --allow-failures to ignore)"),
              file=sys.stderr)
    return 1 if bad and not args.allow_failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""Run the ONNX backend test suites against the runtime and report the results per op type.

    python -m runtime_py.onnx.conformance                       # node tests, summary table
    python -m runtime_py.onnx.conformance --suite all --markdown report.md --json report.json

Each case is converted, loaded and run on every data set it carries; outputs are compared with
the expected ones at rtol 1e-3 / atol 1e-5 for float32 and float64 (float16: 2e-3 / 1e-3,
bfloat16: 1.6e-2 / 1e-2, about two units in the last place), exact for integers and bool.
A case is *passed*, *failed* (wrong numbers, shape or dtype, or a runtime error while running),
*unsupported* (a clean ConversionError or Unsupported at conversion or load) or *crashed* (any
other exception, or the worker process dying). Cases run in worker processes, so a crash is
recorded rather than ending the sweep.
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import sys
import traceback
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple

SUITES = ("node", "simple", "pytorch-converted", "pytorch-operator")
STATUSES = ("passed", "failed", "unsupported", "crashed")
RTOL, ATOL = 1e-3, 1e-5
# Half-precision results are computed in float32 and rounded once per op, where onnx's reference
# rounds at its own points: allow about two units in the last place of the format.
HALF_TOLERANCE = {"float16": (2e-3, 1e-3), "bfloat16": (1.6e-2, 1e-2)}

_cases: Optional[List[Any]] = None


def load_cases(suite: str) -> List[Any]:
    import onnx.backend.test.loader as loader

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if suite == "node":
            return list(loader.load_node_model_tests())
        return [c for c in loader.load_model_tests(kind=suite)]


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


def run_case(case: Any) -> Tuple[str, str]:
    """(status, detail) of one case, in this process."""
    import numpy as np

    from ..errors import Error, InvalidArgument, NotFound, Unsupported
    from .backend import RuntimeBackend

    model, data_sets = _model_and_data(case)
    if model is None:
        return "unsupported", "no model (needs download)"
    try:
        rep = RuntimeBackend.prepare(model, max_steps=10_000_000)
    except (Unsupported, NotFound, InvalidArgument) as e:
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


def _init_worker(suite: str) -> None:
    global _cases
    _cases = load_cases(suite)


def _run_indices(indices: Sequence[int]) -> List[Tuple[int, str, str]]:
    assert _cases is not None
    return [(i, *run_case(_cases[i])) for i in indices]


def sweep(suite: str, jobs: int = 2, only_ops: Optional[Sequence[str]] = None) -> List[Dict[str, str]]:
    """Run every case of a suite; one record per case."""
    cases = load_cases(suite)
    labels = op_types(cases)
    selected = [i for i, op in enumerate(labels) if not only_ops or op in only_ops]
    by_op: Dict[str, List[int]] = collections.defaultdict(list)
    for i in selected:
        by_op[labels[i]].append(i)
    results: Dict[int, Tuple[str, str]] = {}

    def isolate(indices: Sequence[int]) -> None:
        """Rerun cases one process each, to pin a crash on its case."""
        for i in indices:
            with concurrent.futures.ProcessPoolExecutor(1, initializer=_init_worker,
                                                        initargs=(suite,)) as one:
                try:
                    for j, status, detail in one.submit(_run_indices, [i]).result():
                        results[j] = (status, detail)
                except concurrent.futures.process.BrokenProcessPool:
                    results[i] = ("crashed", "the process died")

    pending = list(by_op.values())
    while pending:
        broken: List[Sequence[int]] = []
        with concurrent.futures.ProcessPoolExecutor(jobs, initializer=_init_worker,
                                                    initargs=(suite,)) as pool:
            futures = {pool.submit(_run_indices, group): group for group in pending}
            for future in concurrent.futures.as_completed(futures):
                try:
                    for i, status, detail in future.result():
                        results[i] = (status, detail)
                except concurrent.futures.process.BrokenProcessPool:
                    broken.append(futures[future])
        pending = []
        for group in broken:
            missing = [i for i in group if i not in results]
            if missing:
                isolate(missing)
    return [{"name": cases[i].name, "op": labels[i], "status": results[i][0],
             "detail": results[i][1]} for i in selected]


def summarize(records: Sequence[Dict[str, str]]) -> Dict[str, Dict[str, Any]]:
    """Counts per op type, plus the most common reason its unsupported cases were refused."""
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
             "| op type | passed | failed | unsupported | crashed | most common refusal |",
             "|---|---:|---:|---:|---:|---|"]
    for op, counts in table.items():
        reason = counts.get("reason", "").replace("|", "\\|")
        lines.append(f"| {op} | " + " | ".join(str(counts[s]) for s in STATUSES) + f" | {reason} |")
        for s in STATUSES:
            totals[s] += counts[s]
    lines.append("| **total** | " + " | ".join(f"**{totals[s]}**" for s in STATUSES) + " | |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="ONNX backend test conformance of runtime_py")
    parser.add_argument("--suite", choices=SUITES + ("all",), default="node")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--ops", nargs="*", help="only these op types")
    parser.add_argument("--json", help="write every case's result here")
    parser.add_argument("--markdown", help="write the per-op table here")
    parser.add_argument("--failures", action="store_true", help="print each failing case")
    args = parser.parse_args(argv)
    suites = SUITES if args.suite == "all" else (args.suite,)
    all_records, text = {}, []
    for suite in suites:
        records = sweep(suite, args.jobs, args.ops)
        all_records[suite] = records
        table = summarize(records)
        text.append(markdown(table, f"{suite} ({len(records)} cases)"))
        if args.failures:
            for r in records:
                if r["status"] in ("failed", "crashed"):
                    print(f"{r['status']:8} {r['name']}: {r['detail'][:200]}")
    report = "\n".join(text)
    print(report)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(report)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(all_records, f, indent=1)
    crashed = sum(r["status"] == "crashed" for rs in all_records.values() for r in rs)
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())

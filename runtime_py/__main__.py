"""Command line: python -m runtime_py {convert, inspect, run, verify, bench, profile} ...

    python -m runtime_py convert model.onnx -o model.rtp --dynamic x=0:64 --dynamic x=1:512
    python -m runtime_py convert model.onnx -o model.rtp --external-data model.rtd \
        --bundle-inputs case0.npz
    python -m runtime_py verify model.rtp --data model.rtd
    python -m runtime_py inspect model.rtp
    python -m runtime_py run model.rtp --input x=x.npy -o outputs.npz
    python -m runtime_py bench model.rtp --runs 500
    python -m runtime_py profile model.rtp -o trace.json
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from ._files import write_atomically


def _shape_arg(text: str) -> Tuple[str, List[int]]:
    """--shape NAME=D0,D1,... -> (NAME, [D0, D1, ...])."""
    name, eq, dims = text.rpartition("=")
    try:
        sizes = [int(d) for d in dims.split(",") if d.strip()]
    except ValueError:
        sizes = None
    if not eq or not name or sizes is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=D0,D1,... (sizes as integers)")
    return name, sizes


def _bound_arg(text: str) -> Tuple[str, int, int]:
    """--dynamic NAME=AXIS:MAX (or the older NAME:AXIS=MAX) -> (NAME, AXIS, MAX)."""
    name, eq, rest = text.rpartition("=")
    if ":" in rest:
        axis, _, bound = rest.partition(":")
    else:
        name, _, axis = name.rpartition(":")
        bound = rest
    try:
        value = (name, int(axis), int(bound))
    except ValueError:
        value = None
    if not eq or not name or value is None or value[2] < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=AXIS:MAX (an input name, the "
                                         f"axis and its largest size, e.g. input_ids=1:512)")
    return value


def _value_bound_arg(text: str) -> Tuple[str, Tuple[float, float]]:
    """--value-bound NAME=LO:HI -> (NAME, (LO, HI))."""
    name, eq, rest = text.rpartition("=")
    low, colon, high = rest.partition(":")
    try:
        value = (float(low), float(high))
    except ValueError:
        value = None
    if not eq or not name or not colon or value is None or not value[0] <= value[1]:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=LO:HI (an input name and the "
                                         f"lowest and highest value of its elements, e.g. "
                                         f"shape=-1:64)")
    return name, value


def _parse_shapes(items: Sequence[Tuple[str, List[int]]]) -> Dict[str, List[int]]:
    return {name: sizes for name, sizes in items or ()}


def _parse_bounds(items: Sequence[Tuple[str, int, int]]) -> Dict[str, Dict[int, int]]:
    """Repeated --dynamic flags -> {NAME: {AXIS: MAX}}."""
    bounds: Dict[str, Dict[int, int]] = collections.defaultdict(dict)
    for name, axis, bound in items or ():
        bounds[name][axis] = bound
    return dict(bounds)


def cmd_convert(args: argparse.Namespace) -> int:
    from ._importers import importer_for

    cases = []
    for path in args.bundle_inputs or ():
        import numpy as np

        with np.load(path) as npz:  # one case: an array per input name
            cases.append({name: npz[name] for name in npz.files})
    importer = importer_for(args.model)
    if importer is not None and importer.module == "runtime_py.executorch":
        if args.shape or args.dynamic or args.value_bound or args.no_fuse or cases:
            print("error: --shape, --dynamic, --value-bound, --no-fuse and --bundle-inputs "
                  "apply to ONNX models only (a .pte carries no reference to compute expected "
                  "outputs)",
                  file=sys.stderr)
            return 2
        from . import executorch

        data = executorch.convert(args.model, external_data=args.external_data)
    else:
        from . import onnx as ro

        data = ro.convert(args.model, input_shapes=_parse_shapes(args.shape),
                          dynamic_bounds=_parse_bounds(args.dynamic), fuse=not args.no_fuse,
                          bundle_inputs=cases, external_data=args.external_data,
                          value_bounds=dict(args.value_bound or ()))
    # Renamed into place: a process serving the old file keeps its mapping (writing in place
    # would truncate it under that process).
    write_atomically(args.output, data)
    extra = f", {len(cases)} bundled case(s)" if cases else ""
    print(f"wrote {args.output} ({len(data):,} bytes{extra})")
    if args.external_data:
        print(f"wrote weights to {args.external_data}")
    return 0


def _load(args: argparse.Namespace):
    """The program of args.program (ours, or an ExecuTorch / ONNX model converted on the fly)
    with its --data files."""
    from ._importers import program_source
    from .errors import NotFound
    from .program import Program

    try:
        return Program.load(program_source(args.program), data_files=args.data or ())
    except NotFound as e:
        if "data file" in e.message and not args.data:
            e.message += " (pass --data FILE.rtd)"
        raise


def cmd_verify(args: argparse.Namespace) -> int:
    from .bundled import verify_all

    with _load(args) as program:
        results = verify_all(program, args.method or None, rtol=args.rtol, atol=args.atol,
                             num_threads=args.threads)
    if not results:
        print(f"{args.program}: no bundled test cases")
        return 1
    failed = 0
    print(f"{'method':<16} {'case':>4}  {'result':<6} detail")
    for method, index, outcome in results:
        if isinstance(outcome, Exception):
            failed += 1
            print(f"{method:<16} {index:>4}  {'FAIL':<6} {outcome}")
        else:
            worst = max(outcome.max_abs_error, default=0.0)
            print(f"{method:<16} {index:>4}  {'pass':<6} max |error| {worst:.3g}")
    print(f"{len(results) - failed} passed, {failed} failed "
          f"(rtol {args.rtol:g}, atol {args.atol:g})")
    return 1 if failed else 0


def cmd_inspect(args: argparse.Namespace) -> int:
    with _load(args) as program:
        print(f"{args.program}: {len(program.method_names)} method(s), "
              f"{program.constant_bytes:,} bytes of constants")
        for path in program.data_files:
            print(f"  data file {path}")
        for name in program.method_names:
            meta = program.method_meta(name)
            print(f"\nmethod '{name}': {meta.num_instructions} instructions, "
                  f"planned memory {meta.planned_bytes:,} bytes")
            for label, infos in (("input", meta.inputs), ("output", meta.outputs)):
                for i, info in enumerate(infos):
                    sizes = ", ".join(f"<={s}" if a in info.dynamic_axes else str(s)
                                      for a, s in enumerate(info.shape))
                    print(f"  {label} {i} '{info.name}': {info.kind} {info.dtype or ''} "
                          f"[{sizes}]")
            ops = collections.Counter(op for op in program.instruction_ops(name) if op)
            print("  ops: " + ", ".join(f"{op} x{n}" for op, n in ops.most_common()))
            cases = len(program.bundled_tests(name))
            if cases:
                print(f"  bundled test cases: {cases}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    import numpy as np

    feeds = {}
    for item in args.input or ():
        name, _, path = item.partition("=")
        feeds[name] = np.load(path)
    with _load(args) as program:
        meta = program.method_meta(args.method)
        missing = [i.name for i in meta.inputs if i.name not in feeds]
        if missing:
            print(f"missing --input for: {', '.join(missing)}", file=sys.stderr)
            return 2
        with program.load_method(args.method, num_threads=args.threads) as method:
            outputs = method(*[feeds[i.name] for i in meta.inputs])
    arrays = {(info.name or f"output{i}"): np.asarray(o)
              for i, (info, o) in enumerate(zip(meta.outputs, outputs))}
    if args.output:
        np.savez(args.output, **arrays)
        print(f"wrote {args.output}")
    else:
        for name, array in arrays.items():
            print(f"{name}: {array.dtype} {list(array.shape)}\n{array}")
    return 0


def _inputs_for(program, method: str, items: Sequence[str]):
    """Inputs from NAME=FILE.npy items, or deterministic random data of the declared shapes."""
    import numpy as np

    meta = program.method_meta(method)
    given = {}
    for item in items or ():
        name, _, path = item.partition("=")
        given[name] = np.load(path)
    rng = np.random.default_rng(0)
    inputs = []
    for info in meta.inputs:
        if info.name in given:
            inputs.append(given[info.name])
        elif info.kind == "tensor":
            inputs.append(rng.standard_normal(info.shape).astype(info.dtype)
                          if info.dtype.startswith("float") else np.zeros(info.shape, info.dtype))
        else:
            inputs.append(0)
    return inputs


def cmd_bench(args: argparse.Namespace) -> int:
    import statistics
    import time

    with _load(args) as program:
        inputs = _inputs_for(program, args.method, args.input)
        for threads in args.threads:
            with program.load_method(args.method, num_threads=threads) as method:
                for _ in range(args.warmup):
                    method(*inputs)
                times = []
                for i in range(args.runs):
                    t0 = time.perf_counter()
                    method(*inputs)
                    times.append(time.perf_counter() - t0)
                    if args.runs >= 50 and i % max(args.runs // 20, 1) == 0:
                        done = (i + 1) * 20 // args.runs
                        print(f"\r[{'#' * done}{'.' * (20 - done)}] {i + 1}/{args.runs}",
                              end="", file=sys.stderr, flush=True)
                if args.runs >= 50:
                    print(file=sys.stderr)
                times.sort()
                print(f"threads {threads}: median {statistics.median(times) * 1e6:,.1f} us, "
                      f"min {times[0] * 1e6:,.1f} us, p90 {times[int(0.9 * (len(times) - 1))] * 1e6:,.1f} us "
                      f"({args.runs} runs)")
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    from .profiling import Profile

    with _load(args) as program:
        inputs = _inputs_for(program, args.method, args.input)
        with program.load_method(args.method, profile=True, num_threads=args.threads) as method:
            method(*inputs)  # warm-up
            profile = Profile.record(method, inputs, runs=args.runs)
    print(profile.summary_table())
    if args.output:
        profile.write_trace(args.output)
        print(f"wrote {args.output} (open in chrome://tracing or ui.perfetto.dev)")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    script = os.path.basename(sys.argv[0] or "")
    parser = argparse.ArgumentParser(
        prog=script if script == "runtime-py" else "python -m runtime_py",
        description="libruntime command line")
    sub = parser.add_subparsers(dest="command", required=True)

    convert = sub.add_parser("convert", help="convert an ONNX model or an ExecuTorch .pte "
                                             "program into a program file")
    convert.add_argument("model", help="the .onnx or .pte file (chosen by its header)")
    convert.add_argument("-o", "--output", required=True, help="the .rtp file to write")
    convert.add_argument("--shape", action="append", metavar="NAME=D0,D1,...", type=_shape_arg,
                         help="a concrete shape for an input with symbolic dimensions")
    convert.add_argument("--dynamic", action="append", metavar="NAME=AXIS:MAX", type=_bound_arg,
                         help="make an input dimension dynamic, any size up to MAX "
                              "(repeatable: one flag per axis)")
    convert.add_argument("--value-bound", action="append", metavar="NAME=LO:HI",
                         type=_value_bound_arg,
                         help="the range of an input whose values give sizes (a Reshape's "
                              "shape, Resize's scales, ...): outputs are planned for it "
                              "(repeatable)")
    convert.add_argument("--no-fuse", action="store_true", help="keep every op separate")
    convert.add_argument("--bundle-inputs", action="append", metavar="CASE.npz",
                         help="bundle a test case: inputs by name; expected outputs come from "
                              "onnxruntime (or onnx's reference evaluator) (repeatable)")
    convert.add_argument("--external-data", metavar="FILE.rtd",
                         help="write the weights to this data file (extending it if it holds "
                              "another program's weights)")
    convert.set_defaults(fn=cmd_convert)

    data_help = "a data file holding the program's external constants (repeatable)"
    inspect = sub.add_parser("inspect", help="methods, inputs, outputs, ops and memory")
    inspect.add_argument("program")
    inspect.add_argument("--data", action="append", metavar="FILE.rtd", help=data_help)
    inspect.set_defaults(fn=cmd_inspect)

    verify = sub.add_parser("verify", help="run every bundled test case; exit 1 on a failure")
    verify.add_argument("program")
    verify.add_argument("--data", action="append", metavar="FILE.rtd", help=data_help)
    verify.add_argument("--method", action="append", help="only this method (repeatable)")
    verify.add_argument("--rtol", type=float, default=1e-5)
    verify.add_argument("--atol", type=float, default=1e-8)
    verify.add_argument("--threads", type=int, default=0)
    verify.set_defaults(fn=cmd_verify)

    run = sub.add_parser("run", help="run a method on .npy inputs")
    run.add_argument("program")
    run.add_argument("--data", action="append", metavar="FILE.rtd", help=data_help)
    run.add_argument("--method", default="forward")
    run.add_argument("--input", action="append", metavar="NAME=FILE.npy")
    run.add_argument("--threads", type=int, default=0)
    run.add_argument("-o", "--output", help="save outputs to this .npz instead of printing")
    run.set_defaults(fn=cmd_run)

    bench = sub.add_parser("bench", help="latency of a method (random inputs unless given)")
    bench.add_argument("program")
    bench.add_argument("--data", action="append", metavar="FILE.rtd", help=data_help)
    bench.add_argument("--method", default="forward")
    bench.add_argument("--input", action="append", metavar="NAME=FILE.npy")
    bench.add_argument("--runs", type=int, default=200)
    bench.add_argument("--warmup", type=int, default=10)
    bench.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    bench.set_defaults(fn=cmd_bench)

    profile = sub.add_parser("profile", help="per-op times and a Chrome / Perfetto trace")
    profile.add_argument("program")
    profile.add_argument("--data", action="append", metavar="FILE.rtd", help=data_help)
    profile.add_argument("--method", default="forward")
    profile.add_argument("--input", action="append", metavar="NAME=FILE.npy")
    profile.add_argument("--runs", type=int, default=10)
    profile.add_argument("--threads", type=int, default=0)
    profile.add_argument("-o", "--output", help="trace file to write (JSON)")
    profile.set_defaults(fn=cmd_profile)

    args = parser.parse_args(argv)
    from .errors import Error

    try:
        return args.fn(args)
    except (Error, OSError) as e:  # the library's and importer's messages say what and where
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

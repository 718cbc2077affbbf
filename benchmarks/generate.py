"""Generation speed: tokens per second of greedy decoding, ours (the KV cache kept in the
program, runtime_py.onnx kv_cache) against onnxruntime running the same exported model with
its cache fed back as inputs, side by side in one run.

    python benchmarks/generate.py [--threads 1 2] [--tokens 64] [--model tests/data/generate/llama.onnx]

The model is a decoder exported with past_* inputs and present_* outputs
(scripts/export_llama_generate.py writes the default one, a tiny Llama). Each side runs the
same prompt, then `--tokens` decode steps; the rounds alternate sides and the median round
counts. Both loops are Python around one call per token and pick the token with numpy's argmax
over the last logits row. The tokens of both sides are checked equal first. Prefill is the
prompt's call, decode the steps after it. Ratios below 1.0 (time) or above 1.0 (tokens/s) mean
we are faster. A benchmark, never a test.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

ROUNDS = 7


def ours(model: str, max_length: int, threads: int):
    import runtime_py.onnx as ro
    from runtime_py.onnx.generate import reset
    module = ro.load(model, input_shapes={"input_ids": (1, 32), "attention_mask": (1, max_length)},
                     dynamic_bounds={"input_ids": {1: 32}, "attention_mask": {1: max_length}},
                     kv_cache={"max_length": max_length}, num_threads=threads)
    method = module.load_method("forward")

    def run(prompt: np.ndarray, count: int):
        reset(method)
        ids, total, tokens, stamps = prompt, 0, [], [time.perf_counter()]
        for _ in range(count + 1):
            total += ids.shape[1]
            logits = np.asarray(method(ids, np.ones((1, total), np.int64))[0])
            tokens.append(int(logits[0, -1].argmax()))
            stamps.append(time.perf_counter())
            ids = np.array([[tokens[-1]]], np.int64)
        return tokens, stamps
    return run, module


def onnxruntime(model: str, threads: int):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = threads
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    pasts = [i for i in session.get_inputs() if i.name.startswith("past")]

    def run(prompt: np.ndarray, count: int):
        past = {i.name: np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32) for i in pasts}
        ids, total, tokens, stamps = prompt, 0, [], [time.perf_counter()]
        for _ in range(count + 1):
            total += ids.shape[1]
            outs = dict(zip(names, session.run(None, {"input_ids": ids, "attention_mask":
                                                      np.ones((1, total), np.int64), **past})))
            past = {k: outs[k.replace("past", "present")] for k in past}
            tokens.append(int(outs["logits"][0, -1].argmax()))
            stamps.append(time.perf_counter())
            ids = np.array([[tokens[-1]]], np.int64)
        return tokens, stamps
    return run, session


def measure(sides, prompt, count):
    """{side: (prefill seconds, decode tokens/s)}, medians over interleaved rounds."""
    for run in sides.values():
        run(prompt, 4)
    prefill = {name: [] for name in sides}
    rate = {name: [] for name in sides}
    for r in range(ROUNDS):
        for name in list(sides)[r % 2:] + list(sides)[:r % 2]:
            _, stamps = sides[name](prompt, count)
            prefill[name].append(stamps[1] - stamps[0])
            rate[name].append(count / (stamps[-1] - stamps[1]))
    return {name: (statistics.median(prefill[name]), statistics.median(rate[name]))
            for name in sides}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=os.path.join(ROOT, "tests", "data", "generate",
                                                        "llama.onnx"))
    parser.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--prompt", type=int, default=16, help="prompt length")
    args = parser.parse_args()
    max_length = args.prompt + args.tokens + 8
    prompt = np.random.default_rng(0).integers(0, 256, (1, args.prompt)).astype(np.int64)
    print(f"model {os.path.relpath(args.model)}: prompt {args.prompt} tokens, then "
          f"{args.tokens} decode steps; medians of {ROUNDS} rounds\n")
    print("| threads | prefill ours | prefill ORT | ours / ORT | decode ours | decode ORT | "
          "ours / ORT (tokens/s) | decode step ours / ORT |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for threads in args.threads:
        ours_run, _keep = ours(args.model, max_length, threads)
        ort_run, _keep2 = onnxruntime(args.model, threads)
        a, b = ours_run(prompt, args.tokens)[0], ort_run(prompt, args.tokens)[0]
        if a != b:
            print(f"tokens differ at {threads} threads: {a} vs {b}")
            return 1
        got = measure({"ours": ours_run, "onnxruntime": ort_run}, prompt, args.tokens)
        (p0, r0), (p1, r1) = got["ours"], got["onnxruntime"]
        print(f"| {threads} | {p0 * 1e6:.0f} us | {p1 * 1e6:.0f} us | {p0 / p1:.2f} | "
              f"{r0:,.0f} tok/s | {r1:,.0f} tok/s | {r0 / r1:.2f} | {r1 / r0:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

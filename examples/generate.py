"""Greedy text generation with the KV cache kept in the program.

The decoder is a small Llama (random weights) that torch.onnx.export wrote with its cache as
inputs and outputs (tests/data/generate/llama.onnx, scripts/export_llama_generate.py). Converted
with kv_cache, the program holds the cache in attributes and updates it in place: each token
is one call with one new token id, and nothing is copied in or out but the logits.

    python examples/generate.py [--tokens 48] [--threads 1]

It prints the first-token latency (the prompt's prefill) and the decode speed in tokens per
second, and checks the tokens against a reference loop: onnxruntime running the exported model
with its own cache where onnxruntime is installed, else torch eager's tokens stored with the
model.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

import runtime_py.onnx as ro  # noqa: E402
from runtime_py.onnx.generate import greedy  # noqa: E402

DATA = os.path.join(ROOT, "tests", "data", "generate")
MODEL = os.path.join(DATA, "llama.onnx")
MAX_LENGTH = 128


def load(threads: int):
    return ro.load(MODEL, input_shapes={"input_ids": (1, 32), "attention_mask": (1, MAX_LENGTH)},
                   dynamic_bounds={"input_ids": {1: 32}, "attention_mask": {1: MAX_LENGTH}},
                   kv_cache={"max_length": MAX_LENGTH}, num_threads=threads)


def onnxruntime_tokens(prompt: np.ndarray, count: int, threads: int):
    """Greedy tokens from onnxruntime on the same file, feeding each present back as the past;
    None without onnxruntime."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = threads
    session = ort.InferenceSession(MODEL, options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    past = {i.name: np.zeros((1, 2, 0, 16), np.float32) for i in session.get_inputs()
            if i.name.startswith("past")}
    ids, total, tokens = prompt, 0, []
    for _ in range(count):
        total += ids.shape[1]
        outs = dict(zip(names, session.run(None, {"input_ids": ids, "attention_mask":
                                                  np.ones((1, total), np.int64), **past})))
        past = {k: outs[k.replace("past", "present")] for k in past}
        tokens.append(int(outs["logits"][0, -1].argmax()))
        ids = np.array([[tokens[-1]]], np.int64)
    return tokens


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=48, help="tokens to generate")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    if not 1 <= args.tokens <= MAX_LENGTH - 8:
        parser.error(f"--tokens must be in [1, {MAX_LENGTH - 8}]")
    prompt = np.random.default_rng(1).integers(0, 256, (1, 7)).astype(np.int64)
    decoder = load(args.threads)
    method = decoder.load_method("forward")
    greedy(method, prompt, 4)  # warm up
    stamps = []
    start = time.perf_counter()
    tokens = greedy(method, prompt, args.tokens, lambda step, token: stamps.append(
        time.perf_counter()))
    first = stamps[0] - start
    rate = (len(stamps) - 1) / (stamps[-1] - stamps[0]) if len(stamps) > 1 else float("nan")
    print(f"prompt {prompt[0].tolist()}")
    print(f"tokens {tokens}")
    print(f"first token {first * 1e3:.2f} ms, then {rate:,.0f} tokens/s "
          f"({args.threads} thread{'s' if args.threads > 1 else ''})")

    reference = onnxruntime_tokens(prompt, args.tokens, args.threads)
    source = "onnxruntime with its own cache"
    if reference is None:
        with np.load(os.path.join(DATA, "reference.npz")) as saved:
            stored = saved["tokens0"].tolist()
        if prompt.tolist() != [[int(t) for t in np.load(os.path.join(DATA, "reference.npz"))
                                ["prompt0"][0]]]:
            print("no onnxruntime and no stored reference for this prompt: not checked")
            return 0
        reference, source = stored[:args.tokens], "torch eager (stored)"
        tokens = tokens[:len(reference)]
    same = tokens == reference
    print(f"{'same tokens as' if same else 'DIFFERENT tokens from'} {source}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

"""Export a small Llama decoder with its KV cache as inputs and outputs, for generation:
tests/data/generate/ (examples/generate.py, tests/test_generate.py, benchmarks/generate.py).

Why: a generation loop runs one model at every token, prefill (the prompt, past length 0) and
decode steps (one token, the past growing) alike. This export takes input_ids [batch, seq],
attention_mask [batch, past + seq] and past_key_i / past_value_i [batch, kv heads, past,
head size], all of seq and past dynamic, and returns the logits and the present keys and
values (the past with the new ones appended), as Hugging Face's exports do. onnxruntime runs
it by feeding each present back as the next past; runtime_py.onnx converts it with
kv_cache={"max_length": M} into a program that keeps the cache itself.

What it writes:

    llama.onnx      the classic exporter's file (torch.onnx.export dynamo=False, opset 17),
                    weights inside: transformers' LlamaForCausalLM from the tiny config of
                    scripts/dynamic_families.py (hidden 64, 4 heads, 2 kv heads, 2 layers,
                    vocab 256), torch.manual_seed(0)
    reference.npz   greedy generation by torch eager with its own cache (no ONNX involved):
                    `prompt{k}` int64 [1, n] and `tokens{k}` int64 [new] for k = 0, 1

Needs torch, transformers, onnx (a separate venv; nothing the runtime or its tests import):

    python scripts/export_llama_generate.py [--out tests/data/generate]
    python scripts/export_llama_generate.py --out /tmp/llama_larger --hidden 256 --layers 4 \
        --vocab 2048     # a larger one for benchmarks/generate.py --model (not checked in)
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dynamic_families import _llama_config  # noqa: E402

LAYERS = 2
PROMPTS = ((1, 7), (2, 3))  # (seed, length) of the reference prompts
NEW_TOKENS = 24


class Step(torch.nn.Module):
    """One call of the decoder: the new tokens on top of the given cache."""

    def __init__(self, model, layers: int):
        super().__init__()
        self.model = model
        self.layers = layers

    def forward(self, input_ids, attention_mask, *past):
        from transformers import DynamicCache
        cache = DynamicCache([(past[2 * i], past[2 * i + 1]) for i in range(self.layers)])
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, cache=cache,
                         use_cache=True)
        layers = out.cache.layers
        return (out.logits, *[t for layer in layers for t in (layer.keys, layer.values)])


def names(layers: int):
    past = [f"past_{kv}_{i}" for i in range(layers) for kv in ("key", "value")]
    present = [p.replace("past", "present") for p in past]
    return past, present


def greedy(model, prompt: np.ndarray, new: int) -> np.ndarray:
    """Greedy tokens by torch eager with its own cache."""
    ids = torch.from_numpy(prompt)
    out, tokens, cache = None, [], None
    with torch.no_grad():
        for _ in range(new):
            out = model(input_ids=ids, cache=cache, use_cache=True)
            cache = out.cache
            ids = out.logits[:, -1:].argmax(-1)
            tokens.append(int(ids[0, 0]))
    return np.array(tokens, np.int64)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests",
                                                      "data", "generate"))
    parser.add_argument("--hidden", type=int, help="hidden size (default: the tiny config's)")
    parser.add_argument("--layers", type=int, default=LAYERS)
    parser.add_argument("--vocab", type=int, help="vocabulary size")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    from transformers import LlamaForCausalLM
    torch.manual_seed(0)
    config = _llama_config(None)
    config.use_cache = True
    config.num_hidden_layers = args.layers
    if args.hidden:
        config.hidden_size, config.intermediate_size = args.hidden, 4 * args.hidden
        config.num_attention_heads, config.num_key_value_heads = args.hidden // 32, 2
        config.head_dim = 32
    if args.vocab:
        config.vocab_size = args.vocab
    model = LlamaForCausalLM(config).eval()
    past_names, present_names = names(args.layers)
    heads, dim = config.num_key_value_heads, config.hidden_size // config.num_attention_heads
    past = [torch.zeros(1, heads, 3, dim) for _ in past_names]
    example = (torch.zeros(1, 2, dtype=torch.int64), torch.ones(1, 5, dtype=torch.int64), *past)
    axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"},
            "logits": {0: "batch", 1: "seq"}}
    axes.update({n: {0: "batch", 2: "past"} for n in past_names})
    axes.update({n: {0: "batch", 2: "total"} for n in present_names})
    path = os.path.join(args.out, "llama.onnx")
    with torch.no_grad():
        torch.onnx.export(Step(model, args.layers), example, path, dynamo=False, opset_version=17,
                          input_names=["input_ids", "attention_mask", *past_names],
                          output_names=["logits", *present_names], dynamic_axes=axes)
    import onnx
    onnx.checker.check_model(path)
    reference = {}
    for k, (seed, length) in enumerate(PROMPTS):
        prompt = np.random.default_rng(seed).integers(0, config.vocab_size, (1, length))
        reference[f"prompt{k}"] = prompt.astype(np.int64)
        reference[f"tokens{k}"] = greedy(model, prompt.astype(np.int64), NEW_TOKENS)
    np.savez(os.path.join(args.out, "reference.npz"), **reference)
    print(f"wrote {path} ({os.path.getsize(path):,} bytes) and reference.npz")
    return 0


if __name__ == "__main__":
    sys.exit(main())

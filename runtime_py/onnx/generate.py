"""Greedy generation with a decoder converted with kv_cache (see _kv_cache.py): the program
keeps the cache, so each call passes only the new tokens and the attention mask.

    decoder = runtime_py.onnx.load("llama.onnx", kv_cache={"max_length": 256}, ...)
    tokens = greedy(decoder.load_method("forward"), prompt_ids, new_tokens=32)

The cache lives in the method instance: one instance per sequence (load_method gives the
module's first; Program.load_method makes more). Module.forward may run on another instance
when called from several threads, so generation goes through a Method. Needs numpy.
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional

from ._kv_cache import LENGTH


def reset(method: Any) -> None:
    """Empty the method's cache (a new sequence starts at position 0)."""
    method.get_attribute(LENGTH).memoryview()[0] = 0


def greedy(method: Any, prompt: Any, new_tokens: int,
           on_token: Optional[Callable[[int, int], None]] = None) -> List[int]:
    """The `new_tokens` tokens greedy decoding picks after `prompt` (int64 [1, n]): the prompt
    in one call (prefill), then one call per token. on_token(step, token) is called as each
    one is picked. The cache is emptied first."""
    import numpy as np

    reset(method)
    ids = np.asarray(prompt, dtype=np.int64).reshape(1, -1)
    total, tokens = 0, []
    for step in range(new_tokens):
        total += ids.shape[1]
        logits = np.asarray(method(ids, np.ones((1, total), np.int64))[0])
        token = int(logits[0, -1].argmax())
        tokens.append(token)
        if on_token is not None:
            on_token(step, token)
        ids = np.array([[token]], np.int64)
    return tokens

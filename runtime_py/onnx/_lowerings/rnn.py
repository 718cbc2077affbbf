"""LSTM, GRU and RNN onto the runtime's lstm, gru and rnn ops (libruntime/ops/rnn/rnn.c).

The ops take ONNX's inputs as they are (x, W, R, B, sequence_lens, initial_h, initial_c, P),
direction and layout as ints, the activations as kind codes with an (alpha, beta) pair each,
clip (0 for none) and the cell's flag; they always compute every output."""
from __future__ import annotations

from typing import Any, List, Tuple

import numpy as np

from ...compiler import Value
from .._registry import lowers
from .common import check_attrs, optional

# Kind codes of libruntime/ops/rnn/rnn.h, with ONNX's default (alpha, beta) and which of the two
# each activation reads from activation_alpha / activation_beta.
_ACTIVATIONS = {
    "sigmoid": (0, (0.0, 0.0), (False, False)),
    "tanh": (1, (0.0, 0.0), (False, False)),
    "relu": (2, (0.0, 0.0), (False, False)),
    "hardsigmoid": (3, (0.2, 0.5), (True, True)),
    "leakyrelu": (4, (0.01, 0.0), (True, False)),
    "thresholdedrelu": (5, (1.0, 0.0), (True, False)),
    "scaledtanh": (6, (1.0, 1.0), (True, True)),
    "affine": (7, (1.0, 0.0), (True, True)),
    "elu": (8, (1.0, 0.0), (True, False)),
    "softsign": (9, (0.0, 0.0), (False, False)),
    "softplus": (10, (0.0, 0.0), (False, False)),
}
_DEFAULTS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}
_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
_DIRECTIONS = {"forward": 0, "reverse": 1, "bidirectional": 2}


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _activations(cv: Any, op: str, attrs: dict, dirs: int) -> Tuple[List[int], List[float]]:
    """Kind codes and (alpha, beta) pairs, one set per direction. alpha and beta values are
    consumed in order by the activations that take them (ONNX's rule, as onnxruntime)."""
    per = len(_DEFAULTS[op])
    names = [_text(a) for a in attrs.get("activations", [])] or _DEFAULTS[op] * dirs
    if len(names) != per * dirs:
        raise cv.fail(f"activations has {len(names)} names; {op} with {dirs} direction(s) "
                      f"needs {per * dirs}")
    alphas = [float(a) for a in attrs.get("activation_alpha", [])]
    betas = [float(b) for b in attrs.get("activation_beta", [])]
    kinds: List[int] = []
    params: List[float] = []
    for name in names:
        entry = _ACTIVATIONS.get(name.lower())
        if entry is None:
            raise cv.fail(f"activation '{name}' is not supported; supported: "
                          f"{', '.join(sorted(_ACTIVATIONS))} (any case)")
        kind, (alpha, beta), (takes_alpha, takes_beta) = entry
        if takes_alpha and alphas:
            alpha = alphas.pop(0)
        if takes_beta and betas:
            beta = betas.pop(0)
        kinds.append(kind)
        params += [alpha, beta]
    if alphas or betas:
        raise cv.fail(f"activation_alpha/activation_beta hold {len(alphas)}/{len(betas)} more "
                      f"values than the activations {names} take")
    return kinds, params


def _sequence_lens(cv: Any, lens: Any, seq: int, batch: int, x_dynamic: bool) -> Any:
    """None when every length is the full sequence (known at conversion), else an int32/int64
    tensor checked by the op at run."""
    if lens is None:
        return None
    if isinstance(lens, Value):
        if lens.dtype not in ("int32", "int64"):
            raise cv.fail(f"sequence_lens has dtype {lens.dtype}; expected int32")
        return lens
    arr = np.asarray(lens)
    if arr.dtype.kind not in "iu":
        raise cv.fail(f"sequence_lens has dtype {arr.dtype}; expected int32")
    if not x_dynamic and arr.shape == (batch,) and np.all(arr == seq):
        return None
    if np.any(arr < 0) or np.any(arr > seq):
        raise cv.fail(f"sequence_lens {arr.tolist()} must lie in [0, {seq}]")
    return cv.tensor(arr.astype(np.int32))


@lowers("LSTM", "GRU", "RNN")
def recurrent(cv, node, inputs, attrs):
    op = node.op_type
    allowed = ["activation_alpha", "activation_beta", "activations", "clip", "direction",
               "hidden_size", "layout", "output_sequence"]
    allowed += {"LSTM": ["input_forget"], "GRU": ["linear_before_reset"], "RNN": []}[op]
    check_attrs(cv, attrs, allowed)
    x, w, r = (cv.tensor(v) if v is not None else None for v in inputs[:3])
    if x is None or w is None or r is None:
        raise cv.fail("X, W and R are required")
    for name, v in (("X", x), ("W", w), ("R", r)):
        if v.dtype != "float32":
            raise cv.fail(f"{name} has dtype {v.dtype}; only float32 (and float16/bfloat16 "
                          f"through float32) is supported")
    direction = _text(attrs.get("direction", "forward"))
    if direction not in _DIRECTIONS:
        raise cv.fail(f"direction '{direction}' is not forward, reverse or bidirectional")
    dirs = 2 if direction == "bidirectional" else 1
    layout = int(attrs.get("layout", 0))
    if layout not in (0, 1):
        raise cv.fail(f"layout {layout} is not 0 or 1")
    if len(x.shape) != 3 or len(w.shape) != 3 or len(r.shape) != 3:
        raise cv.fail(f"X {list(x.shape)}, W {list(w.shape)} and R {list(r.shape)} must have "
                      f"rank 3")
    gates = _GATES[op]
    hidden = int(attrs.get("hidden_size", w.shape[1] // gates))
    if w.shape[1] != gates * hidden or w.shape[0] != dirs:
        raise cv.fail(f"W has shape {list(w.shape)}; expected [{dirs}, {gates} * hidden_size "
                      f"{hidden}, input_size]")
    if list(r.shape) != [dirs, gates * hidden, hidden]:
        raise cv.fail(f"R has shape {list(r.shape)}; expected {[dirs, gates * hidden, hidden]}")
    seq, batch = (x.shape[0], x.shape[1]) if layout == 0 else (x.shape[1], x.shape[0])
    clip = float(attrs.get("clip", 0.0)) if "clip" in attrs else 0.0
    if "clip" in attrs and not clip > 0:
        raise cv.fail(f"clip {clip} must be positive")
    kinds, params = _activations(cv, op, attrs, dirs)

    def opt(i):
        v = optional(inputs, i)
        return None if v is None else cv.tensor(v)

    lens = _sequence_lens(cv, optional(inputs, 4), seq, batch, x.dynamic)
    state = [dirs, batch, hidden] if layout == 0 else [batch, dirs, hidden]
    y_shape = [seq, dirs, batch, hidden] if layout == 0 else [batch, seq, dirs, hidden]
    dyn = x.dynamic
    args = [x, w, r, opt(3), lens, opt(5)]
    specs = [("float32", y_shape, dyn), ("float32", state, dyn)]
    if op == "LSTM":
        args += [opt(6), opt(7)]
        specs.append(("float32", state, dyn))
    args += [_DIRECTIONS[direction], layout, cv.m.int_list(kinds), cv.m.double_list(params),
             clip]
    if op == "LSTM":
        args.append(bool(attrs.get("input_forget", 0)))
    elif op == "GRU":
        args.append(bool(attrs.get("linear_before_reset", 0)))
    return cv.m.call(op.lower(), *args, outputs=specs)

"""Seed programs for the fuzzer: small, varied programs built with the builder, so that
mutations start from every part of the format (constants, loops, attributes, dynamic inputs,
scalar inputs, tensor lists, every op)."""
from __future__ import annotations

from typing import Any, Dict

import numpy as np

from runtime_py.compiler import ProgramBuilder, Value
from tests.programs import counted_loop


def mlp() -> bytes:
    rng = np.random.default_rng(0)
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (4, 8))
    h = m.relu(m.linear(x, m.constant(rng.standard_normal((6, 8)).astype(np.float32), name="w1"),
                        m.constant(rng.standard_normal(6).astype(np.float32), name="b1")))
    y = m.linear(h, m.constant(rng.standard_normal((3, 6)).astype(np.float32)))
    m.output(m.softmax(y, axis=-1), "probs")
    return b.to_bytes()


def cnn() -> bytes:
    rng = np.random.default_rng(1)
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("image", "float32", (1, 2, 8, 8))
    w = m.constant(rng.standard_normal((4, 2, 3, 3)).astype(np.float32))
    c = m.relu(m.conv2d(x, w, m.constant(np.zeros(4, np.float32)), stride=1, padding=1))
    p = m.max_pool2d(c, 2)
    w2 = m.constant(rng.standard_normal((4, 2, 3, 3)).astype(np.float32))
    g = m.conv2d(p, w2, None, stride=2, padding=[1, 1, 0, 0], dilation=1, groups=2)
    a = m.avg_pool2d(g, 2, stride=1, padding=1, ceil_mode=True, count_include_pad=False)
    m.output(m.reshape(a, [1, -1]), "features")
    return b.to_bytes()


def winograd() -> bytes:
    """A 3x3 convolution large enough to take the Winograd path (32 channels on 16x16)."""
    rng = np.random.default_rng(2)
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("image", "float32", (1, 32, 16, 16))
    w = m.constant((rng.standard_normal((32, 32, 3, 3)) / 16).astype(np.float32))
    m.output(m.relu(m.conv2d(x, w, m.constant(np.ones(32, np.float32)), stride=1, padding=1)))
    return b.to_bytes()


def loop() -> bytes:
    """y = x * 2**n, with a backward jump and a conditional exit; n is a tensor input."""
    return counted_loop(3, "double").to_bytes()


def attributes_and_scalars() -> bytes:
    """Two methods: a counter attribute initialised from a constant, and a scalar-driven
    branch."""
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "int32", (2, 2))
    counter = m.attribute("calls", "int64", (1,), init=np.array([5], np.int64))
    cache = m.attribute("cache", "int32", (2, 2))
    m.add(counter, m.constant(np.ones(1, np.int64)), out=counter)
    m.add(cache, x, out=cache)
    m.output(m.mul(cache, x), "y")
    m.output(counter, "calls")
    s = b.method("scale")
    v = s.input("v", "float64", (2, 2))
    flag = s.input_scalar("double_it", "bool")
    k = s.input_scalar("k", "int")
    f = s.input_scalar("f", "double")
    result = s.tensor("float64", (2, 2))
    skip = s.label()
    s.copy(v, out=result)
    s.jump_if_not(flag, skip)
    s.add(v, v, out=result)
    s.place(skip)
    s.output(result, "out")
    s.output(s.equal(v, result), "same")
    s.output(k, "k")
    s.output(f, "f")
    return b.to_bytes()


def dynamic() -> bytes:
    rng = np.random.default_rng(2)
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (None, 4), max_shape=(16, 4))
    y = m.softmax(m.relu(m.linear(x, m.constant(rng.standard_normal((5, 4)).astype(np.float32)))),
                  axis=1)
    m.output(m.transpose(y, [1, 0]), "yt")
    m.output(m.matmul(x, m.constant(rng.standard_normal((4, 2)).astype(np.float32))), "xw")
    return b.to_bytes()


def run_time_shapes() -> bytes:
    """Format 1.2 and run-time shapes, as the ONNX importer writes them for dynamic axes: an
    input naming its varying axes, sizes measured with shape, combined with integer ops and
    concat, and read by reshape and expand."""
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (None, None, 6), max_shape=(4, 8, 6), dynamic_axes=[0, 1])
    (bs,) = m.call("shape", x, 0, 2, outputs=[("int64", [2], False)])
    (b_,) = m.call("shape", x, 0, 1, outputs=[("int64", [1], False)])
    (s_,) = m.call("shape", x, 1, 2, outputs=[("int64", [1], False)])
    (n,) = m.call("mul", b_, s_, outputs=[("int64", [1], False)])
    heads = m.constant(np.array([2, 3], np.int64))
    target = m.concat([bs, heads], axis=0)
    (split,) = m.call("reshape", x, target, outputs=[("float32", [4, 8, 2, 3], True)])
    m.output(split, "split")
    (flat,) = m.call("reshape", x, m.concat([n, m.constant(np.array([6], np.int64))], axis=0),
                     outputs=[("float32", [32, 6], True)])
    m.output(flat, "flat")
    row = m.constant(np.arange(6, dtype=np.float32).reshape(1, 1, 6))
    (grown,) = m.call("expand", row, m.concat([bs, m.constant(np.array([6], np.int64))],
                                               axis=0),
                      outputs=[("float32", [4, 8, 6], True)])
    m.output(grown, "grown")
    return b.to_bytes()


def data_dependent() -> bytes:
    """Outputs whose sizes the data decides: non_zero, unique along an axis, and
    non_max_suppression with its scalars as inputs."""
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "int32", (None, 3), max_shape=(6, 3))
    (nz,) = m.call("non_zero", x, outputs=[("int64", [2, 18], True)])
    m.output(nz, "nonzero")
    outs = m.call("unique", x, 0, False, outputs=[("int32", [6, 3], True)] +
                  [("int64", [6], True)] * 3)
    for i, o in enumerate(outs):
        m.output(o, f"unique{i}")
    boxes = m.input("boxes", "float32", (1, 5, 4))
    scores = m.input("scores", "float32", (1, 2, 5))
    limit = m.input("limit", "int64", (1,))
    iou = m.input("iou", "float32", (1,))
    (kept,) = m.call("non_max_suppression", boxes, scores, limit, iou, None, 1,
                     outputs=[("int64", [10, 3], True)])
    m.output(kept, "kept")
    return b.to_bytes()


def value_sizes() -> bytes:
    """Sizes that inputs' values give (the ONNX importer's value_bounds): a reshape to a shape
    input, squeeze and unsqueeze with axes inputs, pad, one_hot and resize reading theirs.
    Each input is an offset from valid values, so that zeros run."""
    b = ProgramBuilder()
    m = b.method("forward")

    def given(name: str, dtype: str, base: Any) -> Value:
        offset = m.input(name, dtype, np.shape(base))
        return m.add(offset, m.constant(np.asarray(base, dtype)))

    x = m.input("x", "float32", (2, 1, 3))
    (r,) = m.call("reshape", x, given("shape", "int64", [3, -1]),
                  outputs=[("float32", [6, 6], True)])
    m.output(r, "reshaped")
    axes = given("axes", "int64", [1])
    (sq,) = m.call("squeeze", x, axes, outputs=[("float32", [3, 3], True)])
    (unsq,) = m.call("unsqueeze", sq, axes, outputs=[("float32", [3, 3, 3], True)])
    m.output(unsq, "unsqueezed")
    (padded,) = m.call("pad", x, given("pads", "int64", [0, 1, 0, 1, 0, 2]), 0, None,
                       outputs=[("float32", [6, 5, 7], True)])
    m.output(padded, "padded")
    indices = m.constant(np.array([0, 2, -1], np.int64))
    on_off = m.constant(np.array([0.0, 1.0], np.float32))
    (hot,) = m.call("one_hot", indices, given("depth", "int64", [4]), -1, on_off,
                    outputs=[("float32", [3, 5], True)])
    m.output(hot, "one_hot")
    (big,) = m.call("resize", x, [], given("scales", "float32", [1.0, 2.0, 2.0]), [], 0, 4, 2,
                    -0.75, False, False, 0.0, outputs=[("float32", [4, 2, 6], True)])
    m.output(big, "resized")
    return b.to_bytes()


def decoder_step() -> bytes:
    """One step of a Llama-style decoder with its KV cache in attributes (as the ONNX
    importer's kv_cache writes it): rms_norm, the rotary embedding, the new keys and values
    written at the cache's length (copy_into of a block), grouped-query attention over the
    cache with kv_lengths and a short mask, SiLU; then the length grows. The tokens are a
    dynamic input, so zeros of its bound run every step."""
    rng = np.random.default_rng(5)
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (1, None, 16), max_shape=(1, 4, 16))
    cos = m.input("cos", "float32", (1, 4, 8))
    sin = m.input("sin", "float32", (1, 4, 8))
    mask = m.input("mask", "float32", (1, 1, 4, 12))
    caches = [m.attribute(f"cache_{kv}", "float32", [1, 1, 16, 8]) for kv in "kv"]
    length = m.attribute("length", "int64", [1])
    (h,) = m.call("rms_norm", x, m.constant(rng.random(16).astype(np.float32)), -1, 1e-6,
                  outputs=[("float32", [1, 4, 16], True)])
    (q,) = m.call("reshape", h, [1, -1, 2, 8], outputs=[("float32", [1, 4, 2, 8], True)])
    (q,) = m.call("rotary", q, cos, sin, False, 1, outputs=[("float32", [1, 4, 2, 8], True)])
    (kv,) = m.call("reshape", h, [1, 1, -1, 8], outputs=[("float32", [1, 1, 8, 8], True)])
    (new,) = m.call("slice", kv, [0], [4], [2], None, outputs=[("float32", [1, 1, 4, 8], True)])
    for cache in caches:
        m.call("copy_into", new, length, 2, out=cache)
    total = m.add(length, m.constant(np.array([1], np.int64)))
    (y,) = m.call("attention", q, caches[0], caches[1], mask, total, 0.35, 2, 0.0, 1 | 8,
                  outputs=[("float32", [1, 4, 2, 8], True)])
    (act,) = m.call("silu", y, outputs=[("float32", [1, 4, 2, 8], True)])
    m.output(act, "y")
    m.add(length, m.constant(np.array([1], np.int64)), out=length)
    return b.to_bytes()


def shapes() -> bytes:
    b = ProgramBuilder()
    m = b.method("forward")
    a = m.input("a", "float64", (2, 3, 4))
    c = m.input("c", "float64", (2, 1, 4))
    cat = m.concat([a, c, a], axis=1)
    # Negative perm items are valid (docs/ops.md); the builder's helper only takes 0..r-1.
    (t,) = m.call("transpose", cat, [2, 0, -2], outputs=[("float64", (4, 2, 7), False)])
    r = m.reshape(t, [8, -1])
    m.output(r, "r")
    m.output(m.div(m.sub(a, c), m.constant(np.full((4,), 2.0))), "d")
    u = b.method("bytes")
    q = u.input("q", "uint8", (5,))
    u.output(u.concat([q, q], axis=0))
    u.output(u.copy(u.input("h", "float16", (2, 2))))
    u.output(u.max_pool2d(u.input("img", "int16", (1, 1, 4, 4)), 3, stride=1, padding=1))
    return b.to_bytes()


def bundled() -> bytes:
    """Bundled test cases (format 1.1): a dynamic tensor input given fewer rows than its bound,
    scalar inputs and outputs, two methods; the expected outputs are computed with numpy."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (None, 4), max_shape=(6, 4))
    m.output(m.relu(m.linear(x, m.constant(w))), "y")
    s = b.method("scale")
    v = s.input("v", "int32", (3,))
    k = s.input_scalar("k", "int")
    s.output(s.add(v, v), "twice")
    s.output(k, "k")
    for rows in (2, 6):
        xs = rng.standard_normal((rows, 4)).astype(np.float32)
        b.add_bundled_case("forward", [xs], [np.maximum(xs @ w.T, 0)])
    b.add_bundled_case("scale", [np.array([1, -2, 3], np.int32), 5],
                       [np.array([2, -4, 6], np.int32), 5])
    return b.to_bytes()


def seed_programs() -> Dict[str, bytes]:
    return {"mlp": mlp(), "cnn": cnn(), "winograd": winograd(), "loop": loop(),
            "attributes": attributes_and_scalars(), "dynamic": dynamic(), "shapes": shapes(),
            "bundled": bundled(), "run_time_shapes": run_time_shapes(),
            "data_dependent": data_dependent(), "value_sizes": value_sizes(),
            "decoder_step": decoder_step()}


def seed_data_files() -> Dict[str, bytes]:
    """A data file (its own mode in the harness) and the program whose external constants it
    holds (which, loaded alone as the harness does, must fail cleanly naming a key)."""
    import os
    import tempfile

    rng = np.random.default_rng(4)
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (2, 4))
    w = m.constant(rng.standard_normal((3, 4)).astype(np.float32), key="fc.weight")
    bias = m.constant(rng.standard_normal(3).astype(np.float32))
    m.output(m.linear(x, w, bias), "y")
    m.output(m.constant(np.arange(6, dtype=np.int64).reshape(1, 2, 3)), "table")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "weights.rtd")
        program = b.to_bytes(external_data=path)
        with open(path, "rb") as f:
            data = f.read()
    return {"weights.rtd": data, "external.rtp": program}


if __name__ == "__main__":
    import runtime_py as rt

    for name, data in seed_programs().items():
        with rt.Program.load(data) as p:
            for method in p.method_names:
                meta = p.method_meta(method)
                with p.load_method(method) as mm:
                    args = [np.zeros(i.shape, i.dtype) if i.kind == "tensor" else
                            (False if i.kind == "bool" else 0) for i in meta.inputs]
                    outs = mm(*args)
                    print(name, method, len(data), [getattr(o, "shape", o) for o in outs])

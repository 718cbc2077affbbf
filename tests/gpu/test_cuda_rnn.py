"""lstm, gru and rnn on CUDA against the same programs on the CPU (which tests/test_ops_rnn.py
checks against onnxruntime): directions, layouts, initial states, sequence_lens (checked at
every execute), peepholes, clip, input_forget, linear_before_reset and activations with
alpha / beta."""
from __future__ import annotations

import pytest

import runtime_py as rt
from runtime_py.compiler import ProgramBuilder

np = pytest.importorskip("numpy")
pytestmark = pytest.mark.gpu
GATES = {"lstm": 4, "gru": 3, "rnn": 1}
ACTS = {"lstm": [0, 1, 1], "gru": [0, 1], "rnn": [1]}  # ONNX's defaults


def _program(op, seq, batch, inp, hidden, *, direction=0, layout=0, bias=True, lens=False,
             h0=False, c0=False, peep=False, acts=None, params=None, clip=0.0, flag=False,
             seed=0):
    """A one-instruction program (weights as constants) and its inputs."""
    rng = np.random.default_rng(seed)
    dirs, g = (2 if direction == 2 else 1), GATES[op]
    scale = 1 / np.sqrt(inp + hidden + 1)

    def rand(*shape):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    state = (dirs, batch, hidden) if layout == 0 else (batch, dirs, hidden)
    b = ProgramBuilder()
    m = b.method("forward")
    x_shape = (seq, batch, inp) if layout == 0 else (batch, seq, inp)
    feeds = [rng.standard_normal(x_shape).astype(np.float32)]
    args = [m.input("x", "float32", x_shape), m.constant(rand(dirs, g * hidden, inp)),
            m.constant(rand(dirs, g * hidden, hidden)),
            m.constant(rand(dirs, 2 * g * hidden)) if bias else None]
    args.append(m.input("lens", "int64", (batch,)) if lens else None)
    args.append(m.input("h0", "float32", state) if h0 else None)
    if h0:
        feeds.append(rng.standard_normal(state).astype(np.float32))
    if op == "lstm":
        args.append(m.input("c0", "float32", state) if c0 else None)
        if c0:
            feeds.append(rng.standard_normal(state).astype(np.float32))
        args.append(m.constant(rand(dirs, 3 * hidden)) if peep else None)
    kinds = (acts or ACTS[op]) * (dirs if acts is None or len(acts) == len(ACTS[op]) else 1)
    pairs = params or [0.0] * (2 * len(kinds))
    args += [direction, layout, m.int_list(kinds), m.double_list(pairs), float(clip)]
    if op != "rnn":
        args.append(bool(flag))
    y_shape = (seq, dirs, batch, hidden) if layout == 0 else (batch, seq, dirs, hidden)
    outs = [("float32", y_shape, False), ("float32", state, False)]
    if op == "lstm":
        outs.append(("float32", state, False))
    for v in m.call(op, *args, outputs=outs):
        m.output(v)
    return b.to_bytes(), feeds


def _compare(program, feeds):
    with rt.Program.load(program) as p:
        with p.load_method("forward") as cpu, p.load_method("forward", device="cuda") as gpu:
            want, got = cpu(*feeds), gpu(*feeds)
            for w, g in zip(want, got):
                assert g.device == "cuda:0"
                np.testing.assert_allclose(np.asarray(g.to_host()), np.asarray(w), rtol=1e-4,
                                           atol=1e-5)


LENS = np.array([4, 0, 2], np.int64)
CASES = [
    ("lstm", dict()),
    ("lstm", dict(direction=2, lens=True, h0=True, c0=True, peep=True)),
    ("lstm", dict(direction=1, clip=0.6, flag=True, peep=True, layout=1)),
    ("lstm", dict(bias=False, acts=[3, 1, 9], params=[0.3, 0.4, 0, 0, 0, 0])),
    ("lstm", dict(direction=2, acts=[0, 4, 1, 0, 1, 6],
                  params=[0, 0, 0.1, 0, 0, 0, 0, 0, 0, 0, 0.8, 1.3])),
    ("gru", dict(h0=True)),
    ("gru", dict(direction=2, lens=True, flag=True)),
    ("gru", dict(direction=1, lens=True, clip=0.5, layout=1, h0=True)),
    ("gru", dict(acts=[0, 2], flag=True, bias=False)),
    ("rnn", dict(h0=True)),
    ("rnn", dict(direction=2, lens=True, h0=True, acts=[2, 9])),
    ("rnn", dict(acts=[7], params=[0.5, 0.1], layout=1)),
    ("rnn", dict(direction=1, acts=[8], params=[0.7, 0.0], clip=1.5)),
    ("rnn", dict(acts=[10], params=[0.0, 0.0])),
]


@pytest.mark.parametrize("op,kw", CASES, ids=[f"{op}-{i}" for i, (op, _) in enumerate(CASES)])
def test_matches_the_cpu(op, kw):
    program, feeds = _program(op, 4, 3, 5, 6, seed=len(str(kw)), **kw)
    if kw.get("lens"):
        feeds.insert(1, LENS if kw.get("direction") != 1 else np.array([2, 3, 4], np.int64))
    _compare(program, feeds)


@pytest.mark.parametrize("op", ["lstm", "gru", "rnn"])
def test_larger_sizes(op):
    program, feeds = _program(op, 7, 9, 20, 70, direction=2, h0=True, seed=3)
    _compare(program, feeds)


def test_a_length_out_of_range_fails_the_execute_by_name():
    program, feeds = _program("gru", 4, 3, 5, 6, lens=True)
    with rt.Program.load(program) as p, p.load_method("forward", device="cuda") as gpu:
        with pytest.raises(rt.InvalidArgument, match=r"sequence_lens\[1\] is 5"):
            gpu(feeds[0], np.array([1, 5, 2], np.int64))
        (y, _) = gpu(feeds[0], LENS)  # still usable
        assert np.all(np.asarray(y.to_host())[:, :, 1] == 0)

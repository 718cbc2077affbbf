"""The attention op against a numpy reference written from its definition (float64, the whole
score matrix at once): grouped-query heads, the four layout bits, float / bool / broadcast /
short masks, kv_lengths, both causal alignments, softcap, rows that see no key, sequences longer
than one key block and more queries than one tile, float32 and float64, one and three threads;
then the errors."""
from __future__ import annotations

import numpy as np
import pytest

import runtime_py as rt
from runtime_py.compiler import ProgramBuilder

Q_SEQ, K_SEQ, V_SEQ, OUT_SEQ = 1, 2, 4, 8


def reference(q, k, v, mask=None, kv_lengths=None, scale=None, causal=0, softcap=0.0):
    """q [B, Hq, Sq, D], k [B, Hkv, Skv, D], v [B, Hkv, Skv, Dv] (all [B, H, S, D])."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    b, hq, sq, d = q.shape
    hkv, skv = k.shape[1], k.shape[2]
    scale = 1 / np.sqrt(d) if scale is None else scale
    k = np.repeat(k, hq // hkv, axis=1)
    v = np.repeat(v, hq // hkv, axis=1)
    s = q @ k.transpose(0, 1, 3, 2) * scale
    if softcap:
        s = softcap * np.tanh(s / softcap)
    allowed = np.ones((b, hq, sq, skv), bool)
    if mask is not None:
        pad = skv - mask.shape[-1]
        if mask.dtype == np.bool_:
            m = np.pad(mask, [(0, 0)] * (mask.ndim - 1) + [(0, pad)], constant_values=False)
            allowed &= np.broadcast_to(m, allowed.shape)
        else:
            m = np.pad(mask.astype(np.float64), [(0, 0)] * (mask.ndim - 1) + [(0, pad)],
                       constant_values=-np.inf)
            s = s + m
    lengths = np.full(b, skv) if kv_lengths is None else np.broadcast_to(kv_lengths, (b,))
    j = np.arange(skv)
    for bi in range(b):
        allowed[bi, :, :, lengths[bi]:] = False
        if causal:
            offset = 0 if causal == 1 else lengths[bi] - sq
            allowed[bi] &= j[None, :] <= np.arange(sq)[:, None] + offset
    s = np.where(allowed, s, -np.inf)
    top = s.max(-1, keepdims=True)
    empty = np.isneginf(top)
    p = np.exp(s - np.where(empty, 0, top))
    p = p / np.where(empty, 1, p.sum(-1, keepdims=True))
    return p @ v


def to_layout(a, seq_major):
    return np.ascontiguousarray(a.transpose(0, 2, 1, 3)) if seq_major else a


def run_attention(q, k, v, mask=None, kv_lengths=None, scale=None, causal=0, softcap=0.0,
                  layout=0, threads=1):
    d = q.shape[-1]
    scale = 1 / np.sqrt(d) if scale is None else scale
    args = [to_layout(q, layout & Q_SEQ), to_layout(k, layout & K_SEQ),
            to_layout(v, layout & V_SEQ)]
    out_shape = (q.shape[0], q.shape[2], q.shape[1], v.shape[3]) if layout & OUT_SEQ else \
        (q.shape[0], q.shape[1], q.shape[2], v.shape[3])
    extra = [a for a in (mask, kv_lengths) if a is not None]
    b = ProgramBuilder()
    m = b.method("forward")
    ins = [m.input(f"x{i}", str(a.dtype), a.shape) for i, a in enumerate(args + extra)]
    mask_v = ins[3] if mask is not None else None
    len_v = ins[-1] if kv_lengths is not None else None
    (y,) = m.call("attention", *ins[:3], mask_v, len_v, float(scale), causal, float(softcap),
                  layout, outputs=[(str(q.dtype), out_shape, False)])
    m.output(y, "y")
    with rt.Program.load(b.to_bytes()) as p, p.load_method("forward", num_threads=threads) as f:
        out = np.array(f(*(args + extra))[0])
    return out.transpose(0, 2, 1, 3) if layout & OUT_SEQ else out


def rand(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def qkv(b, hq, hkv, sq, skv, d, dv=None, dtype=np.float32):
    return (rand((b, hq, sq, d), dtype, 1), rand((b, hkv, skv, d), dtype, 2),
            rand((b, hkv, skv, dv or d), dtype, 3))


def close(got, want, dtype=np.float32):
    tol = 2e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dims", [
    (1, 1, 1, 1, 1, 1),        # one of everything
    (2, 4, 4, 5, 5, 8),        # multi-head, self-attention
    (2, 8, 2, 7, 9, 16),       # grouped-query: 4 q heads per kv head
    (1, 6, 1, 3, 300, 32),     # multi-query, keys over several blocks
    (1, 2, 2, 150, 150, 8),    # queries over several tiles
    (3, 4, 4, 1, 17, 64),      # one query (a decode step)
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_plain(dims, dtype):
    b, hq, hkv, sq, skv, d = dims
    q, k, v = qkv(b, hq, hkv, sq, skv, d, dtype=dtype)
    close(run_attention(q, k, v, threads=3), reference(q, k, v), dtype)


@pytest.mark.parametrize("layout", [0, Q_SEQ, K_SEQ | V_SEQ, OUT_SEQ, 15])
def test_layouts(layout):
    q, k, v = qkv(2, 4, 2, 6, 11, 8, dv=12)
    close(run_attention(q, k, v, layout=layout, threads=2), reference(q, k, v))


@pytest.mark.parametrize("causal", [1, 2])
@pytest.mark.parametrize("sq,skv", [(5, 5), (3, 8), (8, 3), (140, 260)])
def test_causal(causal, sq, skv):
    q, k, v = qkv(2, 4, 2, sq, skv, 16)
    got = run_attention(q, k, v, causal=causal, threads=2)
    want = reference(q, k, v, causal=causal)
    close(got, want)
    if causal == 2 and sq > skv:  # the first queries see no key: zeros
        assert not np.any(got[:, :, :sq - skv])


@pytest.mark.parametrize("mask_shape", [(2, 1, 6, 9), (6, 9), (9,), (2, 4, 1, 9), (1, 1, 6, 4),
                                        (2, 1, 1, 1)])
@pytest.mark.parametrize("kind", ["float", "bool"])
def test_masks(mask_shape, kind):
    q, k, v = qkv(2, 4, 2, 6, 9, 8)
    rng = np.random.default_rng(5)
    if kind == "bool":
        mask = rng.random(mask_shape) < 0.7
    else:
        mask = np.where(rng.random(mask_shape) < 0.3, -np.inf,
                        rng.standard_normal(mask_shape)).astype(np.float32)
    close(run_attention(q, k, v, mask=mask), reference(q, k, v, mask=mask))


def test_fully_masked_rows_give_zeros():
    q, k, v = qkv(1, 2, 2, 3, 4, 8)
    mask = np.ones((3, 4), bool)
    mask[1] = False
    got = run_attention(q, k, v, mask=mask)
    assert not np.any(got[:, :, 1])
    close(got, reference(q, k, v, mask=mask))


@pytest.mark.parametrize("lengths", [[9], [3, 9], [0, 5]])
@pytest.mark.parametrize("causal", [0, 2])
def test_kv_lengths(lengths, causal):
    q, k, v = qkv(2, 4, 4, 2, 9, 8)
    kv_lengths = np.array(lengths, np.int64 if len(lengths) > 1 else np.int32)
    close(run_attention(q, k, v, kv_lengths=kv_lengths, causal=causal),
          reference(q, k, v, kv_lengths=kv_lengths, causal=causal))


def test_scale_and_softcap():
    q, k, v = qkv(1, 2, 1, 4, 6, 8)
    close(run_attention(q * 4, k, v, scale=0.7, softcap=5.0),
          reference(q * 4, k, v, scale=0.7, softcap=5.0))


def test_zero_sizes():
    q, k, v = qkv(1, 2, 2, 3, 0, 4)
    assert not np.any(run_attention(q, k, v))  # no key at all: every row gives zeros
    q, k, v = qkv(0, 2, 2, 3, 4, 4)
    assert run_attention(q, k, v).shape == (0, 2, 3, 4)


def build(q_shape, k_shape, v_shape, out_shape, mask_shape=None, lengths_shape=None,
          params=(0.5, 0, 0.0, 0), dtypes=("float32",) * 3):
    b = ProgramBuilder()
    m = b.method("forward")
    ins = [m.input(f"x{i}", dt, s) for i, (dt, s) in enumerate(zip(dtypes, (q_shape, k_shape,
                                                                           v_shape)))]
    mask = m.input("mask", "float32", mask_shape) if mask_shape else None
    lengths = m.input("lengths", "int64", lengths_shape) if lengths_shape else None
    (y,) = m.call("attention", *ins, mask, lengths, *params,
                  outputs=[("float32", out_shape, False)])
    m.output(y, "y")
    return b.to_bytes()


@pytest.mark.parametrize("kwargs,text", [
    (dict(q_shape=(1, 3, 4, 8), k_shape=(1, 2, 4, 8), v_shape=(1, 2, 4, 8),
          out_shape=(1, 3, 4, 8)), r"q has 3 heads, not a multiple of k's 2"),
    (dict(q_shape=(1, 2, 4, 8), k_shape=(1, 2, 4, 6), v_shape=(1, 2, 4, 8),
          out_shape=(1, 2, 4, 8)), r"k's head size is 6 but q's is 8"),
    (dict(q_shape=(1, 2, 4, 8), k_shape=(1, 2, 4, 8), v_shape=(1, 2, 5, 8),
          out_shape=(1, 2, 4, 8)), r"v's sequence length is 5 but k's is 4"),
    (dict(q_shape=(1, 2, 4, 8), k_shape=(1, 2, 4, 8), v_shape=(1, 2, 4, 8),
          out_shape=(1, 2, 4, 8), mask_shape=(3, 4, 4)), r"mask's head size is 3"),
    (dict(q_shape=(1, 2, 4, 8), k_shape=(1, 2, 4, 8), v_shape=(1, 2, 4, 8),
          out_shape=(1, 2, 4, 8), mask_shape=(4, 5)), r"mask's key size is 5"),
    (dict(q_shape=(2, 2, 4, 8), k_shape=(2, 2, 4, 8), v_shape=(2, 2, 4, 8),
          out_shape=(2, 2, 4, 8), lengths_shape=(3,)), r"kv_lengths has 3 elements"),
    (dict(q_shape=(1, 2, 4, 8), k_shape=(1, 2, 4, 8), v_shape=(1, 2, 4, 8),
          out_shape=(1, 2, 4, 8), params=(0.5, 3, 0.0, 0)), r"causal must be 0"),
    (dict(q_shape=(1, 2, 4, 8), k_shape=(1, 2, 4, 8), v_shape=(1, 2, 4, 8),
          out_shape=(1, 2, 4, 8), params=(0.5, 0, -1.0, 0)), r"softcap must be finite"),
    (dict(q_shape=(1, 2, 4, 8), k_shape=(1, 2, 4, 8), v_shape=(1, 2, 4, 8),
          out_shape=(1, 2, 4, 8), params=(0.5, 0, 0.0, 16)), r"layout must be in \[0, 15\]"),
    (dict(q_shape=(1, 2, 4, 8), k_shape=(1, 2, 4, 8), v_shape=(1, 2, 4, 8),
          out_shape=(1, 2, 4, 8), dtypes=("float32", "float64", "float32")),
     r"k .*float64"),
])
def test_load_errors(kwargs, text):
    with pytest.raises((rt.InvalidProgram, rt.Unsupported), match=r"attention\): " + text):
        rt.Program.load(build(**kwargs)).load_method("forward")


def test_kv_lengths_out_of_range_fails_the_call_and_keeps_the_method():
    q, k, v = qkv(1, 2, 2, 1, 4, 8)
    program = build(q.shape, k.shape, v.shape, (1, 2, 1, 8), lengths_shape=(1,))
    with rt.Program.load(program) as p, p.load_method("forward") as f:
        with pytest.raises(rt.InvalidArgument, match=r"kv_lengths\[0\] is 5; it must be in "
                                                      r"\[0, 4\]"):
            f(q, k, v, np.array([5]))
        got = np.array(f(q, k, v, np.array([3]))[0])
    close(got, reference(q, k, v, kv_lengths=np.array([3]), scale=0.5))


_VARIANT_SCRIPT = """
import sys
import numpy as np
sys.path.insert(0, {root!r})
from tests.test_ops_attention import VARIANT_CASES, qkv, reference, run_attention
worst = 0.0
for dims, kw in VARIANT_CASES:
    q, k, v = qkv(*dims)
    got = run_attention(q, k, v, threads=2, **kw)
    want = reference(q, k, v, **{{n: a for n, a in kw.items() if n != "layout"}})
    worst = max(worst, float(np.abs(got - want).max()))
print(worst)
"""

# Small heads (the register-blocked products, odd widths for the lane tails) and large ones
# (the GEMM), causal and masked.
VARIANT_CASES = [((2, 4, 2, 5, 7, 8), dict(causal=2)), ((1, 2, 1, 3, 150, 13), {}),
                 ((1, 4, 4, 70, 70, 64), dict(causal=1)), ((2, 2, 2, 9, 9, 20), dict(layout=15))]


def test_every_instruction_set_variant_matches_the_reference():
    """The float32 kernel is compiled for AVX-512, AVX2 and the baseline; each one this CPU
    runs is forced in a child process (RT_ATTENTION_KERNEL) and checked against numpy."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from tests.test_vmath import _cpu_flags
    flags = _cpu_flags()
    variants = ["portable"] + [v for v, need in (("avx2", {"avx2", "fma"}),
                                                 ("avx512", {"avx512f", "avx512dq", "avx512vl",
                                                             "avx512bw"})) if need <= flags]
    root = str(Path(__file__).resolve().parents[1])
    for variant in variants:
        env = dict(os.environ, RT_ATTENTION_KERNEL=variant)
        env.pop("RT_PORTABLE_KERNELS", None)
        done = subprocess.run([sys.executable, "-c", _VARIANT_SCRIPT.format(root=root)], env=env,
                              check=True, cwd=root, capture_output=True, text=True)
        assert float(done.stdout.strip()) < 2e-5, (variant, done.stdout)


# ---- rotary ---------------------------------------------------------------------------------

def rotary_reference(x, cos, sin, interleaved):
    """x [B, H, S, D]; cos, sin [Bc, S, R] holding each angle twice: x * cos + rotate(x) * sin
    on the first R elements (Llama's formula, rotate_half = cat(-x2, x1)), the rest kept."""
    r = cos.shape[-1]
    xr = x[..., :r].astype(np.float64)
    if interleaved:
        rot = np.empty_like(xr)
        rot[..., 0::2], rot[..., 1::2] = -xr[..., 1::2], xr[..., 0::2]
    else:
        rot = np.concatenate([-xr[..., r // 2:], xr[..., :r // 2]], axis=-1)
    c, s = cos[:, None].astype(np.float64), sin[:, None].astype(np.float64)
    return np.concatenate([xr * c + rot * s, x[..., r:]], axis=-1).astype(x.dtype)


def run_rotary(x, cos, sin, interleaved=False, layout=0, in_place=False, threads=1):
    arg = np.ascontiguousarray(x.transpose(0, 2, 1, 3)) if layout else x
    b = ProgramBuilder()
    m = b.method("forward")
    xv, cv, sv = (m.input(n, str(a.dtype), a.shape) for n, a in (("x", arg), ("c", cos),
                                                                   ("s", sin)))
    if in_place:
        y = m.copy(xv)
        m.call("rotary", y, cv, sv, interleaved, layout, out=y)
    else:
        (y,) = m.call("rotary", xv, cv, sv, interleaved, layout,
                      outputs=[(str(x.dtype), arg.shape, False)])
    m.output(y, "y")
    with rt.Program.load(b.to_bytes()) as p, p.load_method("forward", num_threads=threads) as f:
        out = np.array(f(arg, cos, sin)[0])
    return out.transpose(0, 2, 1, 3) if layout else out


def tables(batch, seq, rotated, dtype=np.float32, interleaved=False):
    angles = np.random.default_rng(4).uniform(0, 6, (batch, seq, rotated // 2))
    twice = np.repeat(angles, 2, axis=-1) if interleaved else np.concatenate([angles] * 2, -1)
    return np.cos(twice).astype(dtype), np.sin(twice).astype(dtype)


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("rotated,table_batch,layout,in_place", [
    (16, 2, 0, False), (8, 1, 1, False), (16, 1, 0, True), (4, 2, 1, True), (0, 1, 0, False)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rotary(interleaved, rotated, table_batch, layout, in_place, dtype):
    x = rand((2, 3, 5, 16), dtype, 7)
    cos, sin = tables(table_batch, 5, rotated, dtype, interleaved)
    got = run_rotary(x, cos, sin, interleaved, layout, in_place, threads=2)
    np.testing.assert_allclose(got, rotary_reference(x, cos, sin, interleaved),
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("cos_shape,text", [
    ((1, 5, 7), r"cos's last size \(the rotated part\) is 7"),
    ((1, 5, 20), r"cos's last size \(the rotated part\) is 20"),
    ((3, 5, 8), r"cos is \[3, 5, 8\]; it must be \[1 or 2, 5, 8\]"),
    ((1, 4, 8), r"cos is \[1, 4, 8\]"),
])
def test_rotary_errors(cos_shape, text):
    b = ProgramBuilder()
    m = b.method("forward")
    xv = m.input("x", "float32", (2, 3, 5, 16))
    cv, sv = m.input("c", "float32", cos_shape), m.input("s", "float32", cos_shape)
    (y,) = m.call("rotary", xv, cv, sv, False, 0, outputs=[("float32", (2, 3, 5, 16), False)])
    m.output(y, "y")
    with pytest.raises(rt.InvalidProgram, match=r"rotary\): " + text):
        rt.Program.load(b.to_bytes()).load_method("forward")

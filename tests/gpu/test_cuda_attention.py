"""The attention op on CUDA against the numpy reference of tests/test_ops_attention.py: grouped
heads, layouts, masks, kv_lengths (and its error), causal alignments, softcap, keys over several
chunks, float32 and float64."""
from __future__ import annotations

import pytest

import runtime_py as rt
from runtime_py.compiler import ProgramBuilder

np = pytest.importorskip("numpy")
from tests.test_ops_attention import OUT_SEQ, Q_SEQ, K_SEQ, V_SEQ, qkv, reference  # noqa: E402

pytestmark = pytest.mark.gpu


def program(q, k, v, mask, lengths, scale, causal, softcap, layout) -> bytes:
    def arrange(a, bit):
        return a.transpose(0, 2, 1, 3) if layout & bit else a
    shapes = [arrange(a, bit).shape for a, bit in ((q, Q_SEQ), (k, K_SEQ), (v, V_SEQ))]
    b = ProgramBuilder()
    m = b.method("forward")
    ins = [m.input(f"x{i}", str(q.dtype), s) for i, s in enumerate(shapes)]
    mask_v = m.input("mask", str(mask.dtype), mask.shape) if mask is not None else None
    len_v = m.input("lengths", str(lengths.dtype), lengths.shape) if lengths is not None else None
    out = arrange(np.zeros(q.shape[:3] + v.shape[3:]), OUT_SEQ).shape
    (y,) = m.call("attention", *ins, mask_v, len_v, float(scale), causal, float(softcap),
                  layout, outputs=[(str(q.dtype), out, False)])
    m.output(y, "y")
    return b.to_bytes()


def run_cuda(q, k, v, mask=None, lengths=None, scale=0.3, causal=0, softcap=0.0, layout=0):
    args = [np.ascontiguousarray(a.transpose(0, 2, 1, 3)) if layout & bit else a
            for a, bit in ((q, Q_SEQ), (k, K_SEQ), (v, V_SEQ))]
    args += [a for a in (mask, lengths) if a is not None]
    data = program(q, k, v, mask, lengths, scale, causal, softcap, layout)
    with rt.Program.load(data) as p, p.load_method("forward", device="cuda") as f:
        out = np.asarray(f(*args)[0].to_host())
    return out.transpose(0, 2, 1, 3) if layout & OUT_SEQ else out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", [
    dict(dims=(2, 8, 2, 5, 7, 8)),
    dict(dims=(1, 2, 1, 3, 300, 16), causal=2),
    dict(dims=(2, 4, 4, 6, 6, 8), causal=1, layout=15),
    dict(dims=(2, 4, 2, 3, 9, 8), lengths=[4, 9], causal=2, softcap=2.0),
    dict(dims=(2, 4, 2, 3, 9, 8), mask="bool"),
    dict(dims=(2, 4, 2, 3, 9, 8), mask="float", layout=Q_SEQ | OUT_SEQ),
], ids=str)
def test_attention_matches_reference(case, dtype):
    b, hq, hkv, sq, skv, d = case["dims"]
    q, k, v = qkv(b, hq, hkv, sq, skv, d, dtype=dtype)
    rng = np.random.default_rng(3)
    mask = None
    if case.get("mask") == "bool":
        mask = rng.random((b, 1, sq, skv)) < 0.7
        mask[0, 0, 1] = False  # a row that sees nothing
    elif case.get("mask") == "float":
        mask = rng.standard_normal((sq, skv)).astype(dtype)
    lengths = np.array(case["lengths"], np.int32) if "lengths" in case else None
    kw = dict(scale=0.3, causal=case.get("causal", 0), softcap=case.get("softcap", 0.0))
    got = run_cuda(q, k, v, mask, lengths, layout=case.get("layout", 0), **kw)
    want = reference(q, k, v, mask=mask, kv_lengths=lengths, **kw)
    tol = 2e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_kv_lengths_out_of_range_fails_by_name():
    q, k, v = qkv(1, 2, 2, 1, 4, 8)
    lengths = np.array([7], np.int64)
    data = program(q, k, v, None, lengths, 0.5, 0, 0.0, 0)
    with rt.Program.load(data) as p, p.load_method("forward", device="cuda") as f:
        with pytest.raises(rt.InvalidArgument, match=r"attention\): kv_lengths\[0\] is 7"):
            f(q, k, v, lengths)
        out = np.asarray(f(q, k, v, np.array([2]))[0].to_host())
    np.testing.assert_allclose(out, reference(q, k, v, kv_lengths=np.array([2]), scale=0.5),
                               rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("rotated,layout,in_place,dtype", [
    (16, 0, False, "float32"), (8, 1, True, "float32"), (4, 0, True, "float64")])
def test_rotary_matches_reference(interleaved, rotated, layout, in_place, dtype):
    from tests.test_ops_attention import rand, rotary_reference, tables
    x = rand((2, 3, 5, 16), np.dtype(dtype).type, 7)
    cos, sin = tables(2, 5, rotated, np.dtype(dtype).type, interleaved)
    arg = np.ascontiguousarray(x.transpose(0, 2, 1, 3)) if layout else x
    b = ProgramBuilder()
    m = b.method("forward")
    xv, cv, sv = (m.input(n, dtype, a.shape) for n, a in (("x", arg), ("c", cos), ("s", sin)))
    if in_place:
        y = m.copy(xv)
        m.call("rotary", y, cv, sv, interleaved, layout, out=y)
    else:
        (y,) = m.call("rotary", xv, cv, sv, interleaved, layout,
                      outputs=[(dtype, arg.shape, False)])
    m.output(y, "y")
    with rt.Program.load(b.to_bytes()) as p, p.load_method("forward", device="cuda") as f:
        out = np.asarray(f(arg, cos, sin)[0].to_host())
    out = out.transpose(0, 2, 1, 3) if layout else out
    np.testing.assert_allclose(out, rotary_reference(x, cos, sin, interleaved), rtol=1e-6,
                               atol=1e-6)

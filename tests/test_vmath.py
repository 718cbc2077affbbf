"""float32 transcendentals (libruntime/ops/elementwise/kernels/vmath.c) over the whole float
range: within a few ulp of numpy's float64 result rounded to float32, NaN and infinities and
signed zeros as the float64 formula gives them, and every instruction-set variant the CPU has
bit-identical to the portable one (NaN's sign bit aside)."""
import math
import os
import subprocess
import sys

import pytest

np = pytest.importorskip("numpy")

import runtime_py as rt  # noqa: E402
from runtime_py.compiler import ProgramBuilder  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sample():
    """Random bit patterns (every exponent), dense grids where the formulas switch, the
    extremes and the special values."""
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 2 ** 32, 1 << 19, dtype=np.uint64).astype(np.uint32).view(np.float32)
    grids = [np.linspace(-20, 20, 200001), np.linspace(-200, 100, 100001),
             np.linspace(-1.5, 1.5, 100001), np.geomspace(1e-45, 3e38, 20001)]
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754944e-38, -1.1754944e-38,
               3.4028235e38, -3.4028235e38, 88.72283, 88.72284, -87.33655, -103.97208, 0.625,
               -0.625, 1.0, -1.0, 0.5, -0.5]
    grids = [g.astype(np.float32) for g in grids] + [-grids[-1].astype(np.float32)]
    return np.concatenate([np.array(special, np.float32), bits[~np.isnan(bits)], *grids])


def _sigmoid(d):
    e = np.exp(-np.abs(d))
    return np.where(d >= 0, 1 / (1 + e), e / (1 + e))


_erf = np.vectorize(math.erf, otypes=[float])
_erfc = np.vectorize(math.erfc, otypes=[float])
_TANH_GELU = 2 * math.sqrt(2 / math.pi)

# op -> (builder arguments after x, float64 reference, largest error allowed in ulp)
FUNCTIONS = {
    "exp": ((), np.exp, 1.5),
    "log": ((), np.log, 1.5),
    "tanh": ((), np.tanh, 2),
    "erf": ((), _erf, 3),
    "sigmoid": ((), _sigmoid, 3),
    "softplus": ((), lambda d: np.maximum(d, 0) + np.log1p(np.exp(-np.abs(d))), 2.5),
    # in float for speed (the activation of every BERT-style FFN): 5.5 ulp at worst, where
    # t = 1 / (1 + |z| / 2) is rounded (x from -10 to -0.7), 1.5 for x >= 0
    "gelu": ((False,), lambda d: 0.5 * d * _erfc(-d / math.sqrt(2)), 5.5),
    # x (1 + tanh(u)) / 2 = x sigmoid(2u): the stable float64 form
    "gelu_tanh": ((True,), lambda d: d * _sigmoid(_TANH_GELU * (d + 0.044715 * d ** 3)), 3),
}


def compute(name, x):
    args, _, _ = FUNCTIONS[name]
    b = ProgramBuilder()
    m = b.method("forward")
    xv = m.input("x", "float32", x.shape)
    (y,) = m.call("gelu" if name.startswith("gelu") else name, xv, *args,
                  outputs=[("float32", x.shape, False)])
    m.output(y, "y")
    with rt.Program.load(b.to_bytes()) as program, program.load_method("forward") as method:
        return np.array(method(x)[0])


def ulp_errors(got, want):
    """|got - want| in ulp of want rounded to float32; where that rounding is not finite, got
    must equal it (0 error) or the error is infinite."""
    with np.errstate(all="ignore"):
        rounded = want.astype(np.float32)
        finite = np.isfinite(rounded)
        ulp = np.spacing(np.abs(np.where(finite, rounded, 0))).astype(np.float64)
        err = np.abs(got.astype(np.float64) - want) / ulp
        same = (got == rounded) | (np.isnan(got) & np.isnan(rounded))
        return np.where(finite & np.isfinite(got), err, np.where(same, 0.0, np.inf))


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_within_a_few_ulp_of_float64_over_the_float_range(name):
    x = sample()
    _, reference, bound = FUNCTIONS[name]
    with np.errstate(all="ignore"):
        want = reference(x.astype(np.float64))
    got = compute(name, x)
    err = ulp_errors(got, want)
    worst = int(np.argmax(err))
    assert err[worst] <= bound, (name, x[worst], got[worst], want[worst])
    # exact zeros keep their sign where the reference has one
    zero = (want == 0) & (got == 0)
    assert (np.signbit(got[zero]) == np.signbit(want[zero].astype(np.float32))).all()


_VARIANT_SCRIPT = """
import sys
import numpy as np
sys.path.insert(0, {root!r})
from tests.test_vmath import FUNCTIONS, compute, sample
x = sample()
np.savez({out!r}, **{{name: compute(name, x) for name in FUNCTIONS}})
"""


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def test_every_variant_matches_the_portable_one_bit_for_bit(tmp_path):
    flags = _cpu_flags()
    variants = ["portable"] + [v for v, need in (("avx2", {"avx2"}),
                                                 ("avx512", {"avx512f", "avx512dq", "avx512vl",
                                                             "avx512bw"}))
                               if need <= flags]
    if len(variants) == 1:
        pytest.skip("this CPU has no vector variant to compare")
    results = {}
    for variant in variants:
        out = str(tmp_path / f"{variant}.npz")
        env = dict(os.environ, RT_VMATH_KERNEL=variant)
        env.pop("RT_PORTABLE_KERNELS", None)
        subprocess.run([sys.executable, "-c", _VARIANT_SCRIPT.format(root=ROOT, out=out)],
                       env=env, check=True, cwd=ROOT)
        with np.load(out) as saved:
            results[variant] = {name: saved[name] for name in saved.files}
    for variant in variants[1:]:
        for name, portable in results["portable"].items():
            got = results[variant][name]
            both_nan = np.isnan(got) & np.isnan(portable)  # a NaN's sign bit means nothing
            same = (got.view(np.uint32) == portable.view(np.uint32)) | both_nan
            assert same.all(), (variant, name, got[~same][:4], portable[~same][:4])


def test_odd_lengths_and_in_place_use():
    """Lengths around the 16-lane vectors (the tail goes through a padded copy) and out = x."""
    rng = np.random.default_rng(1)
    for n in (1, 15, 16, 17, 33, 1000):
        x = (rng.standard_normal(n) * 3).astype(np.float32)
        b = ProgramBuilder()
        m = b.method("forward")
        xv = m.input("x", "float32", (n,))
        t = m.call("tanh", xv, outputs=[("float32", (n,), False)])[0]
        m.call("exp", t, out=t)
        m.output(t, "y")
        with rt.Program.load(b.to_bytes()) as program, program.load_method("forward") as method:
            got = np.array(method(x)[0])
        err = ulp_errors(got, np.exp(np.tanh(x.astype(np.float32)).astype(np.float64)))
        assert err.max() <= 2, n

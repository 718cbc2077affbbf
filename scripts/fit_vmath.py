"""The polynomial coefficients of libruntime/ops/elementwise/kernels/vmath_impl.h: least-squares
fits in float64 at Chebyshev nodes (close to minimax), with the largest relative error of each
fit over its interval. Needs numpy only.

    python scripts/fit_vmath.py

- tanh, |x| < 0.625:    tanh(x) = x + x^3 P(x^2), P of degree 4
- erf, |z| < 1:         erf(z) = z Q(z^2), Q of degree 6
- erfc, z in [0.45, 10.1]: erfc(z) = t exp(-z^2 + R(t)), t = 1 / (1 + z / 2), R of degree 9
  (below 0.45 the kernels use erf; beyond 10.1 erfc is 0 in float32)

exp and log need no fit: exp's remainder uses its Taylor series to degree 7 and log the
series of 2 atanh(s), both below 2^-27 relative on their reduced ranges.
"""
import math

import numpy as np


def chebyshev_nodes(lo, hi, n=8000):
    k = np.arange(n)
    return (lo + hi) / 2 + (hi - lo) / 2 * np.cos((2 * k + 1) * np.pi / (2 * n))


def fit(t, y, degree):
    """Coefficients c[0..degree] of sum c[k] t^k closest to y in least squares."""
    basis = np.vstack([t ** k for k in range(degree + 1)]).T
    return np.linalg.lstsq(basis, y, rcond=None)[0]


def show(name, coefficients, relative_error):
    print(f"{name}: max relative error {relative_error:.2e}")
    print("  lowest degree first: " + ", ".join(repr(float(c)) for c in coefficients))


def main():
    erf, erfc = np.vectorize(math.erf), np.vectorize(math.erfc)

    x = chebyshev_nodes(1e-4, 0.625, 4000)
    p = fit(x * x, (np.tanh(x) - x) / x ** 3, 4)
    show("tanh P", p, np.max(np.abs((x + x ** 3 * np.polyval(p[::-1], x * x)) / np.tanh(x) - 1)))

    z = chebyshev_nodes(1e-4, 1.0, 4000)
    q = fit(z * z, erf(z) / z, 6)
    show("erf Q", q, np.max(np.abs(z * np.polyval(q[::-1], z * z) / erf(z) - 1)))

    z = chebyshev_nodes(0.45, 10.1)
    t = 1 / (1 + z / 2)
    r = fit(t, np.log(erfc(z) / t) + z * z, 9)
    show("erfc R", r, np.max(np.abs(t * np.exp(-z * z + np.polyval(r[::-1], t)) / erfc(z) - 1)))


if __name__ == "__main__":
    main()

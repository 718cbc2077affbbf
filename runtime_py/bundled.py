"""Bundled test cases: inputs and expected outputs stored in a program (docs/format.md, BUNDLE).

    for case in program.bundled_tests("forward"):
        print(case.index, [t.shape for t in case.inputs])
    with program.load_method("forward") as forward:
        result = forward.verify_bundled(0, rtol=1e-5, atol=1e-8)   # raises VerificationError

An element matches when |got - expected| <= atol + rtol * |expected| (numpy.allclose's rule);
NaN matches NaN, an infinity only the same infinity, and integer and bool elements must be
equal. The comparison is plain Python: numpy is not needed.
"""
from __future__ import annotations

import math
from typing import Any, List, NamedTuple, Optional, Sequence, Tuple

from ._ffi import ffi, get_lib
from .errors import VerificationError, _check
from .tensor import Tensor

__all__ = ["BundledTest", "BundledResult", "VerificationError"]

_TENSOR, _INT, _DOUBLE, _BOOL = 7, 1, 2, 3


class BundledTest(NamedTuple):
    """One bundled case of a method: its inputs and the expected outputs (owned Tensors for
    tensors, Python numbers for scalars)."""

    method: str
    index: int
    inputs: Tuple[Any, ...]
    expected_outputs: Tuple[Any, ...]


class BundledResult(NamedTuple):
    """A case that passed: the outputs the method produced and, per output, the largest
    absolute and relative (to |expected|) differences found."""

    method: str
    index: int
    outputs: Tuple[Any, ...]
    max_abs_error: Tuple[float, ...]
    max_rel_error: Tuple[float, ...]


def case_count(program_ptr: Any, method: str) -> int:
    out = ffi.new("size_t *")
    _check(get_lib().rt_program_bundled_case_count(out, program_ptr, method.encode("utf-8")))
    return int(out[0])


def _value(value: Any) -> Any:
    kind = int(value.kind)
    if kind == _TENSOR:
        return Tensor._from_rt(ffi.addressof(value, "tensor"), None, True, False)
    if kind == _DOUBLE:
        return float(value.scalar.d)
    if kind == _BOOL:
        return bool(value.scalar.i)
    return int(value.scalar.i)


def read_case(program_ptr: Any, method: str, index: int, num_inputs: int,
              num_outputs: int) -> BundledTest:
    """Copy case `index` of `method` out of the program."""
    lib = get_lib()
    name = method.encode("utf-8")
    value = ffi.new("rt_bundled_value *")
    inputs, expected = [], []
    for i in range(num_inputs):
        _check(lib.rt_program_bundled_input(value, program_ptr, name, index, i))
        inputs.append(_value(value))
    for i in range(num_outputs):
        _check(lib.rt_program_bundled_expected(value, program_ptr, name, index, i))
        expected.append(_value(value))
    return BundledTest(method, index, tuple(inputs), tuple(expected))


# ---- comparison ---------------------------------------------------------------------------

def _flat(x: Any) -> Tuple[List[Any], Tuple[int, ...], Optional[str]]:
    """(flat elements, shape, dtype) of a Tensor or scalar."""
    if isinstance(x, Tensor):
        flat = [x.tolist()]
        for _ in range(x.ndim):
            flat = [item for row in flat for item in row]
        return flat, tuple(x.shape), x.dtype
    return [x], (), None


def _unravel(flat_index: int, shape: Tuple[int, ...]) -> Tuple[int, ...]:
    index = []
    for size in reversed(shape):
        index.append(flat_index % size)
        flat_index //= size
    return tuple(reversed(index))


def _excess(got: Any, expected: Any, rtol: float, atol: float, exact: bool) -> float:
    """How far an element is past its tolerance (<= 0: it matches)."""
    if exact:
        return 0.0 if got == expected else math.inf
    got, expected = float(got), float(expected)
    if math.isnan(got) or math.isnan(expected):
        return 0.0 if math.isnan(got) and math.isnan(expected) else math.inf
    if math.isinf(got) or math.isinf(expected):
        return 0.0 if got == expected else math.inf
    return abs(got - expected) - (atol + rtol * abs(expected))


def _is_exact(dtype: Optional[str], value: Any) -> bool:
    if dtype is None:
        return not isinstance(value, float)
    return not (dtype.startswith("float") or dtype == "bfloat16")


def compare(method: str, case: int, output: int, name: str, got: Any, expected: Any,
            rtol: float, atol: float) -> Tuple[float, float]:
    """(max abs error, max rel error) of one output; VerificationError when it differs."""
    where = f"method '{method}', bundled case {case}: output {output}" + \
        (f" ('{name}')" if name else "")
    g, g_shape, g_dtype = _flat(got)
    e, e_shape, e_dtype = _flat(expected)
    if g_shape != e_shape or g_dtype != e_dtype:
        def describe(dtype: Optional[str], shape: Tuple[int, ...]) -> str:
            return f"{dtype}{list(shape)}" if dtype else "a scalar"

        raise VerificationError(f"{where} is {describe(g_dtype, g_shape)}, expected "
                                f"{describe(e_dtype, e_shape)}", output=output, name=name)
    exact = _is_exact(e_dtype, e[0] if e else 0)
    worst, worst_at, bad = 0.0, -1, 0
    max_abs = max_rel = 0.0
    for i, (a, b) in enumerate(zip(g, e)):
        over = _excess(a, b, rtol, atol, exact)
        if over > 0:
            bad += 1
            if worst_at < 0 or over > worst:
                worst, worst_at = over, i
        elif not exact and math.isfinite(float(a)) and math.isfinite(float(b)):
            diff = abs(float(a) - float(b))
            max_abs = max(max_abs, diff)
            if b != 0:
                max_rel = max(max_rel, diff / abs(float(b)))
    if bad == 0:
        return max_abs, max_rel
    index = _unravel(worst_at, g_shape)
    a, b = g[worst_at], e[worst_at]
    if exact:
        rule = "elements of this dtype must be equal"
        tolerance = 0.0
    else:
        tolerance = atol + rtol * abs(float(b)) if math.isfinite(float(b)) else 0.0
        rule = (f"|difference| {abs(float(a) - float(b)):.6g} > tolerance {tolerance:.6g} = "
                f"atol {atol:g} + rtol {rtol:g} * |expected|")
    at = f"index {list(index)}" if index else "the scalar"
    raise VerificationError(
        f"{where} differs from the expected output at {bad} of {len(e)} elements; worst at "
        f"{at}: got {a!r}, expected {b!r} ({rule})",
        output=output, name=name, index=index, got=a, expected=b, tolerance=tolerance,
        mismatched=bad, total=len(e))


def verify(method: Any, program: Any, index: int, rtol: float, atol: float) -> BundledResult:
    """Run bundled case `index` on `method` and compare every output."""
    meta = method.method_meta
    case = read_case(program._live(), meta.name, index, meta.num_inputs, meta.num_outputs)
    method.set_inputs(*case.inputs)
    method.execute()
    outputs = tuple(method.get_outputs(clone=True))
    errors = [compare(meta.name, index, i, info.name, got, want, rtol, atol)
              for i, (info, got, want) in enumerate(zip(meta.outputs, outputs,
                                                         case.expected_outputs))]
    return BundledResult(meta.name, index, outputs, tuple(a for a, _ in errors),
                         tuple(r for _, r in errors))


def verify_all(program: Any, methods: Optional[Sequence[str]] = None, rtol: float = 1e-5,
               atol: float = 1e-8, **method_options: Any) -> List[Tuple[str, int, Any]]:
    """Every bundled case of every method (or of `methods`): (method, index, BundledResult or
    the Error that case raised)."""
    from .errors import Error

    results: List[Tuple[str, int, Any]] = []
    for name in methods if methods is not None else program.method_names:
        count = case_count(program._live(), name)
        if count == 0:
            continue
        with program.load_method(name, **method_options) as m:
            for i in range(count):
                try:
                    results.append((name, i, m.verify_bundled(i, rtol=rtol, atol=atol)))
                except Error as exc:
                    results.append((name, i, exc))
    return results

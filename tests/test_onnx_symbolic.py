"""The importer's symbolic sizes (_symbolic.py) and shape tensors (_shape_tensor.py), against
hand-computed results: normal forms, bounds, the decisions min / max / division take, and the
shape arithmetic real exports do between Shape and Reshape."""
import numpy as np
import pytest

pytest.importorskip("onnx")

from runtime_py.onnx._shape_tensor import ShapeTensor, evaluate, shape_tensor  # noqa: E402
from runtime_py.onnx._symbolic import SymbolSpace, as_int, broadcast_dims  # noqa: E402


@pytest.fixture
def space():
    return SymbolSpace()


def test_equal_polynomials_compare_equal(space):
    b = space.atom("batch", 1, 4, None)
    s = space.atom("seq", 1, 32, None)
    assert s * b == b * s
    assert (s + 1) - 1 == s
    assert 2 * s - s == s
    assert (b + s) * (b - s) == b * b - s * s
    assert hash(s * 3) == hash(3 * s)
    assert s * b - b * s == 0 and (s - s).constant == 0
    assert space.text(b * s * 64 - 1) == "64*batch*seq - 1"
    assert as_int(s + 3 - s) == 3 and as_int(s) is None


def test_bounds_are_interval_arithmetic(space):
    b = space.atom("batch", 1, 4, None)
    s = space.atom("seq", 2, 32, None)
    assert space.bounds(b * s * 64) == (128, 8192)
    assert space.bounds(s - b) == (-2, 31)
    assert space.bounds(-3 * s + 100) == (4, 94)
    assert space.bounds(7) == (7, 7)


def test_equalities_are_proved_or_left_open(space):
    s = space.atom("seq", 1, 32, None)
    t = space.atom("other", 1, 32, None)
    assert space.equal(s + 1, 1 + s) is True
    assert space.equal(s + 1, s) is False  # differ by a constant
    assert space.equal(s, 0) is False  # seq >= 1
    assert space.equal(s, 64) is False  # beyond its bound
    assert space.equal(s, t) is None  # two sizes: not decided


def test_min_and_max_settle_by_bounds_else_stay_opaque(space):
    s = space.atom("seq", 1, 32, None)
    t = space.atom("other", 1, 40, None)
    assert space.minimum(s, 64) == s  # a table sliced to seq: seq <= 64
    assert space.maximum(s, 64) == 64
    assert space.minimum(s + 1, s) == s
    m = space.minimum(s, t)
    assert as_int(m) is None and space.bounds(m) == (1, 32)
    assert space.minimum(t, s) == m  # one atom per distinct expression
    assert space.bounds(space.maximum(s, t)) == (1, 40)


def test_division_is_exact_where_it_can_be(space):
    b = space.atom("batch", 1, 4, None)
    s = space.atom("seq", 1, 32, None)
    assert space.divide(b * s * 64, 16) == b * s * 4
    assert space.divide(b * s * 64, b * 16) == s * 4
    assert space.divide(7, 2) == 3 and space.divide(-7, 2) == -3  # truncates toward zero
    q = space.divide(s, 3)  # not exact: an opaque size with the quotient's bounds
    assert as_int(q) is None and space.bounds(q) == (0, 10)
    with pytest.raises(ZeroDivisionError):
        space.divide(s, 0)
    assert space.modulo(s * 4, 2) == 0 and space.modulo(7, 3) == 1
    assert space.bounds(space.modulo(s, 5)) == (0, 4)


def test_broadcast_of_symbolic_shapes(space):
    b = space.atom("batch", 1, 4, None)
    s = space.atom("seq", 1, 32, None)
    assert broadcast_dims(space, [(b, 1, s), (s,)]) == (b, 1, s)
    assert broadcast_dims(space, [(b, s, 64), (1, s, 64)]) == (b, s, 64)
    assert broadcast_dims(space, [(s,), (8,)]) == (8,)  # a fixed size > 1 decides


def test_shape_arithmetic_of_an_attention_reshape(space):
    """Shape(x)[0:2] ++ [heads, -1], as exports build a head split, stays symbolic; Equal to -1
    and Where fold by the bounds; a float or run-time operand is left to the lowering."""
    b = space.atom("batch", 1, 4, None)
    s = space.atom("seq", 1, 32, None)
    shape = shape_tensor(space, [b, s, 64], "int64")
    assert isinstance(shape, ShapeTensor)
    (head,) = evaluate(space, "Slice", [shape, np.array([0]), np.array([2])], {})
    (full,) = evaluate(space, "Concat", [head, np.array([4, -1])], {"axis": 0})
    assert full.items.tolist() == [b, s, 4, -1]
    (batch,) = evaluate(space, "Gather", [shape, np.array(0)], {"axis": 0})
    (unsq,) = evaluate(space, "Unsqueeze", [batch, np.array([0])], {})
    assert unsq.items.tolist() == [b]
    (minus,) = evaluate(space, "Equal", [full, np.array(-1)], {})
    assert minus.tolist() == [False, False, False, True]
    (fixed,) = evaluate(space, "Where", [minus, np.array(1), full], {})
    assert fixed.items.tolist() == [b, s, 4, 1]
    (n,) = evaluate(space, "Mul", [batch, np.array(64)], {})
    assert n.items.tolist() == 64 * b
    (q,) = evaluate(space, "Div", [n, np.array(16)], {})
    assert q.items.tolist() == 4 * b
    (known,) = evaluate(space, "Gather", [shape, np.array([2])], {"axis": 0})
    assert isinstance(known, np.ndarray) and known.tolist() == [64]  # folds to a constant
    assert evaluate(space, "Mul", [shape, np.array(0.5)], {}) is None
    assert evaluate(space, "Equal", [batch, s], {}) is None  # not decided by the bounds

"""Small programs shared by the tests, built with the builder."""
from __future__ import annotations

import numpy as np

from runtime_py.compiler import ProgramBuilder


def add_program(shape=(1,), dtype="float32") -> bytes:
    """forward(a, b) = a + b."""
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.add(m.input("a", dtype, shape), m.input("b", dtype, shape)), "sum")
    return b.to_bytes()


def rich_program(seed: int = 0):
    """Two methods, constants, a dynamic input, an attribute and a scalar input: the program
    the format tests take apart. Returns (bytes, weights)."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    bias = rng.standard_normal(4).astype(np.float32)
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (8, 3), max_shape=(8, 3), dynamic_axes=[0])
    y = m.relu(m.linear(x, m.constant(w, name="w"), m.constant(bias, name="b")))
    counter = m.attribute("calls", "int64", (1,))
    m.add(counter, m.constant(np.ones(1, np.int64)), out=counter)
    m.output(y, "y")
    s = b.method("scale")
    v = s.input("v", "float64", (2, 2))
    flag = s.input_scalar("double_it", "bool")
    result = s.tensor("float64", (2, 2))
    skip = s.label()
    s.copy(v, out=result)
    s.jump_if_not(flag, skip)
    s.add(v, v, out=result)
    s.place(skip)
    s.output(result, "out")
    return b.to_bytes(), (w, bias)


def counted_loop(size: int = 3, body: str = "double") -> ProgramBuilder:
    """forward(x, n) runs n iterations of a backward jump with a conditional exit and returns
    (y, iterations): y = x * 2**n for body "double", y = x ** (n + 1) for body "power"."""
    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (size,))
    n = m.input("n", "int64", (1,))
    one = m.constant(np.ones(1, np.int64))
    i = m.tensor("int64", (1,))
    y = m.tensor("float32", (size,))
    m.sub(one, one, out=i)
    m.copy(x, out=y)
    top, done = m.place(m.label()), m.label()
    m.jump_if_not(m.less(i, n), done)
    if body == "double":
        m.add(y, y, out=y)
    else:
        m.mul(y, x, out=y)
    m.add(i, one, out=i)
    m.jump(top)
    m.place(done)
    m.output(y, "y")
    m.output(i, "iterations")
    return b

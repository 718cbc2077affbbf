"""Shape tensors: small integer tensors the converter knows element by element as sizes.

`Shape` of a dynamic tensor gives a ShapeTensor of its symbolic sizes instead of a run-time
op. The integer ops that graphs apply to shapes (Gather, Slice, Concat, Squeeze, Unsqueeze,
Reshape, Cast, Add, Sub, Mul, Div, Mod, Min, Max, Neg, Equal, Where, Shape, Size, Identity)
are evaluated here on the symbols (`SYMBOLIC`), so that a Reshape, Expand, Range or
ConstantOfShape sees the sizes it is given as expressions: their outputs get exact symbolic
sizes and tight upper bounds. Only where a program tensor really needs the values is a
ShapeTensor turned into run-time code (`Materializer`): one `shape` op per measured size and
integer arithmetic on one-element tensors, each expression emitted once.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..compiler import Value
from ._symbolic import Dim, Size, SymbolSpace, as_int

INT_DTYPES = {"int64": np.int64, "int32": np.int32}


class ShapeTensor:
    """An int64 / int32 tensor whose elements are sizes (ints or Dims), some unknown."""

    __slots__ = ("items", "dtype")

    def __init__(self, items: np.ndarray, dtype: str) -> None:
        self.items = items  # numpy object array: int or Dim elements
        self.dtype = dtype

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(self.items.shape)

    def __repr__(self) -> str:
        return f"ShapeTensor({self.items.tolist()!r}, {self.dtype})"


def shape_tensor(space: SymbolSpace, items: Any, dtype: str) -> Any:
    """A ShapeTensor of items, or a plain numpy array when every item is a known int."""
    arr = np.array(items, dtype=object)
    flat = [space.simplest(v) for v in arr.reshape(-1)]
    if all(not isinstance(v, Dim) for v in flat):
        return np.array(flat, dtype=INT_DTYPES.get(dtype, np.int64)).reshape(arr.shape)
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return ShapeTensor(out.reshape(arr.shape), dtype)


def as_items(x: Any) -> np.ndarray:
    """The elements of a ShapeTensor or an integer array, as an object array."""
    if isinstance(x, ShapeTensor):
        return x.items
    arr = np.asarray(x)
    out = np.empty(arr.shape, dtype=object)
    out.reshape(-1)[:] = [int(v) for v in arr.reshape(-1)]
    return out


def _dtype(x: Any) -> str:
    return x.dtype if isinstance(x, ShapeTensor) else str(np.asarray(x).dtype)


def _int_list(x: Any, what: str) -> List[int]:
    if isinstance(x, ShapeTensor):
        raise _Unknown(f"{what} is not known")
    return [int(v) for v in np.asarray(x).reshape(-1)]


class _Unknown(Exception):
    """A symbolic evaluation that the sizes cannot decide: the node is lowered instead."""


def _elementwise(space: SymbolSpace, fn: Callable[[Size, Size], Any], a: Any, b: Any,
                 dtype: str) -> Any:
    ia, ib = np.broadcast_arrays(as_items(a), as_items(b))
    out = np.empty(ia.shape, dtype=object)
    for index in np.ndindex(*ia.shape):
        out[index] = fn(ia[index], ib[index])
    return shape_tensor(space, out, dtype)


def _equal(space: SymbolSpace, a: Size, b: Size) -> bool:
    known = space.equal(a, b)
    if known is None:
        raise _Unknown("equality of sizes not decided by their bounds")
    return known


def _evaluate(space: SymbolSpace, op: str, inputs: List[Any], attrs: Dict[str, Any]) -> List[Any]:
    """Outputs of an integer op on ShapeTensors (and known arrays), or _Unknown."""
    x = inputs[0]
    dtype = _dtype(x)
    if op == "Identity":
        return [x]
    if op in ("Add", "Sub", "Mul"):
        fn = {"Add": lambda p, q: space.simplest(space.dim(p) + q),
              "Sub": lambda p, q: space.simplest(space.dim(p) - q),
              "Mul": lambda p, q: space.simplest(space.dim(p) * q)}[op]
        return [_elementwise(space, fn, inputs[0], inputs[1], dtype)]
    if op == "Div":
        return [_elementwise(space, space.divide, inputs[0], inputs[1], dtype)]
    if op == "Mod":
        if attrs.get("fmod", 0):
            raise _Unknown("fmod")
        return [_elementwise(space, space.modulo, inputs[0], inputs[1], dtype)]
    if op in ("Min", "Max"):
        fn = space.minimum if op == "Min" else space.maximum
        result = inputs[0]
        for other in inputs[1:]:
            result = _elementwise(space, fn, result, other, dtype)
        return [result]
    if op == "Neg":
        return [_elementwise(space, lambda p, q: space.simplest(-space.dim(p)), x, 0, dtype)]
    if op == "Equal":
        items = _elementwise(space, lambda p, q: int(_equal(space, p, q)), inputs[0], inputs[1],
                             "int64")
        return [np.asarray(items).astype(bool)]
    if op == "Where":
        cond = inputs[0]
        if isinstance(cond, ShapeTensor):
            raise _Unknown("condition")
        c, a, b = np.broadcast_arrays(np.asarray(cond).astype(bool), as_items(inputs[1]),
                                      as_items(inputs[2]))
        return [shape_tensor(space, np.where(c, a, b), _dtype(inputs[1]))]
    if op == "Cast":
        to = _cast_target(attrs)
        if to not in INT_DTYPES:
            raise _Unknown("cast to a non-integer type")
        return [shape_tensor(space, as_items(x), to)]
    if op == "Shape":
        rank = len(as_items(x).shape)
        start, end = int(attrs.get("start", 0)), attrs.get("end")
        return [np.array(as_items(x).shape, dtype=np.int64)[start:None if end is None else int(end)]]
    if op == "Size":
        return [np.array(as_items(x).size, dtype=np.int64)]
    if op == "Gather":
        indices = np.asarray(_int_list(inputs[1], "indices")).reshape(np.shape(inputs[1]))
        axis = int(attrs.get("axis", 0))
        return [shape_tensor(space, np.take(as_items(x), indices, axis=axis), dtype)]
    if op == "Concat":
        parts = [as_items(p) for p in inputs if p is not None]
        return [shape_tensor(space, np.concatenate(parts, axis=int(attrs["axis"])), dtype)]
    if op == "Unsqueeze":
        axes = attrs.get("axes")
        axes = _int_list(inputs[1], "axes") if axes is None else list(axes)
        items = as_items(x)
        rank = items.ndim + len(axes)
        for a in sorted(a + rank if a < 0 else a for a in axes):
            items = np.expand_dims(items, a)
        return [shape_tensor(space, items, dtype)]
    if op == "Squeeze":
        axes = attrs.get("axes")
        if axes is None and len(inputs) > 1 and inputs[1] is not None:
            axes = _int_list(inputs[1], "axes")
        items = as_items(x)
        squeezed = np.squeeze(items, axis=None if axes is None else tuple(int(a) for a in axes))
        return [shape_tensor(space, squeezed, dtype)]
    if op == "Reshape":
        target = _int_list(inputs[1], "shape")
        items = as_items(x)
        target = [items.shape[i] if t == 0 and not attrs.get("allowzero", 0) else t
                  for i, t in enumerate(target)]
        return [shape_tensor(space, items.reshape(target), dtype)]
    if op == "Slice":
        if len(inputs) < 3:
            raise _Unknown("opset < 10 Slice")
        items = as_items(x)
        starts, ends = _int_list(inputs[1], "starts"), _int_list(inputs[2], "ends")
        axes = _int_list(inputs[3], "axes") if len(inputs) > 3 and inputs[3] is not None \
            else list(range(len(starts)))
        steps = _int_list(inputs[4], "steps") if len(inputs) > 4 and inputs[4] is not None \
            else [1] * len(starts)
        index = [slice(None)] * items.ndim
        for s, e, a, st in zip(starts, ends, axes, steps):
            index[a] = slice(s, e, st)  # ONNX's clamping is Python's for these values
        return [shape_tensor(space, items[tuple(index)], dtype)]
    raise _Unknown(op)


def _cast_target(attrs: Dict[str, Any]) -> str:
    from ._convert import onnx_dtype_name

    return onnx_dtype_name(int(attrs["to"]))


# Ops whose lowering takes ShapeTensor parameters itself (their output sizes follow from the
# symbols); every other op gets them materialized as program tensors.
SHAPE_AWARE = frozenset({"Reshape", "Slice", "Expand", "ConstantOfShape", "Range", "Resize"})

SYMBOLIC = frozenset({"Identity", "Add", "Sub", "Mul", "Div", "Mod", "Min", "Max", "Neg",
                      "Equal", "Where", "Cast", "Shape", "Size", "Gather", "Concat",
                      "Unsqueeze", "Squeeze", "Reshape", "Slice"})


def evaluate(space: SymbolSpace, op: str, inputs: List[Any],
             attrs: Dict[str, Any]) -> Optional[List[Any]]:
    """The outputs of an integer op whose inputs are ShapeTensors and known arrays, when the
    sizes decide them; None when the node must be lowered to run-time code instead."""
    if op not in SYMBOLIC:
        return None
    if any(isinstance(x, Value) for x in inputs):
        return None
    if any(not isinstance(x, ShapeTensor) and x is not None
           and not np.issubdtype(np.asarray(x).dtype, np.integer)
           and not (op == "Where" and x is inputs[0]) for x in inputs):
        return None
    try:
        return _evaluate(space, op, inputs, attrs)
    except (_Unknown, ValueError, IndexError, ZeroDivisionError):
        return None


class Materializer:
    """Run-time code for sizes: each atom measured once (`shape(x, axis, axis + 1)`), each
    expression computed once with integer ops on one-element int64 tensors."""

    def __init__(self, cv: Any) -> None:
        self.cv = cv
        self._scalars: Dict[Any, Value] = {}

    def _constant(self, value: int) -> Value:
        key = ("const", value)
        if key not in self._scalars:
            self._scalars[key] = self.cv.m.constant(np.array([value], dtype=np.int64))
        return self._scalars[key]

    def _binary(self, op: str, a: Value, b: Value) -> Value:
        return self.cv.m.call(op, a, b, outputs=[("int64", [1], False)])[0]

    def _atom(self, ident: int) -> Value:
        key = ("atom", ident)
        if key in self._scalars:
            return self._scalars[key]
        atom = self.cv.space.atoms[ident]
        source = atom.source
        if isinstance(source[0], Value):
            tensor, axis = source
            run_key = ("shape", tensor.index, axis, axis + 1)
            if run_key not in self._scalars:
                self._scalars[run_key] = self.cv.m.call("shape", tensor, axis, axis + 1,
                                                        outputs=[("int64", [1], False)])[0]
            value = self._scalars[run_key]
        elif source[0] == "element":  # an element of a run-time int tensor
            _, tensor, index = source
            flat = tensor if len(tensor.shape) == 1 else self.cv.m.reshape(tensor, [-1])
            value = self.cv.m.call("slice", flat, [index], [index + 1], None, None,
                                   outputs=[(tensor.dtype, [1], False)])[0]
            if tensor.dtype != "int64":
                value = self.cv.m.cast(value, "int64")
        else:
            op, args = source
            a, b = (self.scalar(v) for v in args)
            value = self._binary({"min": "min", "max": "max", "div": "div", "mod": "mod"}[op],
                                 a, b)
        self._scalars[key] = value
        return value

    def scalar(self, d: Size) -> Value:
        """A one-element int64 tensor holding d at run time."""
        c = as_int(d)
        if c is not None:
            return self._constant(c)
        key = ("dim", d.key())
        if key in self._scalars:
            return self._scalars[key]
        total: Optional[Value] = None
        for monomial, coeff in sorted(d.terms.items()):
            term: Optional[Value] = None
            for ident in monomial:
                atom = self._atom(ident)
                term = atom if term is None else self._binary("mul", term, atom)
            if term is None:
                term = self._constant(coeff)
            elif coeff != 1:
                term = self._binary("mul", term, self._constant(coeff))
            total = term if total is None else self._binary("add", total, term)
        assert total is not None
        self._scalars[key] = total
        return total

    def tensor(self, x: ShapeTensor) -> Value:
        """The ShapeTensor as a program tensor of its dtype and shape, built once per distinct
        content: runs of known sizes are one constant, runs of a tensor's consecutive sizes
        one `shape` op, and only the rest is computed size by size."""
        items = list(x.items.reshape(-1))
        key = ("tensor", x.dtype, x.shape, tuple(self.cv.space.dim(v).key() for v in items))
        if key in self._scalars:
            return self._scalars[key]
        m = self.cv.m
        pieces: List[Value] = []
        runs = self._runs(items)
        for kind, run in runs:
            if kind == "constant":
                pieces.append(m.constant(np.array(run, dtype=np.int64)))
            elif kind == "shape":
                tensor, start, end = run
                run_key = ("shape", tensor.index, start, end)
                if run_key not in self._scalars:
                    self._scalars[run_key] = m.call("shape", tensor, start, end,
                                                    outputs=[("int64", [end - start], False)])[0]
                pieces.append(self._scalars[run_key])
            else:
                pieces.append(self.scalar(run))
        vector = pieces[0] if len(pieces) == 1 else m.concat(pieces, 0)
        shape = list(x.shape)
        if shape != [len(items)]:
            vector = m.reshape(vector, shape)
        if x.dtype != "int64":
            vector = m.cast(vector, x.dtype)
        self._scalars[key] = vector
        return vector

    def _runs(self, items: Sequence[Size]) -> List[Tuple[str, Any]]:
        """items grouped: ("constant", [ints]), ("shape", (tensor, start, end)) for sizes
        measured on consecutive axes of one tensor, ("size", Dim) for the others."""
        runs: List[Tuple[str, Any]] = []
        for v in items:
            c = as_int(v)
            source = self._measured(v) if c is None else None
            last = runs[-1] if runs else None
            if c is not None:
                if last is not None and last[0] == "constant":
                    last[1].append(c)
                else:
                    runs.append(("constant", [c]))
            elif source is not None:
                tensor, axis = source
                if last is not None and last[0] == "shape" and last[1][0] is tensor \
                        and last[1][2] == axis:
                    runs[-1] = ("shape", (tensor, last[1][1], axis + 1))
                else:
                    runs.append(("shape", (tensor, axis, axis + 1)))
            else:
                runs.append(("size", v))
        return runs

    def _measured(self, d: Dim) -> Optional[Tuple[Value, int]]:
        """(tensor, axis) when d is exactly one size measured on a tensor."""
        if len(d.terms) != 1:
            return None
        ((monomial, coeff),) = d.terms.items()
        if coeff != 1 or len(monomial) != 1:
            return None
        source = self.cv.space.atoms[monomial[0]].source
        return source if isinstance(source, tuple) and isinstance(source[0], Value) else None


def upper_bounds(space: SymbolSpace, dims: Sequence[Size], what: str) -> List[int]:
    """The planned sizes for symbolic dims; a size without a finite non-negative bound is
    refused naming the expression."""
    out = []
    for d in dims:
        lo, hi = space.bounds(d)
        if hi < 0:
            raise ValueError(f"{what}: size {space.text(d)} is negative for every input size")
        out.append(hi)
    return out

"""Author programs in Python: inputs, constants, op calls, control flow, attributes, outputs.

    b = ProgramBuilder()
    m = b.method("forward")
    x = m.input("x", "float32", (32, 256))
    w = m.constant(weights)                      # numpy array, or bytes + dtype + shape
    y = m.relu(m.linear(x, w))
    m.output(y, "y")
    b.save("mlp.rtp")

Tensors get their memory from a planner that lets tensors share bytes when their lifetimes do
not overlap (`ProgramBuilder.memory_report()` compares the planned total with the unplanned
sum). A dynamic input (`max_shape=`) makes the program dynamic up to those bounds: memory is
planned for the bounds and kernels set the actual sizes at run time.
"""
from __future__ import annotations

import math
import struct
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from . import shapes as _shapes, writer as w
from .. import dtypes as _dtypes
from .planner import lifetimes, plan

__all__ = ["ProgramBuilder", "MethodBuilder", "Value", "Label"]


class Value:
    """A value of a method under construction: a tensor, scalar, list or none."""

    __slots__ = ("method", "index", "kind", "dtype", "shape", "dynamic", "dynamic_axes",
                 "dim_order", "storage", "constant", "payload", "items")

    def __init__(self, method: "MethodBuilder", kind: int) -> None:
        self.method = method
        self.index = len(method._values)
        self.kind = kind
        self.dtype: Optional[str] = None
        self.shape: Tuple[int, ...] = ()
        self.dynamic = False
        # Of a dynamic tensor: the axes whose size varies (the others are always their
        # bound); None: every axis may.
        self.dynamic_axes: Optional[Tuple[int, ...]] = None
        self.dim_order: Tuple[int, ...] = ()
        self.storage = 0
        self.constant = w.NO_INDEX
        self.payload: Any = 0
        self.items: Sequence[Any] = ()
        method._values.append(self)

    @property
    def is_tensor(self) -> bool:
        return self.kind == w.TENSOR

    def __repr__(self) -> str:
        if self.is_tensor:
            bound = "<=" if self.dynamic else ""
            return f"Value(%{self.index}: {self.dtype}{bound}{list(self.shape)})"
        return f"Value(%{self.index}: kind {self.kind} = {self.payload!r})"


class Label:
    """A position in a method's instruction list, for jumps."""

    __slots__ = ("position",)

    def __init__(self) -> None:
        self.position: Optional[int] = None


Arg = Union[Value, int, float, bool, None, Sequence[int], Sequence[float], Sequence[Value]]


class MethodBuilder:
    """Builds one method. Create with ProgramBuilder.method(name)."""

    def __init__(self, program: "ProgramBuilder", name: str) -> None:
        self.program = program
        self.name = name
        self._values: List[Value] = []
        self._instructions: List[Tuple[Any, ...]] = []
        self._inputs: List[Tuple[Value, str]] = []
        self._outputs: List[Tuple[Value, str]] = []
        self._attributes: List[Tuple[str, Value]] = []

    # ---- values ------------------------------------------------------------------------------

    def _tensor(self, dtype: Any, shape: Sequence[int], storage: int, dynamic: bool = False,
                dim_order: Optional[Sequence[int]] = None) -> Value:
        v = Value(self, w.TENSOR)
        v.dtype = _dtypes.normalize(dtype)
        v.shape = tuple(int(s) for s in shape)
        if any(s < 0 for s in v.shape):
            raise ValueError(f"method '{self.name}': negative size in shape {v.shape}")
        v.dynamic = bool(dynamic)
        v.dim_order = tuple(dim_order) if dim_order is not None else tuple(range(len(v.shape)))
        if sorted(v.dim_order) != list(range(len(v.shape))):
            raise ValueError(f"dim_order {v.dim_order} is not a permutation for rank {len(v.shape)}")
        v.storage = storage
        return v

    def input(self, name: str, dtype: Any, shape: Sequence[int], *,
              max_shape: Optional[Sequence[int]] = None,
              dim_order: Optional[Sequence[int]] = None,
              dynamic_axes: Optional[Sequence[int]] = None) -> Value:
        """A tensor input. With `max_shape` the input is dynamic: any sizes up to those bounds
        (and `shape` is ignored except for its rank); with `dynamic_axes` too, only those axes
        vary and the others must have exactly their bound (set_input refuses other sizes)."""
        if max_shape is not None:
            if len(max_shape) != len(shape):
                raise ValueError(f"input '{name}': max_shape {tuple(max_shape)} has a different "
                                 f"rank than shape {tuple(shape)}")
            v = self._tensor(dtype, max_shape, w.ARENA, dynamic=True, dim_order=dim_order)
            if dynamic_axes is not None:
                v.dynamic_axes = self._axes(name, dynamic_axes, len(max_shape))
        else:
            v = self._tensor(dtype, shape, w.ARENA, dim_order=dim_order)
        self._inputs.append((v, name))
        return v

    @staticmethod
    def _axes(name: str, axes: Sequence[int], rank: int) -> Tuple[int, ...]:
        out = sorted({int(a) + rank if int(a) < 0 else int(a) for a in axes})
        if any(not 0 <= a < rank for a in out):
            raise ValueError(f"'{name}': dynamic_axes {list(axes)} do not fit rank {rank}")
        return tuple(out)

    def input_scalar(self, name: str, kind: str) -> Value:
        """A scalar input: kind is "int", "double" or "bool"."""
        kinds = {"int": w.INT, "double": w.DOUBLE, "float": w.DOUBLE, "bool": w.BOOL}
        if kind not in kinds:
            raise ValueError(f"input '{name}': scalar kind must be int, double or bool")
        v = Value(self, kinds[kind])
        v.payload = False if kind == "bool" else 0
        self._inputs.append((v, name))
        return v

    def constant(self, data: Any, dtype: Any = None, shape: Optional[Sequence[int]] = None,
                 name: Optional[str] = None, key: Optional[str] = None) -> Value:
        """A read-only tensor: a numpy array (or anything with __array_interface__), or
        bytes-like data with dtype and shape. `key` names it in a data file when the program
        is written with external_data= (default: a digest of its dtype, shape and bytes)."""
        raw, dtype, shape = _tensor_bytes(data, dtype, shape)
        v = self._tensor(dtype, shape, w.CONSTANT)
        v.constant = self.program._add_constant(raw, name, v.dtype, v.shape, key)
        return v

    def attribute(self, name: str, dtype: Any, shape: Sequence[int], init: Any = None) -> Value:
        """A named tensor whose contents persist across executions (state such as a counter or
        a cache), initialised from `init` (array or bytes) or zeros."""
        v = self._tensor(dtype, shape, w.STATE)
        if init is not None:
            raw, _, _ = _tensor_bytes(init, v.dtype, v.shape)
            v.constant = self.program._add_constant(raw, None, v.dtype, v.shape)
        self._attributes.append((name, v))
        return v

    def scalar(self, value: Union[int, float, bool]) -> Value:
        """An int, double or bool constant argument."""
        if isinstance(value, bool):
            v = Value(self, w.BOOL)
        elif isinstance(value, int):
            v = Value(self, w.INT)
        elif isinstance(value, float):
            v = Value(self, w.DOUBLE)
        else:
            raise TypeError(f"not a scalar: {value!r}")
        v.payload = value
        return v

    def none(self) -> Value:
        return Value(self, w.NONE)

    def int_list(self, items: Sequence[int]) -> Value:
        v = Value(self, w.INT_LIST)
        v.items = [int(i) for i in items]
        return v

    def double_list(self, items: Sequence[float]) -> Value:
        v = Value(self, w.DOUBLE_LIST)
        v.items = [float(i) for i in items]
        return v

    def tensor_list(self, items: Sequence[Value]) -> Value:
        v = Value(self, w.TENSOR_LIST)
        v.items = [self._own(t) for t in items]
        if not all(t.is_tensor for t in v.items):
            raise TypeError("tensor_list items must be tensors")
        return v

    def tensor(self, dtype: Any, shape: Sequence[int], dynamic: bool = False) -> Value:
        """A planned tensor with no producer yet, for ops called with out=."""
        return self._tensor(dtype, shape, w.ARENA, dynamic=dynamic)

    def _own(self, v: Value) -> Value:
        if not isinstance(v, Value) or v.method is not self:
            raise ValueError(f"{v!r} does not belong to method '{self.name}'")
        return v

    def _arg(self, a: Arg) -> Value:
        if isinstance(a, Value):
            return self._own(a)
        if a is None:
            return self.none()
        if isinstance(a, (bool, int, float)):
            return self.scalar(a)
        if isinstance(a, (list, tuple)):
            if all(isinstance(i, Value) for i in a) and a:
                return self.tensor_list(a)
            if all(isinstance(i, int) and not isinstance(i, bool) for i in a):
                return self.int_list(a)
            return self.double_list(a)
        raise TypeError(f"cannot pass {a!r} as an op argument")

    # ---- instructions ------------------------------------------------------------------------

    def call(self, op: str, *args: Arg, outputs: Sequence[Tuple[Any, Sequence[int], bool]] = (),
             out: Optional[Union[Value, Sequence[Value]]] = None) -> List[Value]:
        """Append a kernel call. Outputs are new tensors described by (dtype, shape, dynamic)
        or existing tensors given as `out` (to update state or loop-carried values)."""
        arg_values = [self._arg(a) for a in args]
        if out is not None:
            results = [self._own(o) for o in (out if isinstance(out, (list, tuple)) else [out])]
        else:
            results = [self._tensor(d, s, w.ARENA, dynamic=dyn) for d, s, dyn in outputs]
        self._instructions.append(("kernel", op, [v.index for v in arg_values + results]))
        return results

    def _unary_like(self, op: str, x: Value, shape: Sequence[int], dtype: Optional[str],
                    params: Sequence[Arg], out: Optional[Value], dynamic: bool) -> Value:
        spec = [(dtype or x.dtype, shape, dynamic)]
        return self.call(op, x, *params, outputs=spec, out=out)[0]

    def _binary(self, op: str, a: Value, b: Value, out: Optional[Value],
                dtype: Optional[str] = None) -> Value:
        a, b = self._own(a), self._own(b)
        shape = _shapes.broadcast(op, a.shape, b.shape)
        spec = [(dtype or a.dtype, shape, a.dynamic or b.dynamic)]
        return self.call(op, a, b, outputs=spec, out=out)[0]

    def add(self, a: Value, b: Value, out: Optional[Value] = None) -> Value:
        return self._binary("add", a, b, out)

    def sub(self, a: Value, b: Value, out: Optional[Value] = None) -> Value:
        return self._binary("sub", a, b, out)

    def mul(self, a: Value, b: Value, out: Optional[Value] = None) -> Value:
        return self._binary("mul", a, b, out)

    def div(self, a: Value, b: Value, out: Optional[Value] = None) -> Value:
        return self._binary("div", a, b, out)

    def less(self, a: Value, b: Value, out: Optional[Value] = None) -> Value:
        return self._binary("less", a, b, out, dtype="bool")

    def equal(self, a: Value, b: Value, out: Optional[Value] = None) -> Value:
        return self._binary("equal", a, b, out, dtype="bool")

    def copy(self, x: Value, out: Optional[Value] = None) -> Value:
        x = self._own(x)
        return self._unary_like("copy", x, x.shape, None, (), out, x.dynamic)

    def relu(self, x: Value, out: Optional[Value] = None) -> Value:
        x = self._own(x)
        return self._unary_like("relu", x, x.shape, None, (), out, x.dynamic)

    def cast(self, x: Value, dtype: Any, out: Optional[Value] = None) -> Value:
        """x converted to dtype (docs/ops.md, cast): floats to integers truncate and saturate,
        float16/bfloat16 round to nearest even."""
        x = self._own(x)
        return self._unary_like("cast", x, x.shape, _dtypes.normalize(dtype), (), out, x.dynamic)

    def softmax(self, x: Value, axis: int = -1, out: Optional[Value] = None) -> Value:
        x = self._own(x)
        _shapes.normalize_axis("softmax", axis, len(x.shape))
        return self._unary_like("softmax", x, x.shape, None, (int(axis),), out, x.dynamic)

    def matmul(self, a: Value, b: Value, out: Optional[Value] = None) -> Value:
        a, b = self._own(a), self._own(b)
        shape = _shapes.matmul("matmul", a.shape, b.shape)
        return self.call("matmul", a, b, outputs=[(a.dtype, shape, a.dynamic or b.dynamic)],
                         out=out)[0]

    def linear(self, x: Value, weight: Value, bias: Optional[Value] = None,
               out: Optional[Value] = None) -> Value:
        """x @ weight^T + bias, weight of shape [out_features, in_features]."""
        x, weight = self._own(x), self._own(weight)
        shape = _shapes.linear("linear", x.shape, weight.shape,
                               bias.shape if bias is not None else None)
        return self.call("linear", x, weight, bias, outputs=[(x.dtype, shape, x.dynamic)],
                         out=out)[0]

    def conv2d(self, x: Value, weight: Value, bias: Optional[Value] = None, stride: Any = 1,
               padding: Any = 0, dilation: Any = 1, groups: int = 1,
               out: Optional[Value] = None) -> Value:
        """2-D convolution, NCHW; padding is 1, 2 (h, w) or 4 (top, left, bottom, right) ints."""
        x, weight = self._own(x), self._own(weight)
        stride, dilation = _pair(stride), _pair(dilation)
        padding = _pair(padding) if isinstance(padding, int) or len(padding) != 4 else list(padding)
        shape = _shapes.conv2d("conv2d", x.shape, weight.shape,
                               bias.shape if bias is not None else None, stride, padding,
                               dilation, groups)
        return self.call("conv2d", x, weight, bias, stride, padding, dilation, int(groups),
                         outputs=[(x.dtype, shape, x.dynamic)], out=out)[0]

    def max_pool2d(self, x: Value, kernel: Any, stride: Any = None, padding: Any = 0,
                   dilation: Any = 1, ceil_mode: bool = False,
                   out: Optional[Value] = None) -> Value:
        x = self._own(x)
        kernel = _pair(kernel)
        stride = _pair(stride) if stride is not None else kernel
        padding = _pair(padding) if isinstance(padding, int) or len(padding) != 4 else list(padding)
        dilation = _pair(dilation)
        shape = _shapes.pool2d("max_pool2d", x.shape, kernel, stride, padding, dilation, ceil_mode)
        return self.call("max_pool2d", x, kernel, stride, padding, dilation, bool(ceil_mode),
                         outputs=[(x.dtype, shape, x.dynamic)], out=out)[0]

    def avg_pool2d(self, x: Value, kernel: Any, stride: Any = None, padding: Any = 0,
                   ceil_mode: bool = False, count_include_pad: bool = True,
                   out: Optional[Value] = None) -> Value:
        x = self._own(x)
        kernel = _pair(kernel)
        stride = _pair(stride) if stride is not None else kernel
        padding = _pair(padding) if isinstance(padding, int) or len(padding) != 4 else list(padding)
        shape = _shapes.pool2d("avg_pool2d", x.shape, kernel, stride, padding, [1, 1], ceil_mode)
        return self.call("avg_pool2d", x, kernel, stride, padding, bool(ceil_mode),
                         bool(count_include_pad), outputs=[(x.dtype, shape, x.dynamic)],
                         out=out)[0]

    def reshape(self, x: Value, shape: Sequence[int], out: Optional[Value] = None) -> Value:
        x = self._own(x)
        result = _shapes.reshape("reshape", x.shape, shape)
        return self.call("reshape", x, [int(s) for s in shape],
                         outputs=[(x.dtype, result, x.dynamic)], out=out)[0]

    def transpose(self, x: Value, perm: Sequence[int], out: Optional[Value] = None) -> Value:
        x = self._own(x)
        shape = _shapes.transpose("transpose", x.shape, perm)
        return self.call("transpose", x, [int(p) for p in perm],
                         outputs=[(x.dtype, shape, x.dynamic)], out=out)[0]

    def concat(self, xs: Sequence[Value], axis: int = 0, out: Optional[Value] = None) -> Value:
        xs = [self._own(x) for x in xs]
        shape = _shapes.concat("concat", [x.shape for x in xs], axis)
        return self.call("concat", self.tensor_list(xs), int(axis),
                         outputs=[(xs[0].dtype, shape, any(x.dynamic for x in xs))],
                         out=out)[0]

    # ---- normalisation and transposed convolution (docs/ops.md) -------------------------------

    def layer_norm(self, x: Value, scale: Optional[Value] = None, bias: Optional[Value] = None,
                   axis: int = -1, epsilon: float = 1e-5, stats: bool = False,
                   out: Optional[Value] = None) -> Any:
        """Normalise over the dims [axis, rank). With stats=True returns (y, mean, inv_std),
        the statistics shaped x.shape[:axis] + [1] * (rank - axis)."""
        x = self._own(x)
        ax = _shapes.layer_norm("layer_norm", x.shape, scale.shape if scale is not None else None,
                                bias.shape if bias is not None else None, axis)
        specs = [(x.dtype, x.shape, x.dynamic)]
        if stats:
            stat_shape = tuple(x.shape[:ax]) + (1,) * (len(x.shape) - ax)
            specs += [(x.dtype, stat_shape, x.dynamic)] * 2
        results = self.call("layer_norm", x, scale, bias, int(axis), float(epsilon),
                            outputs=specs, out=out)
        return tuple(results) if stats else results[0]

    def instance_norm(self, x: Value, scale: Optional[Value] = None,
                      bias: Optional[Value] = None, epsilon: float = 1e-5,
                      out: Optional[Value] = None) -> Value:
        x = self._own(x)
        _shapes.channel_norm("instance_norm", x.shape, scale.shape if scale is not None else None,
                             bias.shape if bias is not None else None, None)
        return self.call("instance_norm", x, scale, bias, float(epsilon),
                         outputs=[(x.dtype, x.shape, x.dynamic)], out=out)[0]

    def group_norm(self, x: Value, scale: Optional[Value], bias: Optional[Value],
                   num_groups: int, epsilon: float = 1e-5, out: Optional[Value] = None) -> Value:
        """scale and bias hold one value per channel, or one per group."""
        x = self._own(x)
        _shapes.channel_norm("group_norm", x.shape, scale.shape if scale is not None else None,
                             bias.shape if bias is not None else None, int(num_groups))
        return self.call("group_norm", x, scale, bias, int(num_groups), float(epsilon),
                         outputs=[(x.dtype, x.shape, x.dynamic)], out=out)[0]

    def lp_norm(self, x: Value, axis: int = -1, p: int = 2, out: Optional[Value] = None) -> Value:
        x = self._own(x)
        _shapes.normalize_axis("lp_norm", axis, len(x.shape))
        if p not in (1, 2):
            raise ValueError(f"lp_norm: p must be 1 or 2, not {p}")
        return self.call("lp_norm", x, int(axis), int(p), outputs=[(x.dtype, x.shape, x.dynamic)],
                         out=out)[0]

    def conv_transpose2d(self, x: Value, weight: Value, bias: Optional[Value] = None,
                         stride: Any = 1, padding: Any = 0, output_padding: Any = 0,
                         dilation: Any = 1, groups: int = 1,
                         out: Optional[Value] = None) -> Value:
        """Transposed 2-D convolution, NCHW, weight [C, O / groups, kH, kW]; padding is 1, 2
        or 4 (top, left, bottom, right) ints and may be negative."""
        x, weight = self._own(x), self._own(weight)
        stride, dilation, output_padding = _pair(stride), _pair(dilation), _pair(output_padding)
        padding = _pair(padding) if isinstance(padding, int) or len(padding) != 4 else list(padding)
        shape = _shapes.conv_transpose2d("conv_transpose2d", x.shape, weight.shape,
                                         bias.shape if bias is not None else None, stride,
                                         padding, output_padding, dilation, groups)
        return self.call("conv_transpose2d", x, weight, bias, stride, padding, output_padding,
                         dilation, int(groups), outputs=[(x.dtype, shape, x.dynamic)],
                         out=out)[0]

    # ---- control flow ------------------------------------------------------------------------

    def label(self) -> Label:
        """A new, unplaced label; place it with place(label)."""
        return Label()

    def place(self, label: Label) -> Label:
        """Put the label at the next instruction."""
        if label.position is not None:
            raise ValueError("label placed twice")
        label.position = len(self._instructions)
        return label

    def jump(self, label: Label) -> None:
        self._instructions.append(("jump", w.JUMP, label, None))

    def jump_if(self, cond: Value, label: Label) -> None:
        """Jump when cond (bool/int scalar, or the first element of a tensor) is true."""
        self._instructions.append(("jump", w.JUMP_IF_TRUE, label, self._own(cond).index))

    def jump_if_not(self, cond: Value, label: Label) -> None:
        self._instructions.append(("jump", w.JUMP_IF_FALSE, label, self._own(cond).index))

    # ---- interface ---------------------------------------------------------------------------

    def output(self, value: Value, name: str = "") -> Value:
        self._outputs.append((self._own(value), name))
        return value

    def producer(self, value: Value) -> Optional[int]:
        """Index of the last kernel instruction whose output (final argument) is `value`."""
        for pc in range(len(self._instructions) - 1, -1, -1):
            ins = self._instructions[pc]
            if ins[0] == "kernel" and ins[2] and ins[2][-1] == value.index:
                return pc
        return None

    def fuse_activation(self, value: Value, kind: int, lo: float = 0.0, hi: float = 0.0,
                        through_reshape: bool = False) -> bool:
        """Turn the conv2d or linear call producing `value` into conv2d_act / linear_act with
        the given activation (see docs/ops.md). With through_reshape, `value` may also be a
        reshape of such a call's result (an elementwise activation commutes with it): the
        caller vouches that nothing else reads that result. False when `value` has no such
        producer."""
        pc = self.producer(value)
        if pc is None or value.dtype != "float32":
            return False
        _, op, args = self._instructions[pc]
        if op == "reshape" and through_reshape:
            inner = self.producer(self._values[args[0]])
            if inner is not None and self._instructions[inner][1] in ("conv2d", "linear"):
                pc = inner
                _, op, args = self._instructions[pc]
        if op not in ("conv2d", "linear"):
            return False
        extra = [self.scalar(int(kind)).index, self.scalar(float(lo)).index,
                 self.scalar(float(hi)).index]
        self._instructions[pc] = ("kernel", op + "_act", args[:-1] + extra + args[-1:])
        return True

    def fuse_conv_max_pool(self) -> int:
        """Merge each max_pool2d that directly follows the float32 conv2d or conv2d_act whose
        result it pools, when nothing else reads that result (no other instruction, not an
        output or attribute), into one conv2d_act_max_pool2d (see docs/ops.md): the runtime
        pools the convolution's rows while they are in cache and never writes the unpooled
        result. Methods with jumps are left as they are. Returns how many pairs it merged."""
        if any(ins[0] != "kernel" for ins in self._instructions):
            return 0
        reads = self._uses()
        fused: List[Any] = []
        for ins in self._instructions:
            before = fused[-1] if fused else None
            if (ins[1] == "max_pool2d" and before is not None and
                    before[1] in ("conv2d", "conv2d_act") and before[2][-1] == ins[2][0] and
                    reads.get(ins[2][0]) == 2 and
                    self._values[before[2][0]].dtype == "float32"):
                conv = before[2][:-1]
                if before[1] == "conv2d":
                    conv = conv + [self.scalar(0).index, self.scalar(0.0).index,
                                   self.scalar(0.0).index]
                fused[-1] = ("kernel", "conv2d_act_max_pool2d", conv + ins[2][1:])
                continue
            fused.append(ins)
        merged = len(self._instructions) - len(fused)
        self._instructions = fused
        return merged

    def _uses(self) -> Dict[int, int]:
        """For each value index, how many instruction arguments (outputs included), inputs,
        outputs and attributes name it."""
        uses: Dict[int, int] = {}
        for ins in self._instructions:
            for i in ins[2]:
                v = self._values[i]
                for t in (v.items if v.kind == w.TENSOR_LIST else [v]):
                    uses[t.index] = uses.get(t.index, 0) + 1
        for v, _ in self._inputs + self._outputs + [(v, n) for n, v in self._attributes]:
            uses[v.index] = uses.get(v.index, 0) + 1
        return uses

    def fuse_silu(self) -> int:
        """Replace each mul(x, sigmoid(x)) whose sigmoid result nothing else reads by silu(x),
        run in the epilogue of the float32 conv2d or linear producing x when nothing else reads
        x either (ExecuTorch's decomposed SiLU; the ONNX importer matches it before lowering).
        Methods with jumps are left as they are. Returns how many it replaced."""
        if any(ins[0] != "kernel" for ins in self._instructions):
            return 0
        uses = self._uses()
        writers: Dict[int, List[int]] = {}
        for pc, ins in enumerate(self._instructions):
            writers.setdefault(ins[2][-1], []).append(pc)
        drop: set = set()
        count = 0
        for pc, (_, op, args) in enumerate(self._instructions):
            if op != "mul" or len(args) != 3:
                continue
            for x, s in ((args[0], args[1]), (args[1], args[0])):
                spc = (writers.get(s) or [None])[0]
                if spc is None or len(writers[s]) != 1 or spc > pc or uses.get(s) != 2:
                    continue
                _, sop, sargs = self._instructions[spc]
                if sop != "sigmoid" or sargs[0] != x or \
                        any(spc < w_pc < pc for w_pc in writers.get(x, [])):
                    continue
                drop.add(spc)
                count += 1
                xpc = writers.get(x, [None])[0]
                if xpc is not None and len(writers[x]) == 1 and uses.get(x) == 3 and \
                        writers.get(args[2]) == [pc] and \
                        self._instructions[xpc][1] in ("conv2d", "linear") and \
                        self._values[x].dtype == "float32":
                    _, xop, xargs = self._instructions[xpc]
                    extra = [self.scalar(6).index, self.scalar(0.0).index,
                             self.scalar(0.0).index]  # silu (docs/ops.md, linear_act)
                    self._instructions[xpc] = ("kernel", xop + "_act",
                                               xargs[:-1] + extra + [args[2]])
                    drop.add(pc)
                else:
                    self._instructions[pc] = ("kernel", "silu", [x, args[2]])
                break
        self._instructions = [ins for pc, ins in enumerate(self._instructions) if pc not in drop]
        return count

    def _scalar_constant(self, index: int) -> Optional[float]:
        """The value of a one-element float constant tensor, else None."""
        v = self._values[index]
        if v.kind != w.TENSOR or v.constant == w.NO_INDEX or v.storage != w.CONSTANT or \
                v.dtype not in ("float32", "float64") or math.prod(v.shape) != 1:
            return None
        raw = self.program._constants[v.constant][0]
        return struct.unpack("<f" if v.dtype == "float32" else "<d", bytes(raw))[0]

    def fuse_rms_norm(self) -> int:
        """Replace each RMS normalisation over the last axis written out as mul(x, x) (or
        pow(x, 2)), reduce_mean over -1 keeping it, add of a one-element epsilon, sqrt,
        reciprocal, mul by x (ExecuTorch's Llama and T5 exports) by one rms_norm, and a mul of
        its result by a constant with its last sizes (the weight) by rms_norm's scale, when
        nothing else reads the pieces. Methods with jumps are left as they are. Returns how
        many chains it replaced."""
        if any(ins[0] != "kernel" for ins in self._instructions):
            return 0
        uses = self._uses()
        writer: Dict[int, int] = {}
        for pc, ins in enumerate(self._instructions):
            writer[ins[2][-1]] = pc if ins[2][-1] not in writer else -1  # -1: written twice
        ins_of = self._instructions

        def sole(index: int, op: str) -> Optional[int]:
            """The pc of the one `op` writing value `index` that one other argument reads."""
            pc = writer.get(index)
            return pc if pc is not None and pc >= 0 and ins_of[pc][1] == op and \
                uses.get(index) == 2 else None

        drop: set = set()
        replaced = 0
        for pc, (_, op, args) in enumerate(ins_of):
            if op != "mul" or len(args) != 3 or pc in drop:
                continue
            for x, r in ((args[0], args[1]), (args[1], args[0])):
                chain = [sole(r, "reciprocal")]
                chain.append(sole(ins_of[chain[-1]][2][0], "sqrt") if chain[-1] is not None
                             else None)
                add = sole(ins_of[chain[-1]][2][0], "add") if chain[-1] is not None else None
                if add is None:
                    continue
                a0, a1 = ins_of[add][2][:2]
                eps, mean_value = ((self._scalar_constant(a1), a0)
                                   if self._scalar_constant(a1) is not None
                                   else (self._scalar_constant(a0), a1))
                mean = sole(mean_value, "reduce_mean")
                if eps is None or mean is None:
                    continue
                sq_value, axes, keep = ins_of[mean][2][:3]
                rank = len(self._values[x].shape)
                if self._values[axes].kind != w.INT_LIST or \
                        self._values[axes].items not in ([-1], [rank - 1]) or \
                        self._values[keep].payload is not True:
                    continue
                square = sole(sq_value, "mul")
                if square is not None and ins_of[square][2][:2] != [x, x]:
                    square = None
                if square is None:
                    square = sole(sq_value, "pow")
                    if square is not None and (ins_of[square][2][0] != x or
                                               self._scalar_constant(ins_of[square][2][1]) != 2):
                        square = None
                chain += [add, mean, square]
                if None in chain or any(pc2 in drop for pc2 in chain) or \
                        writer.get(x) == -1 or \
                        self._values[x].dtype not in ("float32", "float64"):
                    continue  # (x written once at most: the chain reads one value of it)
                drop.update(chain)
                ins_of[pc] = ("kernel", "rms_norm", [x, self.none().index, self.scalar(-1).index,
                                                     self.scalar(float(eps)).index, args[2]])
                replaced += 1
                break
        self._instructions = [ins for pc, ins in enumerate(ins_of) if pc not in drop]
        if replaced:
            self._fold_rms_norm_weights()
        return replaced

    def _fold_rms_norm_weights(self) -> None:
        """mul(rms_norm(x) without a scale, w) with w a constant of x's last sizes (leading 1s
        aside) and the rms_norm result read by nothing else -> rms_norm(x, w)."""
        uses = self._uses()
        writer = {ins[2][-1]: pc for pc, ins in enumerate(self._instructions)}
        drop: set = set()
        for pc, (_, op, args) in enumerate(self._instructions):
            if op != "mul" or len(args) != 3:
                continue
            for y, weight in ((args[0], args[1]), (args[1], args[0])):
                npc = writer.get(y)
                if npc is None or self._instructions[npc][1] != "rms_norm" or uses.get(y) != 2:
                    continue
                x, scale, axis, eps, _ = self._instructions[npc][2]
                wv, xv = self._values[weight], self._values[x]
                kept = list(wv.shape)
                while kept and kept[0] == 1:
                    kept.pop(0)
                if self._values[scale].kind != w.NONE or wv.kind != w.TENSOR or \
                        wv.storage != w.CONSTANT or wv.dtype != xv.dtype or wv.dynamic or \
                        len(kept) > len(xv.shape) or \
                        list(xv.shape[len(xv.shape) - len(kept):]) != kept:
                    continue  # (a dynamic x's last sizes are checked again at each run)
                self._instructions[npc] = ("kernel", "rms_norm", [x, weight, axis, eps, args[2]])
                drop.add(pc)
                break
        self._instructions = [ins for pc, ins in enumerate(self._instructions) if pc not in drop]

    # attention's layout bits (docs/ops.md): q, k, v, out read as [B, S, H, D].
    _ATTENTION_SEQ_MAJOR = (1, 2, 4, 8)

    def fuse_attention_layouts(self) -> int:
        """Let each attention op read its q, k and v through the transposes that make them
        [B, H, S, D] (a chain of transposes whose composition is the identity, or the swap of
        dims 1 and 2 that its layout bits express), and write its out through a following
        transpose by (0, 2, 1, 3), when nothing else reads what the transposes make; those
        transposes are dropped. Methods with jumps are left as they are. Returns how many
        transposes it removed."""
        if any(ins[0] != "kernel" for ins in self._instructions):
            return 0
        uses = self._uses()
        writer: Dict[int, int] = {}
        for pc, ins in enumerate(self._instructions):
            writer[ins[2][-1]] = pc if ins[2][-1] not in writer else -1
        readers: Dict[int, List[int]] = {}
        for pc, ins in enumerate(self._instructions):
            for i in ins[2][:-1]:
                readers.setdefault(i, []).append(pc)
        drop: set = set()

        def transpose_of(index: int) -> Optional[Tuple[int, List[int]]]:
            """(pc, perm) of the one transpose writing `index`, read by one argument only."""
            pc = writer.get(index)
            if pc is None or pc < 0 or pc in drop or self._instructions[pc][1] != "transpose" \
                    or uses.get(index) != 2:
                return None
            return pc, list(self._values[self._instructions[pc][2][1]].items)

        for pc, (_, op, args) in enumerate(self._instructions):
            if op != "attention" or len(args) != 10:
                continue
            layout = self._values[args[8]].payload
            args = list(args)
            for position, bit in zip(range(3), self._ATTENTION_SEQ_MAJOR):
                if layout & bit:
                    continue
                composed, chain, index, best = [0, 1, 2, 3], [], args[position], None
                while True:
                    found = transpose_of(index)
                    if found is None or len(found[1]) != 4:
                        break
                    chain.append(found[0])
                    composed = [found[1][c] for c in composed]
                    index = self._instructions[found[0]][2][0]
                    if composed in ([0, 1, 2, 3], [0, 2, 1, 3]):
                        best = (index, list(chain), composed != [0, 1, 2, 3])
                if best is not None:
                    args[position] = best[0]
                    drop.update(best[1])
                    layout |= bit if best[2] else 0
            out_readers = readers.get(args[9], [])
            if not layout & 8 and uses.get(args[9]) == 2 and len(out_readers) == 1:
                tpc = out_readers[0]
                _, top, targs = self._instructions[tpc]
                if top == "transpose" and tpc > pc and writer.get(targs[2]) == tpc and \
                        list(self._values[targs[1]].items) == [0, 2, 1, 3]:
                    args[9] = targs[2]
                    drop.add(tpc)
                    layout |= 8
            args[8] = self.scalar(layout).index
            self._instructions[pc] = ("kernel", "attention", args)
        self._instructions = [ins for pc, ins in enumerate(self._instructions) if pc not in drop]
        return len(drop)

    def replace_argument(self, pc: int, position: int, value: Value) -> None:
        """Make instruction `pc` read `value` as its argument `position` (used by fusions)."""
        kind, op, args = self._instructions[pc]
        args = list(args)
        args[position] = self._own(value).index
        self._instructions[pc] = (kind, op, args)

    def _live_values(self) -> List[Value]:
        """The values the method uses, in creation order. Values made and then abandoned (a
        constant replaced by a fusion, say) are left out of the file, with their constants."""
        used = {v.index for v, _ in self._inputs + self._outputs}
        used.update(v.index for _, v in self._attributes)
        for ins in self._instructions:
            indices = ins[2] if ins[0] == "kernel" else ([ins[3]] if ins[3] is not None else [])
            for i in indices:
                used.add(i)
                if self._values[i].kind == w.TENSOR_LIST:
                    used.update(t.index for t in self._values[i].items)
        return [v for v in self._values if v.index in used]

    def _plan(self):
        """Lifetimes and offsets of every arena tensor."""
        uses: Dict[int, List[int]] = {}
        loops = []
        for pc, ins in enumerate(self._instructions):
            if ins[0] == "kernel":
                for idx in ins[2]:
                    v = self._values[idx]
                    for t in (v.items if v.kind == w.TENSOR_LIST else [v]):
                        uses.setdefault(t.index, []).append(pc)
            else:
                label = ins[2]
                if label.position is None:
                    raise ValueError(f"method '{self.name}': a jump targets an unplaced label")
                if ins[3] is not None:
                    uses.setdefault(ins[3], []).append(pc)
                if label.position <= pc:
                    loops.append((label.position, pc))
        planned = {v.index: _nbytes(v) for v in self._values if v.is_tensor and v.storage == w.ARENA}
        live = lifetimes(len(self._instructions), uses, [v.index for v, _ in self._inputs],
                         [v.index for v, _ in self._outputs], loops)
        return plan(planned, live)


class ProgramBuilder:
    """Collects methods, constants and bundled test cases and serializes them into program
    format v1 (v1.1 when the program has bundled cases or external constants)."""

    def __init__(self) -> None:
        self._methods: List[MethodBuilder] = []
        # (bytes, name, dtype, shape, data file key or None)
        self._constants: List[Tuple[bytes, Optional[str], str, Tuple[int, ...], Optional[str]]] = []
        self._cases: List[Tuple[str, List[Tuple[Any, ...]], List[Tuple[Any, ...]]]] = []

    def method(self, name: str = "forward") -> MethodBuilder:
        if any(m.name == name for m in self._methods):
            raise ValueError(f"method '{name}' already exists")
        m = MethodBuilder(self, name)
        self._methods.append(m)
        return m

    def _add_constant(self, raw: bytes, name: Optional[str], dtype: str,
                      shape: Tuple[int, ...], key: Optional[str] = None) -> int:
        if key is not None and (not key or "\0" in key):
            raise ValueError(f"constant key {key!r} is empty or contains a NUL character")
        self._constants.append((raw, name, dtype, tuple(shape), key))
        return len(self._constants) - 1

    def _method(self, name: str) -> MethodBuilder:
        for m in self._methods:
            if m.name == name:
                return m
        raise ValueError(f"no method '{name}' (methods: {[m.name for m in self._methods]})")

    # ---- bundled test cases ------------------------------------------------------------------

    def add_bundled_case(self, method: str, inputs: Sequence[Any],
                         expected_outputs: Sequence[Any]) -> int:
        """Store a test case of `method` in the program: its inputs and the outputs a trusted
        reference computed for them (Method.verify_bundled compares against these; computing
        them with this runtime would test nothing). Tensors are numpy arrays, runtime_py
        Tensors or, for inputs and outputs of static shape, buffers of exactly their bytes;
        scalars are Python numbers. Returns the case's index among the method's cases. Call it
        once the method's inputs and outputs are declared."""
        m = self._method(method)
        ins = [_case_value(method, "input", i, v, item)
               for i, ((v, _), item) in enumerate(_pairs(method, "inputs", m._inputs, inputs))]
        outs = [_case_value(method, "expected output", i, v, item)
                for i, ((v, _), item) in enumerate(_pairs(method, "expected outputs",
                                                          m._outputs, expected_outputs))]
        self._cases.append((method, ins, outs))
        return sum(1 for c in self._cases if c[0] == method) - 1

    def memory_report(self) -> Dict[str, Tuple[int, int]]:
        """Per method: (planned arena bytes, unplanned sum of tensor bytes)."""
        return {m.name: (p.arena_size, p.unplanned_size)
                for m, p in ((m, m._plan()) for m in self._methods)}

    @staticmethod
    def constant_key(raw: bytes, dtype: str, shape: Sequence[int]) -> str:
        """The default data file key of a constant: a digest of dtype, shape and bytes, so that
        equal weights get equal keys in every program (and programs can share a data file)."""
        import hashlib

        dims = [int(s) for s in shape]
        h = hashlib.sha256(f"{_dtypes.normalize(dtype)}{dims}".encode("ascii"))
        h.update(raw)
        return "sha256-" + h.hexdigest()

    def to_bytes(self, external_data: Any = None) -> bytes:
        """The program file's bytes. With `external_data` (a path), every constant is left to
        that data file under its key (MethodBuilder.constant(key=...) or constant_key()), and
        the file is written: created, or extended with the keys it lacks, so that several
        programs can share it. Bundled cases always stay in the program."""
        strings = w.StringTable()
        op_index: Dict[str, int] = {}
        ops: List[int] = []
        words: List[int] = []
        values: List[bytes] = []
        instructions: List[bytes] = []
        methods: List[bytes] = []

        def put_words(items: Sequence[int]) -> int:
            start = len(words)
            words.extend(items)
            return start

        live = {m.name: m._live_values() for m in self._methods}
        kept = sorted({v.constant for vs in live.values() for v in vs
                       if v.is_tensor and v.storage != w.ARENA and v.constant != w.NO_INDEX})
        constant_index = {old: new for new, old in enumerate(kept)}
        for m in self._methods:
            p = m._plan()
            index = {v.index: i for i, v in enumerate(live[m.name])}
            value_start = len(values)
            for v in live[m.name]:
                values.append(_encode_value(v, p.offsets, strings, put_words, index, constant_index))
            instr_start = len(instructions)
            for ins in m._instructions:
                if ins[0] == "kernel":
                    if ins[1] not in op_index:
                        op_index[ins[1]] = len(ops)
                        ops.append(strings.add(ins[1]))
                    args = [index[i] for i in ins[2]]
                    instructions.append(w.INSTRUCTION_RECORD.pack(
                        w.KERNEL, op_index[ins[1]], put_words(args), len(args)))
                else:
                    cond = index[ins[3]] if ins[3] is not None else 0
                    instructions.append(w.INSTRUCTION_RECORD.pack(ins[1], ins[2].position, cond, 0))
            io = lambda pairs: put_words([x for v, n in pairs
                                          for x in (index[v.index], strings.add(n) if n else -1)])
            inputs = io(m._inputs)
            outputs = io(m._outputs)
            arenas = put_words([p.arena_size] if p.offsets else [])
            attrs = put_words([x for n, v in m._attributes for x in (strings.add(n), index[v.index])])
            methods.append(w.METHOD_RECORD.pack(
                strings.add(m.name), 0, value_start, len(live[m.name]), instr_start,
                len(m._instructions), inputs, len(m._inputs), outputs, len(m._outputs), arenas,
                1 if p.offsets else 0, attrs, len(m._attributes), 0, 0))
        constants: List[Tuple[Any, ...]] = []
        external: Dict[str, Any] = {}
        for old in kept:
            raw, name, dtype, shape, key = self._constants[old]
            if external_data is None:
                constants.append((raw, strings.add(name) if name else w.NO_INDEX))
                continue
            from .datafile import DataEntry

            key = key or self.constant_key(raw, dtype, shape)
            external[key] = DataEntry(dtype, shape, raw)
            constants.append((len(raw), strings.add(key), w.CONSTANT_EXTERNAL))
        bundle = self._encode_cases(constants, put_words)
        data = w.encode_program(strings, ops, constants, words, values, instructions, methods,
                                bundle)
        if external_data is not None:
            from .datafile import write_data_file

            write_data_file(external_data, external)
        return data

    def _encode_cases(self, constants: List[Tuple[Any, ...]], put_words: Any) -> bytes:
        """The BUNDLE section's body; each case tensor becomes a constant of the program."""
        if not self._cases:
            return b""
        order = {m.name: i for i, m in enumerate(self._methods)}
        cases, records = [], []
        for method, ins, outs in self._cases:
            m = self._method(method)
            if len(ins) != len(m._inputs) or len(outs) != len(m._outputs):
                raise ValueError(f"method '{method}': a bundled case has {len(ins)} inputs and "
                                 f"{len(outs)} outputs, but the method now has "
                                 f"{len(m._inputs)} and {len(m._outputs)}")
            first = len(records)
            for item in ins + outs:
                if item[0] == w.TENSOR:
                    _, dtype, shape, raw = item
                    d = _dtypes.get(dtype)
                    constants.append((raw, w.NO_INDEX))
                    records.append(w.BUNDLE_VALUE_RECORD.pack(
                        w.TENSOR, len(shape), 0, d.code, d.bits, 1, put_words(shape),
                        len(constants) - 1, 0, 0))
                else:
                    kind, payload = item
                    records.append(w.BUNDLE_VALUE_RECORD.pack(kind, 0, 0, 0, 0, 0, 0, 0, 0,
                                                              payload))
            cases.append(w.BUNDLE_CASE_RECORD.pack(order[method], first, len(ins), len(outs)))
        return struct.pack("<II", len(cases), len(records)) + b"".join(cases) + b"".join(records)

    def save(self, path: Any, external_data: Any = None) -> None:
        """Write the program to `path` atomically: a process that has the old file mapped keeps
        reading the old bytes (rewriting a mapped file in place would change them under it).
        `external_data` as for to_bytes()."""
        from .._files import write_atomically

        write_atomically(path, self.to_bytes(external_data=external_data))


# ---- helpers --------------------------------------------------------------------------------

def _pair(v: Any) -> List[int]:
    if isinstance(v, int):
        return [v, v]
    return [int(x) for x in v]


def _nbytes(v: Value) -> int:
    n = _dtypes.itemsize(v.dtype)
    for s in v.shape:
        n *= s
    return n


def _tensor_bytes(data: Any, dtype: Any, shape: Optional[Sequence[int]]):
    """(raw bytes, dtype name, shape) of a constant given as an array or as bytes."""
    iface = getattr(data, "__array_interface__", None)
    if iface is not None:
        import numpy as np  # only reached when the caller already holds a numpy-like array

        arr = np.asarray(data, order="C")  # not ascontiguousarray: it makes 0-d arrays 1-d
        name = _dtypes.normalize(arr.dtype if dtype is None else dtype)
        if dtype is not None and _dtypes.normalize(arr.dtype) != name:
            arr = arr.astype(name)
        if shape is not None and tuple(shape) != arr.shape:
            arr = arr.reshape(tuple(shape))
        return arr.tobytes(), name, arr.shape
    if dtype is None or shape is None:
        raise ValueError("a constant from raw bytes needs dtype and shape")
    raw = bytes(memoryview(data).cast("B"))
    name = _dtypes.normalize(dtype)
    n = _dtypes.itemsize(name)
    for s in shape:
        n *= int(s)
    if n != len(raw):
        raise ValueError(f"constant data holds {len(raw)} bytes but {name}{list(shape)} needs {n}")
    return raw, name, tuple(int(s) for s in shape)


def _pairs(method: str, what: str, declared: Sequence[Any], given: Sequence[Any]):
    given = list(given)
    if len(given) != len(declared):
        raise ValueError(f"method '{method}': a bundled case needs {len(declared)} {what}, "
                         f"got {len(given)}")
    return zip(declared, given)


def _case_value(method: str, what: str, index: int, v: Value, item: Any) -> Tuple[Any, ...]:
    """(TENSOR, dtype, shape, bytes) or (scalar kind, payload) for one value of a bundled
    case, checked against the method's value `v`."""
    where = f"method '{method}': bundled {what} {index}"
    if v.kind in (w.INT, w.DOUBLE, w.BOOL):
        import operator

        try:
            if v.kind == w.DOUBLE:
                return (w.DOUBLE, struct.unpack("<q", struct.pack("<d", float(item)))[0])
            if v.kind == w.BOOL:
                flag = int(bool(item)) if type(item).__name__ in ("bool", "bool_") \
                    else operator.index(item)
                if flag not in (0, 1):
                    raise ValueError(item)
                return (w.BOOL, flag)
            return (w.INT, operator.index(item))
        except (TypeError, ValueError):
            kind = {w.INT: "int", w.DOUBLE: "float", w.BOOL: "bool"}[v.kind]
            raise ValueError(f"{where} must be a Python {kind}, not {item!r}") from None
    if not v.is_tensor:
        raise ValueError(f"{where}: the method's value is not a tensor or scalar")
    from ..tensor import Tensor

    if isinstance(item, Tensor):
        dtype, shape, raw = item.dtype, tuple(item.shape), item.tobytes()
    elif getattr(item, "__array_interface__", None) is not None:
        raw, dtype, shape = _tensor_bytes(item, None, None)
    else:
        try:
            raw = bytes(memoryview(item).cast("B"))
        except TypeError:
            raise ValueError(f"{where}: cannot read a tensor from {type(item).__name__}") from None
        if v.dynamic:
            raise ValueError(f"{where}: a raw buffer has no shape and the method's is dynamic; "
                             f"pass an array or runtime_py.Tensor")
        dtype, shape = v.dtype, v.shape
        if len(raw) != _nbytes(v):
            raise ValueError(f"{where}: {len(raw)} bytes, but {v.dtype}{list(v.shape)} needs "
                             f"{_nbytes(v)}")
    dtype = _dtypes.normalize(dtype)
    shape = tuple(int(s) for s in shape)
    if dtype != v.dtype:
        raise ValueError(f"{where} has dtype {dtype}, but the method's is {v.dtype}")
    fits = len(shape) == len(v.shape) and all(
        (s <= b if v.dynamic else s == b) for s, b in zip(shape, v.shape))
    if not fits:
        bound = "within the bounds " if v.dynamic else ""
        raise ValueError(f"{where} has shape {list(shape)}, but the method's is "
                         f"{bound}{list(v.shape)}")
    return (w.TENSOR, dtype, shape, raw)


def _encode_value(v: Value, offsets: Dict[int, int], strings: "w.StringTable", put_words,
                  index: Dict[int, int], constant_index: Dict[int, int]) -> bytes:
    """One VALUES record; `index` and `constant_index` renumber the values and constants that
    the file keeps."""
    rec = w.VALUE_RECORD
    if v.kind == w.TENSOR:
        d = _dtypes.get(v.dtype)
        a = put_words(v.shape)
        b = put_words(v.dim_order)
        c = 0 if v.storage == w.ARENA else constant_index.get(v.constant, w.NO_INDEX)
        payload = offsets.get(v.index, 0) if v.storage == w.ARENA else 0
        flags, axes = 0, 0
        if v.dynamic:
            flags = w.FLAG_DYNAMIC
            if v.dynamic_axes is not None:
                flags |= w.FLAG_AXES
                axes = sum(1 << a for a in v.dynamic_axes)
        return rec.pack(w.TENSOR, flags, len(v.shape), v.storage, d.code, d.bits, 1, a, b, c,
                        axes, payload)
    if v.kind in (w.INT, w.BOOL):
        return rec.pack(v.kind, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, int(v.payload))
    if v.kind == w.DOUBLE:
        bits = struct.unpack("<q", struct.pack("<d", float(v.payload)))[0]
        return rec.pack(v.kind, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, bits)
    if v.kind == w.STRING:
        return rec.pack(v.kind, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, strings.add(v.payload))
    if v.kind == w.INT_LIST:
        return rec.pack(v.kind, 0, 0, 0, 0, 0, 0, put_words(v.items), len(v.items), 0, 0, 0)
    if v.kind == w.DOUBLE_LIST:
        bits = [struct.unpack("<q", struct.pack("<d", x))[0] for x in v.items]
        return rec.pack(v.kind, 0, 0, 0, 0, 0, 0, put_words(bits), len(v.items), 0, 0, 0)
    if v.kind == w.TENSOR_LIST:
        return rec.pack(v.kind, 0, 0, 0, 0, 0, 0, put_words([index[t.index] for t in v.items]),
                        len(v.items), 0, 0, 0)
    return rec.pack(w.NONE, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)

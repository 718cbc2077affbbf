"""Lowerings of ExecuTorch's data-movement and tensor-creation operators.

Views and copies (view_copy, squeeze_copy, the dim-order copies, ...) take their result shape
from the out tensor ExecuTorch declares. Tensors that only depend on constants (full, arange,
full_like of a static shape) become constants of the program.
"""
from __future__ import annotations

import math
from typing import List

from ..compiler import shapes as _shapes
from . import _program as P
from ._convert import MAX_GENERATED_BYTES, MethodConverter, lowers, pack_scalar

INT64_MAX = (1 << 63) - 1


def _axis(cx: MethodConverter, axis: int, rank: int) -> int:
    try:
        return _shapes.normalize_axis(cx.op, axis, max(rank, 1))
    except ValueError as e:
        raise cx.fail(str(e)) from None


@lowers("aten::permute_copy.out", args=2)
def permute_copy(cx, a, o):
    dims = cx.ints(a[1])
    spec = cx.spec(a[0])
    if cx.is_constant(a[0]) and len(spec.sizes) == 2 and [d % 2 for d in dims] == [1, 0] \
            and o[0] not in cx.state:
        # A transposed weight: emitted only if something other than addmm -> linear reads it.
        cx.transposes[o[0]] = a[0]
        dtype, sizes, dynamic = cx.out_spec(o[0])
        source = a[0]
        cx.lazy[o[0]] = lambda: cx.new("transpose", cx.tensor(source), [1, 0], dtype=dtype,
                                       shape=sizes, dynamic=dynamic)
        return
    cx.emit("transpose", cx.tensor(a[0]), dims, out=o[0])


@lowers("aten::view_copy.out", "aten::_unsafe_view.out", args=2)
def view_copy(cx, a, o):
    _reshape_to_out(cx, a, o)


@lowers("aten::squeeze_copy.dims_out", "aten::squeeze_copy.dim_out", "aten::unsqueeze_copy.out",
        args=2)
def squeeze_dims(cx, a, o):
    _reshape_to_out(cx, a, o)


@lowers("aten::squeeze_copy.out", args=1)
def squeeze_all(cx, a, o):
    _reshape_to_out(cx, a, o)


@lowers("aten::alias_copy.out", "aten::detach_copy.out", "aten::lift_fresh_copy.out", args=1)
def alias_copy(cx, a, o):
    _copy_to_out(cx, cx.tensor(a[0]), o[0])


def _reshape_to_out(cx, a, o):
    x = cx.tensor(a[0])
    dtype, sizes, dynamic = cx.out_spec(o[0])
    if x.dtype != dtype:
        raise cx.fail(f"changes dtype {x.dtype} to {dtype}")
    if not (dynamic or x.dynamic):
        cx.emit("reshape", x, sizes, out=o[0])
        return
    if cx.op.startswith("aten::unsqueeze_copy"):
        cx.insert_axis(x, _axis(cx, cx.int(a[1]), len(x.shape) + 1), out=o[0])
    elif cx.op.startswith("aten::squeeze_copy"):
        rank = len(x.shape)
        axes = [_axis(cx, d, rank) for d in cx.ints(a[1])] if len(a) > 1 else \
            [d for d in range(rank) if x.shape[d] == 1]
        if len(sizes) != rank - len(axes):  # torch squeezes only the axes of size 1
            axes = [d for d in axes if x.shape[d] == 1]
        if len(sizes) != rank - len(axes):
            raise cx.fail(f"squeezes axes {axes} of a {rank}-d tensor into {len(sizes)} axes")
        cx.drop_axes(x, axes, out=o[0])
    else:
        cx.emit("reshape", x, cx.sizes(a[1]), out=o[0])


@lowers("executorch_prim::et_view.default", args=2)
def et_view(cx, a, o):
    """ExecuTorch's view (no copy there; a reshape here), sizes possibly from sym_size."""
    _reshape_to_out(cx, a, o)


@lowers("aten::sym_size.int", args=2)
def sym_size(cx, a, o):
    """The size of one dimension as an Int value: a constant for a static dimension, a
    run-time size (a shape op, emitted where something needs its value) for a dynamic one."""
    x = cx.tensor(a[0])
    dim = _axis(cx, cx.int(a[1]), len(x.shape))
    if cx.evalue(o[0]).kind != P.K_INT:
        raise cx.fail(f"value {o[0]} must be an int")
    if x.dynamic:  # torch.export asks only for the sizes it cannot fix
        cx.symbolic[o[0]] = lambda: cx.shape_of(x, dim, dim + 1)
    else:
        cx.plan.values[o[0]] = P.EValue(P.K_INT, x.shape[dim])


_PRIM_INT = {"executorch_prim::add.Scalar": lambda x, y: x + y,
             "executorch_prim::sub.Scalar": lambda x, y: x - y,
             "executorch_prim::mul.Scalar": lambda x, y: x * y,
             "executorch_prim::floordiv.Scalar": lambda x, y: x // y if y else None,
             "executorch_prim::mod.Scalar": lambda x, y: x % y if y else None,
             "executorch_prim::sym_max.Scalar": max,
             "executorch_prim::sym_min.Scalar": min}
# The runtime op computing each on one-element int64 tensors (sizes are >= 0, so the div op's
# truncation is floor division).
_PRIM_OPS = {"executorch_prim::add.Scalar": "add", "executorch_prim::sub.Scalar": "sub",
             "executorch_prim::mul.Scalar": "mul", "executorch_prim::floordiv.Scalar": "div",
             "executorch_prim::mod.Scalar": "mod", "executorch_prim::sym_max.Scalar": "max",
             "executorch_prim::sym_min.Scalar": "min"}


@lowers(*_PRIM_INT, args=2)
def prim_int(cx, a, o):
    """Scalar arithmetic on sizes: computed here when both are known, else at run time on
    one-element int64 tensors."""
    if any(i in cx.symbolic for i in a):
        if any(cx.evalue(i).kind != P.K_INT for i in a):
            raise cx.fail("run-time size arithmetic takes ints only")
        op, (x, y) = _PRIM_OPS[cx.op], a
        cx.symbolic[o[0]] = lambda: cx.new(op, cx.size_value(x), cx.size_value(y),
                                            dtype="int64", shape=[1])
        return
    x, y = cx.scalar(a[0]), cx.scalar(a[1])
    result = _PRIM_INT[cx.op](x, y)
    if result is None:
        raise cx.fail("division by zero")
    kind = P.K_DOUBLE if isinstance(result, float) else P.K_INT
    cx.plan.values[o[0]] = P.EValue(kind, result)


@lowers("aten::expand_copy.out", args=3)
def expand_copy(cx, a, o):
    x = cx.tensor(a[0])
    dtype, sizes, dynamic = cx.out_spec(o[0])
    if not dynamic:
        cx.emit("expand", x, sizes, out=o[0])
        return
    # Run-time sizes: each -1 keeps x's size, a symbolic size is read at run time.
    items = cx.evalue(a[1]).payload if cx.evalue(a[1]).kind == P.K_INT_LIST else None
    if items is None:
        raise cx.fail(f"value {a[1]} must be an int list")
    lead = len(items) - len(x.shape)
    shape = []
    for k, j in enumerate(items):
        if j in cx.symbolic:
            shape.append(cx.size_value(j))
        elif cx.int(j) == -1 and k >= lead:
            shape.append(cx.shape_of(x, k - lead, k - lead + 1) if x.dynamic else
                         x.shape[k - lead])
        else:
            shape.append(cx.int(j))
    cx.emit("expand", x, cx.shape_tensor(shape), out=o[0])


@lowers("aten::select_copy.int_out", args=3)
def select_copy(cx, a, o):
    x = cx.tensor(a[0])
    axis = _axis(cx, cx.int(a[1]), len(x.shape))
    index = cx.int(a[2])
    size = x.shape[axis]
    if not -size <= index < size:
        raise cx.fail(f"index {index} is out of range for dimension {axis} of size {size}")
    cx.emit("gather", x, cx.const(index, "int64"), axis, out=o[0])


@lowers("aten::slice_copy.Tensor_out", args=5)
def slice_copy(cx, a, o):
    """x[start:end:step] along an axis; start and end may be run-time sizes (a position
    table sliced to the sequence length), read by the slice op at every execute."""
    x = cx.tensor(a[0])
    axis = _axis(cx, cx.int(a[1]), len(x.shape))
    step = cx.int(a[4])
    if step < 1:
        raise cx.fail(f"step {step} must be positive")

    def bound(i, default):
        if i in cx.symbolic:
            return cx.size_value(i)
        value = cx.opt_int(i)
        return [default if value is None else value]

    cx.emit("slice", x, bound(a[2], 0), bound(a[3], INT64_MAX), [axis], [step], out=o[0])


@lowers("aten::cat.out", args=2)
def cat(cx, a, o):
    dtype, sizes, _ = cx.out_spec(o[0])
    items = [cx.tensor(i) for i in cx.tensor_items(a[0])]
    # torch skips 1-D empty tensors beside tensors of another rank (legacy behaviour)
    items = [t for t in items if not (list(t.shape) == [0] and len(sizes) != 1)]
    if not items:
        raise cx.fail("concatenates no tensors")
    axis = _axis(cx, cx.int(a[1]), len(sizes))
    cx.emit("concat", [cx.cast(t, dtype) for t in items], axis, out=o[0])


@lowers("aten::stack.out", args=2)
def stack(cx, a, o):
    dtype, sizes, _ = cx.out_spec(o[0])
    axis = _axis(cx, cx.int(a[1]), len(sizes))
    items = []
    for i in cx.tensor_items(a[0]):
        t = cx.tensor(i)
        shape = list(t.shape)
        items.append(cx.reshape(cx.cast(t, dtype), shape[:axis] + [1] + shape[axis:]))
    if not items:
        raise cx.fail("stacks no tensors")
    cx.emit("concat", items, axis, out=o[0])


def _split(cx, x, axis: int, sizes: List[int], outs: List[int]) -> None:
    if len(sizes) != len(outs):
        raise cx.fail(f"splits into {len(sizes)} parts but has {len(outs)} out tensors")
    specs = [cx.out_spec(i) for i in outs]
    results = cx.m.call("split", x, axis, sizes, outputs=specs)
    for i, value in zip(outs, results):
        cx.bind(i, value)


@lowers("aten::split_with_sizes_copy.out", args=3)
def split_with_sizes(cx, a, o):
    x = cx.tensor(a[0])
    _split(cx, x, _axis(cx, cx.int(a[2]), len(x.shape)), cx.ints(a[1]), cx.tensor_items(o[0]))


@lowers("aten::split_copy.Tensor_out", args=3)
def split_copy(cx, a, o):
    x = cx.tensor(a[0])
    axis = _axis(cx, cx.int(a[2]), len(x.shape))
    size, total = cx.int(a[1]), x.shape[axis]
    if size <= 0:
        raise cx.fail(f"split size {size} must be positive")
    sizes = [min(size, total - start) for start in range(0, total, size)] or [0]
    _split(cx, x, axis, sizes, cx.tensor_items(o[0]))


@lowers("aten::unbind_copy.int_out", args=2)
def unbind_copy(cx, a, o):
    x = cx.tensor(a[0])
    axis = _axis(cx, cx.int(a[1]), len(x.shape))
    outs = cx.tensor_items(o[0])
    if len(outs) != x.shape[axis]:
        raise cx.fail(f"unbinds {x.shape[axis]} slices into {len(outs)} out tensors")
    for index, i in enumerate(outs):
        cx.emit("gather", x, cx.const(index, "int64"), axis, out=i)


# ---- copies and dim order ------------------------------------------------------------------

@lowers("aten::clone.out", args=2)
def clone(cx, a, o):
    _copy_to_out(cx, cx.tensor(a[0]), o[0])


@lowers("dim_order_ops::_clone_dim_order.out", "dim_order_ops::_to_dim_order_copy.out",
        "aten::_to_copy.out", args=3)
def dim_order_copy(cx, a, o):
    """A change of dtype and/or memory layout: values stay in logical order here, so only the
    dtype matters (see _convert's module note)."""
    _copy_to_out(cx, cx.tensor(a[0]), o[0])


def _copy_to_out(cx, x, out: int) -> None:
    dtype = cx.out_spec(out)[0]
    cx.emit("cast" if x.dtype != dtype else "copy", x, out=out)


@lowers("aten::copy_", args=3)
def copy_inplace(cx, a, o):
    """self.copy_(src): the update of a mutable buffer (an attribute here)."""
    target = a[0]
    if target not in cx.state:
        raise cx.fail(f"copies into value {target}, which is not a mutable buffer")
    _assign(cx, target, cx.tensor(a[1]))
    cx.env[o[0]] = cx.env[target] if o[0] == target else cx.m.copy(cx.env[target])


@lowers("aten::copy.out", args=3)
def copy_out(cx, a, o):
    src = cx.tensor(a[1])
    dtype, sizes, dynamic = cx.out_spec(o[0])
    if list(src.shape) != sizes:
        src = cx.new("expand", src, sizes, dtype=src.dtype, shape=sizes, dynamic=dynamic)
    _copy_to_out(cx, src, o[0])


def _assign(cx, target: int, src) -> None:
    state = cx.env[target]
    if list(src.shape) != list(state.shape):
        src = cx.new("expand", src, list(state.shape), dtype=src.dtype, shape=state.shape)
    cx.m.call("cast" if src.dtype != state.dtype else "copy", src, out=state)


# ---- creation ------------------------------------------------------------------------------

def _filled_out(cx, value, out: int, size_list=None, like=None) -> None:
    """A tensor filled with value: a constant for a static shape; for a dynamic one a
    constant_of_shape whose shape is read at run time (from the size list, or from `like`)."""
    dtype, sizes, dynamic = cx.out_spec(out)
    if not dynamic:
        cx.bind(out, cx.filled(value, dtype, sizes))
        return
    if like is not None:
        x = cx.tensor(like)
        shape = cx.shape_of(x, 0, len(x.shape)) if x.shape else None
    elif size_list is not None:
        items = cx.evalue(size_list).payload
        shape = cx.shape_tensor([cx.size_value(j) if j in cx.symbolic else cx.int(j)
                                 for j in items]) if items else None
    else:
        raise cx.fail("a filled tensor of dynamic shape without its sizes")
    if shape is None:
        raise cx.fail("a dynamic 0-d tensor")
    cx.emit("constant_of_shape", shape, cx.const(value, dtype), out=out)


@lowers("aten::full.out", args=2)
def full(cx, a, o):
    _filled_out(cx, cx.scalar(a[1]), o[0], size_list=a[0])


@lowers("aten::full_like.out", args=3)
def full_like(cx, a, o):
    _filled_out(cx, cx.scalar(a[1]), o[0], like=a[0])


@lowers("aten::zeros.out", args=1)
def zeros(cx, a, o):
    _filled_out(cx, 0, o[0], size_list=a[0])


@lowers("aten::ones.out", args=1)
def ones(cx, a, o):
    _filled_out(cx, 1, o[0], size_list=a[0])


@lowers("aten::scalar_tensor.out", args=1)
def scalar_tensor(cx, a, o):
    if a[0] in cx.symbolic:  # a run-time size as a 0-d tensor (a KV cache's position)
        dtype = cx.out_spec(o[0])[0]
        size = cx.new("reshape", cx.size_value(a[0]), [], dtype="int64", shape=[])
        cx.bind(o[0], cx.cast(size, dtype))
        return
    _filled_out(cx, cx.scalar(a[0]), o[0])


@lowers("aten::arange.out", args=1)
def arange(cx, a, o):
    if a[0] in cx.symbolic:
        _run_time_arange(cx, None, a[0], None, o[0])
        return
    _arange(cx, 0, cx.scalar(a[0]), 1, o[0])


@lowers("aten::arange.start_out", args=3)
def arange_start(cx, a, o):
    if any(i in cx.symbolic for i in a[:3]):
        _run_time_arange(cx, a[0], a[1], a[2], o[0])
        return
    _arange(cx, cx.scalar(a[0]), cx.scalar(a[1]), cx.scalar(a[2]), o[0])


def _run_time_arange(cx, start, end, step, out: int) -> None:
    """arange with a run-time size among its arguments (positions up to the sequence length):
    the range op, its 0-d arguments cast to the out dtype, planned at the declared bound."""
    dtype = cx.out_spec(out)[0]

    def arg(i, default):
        if i is None:
            return cx.const(default, dtype)
        if i in cx.symbolic:
            size = cx.new("reshape", cx.size_value(i), [], dtype="int64", shape=[])
            return cx.cast(size, dtype)
        return cx.const(cx.scalar(i), dtype)

    cx.emit("range", arg(start, 0), arg(end, 0), arg(step, 1), out=out)


def _arange(cx, start, end, step, out: int) -> None:
    dtype, sizes, _ = cx.out_spec(out)
    if step == 0 or not all(math.isfinite(float(v)) for v in (start, end, step)):
        raise cx.fail(f"arange({start}, {end}, {step}) is not a finite range")
    count = max(0, math.ceil((end - start) / step))
    if sizes != [count]:
        raise cx.fail(f"arange gives {count} values, the program declares {sizes}")
    if count * 8 > MAX_GENERATED_BYTES:
        raise cx.fail(f"arange of {count} values is too large")
    raw = b"".join(pack_scalar(start + k * step, dtype) for k in range(count))
    cx.bind(out, cx.m.constant(raw, dtype, sizes))


# ---- indexing ------------------------------------------------------------------------------

@lowers("aten::embedding.out", args=5)
def embedding(cx, a, o):
    cx.emit("gather", cx.tensor(a[0]), _indices(cx, a[1]), 0, out=o[0])


def _indices(cx, i: int):
    x = cx.tensor(i)
    if x.dtype not in ("int32", "int64"):
        raise cx.fail(f"indices of dtype {x.dtype} are not supported (int32 or int64 only)")
    return x


@lowers("aten::index_select.out", args=3)
def index_select(cx, a, o):
    x = cx.tensor(a[0])
    axis = _axis(cx, cx.int(a[1]), len(x.shape))
    cx.emit("gather", x, _indices(cx, a[2]), axis, out=o[0])


@lowers("aten::index.Tensor_out", args=2)
def index(cx, a, o):
    """x[..., i_0, ..., i_{n-1}, ...]: one index tensor is a gather along its dimension; several
    are broadcast against each other, stacked on a last axis and read with gather_nd, the
    indexed dimensions moved to the front. As in numpy and torch, the result keeps the
    broadcast dimensions in front where the index tensors are apart (a slice between them) and
    moves them back to where they stood where they are adjacent."""
    items = cx.tensor_items(a[1])
    present = [k for k, i in enumerate(items) if i != -1 and not cx.is_none(i)]
    if not present:
        raise cx.fail("indexing without an index tensor")
    for k in present:
        if cx.spec(items[k]).dtype == "bool":
            raise cx.fail("indexing with a boolean mask is not supported")
    x = cx.tensor(a[0])
    if len(present) == 1:
        cx.emit("gather", x, _indices(cx, items[present[0]]), present[0], out=o[0])
        return
    rank, n = len(x.shape), len(present)
    indices = [_indices(cx, items[k]) for k in present]
    zero = cx.const(0, "int64")
    spread = None  # the broadcast of every index tensor, as zeros
    for t in indices:
        t0 = cx.m.mul(cx.cast(t, "int64"), zero)
        spread = t0 if spread is None else cx.m.add(spread, t0)
    stacked = [cx.insert_axis(cx.m.add(cx.cast(t, "int64"), spread), len(spread.shape))
               for t in indices]
    joint = cx.new("concat", stacked, len(spread.shape), dtype="int64",
                   shape=list(spread.shape) + [n], dynamic=spread.dynamic)
    rest = [d for d in range(rank) if d not in present]
    front = present + rest
    source = x if front == list(range(rank)) else cx.new(
        "transpose", x, front, dtype=x.dtype, shape=[x.shape[d] for d in front],
        dynamic=x.dynamic)
    k0 = present[0]
    if k0 == 0 or present != list(range(k0, k0 + n)):
        cx.emit("gather_nd", source, joint, 0, out=o[0])
        return
    b = len(spread.shape)
    gathered_shape = list(spread.shape) + [x.shape[d] for d in rest]
    gathered = cx.new("gather_nd", source, joint, 0, dtype=x.dtype, shape=gathered_shape,
                      dynamic=x.dynamic or spread.dynamic)
    back = list(range(b, b + k0)) + list(range(b)) + list(range(b + k0, len(gathered_shape)))
    cx.emit("transpose", gathered, back, out=o[0])


@lowers("aten::gather.out", args=4)
def gather(cx, a, o):
    x = cx.tensor(a[0])
    axis = _axis(cx, cx.int(a[1]), len(x.shape))
    cx.emit("gather_elements", x, _indices(cx, a[2]), axis, out=o[0])


# ---- padding, tiling, triangles ------------------------------------------------------------

@lowers("aten::constant_pad_nd.out", args=3)
def constant_pad_nd(cx, a, o):
    x = cx.tensor(a[0])
    pad = cx.ints(a[1])
    rank = len(x.shape)
    if len(pad) % 2 or len(pad) // 2 > rank:
        raise cx.fail(f"pad {pad} must give (before, after) pairs for at most {rank} dims")
    full = [0] * (2 * rank)
    for k in range(len(pad) // 2):
        d = rank - 1 - k
        full[d], full[d + rank] = pad[2 * k], pad[2 * k + 1]
    value = cx.const(cx.scalar(a[2]), x.dtype)
    cx.emit("pad", x, full, 0, value, out=o[0])


@lowers("aten::repeat.out", args=2)
def repeat(cx, a, o):
    x = cx.tensor(a[0])
    repeats = cx.ints(a[1])
    if len(repeats) < len(x.shape):
        raise cx.fail(f"repeats {repeats} has fewer items than the input has dimensions")
    x = cx.reshape(x, [1] * (len(repeats) - len(x.shape)) + list(x.shape))
    cx.emit("tile", x, repeats, out=o[0])


@lowers("aten::tril.out", "aten::triu.out", args=2)
def tril(cx, a, o):
    cx.emit("trilu", cx.tensor(a[0]), cx.int(a[1]), cx.op.startswith("aten::triu"), out=o[0])



def _put_along(cx, x, axis: int, index, values, accumulate: bool, out: int) -> None:
    """out = x with x[..., index, ...] (along axis) = values (or += with accumulate): a
    scatter_elements whose indices and updates are expanded over the updated region."""
    if len(index.shape) != 1 or index.dynamic or x.dynamic:
        raise cx.fail("only a static 1-D index tensor is supported")
    region = list(x.shape)
    region[axis] = index.shape[0]
    column = [1] * len(x.shape)
    column[axis] = index.shape[0]
    spread = cx.new("expand", cx.reshape(index, column), region, dtype=index.dtype, shape=region)
    values = cx.cast(values, x.dtype)
    if list(values.shape) != region:
        values = cx.new("expand", values, region, dtype=x.dtype, shape=region)
    cx.emit("scatter_elements", x, spread, values, axis, 1 if accumulate else 0, out=out)


@lowers("aten::index_put.out", args=4)
def index_put(cx, a, o):
    """x[..., idx, ...] = values with one index tensor (a KV-cache update, say)."""
    items = cx.tensor_items(a[1])
    present = [k for k, i in enumerate(items) if i != -1 and not cx.is_none(i)]
    if len(present) != 1:
        raise cx.fail("index_put with more than one index tensor is not supported")
    k = present[0]
    if cx.spec(items[k]).dtype == "bool":
        raise cx.fail("index_put with a boolean mask is not supported")
    _put_along(cx, cx.tensor(a[0]), k, _indices(cx, items[k]), cx.tensor(a[2]),
               bool(cx.scalar(a[3])), o[0])


@lowers("aten::index_copy.out", args=4)
def index_copy(cx, a, o):
    x = cx.tensor(a[0])
    _put_along(cx, x, _axis(cx, cx.int(a[1]), len(x.shape)), _indices(cx, a[2]),
               cx.tensor(a[3]), False, o[0])


@lowers("aten::slice_scatter.out", args=6)
def slice_scatter(cx, a, o):
    """out = x with x[..., start:end:step, ...] = src (a cache written at a fixed range)."""
    x = cx.tensor(a[0])
    axis = _axis(cx, cx.int(a[2]), len(x.shape))
    start, end, step = cx.opt_int(a[3]), cx.opt_int(a[4]), cx.int(a[5])
    if step < 1:
        raise cx.fail(f"step {step} must be positive")
    positions = list(range(x.shape[axis]))[slice(start, end, step)]
    if not positions:
        cx.emit("copy", x, out=o[0])
        return
    index = cx.m.constant(b"".join(pack_scalar(p, "int64") for p in positions), "int64",
                          (len(positions),))
    _put_along(cx, x, axis, index, cx.tensor(a[1]), False, o[0])


@lowers("aten::select_scatter.out", args=4)
def select_scatter(cx, a, o):
    """out = x with x[..., index, ...] = src (src lacks that dimension)."""
    x = cx.tensor(a[0])
    axis = _axis(cx, cx.int(a[2]), len(x.shape))
    index = cx.int(a[3])
    if not -x.shape[axis] <= index < x.shape[axis]:
        raise cx.fail(f"index {index} is out of range for dimension {axis}")
    src = cx.tensor(a[1])
    shape = list(src.shape)
    src = cx.reshape(src, shape[:axis] + [1] + shape[axis:])
    _put_along(cx, x, axis, cx.m.constant(pack_scalar(index % x.shape[axis], "int64"), "int64",
                                          (1,)), src, False, o[0])


@lowers("aten::pixel_shuffle.out", "aten::pixel_unshuffle.out", args=2)
def pixel_shuffle(cx, a, o):
    """depth_to_space / space_to_depth in CRD order (channel c * r^2 + i * r + j), torch's."""
    op = "depth_to_space" if cx.op == "aten::pixel_shuffle.out" else "space_to_depth"
    cx.emit(op, cx.tensor(a[0]), cx.int(a[1]), 1, out=o[0])


@lowers("aten::flip.out", args=2)
def flip(cx, a, o):
    x = cx.tensor(a[0])
    dims = sorted({_axis(cx, d, len(x.shape)) for d in cx.ints(a[1])})
    n = len(dims)
    cx.emit("slice", x, [-1] * n, [-INT64_MAX - 1] * n, dims, [-1] * n, out=o[0])

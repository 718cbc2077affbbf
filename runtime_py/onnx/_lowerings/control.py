"""If, Loop and Scan lowered onto the runtime's jumps.

A subgraph (If branch, Loop or Scan body) is lowered inline by Converter.lower_subgraph: the
names of the enclosing graph stay visible and the body's inputs are bound to program tensors.
Loop-carried values live in tensors of their own, assigned with `copy` at the end of each
iteration, so their dtype and shape (or bounds) must be the same in every iteration. Scan
outputs are collected with `copy_into` into a tensor preallocated at the number of
iterations (or a bound of it), and cut to the iterations actually run with `slice`.

    If:    jump_if_not(cond, else); <then>; copy -> results; jump(end)
           else: <else>; copy -> results; end:
    Loop:  i = 0; cond = cond_init; v = v_init
           top: if !(i < M) or !cond goto done; <body>; copy_into(scan_k, i, 0, acc_k);
                cond, v = body outputs; i = i + 1; goto top
           done:
A known If condition lowers only the branch it selects, with no jumps.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence

import numpy as np

from ... import dtypes as _dtypes
from ...compiler import Value
from .._registry import lowers
from .common import check_attrs

# The largest preallocated scan output; beyond it a bound is refused rather than planned.
_MAX_SCAN_BYTES = 1 << 31


# ---- helpers --------------------------------------------------------------------------------

def _require_tensor_io(cv: Any, graph: Any, what: str) -> None:
    """Subgraph inputs and outputs must be tensors (or untyped): no sequences, maps or
    optionals."""
    for vi in list(graph.input) + list(graph.output):
        kind = vi.type.WhichOneof("value")
        if kind not in (None, "tensor_type"):
            raise cv.fail(f"{what} {'input' if vi in graph.input else 'output'} '{vi.name}' "
                          f"is a {kind.replace('_type', '')}; only tensors are supported")


def _body_outputs(cv: Any, outputs: Sequence[Any], graph: Any, what: str) -> List[Any]:
    for out, vi in zip(outputs, graph.output):
        if out is None:
            raise cv.fail(f"{what} output '{vi.name}' is empty")
    return list(outputs)


def _scalar_bool(cv: Any, x: Value, what: str) -> None:
    if x.dtype != "bool" or x.dynamic or int(np.prod(x.shape)) != 1:
        raise cv.fail(f"{what} must be a bool tensor of one element, not "
                      f"{x.dtype}{list(x.shape)}{' (dynamic)' if x.dynamic else ''}")


def _int64(cv: Any, value: int) -> Value:
    return cv.tensor(np.array(value, dtype=np.int64))


def _assign(cv: Any, src: Any, dst: Value) -> None:
    """dst = src (same dtype; same shape, or one element each; a dynamic src must have
    dst's shape at run, which the copy checks)."""
    v = cv.tensor(src)
    if v is dst:
        return
    if v.dynamic and tuple(v.shape) != tuple(dst.shape):
        cv.m.call("assign", v, out=dst)  # the shape is checked at run
        return
    if tuple(v.shape) != tuple(dst.shape):
        v = cv.m.reshape(v, list(dst.shape))
    cv.m.copy(v, out=dst)


def _check_carried(cv: Any, name: str, out: Any, carried: Value) -> None:
    """The body's new value of a loop-carried variable must fit the tensor that holds it:
    the same dtype, and the same shape (bounds for a dynamic one). A dynamic result of a
    static variable is accepted when the variable's shape lies within its bounds; the copy
    then checks at run that the result has exactly that shape."""
    dtype, shape = cv.dtype_of(out), tuple(cv.shape_of(out))
    if dtype != carried.dtype:
        raise cv.fail(f"loop-carried value '{name}' changes dtype across iterations "
                      f"({carried.dtype} -> {dtype})")
    if shape == tuple(carried.shape) and (carried.dynamic or not cv.is_dynamic(out)):
        return
    if not carried.dynamic and int(np.prod(shape)) == 1 == int(np.prod(carried.shape)) \
            and not cv.is_dynamic(out):
        return  # one element: reshaped
    if not carried.dynamic and cv.is_dynamic(out) and _fits(carried.shape, shape):
        return
    raise cv.fail(f"loop-carried value '{name}' changes shape across iterations "
                  f"({list(carried.shape)} -> {list(shape)}"
                  f"{' (dynamic)' if cv.is_dynamic(out) else ''}); only values of one static "
                  f"shape (or the same bounds) are supported")


def _fits(shape: Sequence[int], bounds: Sequence[int]) -> bool:
    return len(shape) == len(bounds) and all(s <= b for s, b in zip(shape, bounds))


def _declared_shape(graph_output: Any) -> Optional[List[int]]:
    """The static shape a (sub)graph declares for one of its outputs, if it declares one."""
    t = graph_output.type
    if t.WhichOneof("value") != "tensor_type" or not t.tensor_type.HasField("shape"):
        return None
    dims = t.tensor_type.shape.dim
    if not all(d.HasField("dim_value") for d in dims):
        return None
    return [int(d.dim_value) for d in dims]


def _assign_all(cv: Any, pairs: Sequence[Any], state: Sequence[Value]) -> None:
    """Assign (src, dst) pairs as one parallel assignment: a source that is itself one of
    the loop's state tensors (a swap, say) is copied aside before any destination changes."""
    ids = {id(v) for v in state}
    staged = []
    for src, dst in pairs:
        if isinstance(src, Value) and src is not dst and id(src) in ids:
            src = cv.m.copy(src)
        staged.append((src, dst))
    for src, dst in staged:
        _assign(cv, src, dst)


def _declared_rows(cv: Any, name: str) -> Optional[int]:
    """The static size of dimension 0 that the model declares for value `name`, if any."""
    graph = cv.model.graph
    for vi in list(graph.output) + list(graph.value_info):
        if vi.name == name and vi.type.HasField("tensor_type"):
            dims = vi.type.tensor_type.shape.dim
            if len(dims) and dims[0].HasField("dim_value"):
                return int(dims[0].dim_value)
    return None


def _accumulator(cv: Any, value: Any, rows: int, axis: int, what: str,
                 declared: Any) -> Value:
    """A tensor holding `rows` values like `value`, stacked along `axis`. A dynamic value
    takes the static shape its body declares for it (copy_into checks it at run)."""
    shape = list(cv.shape_of(value))
    if cv.is_dynamic(value):
        fixed = _declared_shape(declared)
        if fixed is None or not _fits(fixed, shape):
            raise cv.fail(f"{what} has a dynamic shape (bounds {shape}) and the body declares "
                          f"no static shape within them; scan outputs need one static shape")
        shape = fixed
    shape.insert(axis, rows)
    nbytes = int(np.prod(shape)) * _dtypes.itemsize(cv.dtype_of(value))
    if nbytes > _MAX_SCAN_BYTES:
        raise cv.fail(f"{what} would be preallocated at {shape} ({nbytes} bytes); too large")
    return cv.m.tensor(cv.dtype_of(value), shape)


def _collect(cv: Any, value: Any, index: Value, axis: int, acc: Value) -> None:
    cv.m.call("copy_into", cv.tensor(value), index, axis, out=acc)


def _first_rows(cv: Any, acc: Value, count: Value) -> Value:
    """acc[:count] along axis 0, a dynamic tensor bounded by acc's shape."""
    return cv.m.call("slice", acc, [0], count, [0], None,
                     outputs=[(acc.dtype, list(acc.shape), True)])[0]


# ---- If -------------------------------------------------------------------------------------

def _merge_branch(cv: Any, result: Value, other: Any, k: int) -> None:
    """Make `result` (typed after the then branch) able to hold the else branch's output k:
    equal dtypes; equal shapes, or equal ranks, where the result becomes dynamic with the
    larger size of each dimension as its bound."""
    dtype, shape = cv.dtype_of(other), tuple(cv.shape_of(other))
    if dtype != result.dtype:
        raise cv.fail(f"output {k} is {result.dtype} in then_branch but {dtype} in "
                      f"else_branch; the branches must agree")
    if shape == tuple(result.shape):
        result.dynamic = result.dynamic or cv.is_dynamic(other)
        return
    if len(shape) != len(result.shape):
        raise cv.fail(f"output {k} has shape {list(result.shape)} in then_branch but "
                      f"{list(shape)} in else_branch; branches must give outputs of one rank")
    result.shape = tuple(max(a, b) for a, b in zip(result.shape, shape))
    result.dynamic = True


@lowers("If")
def if_(cv, node, inputs, attrs):
    check_attrs(cv, attrs, ("then_branch", "else_branch"))
    branches = (("then_branch", attrs["then_branch"]), ("else_branch", attrs["else_branch"]))
    for what, graph in branches:
        _require_tensor_io(cv, graph, what)
        if len(graph.output) != len(node.output):
            raise cv.fail(f"{what} has {len(graph.output)} outputs; the node has "
                          f"{len(node.output)}")
    cond = inputs[0]
    if not isinstance(cond, Value):
        arr = np.asarray(cond)
        if arr.size != 1:
            raise cv.fail(f"cond has {arr.size} elements; it must have one")
        what, graph = branches[0] if bool(arr.reshape(-1)[0]) else branches[1]
        return _body_outputs(cv, cv.lower_subgraph(graph, {}, what), graph, what)
    _scalar_bool(cv, cond, "cond")
    m = cv.m
    else_label, end = m.label(), m.label()
    m.jump_if_not(cond, else_label)
    (then_what, then_g), (else_what, else_g) = branches
    outs = _body_outputs(cv, cv.lower_subgraph(then_g, {}, then_what), then_g, then_what)
    results = [m.tensor(cv.dtype_of(v), cv.shape_of(v), cv.is_dynamic(v)) for v in outs]
    for v, r in zip(outs, results):
        m.copy(cv.tensor(v), out=r)
    m.jump(end)
    m.place(else_label)
    outs = _body_outputs(cv, cv.lower_subgraph(else_g, {}, else_what), else_g, else_what)
    for k, (v, r) in enumerate(zip(outs, results)):
        _merge_branch(cv, r, v, k)
        m.copy(cv.tensor(v), out=r)
    m.place(end)
    return results


# ---- Loop -----------------------------------------------------------------------------------

def _trip_count(cv: Any, value: Any) -> Any:
    """None (no limit), a known int, or a run-time int64 tensor of one element."""
    if value is None:
        return None
    if isinstance(value, Value):
        if value.dtype != "int64" or value.dynamic or int(np.prod(value.shape)) != 1:
            raise cv.fail(f"M must be an int64 tensor of one element, not {value.dtype}"
                          f"{list(value.shape)}")
        return value
    arr = np.asarray(value)
    if arr.size != 1:
        raise cv.fail(f"M has {arr.size} elements; it must have one")
    return int(arr.reshape(-1)[0])


def _initial_cond(cv: Any, value: Any) -> Any:
    """True when absent; else a known bool or a run-time tensor."""
    if value is None:
        return True
    if isinstance(value, Value):
        _scalar_bool(cv, value, "cond")
        return value
    arr = np.asarray(value)
    if arr.size != 1:
        raise cv.fail(f"cond has {arr.size} elements; it must have one")
    return bool(arr.reshape(-1)[0])


def _scan_rows(cv: Any, node: Any, k: int, trips: Any) -> int:
    """Rows to preallocate for scan output k: M when known, or what the model declares for
    the output (checked at run by copy_into), whichever is smaller."""
    candidates = [max(trips, 0)] if isinstance(trips, int) else []
    name = node.output[k] if k < len(node.output) else ""
    declared = _declared_rows(cv, name) if name else None
    if declared is not None:
        candidates.append(declared)
    if not candidates:
        raise cv.fail(f"scan output '{name}' needs a known trip count M (or a static first "
                      f"dimension declared for the output) to preallocate its rows")
    return min(candidates)


@lowers("Loop")
def loop(cv, node, inputs, attrs):
    check_attrs(cv, attrs, ("body",))
    body = attrs["body"]
    _require_tensor_io(cv, body, "body")
    inputs = list(inputs) + [None] * max(0, 2 - len(inputs))
    trips, cond0, inits = _trip_count(cv, inputs[0]), _initial_cond(cv, inputs[1]), inputs[2:]
    n = len(inits)
    if len(body.input) != n + 2 or len(body.output) < n + 1:
        raise cv.fail(f"body has {len(body.input)} inputs and {len(body.output)} outputs; "
                      f"with {n} loop-carried values it needs {n + 2} inputs and at least "
                      f"{n + 1} outputs")
    if any(v is None for v in inits):
        raise cv.fail("a loop-carried initial value is empty")
    m = cv.m
    i = m.tensor("int64", ())
    m.copy(_int64(cv, 0), out=i)
    cond = m.tensor("bool", ())
    _assign(cv, np.array(cond0) if isinstance(cond0, bool) else cond0, cond)
    carried = []
    for v in inits:
        t = m.tensor(cv.dtype_of(v), cv.shape_of(v), cv.is_dynamic(v))
        _assign(cv, v, t)
        carried.append(t)
    top, done = m.place(m.label()), m.label()
    if trips is not None:
        m.jump_if_not(m.less(i, trips if isinstance(trips, Value) else _int64(cv, trips)), done)
    m.jump_if_not(cond, done)
    bindings = {body.input[0].name: i, body.input[1].name: cond}
    bindings.update({vi.name: t for vi, t in zip(body.input[2:], carried)})
    outs = _body_outputs(cv, cv.lower_subgraph(body, bindings, "body"), body, "body")
    cond_out, new_values, scans = outs[0], outs[1:n + 1], outs[n + 1:]
    cond_type = (cv.dtype_of(cond_out), int(np.prod(cv.shape_of(cond_out))))
    if cond_type != ("bool", 1) or cv.is_dynamic(cond_out):
        raise cv.fail(f"body output cond must be a bool of one element, not "
                      f"{cond_type[0]}{list(cv.shape_of(cond_out))}")
    for vi, v, t in zip(body.output[1:], new_values, carried):
        _check_carried(cv, vi.name, v, t)
    accs = []
    for k, v in enumerate(scans):
        rows = _scan_rows(cv, node, n + k, trips)
        accs.append(_accumulator(cv, v, rows, 0, f"scan output {k}", body.output[n + 1 + k]))
        _collect(cv, v, i, 0, accs[-1])
    _assign_all(cv, [(cond_out, cond)] + list(zip(new_values, carried)), [i, cond] + carried)
    m.add(i, _int64(cv, 1), out=i)
    m.jump(top)
    m.place(done)
    # With a known M and a condition that stays true, every scan output has M rows exactly.
    exact = (isinstance(trips, int) and cond0 is True and
             (cond_out is cond or (not isinstance(cond_out, Value) and bool(np.asarray(cond_out)))))
    exact = exact and all(acc.shape[0] == max(trips, 0) for acc in accs)
    return carried + [acc if exact else _first_rows(cv, acc, i) for acc in accs]


# ---- Scan -----------------------------------------------------------------------------------

@lowers("Scan")
def scan(cv, node, inputs, attrs):
    if cv.opset < 9:
        return _scan8(cv, node, inputs, attrs)
    check_attrs(cv, attrs, ("body", "num_scan_inputs", "scan_input_axes", "scan_input_directions",
                            "scan_output_axes", "scan_output_directions"))
    body = attrs["body"]
    states, xs = _split_scan_inputs(cv, node, inputs, attrs, body)
    in_axes = _axes(cv, attrs, "scan_input_axes", len(xs), [len(x.shape) for x in xs])
    in_dirs = _directions(cv, attrs, "scan_input_directions", len(xs))
    return _scan_loop(cv, body, states, xs, in_axes, in_dirs, attrs)


def _split_scan_inputs(cv: Any, node: Any, inputs: Sequence[Any], attrs: dict, body: Any):
    """(initial states, scan input tensors) of a Scan node (after sequence_lens for opset 8)."""
    _require_tensor_io(cv, body, "body")
    n_in = int(attrs["num_scan_inputs"])
    n_state = len(inputs) - n_in
    if n_in < 1 or n_state < 0 or len(body.output) < n_state or len(body.input) != len(inputs):
        raise cv.fail(f"num_scan_inputs {n_in} does not fit {len(inputs)} inputs and a body of "
                      f"{len(body.input)} inputs, {len(body.output)} outputs")
    if any(v is None for v in inputs):
        raise cv.fail("an input is empty")
    xs = [cv.tensor(x) for x in inputs[n_state:]]
    if any(x.dynamic for x in xs):
        raise cv.fail("scan inputs with dynamic shapes are not supported")
    return list(inputs[:n_state]), xs


def _scan_loop(cv: Any, body: Any, states: Sequence[Any], xs: Sequence[Value],
               in_axes: Sequence[int], in_dirs: Sequence[int], attrs: dict) -> List[Value]:
    """The loop of one Scan: the final states, then the scan outputs stacked along
    scan_output_axes (attrs) in scan_output_directions."""
    n_state, n_out = len(states), len(body.output) - len(states)
    lengths = {x.shape[a] for x, a in zip(xs, in_axes)}
    if len(lengths) != 1:
        raise cv.fail(f"scan inputs have different lengths {sorted(lengths)} along their axes")
    (steps,) = lengths
    out_dirs = _directions(cv, attrs, "scan_output_directions", n_out)
    m = cv.m
    i = m.tensor("int64", ())
    m.copy(_int64(cv, 0), out=i)
    carried = []
    for v in states:
        t = m.tensor(cv.dtype_of(v), cv.shape_of(v), cv.is_dynamic(v))
        _assign(cv, v, t)
        carried.append(t)
    top, done = m.place(m.label()), m.label()
    m.jump_if_not(m.less(i, _int64(cv, steps)), done)
    reverse_i = m.sub(_int64(cv, steps - 1), i) if any(in_dirs) or any(out_dirs) else None
    bindings = {vi.name: t for vi, t in zip(body.input, carried)}
    for vi, x, axis, d in zip(body.input[n_state:], xs, in_axes, in_dirs):
        shape = list(x.shape[:axis]) + list(x.shape[axis + 1:])
        bindings[vi.name] = m.call("gather", x, reverse_i if d else i, axis,
                                   outputs=[(x.dtype, shape, False)])[0]
    outs = _body_outputs(cv, cv.lower_subgraph(body, bindings, "body"), body, "body")
    new_values, scans = outs[:n_state], outs[n_state:]
    for vi, v, t in zip(body.output, new_values, carried):
        _check_carried(cv, vi.name, v, t)
    out_axes = _axes(cv, attrs, "scan_output_axes", n_out,
                     [len(cv.shape_of(v)) + 1 for v in scans])
    accs = []
    for k, (v, axis, d) in enumerate(zip(scans, out_axes, out_dirs)):
        accs.append(_accumulator(cv, v, steps, axis, f"scan output {k}",
                                 body.output[n_state + k]))
        _collect(cv, v, reverse_i if d else i, axis, accs[-1])
    _assign_all(cv, list(zip(new_values, carried)), [i] + carried)
    m.add(i, _int64(cv, 1), out=i)
    m.jump(top)
    m.place(done)
    return carried + accs


def _scan8(cv: Any, node: Any, inputs: Sequence[Any], attrs: dict) -> List[Value]:
    """Scan-8: every input has a leading batch dimension and scans along dimension 1; a loop
    over the batch runs one Scan per entry. sequence_lens must be absent or all full."""
    check_attrs(cv, attrs, ("body", "num_scan_inputs", "directions"))
    body = attrs["body"]
    lens = inputs[0] if inputs else None
    states, xs = _split_scan_inputs(cv, node, list(inputs[1:]), attrs, body)
    states = [cv.tensor(v) for v in states]
    if any(len(x.shape) < 2 for x in xs) or any(len(v.shape) < 1 for v in states):
        raise cv.fail("Scan-8 inputs need a batch dimension (and scan inputs a sequence one)")
    batch = {v.shape[0] for v in states + xs}
    if len(batch) != 1 or any(v.dynamic for v in states):
        raise cv.fail(f"Scan-8 inputs disagree on the batch size {sorted(batch)}")
    (batch,) = batch
    if lens is not None:
        if isinstance(lens, Value) or np.any(np.asarray(lens) != xs[0].shape[1]):
            raise cv.fail("sequence_lens shorter than the sequence (or known only at run) is "
                          "not supported")
    in_dirs = _directions(cv, attrs, "directions", len(xs))
    m = cv.m
    b = m.tensor("int64", ())
    m.copy(_int64(cv, 0), out=b)
    top, done = m.place(m.label()), m.label()
    m.jump_if_not(m.less(b, _int64(cv, batch)), done)
    entry = [m.call("gather", v, b, 0, outputs=[(v.dtype, list(v.shape[1:]), False)])[0]
             for v in states + xs]
    finals = _scan_loop(cv, body, entry[:len(states)], entry[len(states):], [0] * len(xs),
                        in_dirs, {})
    accs = [m.tensor(v.dtype, [batch] + list(v.shape)) for v in finals]
    for v, acc in zip(finals, accs):
        _collect(cv, v, b, 0, acc)
    m.add(b, _int64(cv, 1), out=b)
    m.jump(top)
    m.place(done)
    return accs


def _axes(cv: Any, attrs: dict, name: str, count: int, ranks: Sequence[int]) -> List[int]:
    axes = [int(a) for a in attrs.get(name, [0] * count)]
    if len(axes) != count:
        raise cv.fail(f"{name} has {len(axes)} items; expected {count}")
    out = []
    for a, rank in zip(axes, ranks):
        if not -rank <= a < rank:
            raise cv.fail(f"{name} item {a} is out of range for rank {rank}")
        out.append(a % rank)
    return out


def _directions(cv: Any, attrs: dict, name: str, count: int) -> List[int]:
    dirs = [int(d) for d in attrs.get(name, [0] * count)]
    if len(dirs) != count or any(d not in (0, 1) for d in dirs):
        raise cv.fail(f"{name} {dirs} must hold {count} values of 0 (forward) or 1 (reverse)")
    return dirs

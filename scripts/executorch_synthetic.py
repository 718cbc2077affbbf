"""Write tests/data/executorch/synthetic.pte: single-operator programs built directly with
ExecuTorch's own schema classes and serializer, for the operators (and instruction kinds and
layouts) that the exported models do not produce because torch.export decomposes them
(rsub, silu, hardswish, stack, unbind, ...), plus MoveCall / FreeCall, a dynamic-bound input,
run-time batch-norm statistics, an old-style file with inline constant buffers
(synthetic_inline.pte), and programs the importer must refuse (refused_*.pte).

Expected outputs come from torch's own out-variant kernels (torch.ops.aten.X.out), called with
the same arguments the .pte lists. Run in the side venv (see export_executorch.py):

    /tmp/venv-et/bin/python scripts/executorch_synthetic.py [OUTPUT_DIR]
"""
from __future__ import annotations

import os
import sys
from typing import Any, Dict, List, Tuple

import numpy as np
import torch
from executorch.exir import schema as S
from executorch.exir._serialize._flatbuffer_program import _program_to_flatbuffer
from executorch.exir._serialize._program import PTEFile, serialize_pte_binary
from executorch.exir.scalar_type import ScalarType

DTYPES = {torch.float32: ScalarType.FLOAT, torch.int64: ScalarType.LONG,
          torch.bool: ScalarType.BOOL, torch.int32: ScalarType.INT}


class Plan:
    """One method under construction: values, inputs, one or more kernel calls."""

    def __init__(self, name: str, program: "ProgramWriter") -> None:
        self.name, self.program = name, program
        self.values: List[S.EValue] = []
        self.inputs: List[int] = []
        self.instructions: List[S.Instruction] = []
        self.operators: List[S.Operator] = []
        self.offset = 0
        self.torch_values: Dict[int, Any] = {}  # value index -> torch value, for the reference

    def _add(self, val: Any, torch_value: Any = None) -> int:
        self.values.append(S.EValue(val))
        self.torch_values[len(self.values) - 1] = torch_value
        return len(self.values) - 1

    def tensor(self, t: torch.Tensor, *, planned: bool = True, constant: bool = False,
               dynamic_bound: bool = False) -> int:
        alloc = None
        buffer_idx = 0
        if constant:
            buffer_idx = self.program.constant(t)
        elif planned:
            alloc = S.AllocationDetails(memory_id=1, memory_offset_low=self.offset,
                                        memory_offset_high=0)
            self.offset += (t.numel() * t.element_size() + 15) // 16 * 16
        spec = S.Tensor(scalar_type=DTYPES[t.dtype], storage_offset=0, sizes=list(t.shape),
                        dim_order=list(range(t.dim())), requires_grad=False, layout=0,
                        data_buffer_idx=buffer_idx, allocation_info=alloc,
                        shape_dynamism=S.TensorShapeDynamism.DYNAMIC_BOUND if dynamic_bound
                        else S.TensorShapeDynamism.STATIC)
        return self._add(spec, t)

    def input(self, t: torch.Tensor, **kw: Any) -> int:
        i = self.tensor(t, **kw)
        self.inputs.append(i)
        return i

    def int(self, v: int) -> int:
        return self._add(S.Int(v), v)

    def double(self, v: float) -> int:
        return self._add(S.Double(v), v)

    def bool(self, v: bool) -> int:
        return self._add(S.Bool(v), v)

    def none(self) -> int:
        return self._add(S.Null(), None)

    def string(self, v: str) -> int:
        return self._add(S.String(v), v)

    def ints(self, items: List[int]) -> int:
        return self._add(S.IntList([self.int(v) for v in items]), list(items))

    def tensors(self, items: List[int]) -> int:
        return self._add(S.TensorList(items), [self.torch_values[i] for i in items])

    def optional_tensors(self, items: List[int]) -> int:
        return self._add(S.OptionalTensorList(items),
                         [None if i == -1 else self.torch_values[i] for i in items])

    def call(self, op: str, args: List[int], outs: List[int], ret: int) -> None:
        name, _, overload = op.partition(".")
        self.operators.append(S.Operator(name=name, overload=overload))
        self.instructions.append(S.Instruction(S.KernelCall(op_index=len(self.operators) - 1,
                                                            args=args + outs + [ret])))
        # torch reference: the same arguments, out tensors by keyword
        ns, base = name.split("::")
        fn = getattr(getattr(getattr(torch.ops, ns), base), overload or "default")
        schema_args = [a for a in fn._schema.arguments]
        values = [self.torch_values[i] for i in args + outs]
        pos, kw = [], {}
        for spec, value in zip(schema_args, values):
            if spec.kwarg_only:
                kw[spec.name] = value
            else:
                pos.append(value)
        fn(*pos, **kw)

    def raw_call(self, op: str, args: List[int]) -> None:
        """A kernel call with no torch reference run (the caller sets the expected values)."""
        name, _, overload = op.partition(".")
        self.operators.append(S.Operator(name=name, overload=overload))
        self.instructions.append(S.Instruction(S.KernelCall(op_index=len(self.operators) - 1,
                                                            args=args)))

    def plan(self, outputs: List[int]) -> S.ExecutionPlan:
        chain = S.Chain(inputs=self.inputs, outputs=outputs, instructions=self.instructions,
                        stacktrace=None)
        return S.ExecutionPlan(name=self.name, container_meta_type=S.ContainerMetadata("", ""),
                               values=self.values, inputs=self.inputs, outputs=outputs,
                               chains=[chain], operators=self.operators, delegates=[],
                               non_const_buffer_sizes=[0, self.offset])


class ProgramWriter:
    def __init__(self) -> None:
        self.buffers: List[S.Buffer] = [S.Buffer(storage=b"")]  # index 0: no data
        self.plans: List[S.ExecutionPlan] = []
        self.arrays: Dict[str, np.ndarray] = {}

    def constant(self, t: torch.Tensor) -> int:
        self.buffers.append(S.Buffer(storage=t.contiguous().numpy().tobytes()))
        return len(self.buffers) - 1

    def add(self, plan: Plan, outputs: List[int], run_inputs: List[torch.Tensor] = None) -> None:
        self.plans.append(plan.plan(outputs))
        inputs = run_inputs or [plan.torch_values[i] for i in plan.inputs]
        for k, t in enumerate(inputs):
            self.arrays[f"{plan.name}_call0_in{k}"] = t.numpy().copy()
        for k, i in enumerate(outputs):
            self.arrays[f"{plan.name}_call0_out{k}"] = plan.torch_values[i].numpy().copy()

    def program(self) -> S.Program:
        return S.Program(version=0, execution_plan=self.plans, constant_buffer=self.buffers,
                         backend_delegate_data=[], segments=[],
                         constant_segment=S.SubsegmentOffsets(segment_index=0, offsets=[]))


def _unary(w: ProgramWriter, name: str, op: str, x: torch.Tensor, extra=(), out_dtype=None):
    p = Plan(name, w)
    a = p.input(x)
    args = [a] + [f(p) for f in extra]
    out = p.tensor(torch.empty(x.shape, dtype=out_dtype or x.dtype))
    p.call(op, args, [out], out)
    w.add(p, [out])


def build(w: ProgramWriter) -> None:
    torch.manual_seed(0)
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    xi = torch.tensor([[7, -7, 9], [-9, 4, 0]])
    b1, b2 = torch.tensor([True, False, True, False]), torch.tensor([True, True, False, False])

    for name, op, t, extra in [
        ("rsub", "aten::rsub.Scalar_out", x, (lambda p: p.double(3.0), lambda p: p.int(2))),
        ("add_scalar", "aten::add.Scalar_out", x, (lambda p: p.double(2.5), lambda p: p.double(1.5))),
        ("div_scalar_floor", "aten::div.Scalar_mode_out", x,
         (lambda p: p.double(0.7), lambda p: p.string("floor"))),
        ("div_scalar_trunc", "aten::div.Scalar_mode_out", x,
         (lambda p: p.double(-0.7), lambda p: p.string("trunc"))),
        ("hardswish", "aten::hardswish.out", x * 4, ()),
        ("tan", "aten::tan.out", x, ()),
        ("reciprocal", "aten::reciprocal.out", x, ()),
        ("silu", "aten::silu.out", x, ()),
        ("hardsigmoid", "aten::hardsigmoid.out", x * 4, ()),
        ("softplus", "aten::softplus.out", x * 10, (lambda p: p.int(1), lambda p: p.int(20))),
        ("rsqrt", "aten::rsqrt.out", x.abs() + 0.1, ()),
        ("expm1", "aten::expm1.out", x, ()),
        ("clamp_int", "aten::clamp.out", xi, (lambda p: p.int(-5), lambda p: p.int(5))),
        ("tril", "aten::tril.out", x, (lambda p: p.int(1),)),
        ("triu", "aten::triu.out", x, (lambda p: p.int(-1),)),
        ("alias_copy", "aten::alias_copy.out", x, ()),
        ("detach_copy", "aten::detach_copy.out", x, ()),
        ("clone", "aten::clone.out", x, (lambda p: p.none(),)),
        ("sum_all", "aten::sum.out", x, (lambda p: p.none(),)),
    ]:
        shape_out = () if name == "sum_all" else x.shape if t is not xi else xi.shape
        p = Plan(name, w)
        a = p.input(t)
        args = [a] + [f(p) for f in extra]
        out = p.tensor(torch.empty(shape_out, dtype=t.dtype))
        p.call(op, args, [out], out)
        w.add(p, [out])

    _unary(w, "isnan", "aten::isnan.out", torch.tensor([1.0, float("nan"), 3.0]),
           out_dtype=torch.bool)
    _unary(w, "bitwise_not", "aten::bitwise_not.out", b1)
    _unary(w, "to_copy_int", "aten::_to_copy.out", x * 3, (lambda p: p.bool(False),
                                                         lambda p: p.none()), torch.int64)

    def binary(name, op, a, b, out_dtype, scalar=None):
        p = Plan(name, w)
        ia = p.input(a)
        ib = p.input(b) if scalar is None else scalar(p)
        out = p.tensor(torch.empty(torch.broadcast_shapes(a.shape, b.shape if scalar is None
                                                          else ()), dtype=out_dtype))
        p.call(op, [ia, ib], [out], out)
        w.add(p, [out])

    binary("mul_bool", "aten::mul.out", b1, b2, torch.bool)
    binary("bitwise_and", "aten::bitwise_and.Tensor_out", b1, b2, torch.bool)
    binary("bitwise_or", "aten::bitwise_or.Tensor_out", b1, b2, torch.bool)
    binary("logical_xor", "aten::logical_xor.out", b1, b2, torch.bool)
    binary("pow_tensor", "aten::pow.Tensor_Tensor_out", x.abs(), y, torch.float32)
    binary("eq_int_float", "aten::eq.Tensor_out", torch.tensor([1, 2, 3]),
           torch.tensor([1.0, 2.5, 3.0]), torch.bool)
    binary("ne_scalar", "aten::ne.Scalar_out", xi, xi, torch.bool, scalar=lambda p: p.int(4))
    binary("lt_tensor", "aten::lt.Tensor_out", x, y, torch.bool)
    binary("ge_tensor", "aten::ge.Tensor_out", x, y[0], torch.bool)
    binary("div_int_true", "aten::div.out", xi, torch.tensor([2, 3, -4]), torch.float32)
    binary("div_scalar_int", "aten::div.Scalar_out", xi.float(), xi, torch.float32,
           scalar=lambda p: p.int(4))

    # argmin over the flattened tensor; any / all over dims
    for name, op, t, extra, shape, dtype in [
        ("argmin_all", "aten::argmin.out", x, (lambda p: p.none(), lambda p: p.bool(False)), (),
         torch.int64),
        ("any_dims", "aten::any.dims_out", x > 0, (lambda p: p.ints([1]), lambda p: p.bool(True)),
         (3, 1), torch.bool),
        ("all_dim", "aten::all.out", x > -1, (lambda p: p.int(0), lambda p: p.bool(False)), (4,),
         torch.bool),
        ("all_all", "aten::all.all_out", x > -3, (), (), torch.bool),
        ("adaptive_even", "aten::_adaptive_avg_pool2d.out", torch.randn(1, 2, 4, 6),
         (lambda p: p.ints([2, 3]),), (1, 2, 2, 3), torch.float32),
        ("adaptive_one", "aten::_adaptive_avg_pool2d.out", torch.randn(1, 2, 4, 6),
         (lambda p: p.ints([1, 1]),), (1, 2, 1, 1), torch.float32),
        ("squeeze_all", "aten::squeeze_copy.out", torch.randn(1, 3, 1, 2), (), (3, 2),
         torch.float32),
        ("squeeze_dim", "aten::squeeze_copy.dim_out", torch.randn(1, 3, 1, 2),
         (lambda p: p.int(2),), (1, 3, 2), torch.float32),
        ("unsafe_view", "aten::_unsafe_view.out", x, (lambda p: p.ints([2, 6]),), (2, 6),
         torch.float32),
        ("masked_fill", "aten::masked_fill.Scalar_out", x, (lambda p: p.input(y > 0),
                                                             lambda p: p.double(-2.0)),
         (3, 4), torch.float32),
        ("copy_broadcast", "aten::copy.out", x, (lambda p: p.input(y[0]), lambda p: p.bool(False)),
         (3, 4), torch.float32),
    ]:
        p = Plan(name, w)
        a = p.input(t)
        args = [a] + [f(p) for f in extra]
        out = p.tensor(torch.empty(shape, dtype=dtype))
        p.call(op, args, [out], out)
        w.add(p, [out])

    # scatters into a copy, shuffles, remainders
    cache = torch.randn(2, 6, 3)
    for name, op, t, extra, shape in [
        ("slice_scatter", "aten::slice_scatter.out", cache,
         (lambda p: p.input(torch.randn(2, 2, 3)), lambda p: p.int(1), lambda p: p.int(1),
          lambda p: p.int(5), lambda p: p.int(2)), (2, 6, 3)),
        ("select_scatter", "aten::select_scatter.out", cache,
         (lambda p: p.input(torch.randn(2, 3)), lambda p: p.int(1), lambda p: p.int(-2)),
         (2, 6, 3)),
        ("index_put_accumulate", "aten::index_put.out", cache,
         (lambda p: p.optional_tensors([-1, p.input(torch.tensor([4, 1, 4]))]),
          lambda p: p.input(torch.randn(3, 3)), lambda p: p.bool(True)), (2, 6, 3)),
        ("pixel_shuffle", "aten::pixel_shuffle.out", torch.randn(1, 8, 2, 3),
         (lambda p: p.int(2),), (1, 2, 4, 6)),
        ("pixel_unshuffle", "aten::pixel_unshuffle.out", torch.randn(1, 2, 4, 6),
         (lambda p: p.int(2),), (1, 8, 2, 3)),
        ("flip", "aten::flip.out", cache, (lambda p: p.ints([0, -1]),), (2, 6, 3)),
        ("remainder", "aten::remainder.Tensor_out", x * 3, (lambda p: p.input(y),), (3, 4)),
        ("fmod_scalar", "aten::fmod.Scalar_out", x * 3, (lambda p: p.double(-0.7),), (3, 4)),
        ("trunc", "aten::trunc.out", x * 3, (), (3, 4)),
    ]:
        p = Plan(name, w)
        a = p.input(t)
        args = [a] + [f(p) for f in extra]
        out = p.tensor(torch.empty(shape, dtype=t.dtype))
        p.call(op, args, [out], out)
        w.add(p, [out])

    # addmm with alpha and beta (not the linear path), and linear.out
    p = Plan("addmm_scaled", w)
    bias, m1 = p.input(torch.randn(1, 5)), p.input(torch.randn(3, 4))
    m2 = p.tensor(torch.randn(4, 5), constant=True)
    out = p.tensor(torch.empty(3, 5))
    p.call("aten::addmm.out", [bias, m1, m2, p.double(2.0), p.double(0.5)], [out], out)
    w.add(p, [out])
    p = Plan("linear", w)
    a = p.input(torch.randn(2, 3, 4))
    weight, bias = p.tensor(torch.randn(5, 4), constant=True), p.tensor(torch.randn(5), constant=True)
    out = p.tensor(torch.empty(2, 3, 5))
    p.call("aten::linear.out", [a, weight, bias], [out], out)
    w.add(p, [out])

    # batch norm whose statistics are inputs (computed at run time)
    p = Plan("batch_norm_runtime", w)
    a = p.input(torch.randn(2, 3, 4, 4))
    mean, var = p.input(torch.randn(3)), p.input(torch.rand(3) + 0.5)
    weight, bias = p.tensor(torch.randn(3), constant=True), p.tensor(torch.randn(3), constant=True)
    outs = [p.tensor(torch.empty(2, 3, 4, 4)), p.tensor(torch.empty(0)), p.tensor(torch.empty(0))]
    p.call("aten::_native_batch_norm_legit_no_training.out",
           [a, weight, bias, mean, var, p.double(0.1), p.double(1e-5)], outs, p.tensors(outs))
    w.add(p, [outs[0]])

    # tensor lists: stack, split_copy, unbind_copy
    p = Plan("stack", w)
    items = [p.input(torch.randn(2, 3)) for _ in range(3)]
    out = p.tensor(torch.empty(2, 3, 3))
    p.call("aten::stack.out", [p.tensors(items), p.int(-1)], [out], out)
    w.add(p, [out])
    p = Plan("split_unbind", w)
    a = p.input(torch.randn(5, 2))
    parts = [p.tensor(torch.empty(2, 2)), p.tensor(torch.empty(2, 2)), p.tensor(torch.empty(1, 2))]
    listed = p.tensors(parts)
    p.call("aten::split_copy.Tensor_out", [a, p.int(2), p.int(0)], [listed], listed)
    rows = [p.tensor(torch.empty(2)) for _ in range(5)]
    rows_list = p.tensors(rows)
    p.call("aten::unbind_copy.int_out", [a, p.int(0)], [rows_list], rows_list)
    w.add(p, parts + rows[::2])

    # creation: zeros, ones, arange.out
    p = Plan("creation", w)
    a = p.input(torch.randn(2, 3))
    z, o = p.tensor(torch.empty(2, 3)), p.tensor(torch.empty(2, 3, dtype=torch.int64))
    r = p.tensor(torch.empty(5, dtype=torch.int64))
    p.call("aten::zeros.out", [p.ints([2, 3])], [z], z)
    p.call("aten::ones.out", [p.ints([2, 3])], [o], o)
    p.call("aten::arange.out", [p.int(5)], [r], r)
    s = p.tensor(torch.empty(2, 3))
    p.call("aten::add.out", [a, z, p.int(1)], [s], s)
    w.add(p, [s, o, r])

    # MoveCall and FreeCall between kernel calls
    p = Plan("move_free", w)
    a = p.input(torch.randn(3, 4))
    moved = p.tensor(torch.empty(3, 4))
    p.instructions.append(S.Instruction(S.MoveCall(move_from=a, move_to=moved)))
    p.torch_values[moved] = p.torch_values[a]
    out = p.tensor(torch.empty(3, 4))
    p.call("aten::relu.out", [moved], [out], out)
    p.instructions.append(S.Instruction(S.FreeCall(value_index=moved)))
    w.add(p, [out])

    # a dynamic-bound input, run with fewer rows than its bound
    p = Plan("dynamic_rows", w)
    small = torch.randn(2, 4)
    a = p.input(torch.zeros(6, 4), dynamic_bound=True)
    out = p.tensor(torch.empty(6, 4), dynamic_bound=True)
    p.torch_values[a] = small
    p.torch_values[out] = torch.empty(0)
    p.call("aten::relu.out", [a], [out], out)
    w.add(p, [out], run_inputs=[small])

    # sizes followed through: view(x, [sym_size(x, 0) * 2, 3]) of a dynamic x, then relu
    p = Plan("dynamic_view", w)
    small = torch.randn(4, 2, 3)
    a = p.input(torch.zeros(6, 2, 3), dynamic_bound=True)
    rows = p.int(0)
    p.raw_call("aten::sym_size.int", [a, p.int(0), rows])
    doubled = p.int(0)
    p.raw_call("executorch_prim::mul.Scalar", [rows, p.int(2), doubled])
    target = p._add(S.IntList([doubled, p.int(3)]), None)
    view = p.tensor(torch.empty(12, 3), dynamic_bound=True)
    p.raw_call("executorch_prim::et_view.default", [a, target, view])
    out = p.tensor(torch.empty(12, 3), dynamic_bound=True)
    p.raw_call("aten::relu.out", [view, out, out])
    p.torch_values[out] = torch.relu(small.reshape(-1, 3))
    w.add(p, [out], run_inputs=[small])


def build_inline(w: ProgramWriter) -> None:
    """An addmm whose weights live in the inline constant_buffer (older files)."""
    torch.manual_seed(1)
    p = Plan("forward", w)
    a = p.input(torch.randn(2, 4))
    weight, bias = p.tensor(torch.randn(4, 3), constant=True), p.tensor(torch.randn(3), constant=True)
    out = p.tensor(torch.empty(2, 3))
    p.call("aten::addmm.out", [bias, a, weight, p.int(1), p.int(1)], [out], out)
    w.add(p, [out])


def build_refused(out_dir: str) -> None:
    """Programs the importer must refuse, each naming instruction and operator:
    refused_NAME.pte; and index_two_tensors.pte (advanced indexing by two index tensors),
    which it used to refuse."""
    torch.manual_seed(2)
    cases = {}
    w = ProgramWriter()
    p = Plan("forward", w)  # the indices of max_pool2d_with_indices are a method output
    a = p.input(torch.randn(1, 1, 4, 4))
    outs = [p.tensor(torch.empty(1, 1, 2, 2)), p.tensor(torch.empty(1, 1, 2, 2, dtype=torch.int64))]
    p.call("aten::max_pool2d_with_indices.out", [a, p.ints([2, 2]), p.ints([2, 2]), p.ints([0, 0]),
                                                  p.ints([1, 1]), p.bool(False)], outs,
           p.tensors(outs))
    w.add(p, outs)
    cases["pool_indices"] = w
    w = ProgramWriter()
    p = Plan("forward", w)  # advanced indexing with two index tensors
    a = p.input(torch.randn(3, 4))
    i0, i1 = p.input(torch.tensor([0, 2])), p.input(torch.tensor([1, 3]))
    out = p.tensor(torch.empty(2))
    p.call("aten::index.Tensor_out", [a, p.optional_tensors([i0, i1])], [out], out)
    w.add(p, [out])
    supported = {"index_two_tensors": w}  # refused once; kept here so the seeds stay as they were
    w = ProgramWriter()
    p = Plan("forward", w)  # x[i0, :, i2]: index tensors apart, broadcast dimensions in front
    a = p.input(torch.randn(3, 2, 4, 5))
    i0, i2 = p.input(torch.tensor([[0], [2]])), p.input(torch.tensor([1, 3, 0]))
    out = p.tensor(torch.empty(2, 3, 2, 5))
    p.call("aten::index.Tensor_out", [a, p.optional_tensors([i0, -1, i2])], [out], out)
    w.add(p, [out])
    supported["index_tensors_apart"] = w
    w = ProgramWriter()
    p = Plan("forward", w)  # a divisor_override
    a = p.input(torch.randn(1, 1, 4, 4))
    out = p.tensor(torch.empty(1, 1, 2, 2))
    p.call("aten::avg_pool2d.out", [a, p.ints([2, 2]), p.ints([2, 2]), p.ints([0, 0]),
                                    p.bool(False), p.bool(True), p.int(3)], [out], out)
    w.add(p, [out])
    cases["divisor_override"] = w
    for name, writer in cases.items():
        data = bytes(serialize_pte_binary(PTEFile(program=writer.program())))
        with open(os.path.join(out_dir, f"refused_{name}.pte"), "wb") as f:
            f.write(data)
        print(f"wrote refused_{name}.pte ({len(data)} bytes)")
    for name, writer in supported.items():
        data = bytes(serialize_pte_binary(PTEFile(program=writer.program())))
        with open(os.path.join(out_dir, f"{name}.pte"), "wb") as f:
            f.write(data)
        print(f"wrote {name}.pte ({len(data)} bytes)")


def main() -> None:
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "executorch")
    w = ProgramWriter()
    build(w)
    data = bytes(serialize_pte_binary(PTEFile(program=w.program())))
    with open(os.path.join(out_dir, "synthetic.pte"), "wb") as f:
        f.write(data)
    np.savez(os.path.join(out_dir, "synthetic.npz"), **w.arrays)
    print(f"wrote synthetic.pte ({len(data)} bytes, {len(w.plans)} methods) and synthetic.npz")
    inline = ProgramWriter()
    build_inline(inline)
    data = _program_to_flatbuffer(inline.program(), constant_tensor_alignment=16,
                                  delegate_alignment=None).data
    with open(os.path.join(out_dir, "synthetic_inline.pte"), "wb") as f:
        f.write(data)
    np.savez(os.path.join(out_dir, "synthetic_inline.npz"), **inline.arrays)
    print(f"wrote synthetic_inline.pte ({len(data)} bytes) and synthetic_inline.npz")
    build_refused(out_dir)


if __name__ == "__main__":
    main()

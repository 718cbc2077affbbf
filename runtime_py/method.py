"""MethodMeta / TensorInfo (metadata read without loading a method) and Method (one instance).

A Method is used by one thread at a time (a second concurrent caller gets InvalidState). It
keeps its Program and every bound input object alive for as long as libruntime may read them.
"""
from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from typing import Any, List, NamedTuple, NoReturn, Optional, Tuple

from . import _inputs
from . import _values as _v
from . import dtypes as _dt
from ._ffi import ffi, get_lib, to_str
from .errors import (ClosedError, Error, InvalidArgument, InvalidState, NotFound, _check,
                     raise_status)
from .tensor import _CPU, Tensor, device_name, owned

_prepare = _inputs.prepare
_buffer = ffi.buffer
_cast = ffi.cast
_view = Tensor._view

__all__ = ["TensorInfo", "MethodMeta", "Method", "ProfileEvent"]

_ALLOW_MUTATE = 2  # RT_INPUT_ALLOW_MUTATE


@dataclass(frozen=True, repr=False)
class TensorInfo:
    """Metadata of one input, output or attribute; shape holds upper bounds when dynamic."""

    name: str
    kind: str
    dtype: Optional[str]
    shape: Tuple[int, ...]
    dynamic: bool
    dim_order: Tuple[int, ...]
    nbytes: int
    is_memory_planned: bool
    is_constant: bool
    # The axes whose size may vary from call to call; the others always have their size.
    dynamic_axes: Tuple[int, ...] = ()

    @property
    def kind_code(self) -> int:
        return _v.KIND_NAMES.index(self.kind) if self.kind in _v.KIND_NAMES else -1

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @classmethod
    def _from_rt(cls, info: Any) -> "TensorInfo":
        kind = int(info.kind)
        rank = max(0, min(int(info.rank), 16))
        is_tensor = kind in (_v.TENSOR, _v.TENSOR_LIST)
        dtype = None
        if is_tensor:
            try:
                dtype = _dt.from_dlpack(info.dtype.code, info.dtype.bits)
            except InvalidArgument:
                dtype = None
        return cls(
            name=to_str(info.name),
            kind=_v.KIND_NAMES[kind] if 0 <= kind < len(_v.KIND_NAMES) else f"kind{kind}",
            dtype=dtype,
            shape=tuple(info.sizes[0:rank]) if is_tensor else (),
            dynamic=bool(info.dynamic),
            dim_order=tuple(info.dim_order[0:rank]) if is_tensor else (),
            nbytes=int(info.nbytes),
            is_memory_planned=bool(info.memory_planned),
            is_constant=bool(info.is_constant),
        )

    def __repr__(self) -> str:
        if self.kind != "tensor":
            return f"TensorInfo(name={self.name!r}, kind={self.kind!r})"
        sizes = ", ".join(f"<={s}" if a in self.dynamic_axes else str(s)
                          for a, s in enumerate(self.shape))  # a tuple's look, bounds marked
        sizes += "," if len(self.shape) == 1 else ""
        return (f"TensorInfo(name={self.name!r}, shape=({sizes}), dtype={self.dtype!r}, "
                f"dynamic={self.dynamic})")


@dataclass(frozen=True, repr=False)
class MethodMeta:
    """Summary of one method of a program: its inputs, outputs, attributes and plan."""

    name: str
    inputs: Tuple[TensorInfo, ...]
    outputs: Tuple[TensorInfo, ...]
    attributes: Tuple[TensorInfo, ...]
    planned_bytes: int
    num_instructions: int
    num_values: int
    num_arenas: int

    @property
    def num_inputs(self) -> int:
        return len(self.inputs)

    @property
    def num_outputs(self) -> int:
        return len(self.outputs)

    def input_tensor_meta(self, index: int) -> TensorInfo:
        return self.inputs[index]

    def output_tensor_meta(self, index: int) -> TensorInfo:
        return self.outputs[index]

    def attribute_meta(self, name: str) -> TensorInfo:
        for info in self.attributes:
            if info.name == name:
                return info
        raise NotFound(f"method {self.name!r} has no attribute {name!r}")

    @classmethod
    def _read(cls, program: Any, name: str) -> "MethodMeta":
        """Copy everything out of rt_program_*_info into Python values."""
        lib = get_lib()
        cname = name.encode("utf-8")
        info = ffi.new("rt_method_info *")
        _check(lib.rt_program_method_info(info, program, cname))
        tinfo = ffi.new("rt_tensor_info *")

        axes = ffi.new("uint32_t *")

        def infos(fn: Any, count: int, axes_fn: Any = None) -> Tuple[TensorInfo, ...]:
            out = []
            for i in range(count):
                _check(fn(tinfo, program, cname, i))
                entry = TensorInfo._from_rt(tinfo)
                if axes_fn is not None and entry.dynamic:
                    _check(axes_fn(axes, program, cname, i))
                    entry = dataclasses.replace(entry, dynamic_axes=tuple(
                        a for a in range(entry.ndim) if axes[0] >> a & 1))
                out.append(entry)
            return tuple(out)

        return cls(
            name=to_str(info.name) or name,
            inputs=infos(lib.rt_program_input_info, info.num_inputs,
                         lib.rt_program_input_dynamic_axes),
            outputs=infos(lib.rt_program_output_info, info.num_outputs,
                          lib.rt_program_output_dynamic_axes),
            attributes=infos(lib.rt_program_attribute_info, info.num_attributes),
            planned_bytes=int(info.planned_bytes),
            num_instructions=int(info.num_instructions),
            num_values=int(info.num_values),
            num_arenas=int(info.num_arenas),
        )

    def __repr__(self) -> str:
        return (f"MethodMeta(name={self.name!r}, inputs={list(self.inputs)!r}, "
                f"outputs={list(self.outputs)!r})")


class ProfileEvent(NamedTuple):
    """One profiled instruction of the last execute (monotonic nanoseconds)."""

    op_name: str
    instruction: int
    start_ns: int
    end_ns: int


class Method:
    """A loaded method: bind inputs, execute, read outputs. Use Program.load_method()."""

    def __init__(self, program: Any, ptr: Any, meta: MethodMeta, *, device: Tuple[int, int],
                 clone_outputs: bool, profile: bool) -> None:
        lib = get_lib()
        self._program = program  # the C side retains too; this keeps borrowed bytes alive
        self._ptr = ptr  # ffi.gc(..., rt_method_destroy)
        self._name = meta.name
        self._meta = meta
        self._device = device
        self._clone = clone_outputs
        self._profile = profile
        self._busy = threading.Lock()
        # DLPack capsules of this method's memory still held by consumers; close() with some
        # alive leaves the destroy to the last one's release (_let_go).
        self._exports = 0
        self._exports_lock = threading.Lock()
        self._doomed: Any = None
        # rt_method_run reads the inputs from one rt_tensor array (slot i fills entry i) and
        # writes the output views into another.
        num_in, num_out = len(meta.inputs), len(meta.outputs)
        self._ins = ffi.new("rt_tensor[]", num_in)
        self._slots = tuple(_inputs.Slot(meta.name, i, info, device, self._ins + i)
                            for i, info in enumerate(meta.inputs))
        self._bound: List[Any] = [None] * num_in
        self._out_kinds = tuple(info.kind_code for info in meta.outputs)
        self._out_static = tuple(not info.dynamic for info in meta.outputs)
        # (nbytes, dtype, shape) of static dense outputs once seen: copying one out then
        # needs only its address (the output may alias a bound input, so that is re-read).
        self._out_known: List[Any] = [None] * num_out
        # (view, nbytes, dtype, shape) of every output once all are known (all tensors):
        # __call__ then copies them out without looking at anything else.
        self._fast_views: Any = None
        self._outs = ffi.new("rt_tensor[]", num_out)
        self._out_views = tuple((self._outs + i, ffi.buffer(self._outs + i))
                                for i in range(num_out))
        # Two call descriptors: bind every input from _ins, or run on the bound ones.
        self._io = ffi.new("rt_run_io *", {"inputs": self._ins, "num_inputs": num_in,
                                           "outputs": self._outs, "num_outputs": num_out})
        self._io_bound = ffi.new("rt_run_io *", {"outputs": self._outs,
                                                 "num_outputs": num_out})
        self._out_t = ffi.new("rt_tensor *")
        self._out_raw = ffi.buffer(self._out_t)
        self._out_s = ffi.new("rt_scalar *")
        self._set_input = lib.rt_method_set_input
        self._set_scalar = lib.rt_method_set_input_scalar
        self._execute = lib.rt_method_execute
        self._run = lib.rt_method_run
        self._output = lib.rt_method_output
        self._output_scalar = lib.rt_method_output_scalar
        self._lib = lib

    # ---- state --------------------------------------------------------------------------

    def _closed_error(self) -> ClosedError:
        return ClosedError(f"operation on closed method {self._name!r}")

    def _enter(self) -> Any:
        ptr = self._ptr
        if ptr is None:
            raise self._closed_error()
        if not self._busy.acquire(False):
            raise InvalidState(f"method {self._name!r} is in use by another thread")
        return ptr

    @property
    def name(self) -> str:
        return self._name

    @property
    def method_meta(self) -> MethodMeta:
        return self._meta

    @property
    def program(self) -> Any:
        return self._program

    @property
    def device(self) -> str:
        return device_name(self._device)

    @property
    def num_inputs(self) -> int:
        return len(self._slots)

    @property
    def num_outputs(self) -> int:
        return len(self._out_kinds)

    @property
    def closed(self) -> bool:
        return self._ptr is None

    def close(self) -> None:
        """Destroy the method now (idempotent); its views become invalid. Memory a DLPack
        consumer still holds is freed when the last such consumer lets go."""
        ptr = self._ptr
        if ptr is None:
            return
        if not self._busy.acquire(False):
            raise InvalidState(f"method {self._name!r} is in use by another thread")
        try:
            self._ptr = None
            with self._exports_lock:
                if self._exports:
                    self._doomed, ptr = ptr, None
            if ptr is not None:
                ffi.release(ptr)
            self._bound = [None] * len(self._slots)
            for slot in self._slots:
                slot.last = None  # its export of the caller's array
        finally:
            self._busy.release()

    def _hold_memory(self) -> Any:
        """Keep this method's memory until the returned callable runs (a DLPack export)."""
        with self._exports_lock:
            if self._ptr is None:
                raise self._closed_error()
            self._exports += 1
        return self._let_go

    def _let_go(self) -> None:
        with self._exports_lock:
            self._exports -= 1
            doomed = self._doomed if self._exports == 0 else None
            if doomed is not None:
                self._doomed = None
        if doomed is not None:
            ffi.release(doomed)

    def __enter__(self) -> "Method":
        if self._ptr is None:
            raise self._closed_error()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __reduce__(self) -> Any:
        raise TypeError(f"cannot pickle method {self._name!r}: a Method is per-process state "
                        f"(bound inputs, attributes); pickle its Program or a Module and load "
                        f"the method on the other side")

    def __repr__(self) -> str:
        state = ", closed" if self._ptr is None else ""
        return (f"Method(name={self._name!r}, device={self.device!r}, "
                f"inputs={len(self._slots)}, outputs={len(self._out_kinds)}{state})")

    # ---- inputs -------------------------------------------------------------------------

    def _bind(self, ptr: Any, index: int, value: Any, flags: int = 0) -> None:
        slot = self._slots[index]
        if slot.kind == _v.TENSOR:
            t, keep = _inputs.tensor_value(slot, value)
            if flags & _ALLOW_MUTATE and slot.readonly:
                self._bound[index] = None
                self._set_input(ptr, index, ffi.NULL, 0)  # unset, as any failed bind does
                raise InvalidArgument(f"{slot.label}: the tensor is read-only ({slot.readonly});"
                                      f" it cannot be bound with allow_mutate=True")
            status = self._set_input(ptr, index, t, flags)
        else:
            keep = None
            status = self._set_scalar(ptr, index, _inputs.scalar_value(slot, value))
        if status:
            self._bound[index] = None  # the library unset the input
            raise_status(status)
        self._bound[index] = keep

    def _bind_all(self, ptr: Any, inputs: Tuple[Any, ...]) -> None:
        if len(inputs) != len(self._slots):
            raise InvalidArgument(
                f"method {self._name!r} takes {len(self._slots)} inputs, got {len(inputs)}")
        for index, value in enumerate(inputs):
            self._bind(ptr, index, value)

    def set_input(self, index: int, value: Any, *, allow_mutate: bool = False) -> None:
        """Bind input `index` (zero copy when the library can; kept referenced until rebound).

        allow_mutate=True lets a method that writes this input in place write into the
        caller's memory instead of a copy (RT_INPUT_ALLOW_MUTATE); a read-only input (bytes, a
        read-only buffer or array, a read-only DLPack capsule) is then refused."""
        ptr = self._enter()
        try:
            if not 0 <= index < len(self._slots):
                raise InvalidArgument(f"method {self._name!r} has no input {index} "
                                      f"(it has {len(self._slots)})")
            self._bind(ptr, index, value, _ALLOW_MUTATE if allow_mutate else 0)
        finally:
            self._busy.release()

    def set_inputs(self, *inputs: Any) -> None:
        """Bind every input, in order."""
        ptr = self._enter()
        try:
            self._bind_all(ptr, inputs)
        finally:
            self._busy.release()

    # ---- execution and outputs ----------------------------------------------------------

    def execute(self) -> None:
        """Run the method on the bound inputs (the GIL is released meanwhile)."""
        ptr = self._enter()
        try:
            status = self._execute(ptr)
            if status:
                raise_status(status)
        finally:
            self._busy.release()

    def _tensor_output(self, index: int, t: Any, raw: Any, clone: bool) -> Tensor:
        """Output `index` from its view in `t` (raw: ffi.buffer(t))."""
        known = self._out_known[index]
        if known is not None and clone:
            nbytes, dtype, shape = known
            data = bytearray(nbytes)
            if nbytes:
                ffi.memmove(data, t.data, nbytes)
            return owned(data, dtype, shape)
        tensor = Tensor._from_rt(t, self, clone, True, raw)
        if self._out_static[index] and tensor.is_contiguous and tensor.device == "cpu":
            self._out_known[index] = (tensor.nbytes, tensor.dtype, tensor.shape)
        return tensor

    def _collect(self, ptr: Any, clone: bool) -> List[Any]:
        outputs: List[Any] = []
        t, s, raw = self._out_t, self._out_s, self._out_raw
        for index, kind in enumerate(self._out_kinds):
            if kind in (_v.INT, _v.DOUBLE, _v.BOOL):
                status = self._output_scalar(s, ptr, index)
                if status:
                    raise_status(status)
                outputs.append(s.d if s.kind == _v.DOUBLE else bool(s.i) if s.kind == _v.BOOL
                               else int(s.i))
            else:
                status = self._output(t, ptr, index)
                if status:
                    raise_status(status)
                outputs.append(self._tensor_output(index, t, raw, clone))
        return outputs

    def _views(self, clone: bool) -> List[Any]:
        """Outputs from the views rt_method_run wrote (scalars as 0-d int64 / float64 / bool
        views of their value)."""
        outputs = []
        for index, (t, raw) in enumerate(self._out_views):
            kind = self._out_kinds[index]
            if kind == _v.DOUBLE:
                outputs.append(ffi.cast("double *", t.data)[0])
            elif kind == _v.BOOL:
                outputs.append(ffi.cast("uint8_t *", t.data)[0] != 0)
            elif kind == _v.INT:
                outputs.append(int(ffi.cast("int64_t *", t.data)[0]))
            else:
                outputs.append(self._tensor_output(index, t, raw, clone))
        if None not in self._out_known:
            self._fast_views = tuple((t, *known) for (t, _), known in
                                     zip(self._out_views, self._out_known))
        return outputs

    def get_outputs(self, clone: Optional[bool] = None) -> List[Any]:
        """Outputs of the last execute: Tensors (copies, or views valid until the next execute
        when clone is False; default: the method's clone_outputs) and Python scalars."""
        ptr = self._enter()
        try:
            return self._collect(ptr, self._clone if clone is None else clone)
        finally:
            self._busy.release()

    def get_output(self, index: int, clone: Optional[bool] = None) -> Any:
        """One output of the last execute."""
        return self.get_outputs(clone)[index]

    def _failed_run(self, ptr: Any, inputs: Tuple[Any, ...], status: int) -> NoReturn:
        """Raise the error of a failed rt_method_run that bound `inputs`, after binding them
        again one at a time: that leaves the same bindings (the inputs before a refused one
        bound, it unset, the later ones as they were; every check answers as before) and
        records which objects they hold, for _bound."""
        try:
            raise_status(status)
        except Error as exc:
            error = exc
        try:
            self._bind_all(ptr, inputs)
        except Exception:  # noqa: BLE001 - the same refusal again; the first one is raised
            pass
        raise error

    def __call__(self, *inputs: Any) -> List[Any]:
        """set_inputs(*inputs) (skipped when called with none), execute(), get_outputs().

        One rt_method_run call binds, runs and views the outputs; inputs that must be bound
        one at a time (see _inputs.prepare) are bound with set_input first. This is the hot
        path of calling a method in a loop, so it is written out flat."""
        ptr = self._ptr
        if ptr is None:
            raise self._closed_error()
        busy = self._busy
        if not busy.acquire(False):
            raise InvalidState(f"method {self._name!r} is in use by another thread")
        try:
            keeps = _prepare(self._slots, inputs) if inputs else None
            if keeps is not None:
                status = self._run(ptr, self._io)
                if status:
                    self._failed_run(ptr, inputs, status)
                self._bound = keeps
            else:
                if inputs:
                    self._bind_all(ptr, inputs)
                status = self._run(ptr, self._io_bound)
                if status:
                    raise_status(status)
            fast = self._fast_views
            if fast is not None:  # static dense CPU outputs: copy them out, or view them
                outputs = []  # a loop: a comprehension is a call of its own before 3.12
                if self._clone:
                    for t, nbytes, dtype, shape in fast:
                        outputs.append(owned(bytearray(_buffer(t.data, nbytes)) if nbytes
                                             else bytearray(), dtype, shape))
                else:
                    for t, nbytes, dtype, shape in fast:
                        outputs.append(_view(int(_cast("uintptr_t", t.data)), dtype, shape,
                                             None, _CPU, self, True))
                return outputs
            return self._views(self._clone)
        finally:
            busy.release()

    def verify_bundled(self, index: int = 0, rtol: float = 1e-5, atol: float = 1e-8) -> Any:
        """Run the program's bundled test case `index` of this method (on the method's current
        state) and compare each output with the expected one: |got - expected| <= atol +
        rtol * |expected| for floats (NaN matches NaN), equality otherwise. Returns a
        BundledResult (outputs, largest errors); raises VerificationError naming the output
        and its worst element (index, got, expected, tolerance) when they differ."""
        from .bundled import verify

        if self._ptr is None:
            raise self._closed_error()
        return verify(self, self._program, int(index), float(rtol), float(atol))

    def get_attribute(self, name: str) -> Tensor:
        """A writable view of a named attribute (state kept across executions), valid until the
        method is closed."""
        ptr = self._enter()
        try:
            t = ffi.new("rt_tensor *")
            _check(self._lib.rt_method_attribute(t, ptr, name.encode("utf-8")))
            return Tensor._from_rt(t, self, False, False)
        finally:
            self._busy.release()

    def profile_events(self) -> List[ProfileEvent]:
        """Per-instruction times of the last execute (methods loaded with profile=True)."""
        ptr = self._enter()
        try:
            if not self._profile:
                raise InvalidState(f"method {self._name!r} was not loaded with profile=True")
            lib = self._lib
            event = ffi.new("rt_profile_event *")
            events = []
            for i in range(lib.rt_method_profile_event_count(ptr)):
                _check(lib.rt_method_profile_event(event, ptr, i))
                events.append(ProfileEvent(to_str(event.op_name), int(event.instruction),
                                           int(event.start_ns), int(event.end_ns)))
            return events
        finally:
            self._busy.release()

"""Program: a verified, immutable program (file mapped or buffer), shareable across threads.

Methods loaded from a program keep it alive (the C side retains it, and each Method references
this object, which in turn references any borrowed buffer), so closing a Program while its
methods are in use is safe.
"""
from __future__ import annotations

import contextlib
import os
import threading
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from ._ffi import ffi, from_buffer, get_lib, to_str
from .errors import ClosedError, InvalidArgument, _check
from .bundled import BundledTest, case_count, read_case
from .method import Method, MethodMeta
from .tensor import parse_device

__all__ = ["Program"]

RT_PROGRAM_COPY = 1
RT_PROGRAM_VERIFY_CONSTANTS = 2
RT_METHOD_PROFILE = 1
_ALIGNMENT = 64

Source = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, Any]

# Uninitialised memory for private copies of program buffers (no memset of the weights).
_new_raw = ffi.new_allocator(should_clear_after_alloc=False)


def _unpickle_program(source: Any, verify_constants: bool,
                      data_files: Sequence[str] = ()) -> "Program":
    """Program.__reduce__'s reconstructor: a path (str) is mapped again, bytes are loaded;
    data files are mapped again from their paths."""
    return Program.load(source, verify_constants=verify_constants, data_files=data_files)


def data_file_paths(data_files: Any) -> Tuple[str, ...]:
    """Absolute paths of a data_files argument: one path or a sequence of paths."""
    if data_files is None:
        return ()
    if isinstance(data_files, (str, bytes, os.PathLike)):
        data_files = [data_files]
    return tuple(os.path.abspath(os.fsdecode(p)) for p in data_files)


def _is_immutable(obj: Any) -> bool:
    if isinstance(obj, memoryview):
        obj = obj.obj
    return isinstance(obj, bytes)


class Program:
    """A loaded program. Create with Program.load(); close() or `with` releases it."""

    def __init__(self) -> None:
        raise TypeError("use Program.load(path_or_buffer)")

    @classmethod
    def load(cls, source: Source, *, copy: Optional[bool] = None,
             verify_constants: bool = False, data_files: Any = ()) -> "Program":
        """Load and verify a program.

        A str / os.PathLike is a file, mapped read-only (constants used in place). Anything
        else is a buffer holding the program: borrowed (zero copy, kept referenced) when it is
        64-byte aligned and immutable (bytes) or copy=False, copied otherwise or with copy=True.
        With copy=False the caller promises not to change the buffer while the program lives.
        data_files: paths of the data files (.rtd) holding the program's external constants,
        each mapped read-only and used in place; verify_constants checks their data too.
        """
        lib = get_lib()
        flags = RT_PROGRAM_VERIFY_CONSTANTS if verify_constants else 0
        paths = data_file_paths(data_files)
        opts = ffi.new("rt_program_options *")
        lib.rt_program_options_init(opts)
        opts.flags = flags
        c_paths = [ffi.new("char[]", os.fsencode(p)) for p in paths]
        c_array = ffi.new("const char *[]", c_paths) if paths else ffi.NULL
        opts.data_files = c_array
        opts.num_data_files = len(paths)
        out = ffi.new("rt_program **")
        keepalive: Any = None
        path: Optional[str] = None
        data: Any = None
        size = 0
        borrow = False
        if isinstance(source, (str, os.PathLike)):
            path = os.path.abspath(os.fsdecode(source))  # absolute: pickles reload it by path
            _check(lib.rt_program_load_file_v2(out, os.fsencode(path), opts))
        else:
            try:
                view = memoryview(source)
            except TypeError:
                raise InvalidArgument(
                    f"Program.load needs a path or a buffer, not {type(source).__name__}"
                ) from None
            if not view.c_contiguous:
                if copy is False:
                    raise InvalidArgument("Program.load(copy=False) needs a contiguous buffer")
                view = memoryview(view.tobytes())
            holder, buf = from_buffer(view)
            address = int(ffi.cast("uintptr_t", buf))
            aligned = address % _ALIGNMENT == 0
            if copy is False and not aligned:
                raise InvalidArgument(
                    f"Program.load(copy=False) needs a {_ALIGNMENT}-byte aligned buffer; this "
                    f"one starts {address % _ALIGNMENT} bytes past a boundary")
            borrow = copy is False or (copy is None and aligned and _is_immutable(source))
            size = view.nbytes
            if borrow:
                keepalive = (source, holder)
                data = buf
            else:
                # Our own aligned copy, borrowed by the library (rather than RT_PROGRAM_COPY),
                # so that the bytes stay readable for pickling.
                raw = _new_raw("char[]", size + _ALIGNMENT)
                data = raw + (-int(ffi.cast("uintptr_t", raw)) % _ALIGNMENT)
                if size:
                    ffi.memmove(data, buf, size)
                ffi.release(holder)  # let go of the caller's buffer now, not at the next GC
                keepalive = raw
            _check(lib.rt_program_load_buffer_v2(out, data, size, opts))
        self = object.__new__(cls)
        self._ptr = ffi.gc(out[0], lib.rt_program_release)
        self._keepalive = keepalive  # never dropped: methods may outlive close()
        self._borrowed = borrow
        self._path = path
        self._data = data
        self._size = size
        self._verify_constants = bool(verify_constants)
        self._data_files = paths
        self._lib = lib
        self._users_lock = threading.Lock()
        self._users = 0  # calls in progress (_using)
        self._doomed: Any = None  # the handle close() left to the last of them
        self._metas: Dict[str, MethodMeta] = {}
        count = lib.rt_program_method_count(self._ptr)
        self._method_names = tuple(to_str(lib.rt_program_method_name(self._ptr, i))
                                   for i in range(count))
        return self

    def _live(self) -> Any:
        ptr = self._ptr
        if ptr is None:
            raise ClosedError("operation on closed program")
        return ptr

    @contextlib.contextmanager
    def _using(self) -> Iterator[Any]:
        """The program's handle, kept alive until the block ends even if another thread
        closes the program meanwhile (close() then releases it when the last such block
        ends; calls that start after close() raise ClosedError)."""
        with self._users_lock:
            ptr = self._live()
            self._users += 1
        try:
            yield ptr
        finally:
            with self._users_lock:
                self._users -= 1
                doomed = self._doomed if self._users == 0 else None
                if doomed is not None:
                    self._doomed = None
            if doomed is not None:
                ffi.release(doomed)

    # ---- pickling -------------------------------------------------------------------------

    @property
    def path(self) -> Optional[str]:
        """The absolute path of the mapped file, or None for a program loaded from a buffer."""
        return self._path

    def to_bytes(self) -> bytes:
        """The program's bytes (read from the file for a mapped program)."""
        self._live()
        if self._path is not None:
            with open(self._path, "rb") as f:
                return f.read()
        return ffi.buffer(self._data, self._size)[:]

    def __reduce__(self) -> Any:
        """Pickled by path for a mapped file (the other side maps the same path again) and by
        its bytes otherwise; either way the other side loads and verifies a new Program."""
        self._live()
        source = self._path if self._path is not None else self.to_bytes()
        return _unpickle_program, (source, self._verify_constants, self._data_files)

    @property
    def data_files(self) -> Tuple[str, ...]:
        """Absolute paths of the data files the program reads external constants from."""
        return self._data_files

    @property
    def closed(self) -> bool:
        return self._ptr is None

    @property
    def borrowed(self) -> bool:
        """True when the program reads the caller's buffer in place (no copy)."""
        return self._borrowed

    @property
    def method_names(self) -> Tuple[str, ...]:
        self._live()
        return self._method_names

    @property
    def constant_bytes(self) -> int:
        """Bytes of the constant segment (weights held in the program; data files not counted)."""
        with self._using() as ptr:
            return int(self._lib.rt_program_constant_bytes(ptr))

    def method_meta(self, name: str = "forward") -> MethodMeta:
        """Metadata of a method, without loading it (NotFound when there is none)."""
        with self._using() as ptr:
            meta = self._metas.get(name)
            if meta is None:
                meta = self._metas[name] = MethodMeta._read(ptr, name)
            return meta

    def bundled_tests(self, name: str = "forward") -> List[BundledTest]:
        """The test cases bundled with a method (inputs and expected outputs, copied out of
        the program); run one with Method.verify_bundled(index)."""
        with self._using() as ptr:
            meta = self.method_meta(name)
            return [read_case(ptr, name, i, meta.num_inputs, meta.num_outputs)
                    for i in range(case_count(ptr, name))]

    def instruction_ops(self, name: str = "forward") -> Tuple[Optional[str], ...]:
        """The op each instruction of a method calls (None for a jump)."""
        cname = name.encode("utf-8")
        out = ffi.new("const char **")
        ops = []
        with self._using() as ptr:
            for i in range(self.method_meta(name).num_instructions):
                _check(self._lib.rt_program_instruction_op(out, ptr, cname, i))
                ops.append(None if out[0] == ffi.NULL else to_str(out[0]))
        return tuple(ops)

    def load_method(self, name: str = "forward", *, device: Any = "cpu", num_threads: int = 0,
                    profile: bool = False, memory_limit: int = 0, max_steps: int = 0,
                    clone_outputs: bool = True) -> Method:
        """Load an instance of a method: resolve and type-check it, allocate its memory once.

        clone_outputs=False makes outputs views into the method's memory, valid until its
        next execute; num_threads=0 uses the global default; memory_limit=0 sets no limit;
        max_steps bounds the instructions one execute may run (0: none; for untrusted programs).
        """
        meta = self.method_meta(name)
        lib = self._lib
        dev = parse_device(device)
        opts = ffi.new("rt_method_options *")
        lib.rt_method_options_init(opts)
        opts.flags = RT_METHOD_PROFILE if profile else 0
        opts.device.type, opts.device.index = dev
        opts.num_threads = int(num_threads)
        if memory_limit < 0:
            raise InvalidArgument("memory_limit must be >= 0 (0: no limit)")
        opts.memory_limit = int(memory_limit)
        if max_steps < 0:
            raise InvalidArgument("max_steps must be >= 0 (0: no limit)")
        opts.max_steps = int(max_steps)
        out = ffi.new("rt_method **")
        with self._using() as ptr:  # the method retains the program it is loaded from
            _check(lib.rt_method_load(out, ptr, name.encode("utf-8"), opts))
        handle = ffi.gc(out[0], lib.rt_method_destroy)
        return Method(self, handle, meta, device=dev, clone_outputs=clone_outputs,
                      profile=profile)

    def close(self) -> None:
        """Release the program now (idempotent); loaded methods keep working. A call another
        thread is making on it finishes first: the handle is released when it ends."""
        with self._users_lock:
            ptr = self._ptr
            if ptr is None:
                return
            self._ptr = None
            if self._users:
                self._doomed = ptr
                return
        ffi.release(ptr)

    def __enter__(self) -> "Program":
        self._live()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        if self._ptr is None:
            return "Program(closed)"
        files = f", data_files={list(self._data_files)!r}" if self._data_files else ""
        return (f"Program(methods={self._method_names!r}, "
                f"constant_bytes={self.constant_bytes}{files})")

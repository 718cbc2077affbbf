"""PyCapsule access from pure Python (for DLPack), on CPython and on PyPy.

A capsule is a C-level object: reading its pointer, renaming it and creating one need the
Python C API, which cffi's ABI mode does not reach by itself.

- CPython: `ctypes.pythonapi`. Its functions hold the GIL during the call and take objects as
  real `PyObject *` (ctypes.py_object), which is what the C API needs.
- PyPy 7.3: there is no `ctypes.pythonapi`. The C API (cpyext) is exported by the PyPy library
  itself with a `PyPy` prefix (`PyPyCapsule_New`, ...), which cffi opens with `dlopen(None)`.
  cffi has no way to pass a Python object as `PyObject *`, so objects cross through an attribute
  of this module: `PyPyObject_GetAttrString(module, "_bridge")` gives the `PyObject *` of an
  object stored there, and `PyPyObject_SetAttrString` brings a new capsule back. cffi releases
  the GIL around each call; cpyext takes it back for the duration of each API function (its
  "GIL auto" rule for C code that calls in without the GIL). The PyCapsule_* functions
  themselves are plain C in PyPy (a copy of CPython's capsule.c).
  Reading, renaming and consuming capsules works there. Making one does not (`new` raises
  CapsuleError): its deleter would be a cffi callback, and PyPy 7.3.11 deadlocks when a C
  extension calls a cffi callback from an object's deallocation, which is where numpy, the one
  DLPack consumer on PyPy, calls deleters (gc.collect() never returns).

`available()` says whether capsules can be read; every function raises `CapsuleError` otherwise.
"""
from __future__ import annotations

import ctypes
import platform
import sys
import threading
from typing import Any, Callable, Optional

__all__ = ["CapsuleError", "available", "is_capsule", "get_name", "get_pointer", "set_name",
           "new", "destructor_name"]

IS_PYPY = platform.python_implementation() == "PyPy"


class CapsuleError(RuntimeError):
    """The interpreter offers no way to handle PyCapsules from pure Python."""


def is_capsule(obj: Any) -> bool:
    t = type(obj)
    return t.__name__ == "PyCapsule" and t.__module__ == "builtins"


# Names a capsule may be renamed to must outlive it: these are module-level constants.
_NAMES = {}


def _static_name(name: bytes) -> Any:
    """A char pointer to `name` that lives as long as the process."""
    ptr = _NAMES.get(name)
    if ptr is None:
        ptr = _NAMES[name] = _make_name(name)
    return ptr


class _CPython:
    def __init__(self) -> None:
        api = ctypes.pythonapi
        obj, vp, cp = ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p

        def fn(name: str, restype: Any, *argtypes: Any) -> Any:
            return ctypes.PYFUNCTYPE(restype, *argtypes)((name, api))

        self.get_name = fn("PyCapsule_GetName", vp, obj)
        self.get_pointer = fn("PyCapsule_GetPointer", vp, obj, cp)
        self.set_name = fn("PyCapsule_SetName", ctypes.c_int, obj, vp)
        self.new = fn("PyCapsule_New", obj, vp, cp, vp)
        # For the destructor, which receives the capsule as a bare address and may run while
        # an exception is being raised: plain C calls (no check of the error indicator, which
        # would mistake that exception for ours). Both only read the capsule's fields.
        def raw(name: str, restype: Any, *argtypes: Any) -> Any:
            return ctypes.CFUNCTYPE(restype, *argtypes)((name, api))

        self.raw_get_name = raw("PyCapsule_GetName", vp, vp)
        self.raw_get_pointer = raw("PyCapsule_GetPointer", vp, vp, vp)


class _PyPy:
    CDEF = """
        void *PyPyCapsule_GetPointer(void *capsule, const char *name);
        const char *PyPyCapsule_GetName(void *capsule);
        int PyPyCapsule_SetName(void *capsule, const char *name);
        void *PyPyImport_ImportModule(const char *name);
        void *PyPyObject_GetAttrString(void *o, const char *name);
        void PyPy_DecRef(void *o);
    """

    def __init__(self) -> None:
        import cffi

        self.ffi = cffi.FFI()
        self.ffi.cdef(self.CDEF)
        self.lib = self.ffi.dlopen(None)
        self.lock = threading.Lock()
        self.module: Any = None  # PyObject * of this module, held for the process's life

    def _module(self) -> Any:
        # A new reference kept for the process's life.
        if self.module is None:
            module = self.lib.PyPyImport_ImportModule(__name__.encode())
            if module == self.ffi.NULL:
                raise CapsuleError(f"PyPy: cannot reach module {__name__} through cpyext")
            self.module = module
        return self.module

    def borrow(self, obj: Any, use: Callable[[Any], Any]) -> Any:
        """use(PyObject * of obj), holding a reference for the duration of the call."""
        module = sys.modules[__name__]
        with self.lock:
            module._bridge = obj
            try:
                ref = self.lib.PyPyObject_GetAttrString(self._module(), b"_bridge")
            finally:
                module._bridge = None
        if ref == self.ffi.NULL:
            raise CapsuleError("PyPy: cannot get the PyObject * of a capsule")
        try:
            return use(ref)
        finally:
            self.lib.PyPy_DecRef(ref)


_bridge: Any = None
_impl: Any = None
_failure: Optional[str] = None


def _get() -> Any:
    global _impl, _failure
    if _impl is None and _failure is None:
        try:
            _impl = _PyPy() if IS_PYPY else _CPython()
        except (AttributeError, OSError, ImportError) as exc:
            _failure = f"{platform.python_implementation()} offers no PyCapsule access ({exc})"
    if _impl is None:
        raise CapsuleError(_failure)
    return _impl


def available() -> bool:
    try:
        _get()
    except CapsuleError:
        return False
    return True


def _make_name(name: bytes) -> Any:
    impl = _get()
    if IS_PYPY:
        return impl.ffi.new("char[]", name)
    return ctypes.create_string_buffer(name)


def _addr(ptr: Any, impl: Any) -> int:
    if IS_PYPY:
        return int(impl.ffi.cast("uintptr_t", ptr))
    return ptr or 0


def get_name(capsule: Any) -> Optional[bytes]:
    """The capsule's name (None when it has none)."""
    impl = _get()
    if IS_PYPY:
        ffi = impl.ffi
        name = impl.borrow(capsule, impl.lib.PyPyCapsule_GetName)
        return None if name == ffi.NULL else ffi.string(name)
    name = impl.get_name(capsule)
    return None if not name else ctypes.string_at(name)


def get_pointer(capsule: Any, name: bytes) -> int:
    """The capsule's pointer as an int; the name must match (ValueError otherwise)."""
    impl = _get()
    if IS_PYPY:
        ptr = impl.borrow(capsule, lambda ref: impl.lib.PyPyCapsule_GetPointer(ref, name))
        if ptr == impl.ffi.NULL:
            raise ValueError(f"capsule is not named {name!r} or holds NULL")
        return _addr(ptr, impl)
    return _addr(impl.get_pointer(capsule, name), impl)


def set_name(capsule: Any, name: bytes) -> None:
    """Rename the capsule (the name is kept in static storage)."""
    impl = _get()
    static = _static_name(name)
    if IS_PYPY:
        status = impl.borrow(capsule, lambda ref: impl.lib.PyPyCapsule_SetName(ref, static))
    else:
        status = impl.set_name(capsule, ctypes.cast(static, ctypes.c_void_p))
    if status != 0:
        raise CapsuleError(f"cannot rename a capsule to {name!r}")


def _cpython_only(what: str) -> Any:
    impl = _get()
    if IS_PYPY:
        raise CapsuleError(f"{what} is not possible on PyPy: a capsule's deleter would be a cffi "
                           f"callback, and PyPy 7.3 deadlocks when a C extension (numpy) calls "
                           f"one while freeing an object")
    return impl


def destructor_name(capsule_addr: int) -> Optional[bytes]:
    """Name of a capsule given by address: for a capsule destructor, which gets no object."""
    impl = _cpython_only("a capsule destructor")
    name = impl.raw_get_name(capsule_addr)
    return None if not name else ctypes.string_at(name)


def destructor_pointer(capsule_addr: int, name: bytes) -> int:
    """Pointer of a capsule given by address (in its destructor)."""
    impl = _cpython_only("a capsule destructor")
    static = _static_name(name)
    return impl.raw_get_pointer(capsule_addr, ctypes.cast(static, ctypes.c_void_p)) or 0


def new(pointer: int, name: bytes, destructor: int) -> Any:
    """A new capsule holding `pointer`, named `name` (kept static), whose destructor is the C
    function at address `destructor` (called with the capsule's address)."""
    impl = _cpython_only("making a DLPack capsule")
    static = _static_name(name)
    return impl.new(pointer, ctypes.cast(static, ctypes.c_char_p), destructor)

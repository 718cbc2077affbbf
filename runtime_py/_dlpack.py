"""DLPack in pure Python: reading capsules handed to us (inputs) and making capsules of our
Tensors (outputs), with the structs of dlpack.h (1.x) declared for cffi.

Inputs: `import_object(slot, obj)` asks `obj.__dlpack__(max_version=(1, 0))` for a versioned
capsule (retrying without the keyword for producers older than DLPack 1.0), `import_capsule`
takes a bare capsule. Everything is checked (name, version, device, dtype, rank) before the
capsule is renamed "used_dltensor[_versioned]"; from then on we own the managed tensor and call
its deleter once, when the binding that holds it is released (ffi.gc).

Outputs: `export(tensor, versioned, ...)` fills a DLManagedTensor[Versioned] in memory cffi
owns, registers the Tensor (which keeps its owner, bytes or Method, alive) under the struct's
address, and wraps it in a capsule. The deleter (consumer side) or the capsule destructor (when
no one consumed the capsule) drops that registration.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Optional, Tuple

import cffi

from . import _capsule
from . import dtypes as _dt
from .errors import InvalidArgument

CDEF = """
typedef struct { int32_t device_type; int32_t device_id; } DLDevice;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides;
    uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;
typedef struct { uint32_t major; uint32_t minor; } DLPackVersion;
typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;
"""
dl = cffi.FFI()
dl.cdef(CDEF)

FLAG_READ_ONLY = 1
FLAG_IS_COPIED = 2
LEGACY, VERSIONED = b"dltensor", b"dltensor_versioned"
USED = {LEGACY: b"used_dltensor", VERSIONED: b"used_dltensor_versioned"}
MAX_VERSION = (1, 0)  # what we ask producers for; every 1.x struct reads the same
CPU, CUDA, CUDA_HOST = 1, 2, 3
_DEVICE_NAMES = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal",
                 9: "vpi", 10: "rocm", 11: "rocm_host", 12: "ext_dev", 13: "cuda_managed",
                 14: "oneapi", 15: "webgpu", 16: "hexagon", 17: "maia"}
_CODE_NAMES = {0: "int", 1: "uint", 2: "float", 3: "opaque_handle", 4: "bfloat", 5: "complex",
               6: "bool", 7: "float8_e3m4", 8: "float8_e4m3", 9: "float8_e4m3b11fnuz",
               10: "float8_e4m3fn", 11: "float8_e4m3fnuz", 12: "float8_e5m2",
               13: "float8_e5m2fnuz", 14: "float8_e8m0fnu", 15: "float6_e2m3fn",
               16: "float6_e3m2fn", 17: "float4_e2m1fn"}


def device_text(device: Tuple[int, int]) -> str:
    kind, index = device
    name = _DEVICE_NAMES.get(kind, f"device type {kind}")
    return "cpu" if kind == CPU else f"{name}:{index}"


def dtype_text(code: int, bits: int, lanes: int) -> str:
    name = _CODE_NAMES.get(code, f"code {code}")
    text = f"{name}{bits}" if code < 7 else name
    return text if lanes == 1 else f"{text}x{lanes}"


# ---- inputs ---------------------------------------------------------------------------------

def _call_deleter(managed: Any) -> None:
    if managed.deleter != dl.NULL:
        managed.deleter(managed)


def check_device(label: str, device: Tuple[int, int], method_device: Tuple[int, int],
                 how: str) -> Tuple[int, int]:
    """The rt_device to bind `device` memory with, or InvalidArgument naming the input."""
    kind, index = device
    if kind in (CPU, CUDA_HOST):  # pinned host memory is ordinary CPU memory to us
        return (CPU, 0)
    if kind == CUDA:
        if method_device[0] != CUDA:
            raise InvalidArgument(
                f"{label}: the tensor ({how}) is on {device_text(device)}, but the method runs "
                f"on {device_text(method_device)}; copy it to the host first (e.g. .cpu()) or "
                f"load the method on that device")
        return (CUDA, index)
    raise InvalidArgument(f"{label}: the tensor ({how}) is on {device_text(device)}, a device "
                          f"runtime_py cannot read; the method runs on "
                          f"{device_text(method_device)}")


class Imported:
    """What a DLPack capsule describes, plus the binding that releases it."""

    __slots__ = ("addr", "dtype", "shape", "strides", "device", "readonly", "keep")

    def __init__(self, addr: int, dtype: str, shape: Tuple[int, ...],
                 strides: Optional[Tuple[int, ...]], device: Tuple[int, int], readonly: bool,
                 keep: Any) -> None:
        self.addr, self.dtype, self.shape, self.strides = addr, dtype, shape, strides
        self.device, self.readonly, self.keep = device, readonly, keep


def import_capsule(label: str, capsule: Any, method_device: Tuple[int, int],
                   producer: Any = None) -> Imported:
    """Take ownership of a DLPack capsule (legacy or versioned) after checking it."""
    name = _capsule.get_name(capsule)
    if name in USED.values():
        raise InvalidArgument(
            f"{label}: the DLPack capsule was already consumed (it is named {name.decode()!r}); "
            f"a capsule can be used once: pass the array itself, or a fresh __dlpack__() capsule")
    if name not in USED:
        raise InvalidArgument(f"{label}: a capsule named {name!r} is not a DLPack tensor")
    ptr = _capsule.get_pointer(capsule, name)
    if not ptr:
        raise InvalidArgument(f"{label}: the DLPack capsule holds a NULL tensor")
    readonly = False
    if name == VERSIONED:
        managed = dl.cast("DLManagedTensorVersioned *", ptr)
        major, minor = managed.version.major, managed.version.minor
        if major != 1:
            raise InvalidArgument(f"{label}: DLPack version {major}.{minor} is not supported "
                                  f"(runtime_py reads 1.x)")
        readonly = bool(managed.flags & FLAG_READ_ONLY)
    else:
        managed = dl.cast("DLManagedTensor *", ptr)
    t = managed.dl_tensor
    ndim = t.ndim
    if not 0 <= ndim <= 16:
        raise InvalidArgument(f"{label}: the DLPack tensor has {ndim} dimensions (at most 16)")
    code, bits, lanes = t.dtype.code, t.dtype.bits, t.dtype.lanes
    dtype = _dt._BY_DLPACK.get((code, bits)) if lanes == 1 else None
    if dtype is None:
        raise InvalidArgument(f"{label}: dtype {dtype_text(code, bits, lanes)} (DLPack code "
                              f"{code}, bits {bits}, lanes {lanes}) is not supported by "
                              f"runtime_py")
    device = check_device(label, (t.device.device_type, t.device.device_id), method_device,
                          "DLPack")
    shape = tuple(t.shape[0:ndim]) if ndim else ()
    strides = tuple(t.strides[0:ndim]) if ndim and t.strides != dl.NULL else None
    addr = int(dl.cast("uintptr_t", t.data)) + t.byte_offset
    # Ours from here: the consumer renames the capsule so that its destructor leaves the tensor
    # alone, and calls the deleter when done (ffi.gc, when the binding is dropped).
    _capsule.set_name(capsule, USED[name])
    owner = dl.gc(managed, _call_deleter)
    return Imported(addr, dtype, shape, strides, device, readonly, (producer, owner))


def import_object(label: str, obj: Any, method_device: Tuple[int, int],
                  stream: Optional[int] = None) -> Imported:
    """Bind an object with __dlpack__ / __dlpack_device__ (torch, cupy, jax, numpy...)."""
    get_device = getattr(obj, "__dlpack_device__", None)
    if get_device is not None:  # refuse foreign devices before the producer does any work
        try:
            kind, index = (int(v) for v in get_device())
        except (TypeError, ValueError, RuntimeError) as exc:
            raise InvalidArgument(f"{label}: {type(obj).__name__}.__dlpack_device__() did not "
                                  f"give (device type, index): {exc}") from exc
        check_device(label, (kind, index), method_device, "DLPack")
    kwargs = {"stream": stream} if method_device[0] == CUDA else {}
    try:
        try:
            capsule = obj.__dlpack__(max_version=MAX_VERSION, **kwargs)
        except TypeError:  # a producer from before DLPack 1.0: no max_version keyword
            capsule = obj.__dlpack__(**kwargs)
    except (BufferError, RuntimeError, ValueError, TypeError) as exc:
        raise InvalidArgument(f"{label}: {type(obj).__name__}.__dlpack__() failed: {exc}") from exc
    return import_capsule(label, capsule, method_device, obj)


# ---- outputs --------------------------------------------------------------------------------

# address of an exported DLManagedTensor[Versioned] -> (Tensor, its cffi buffers, release hook)
_exports: Dict[int, Tuple[Any, ...]] = {}
_exports_lock = threading.Lock()


def live_exports() -> int:
    """How many exported capsules still hold a Tensor (their consumer has not let go)."""
    return len(_exports)


def _release(addr: int) -> None:
    with _exports_lock:
        entry = _exports.pop(addr, None)
    if entry is not None and entry[-1] is not None:
        entry[-1]()


def _deleter(managed: Any) -> None:
    _release(int(dl.cast("uintptr_t", managed)))


def _capsule_destructor(capsule: Any) -> None:
    # Only a capsule never consumed still has its first name: then nobody else will call the
    # deleter, so we let go here. A consumed one ("used_...") is the consumer's to delete.
    addr = int(dl.cast("uintptr_t", capsule))
    name = _capsule.destructor_name(addr)
    if name in USED:
        _release(_capsule.destructor_pointer(addr, name))


_callbacks: Optional[Tuple[Any, Any, Any, int]] = None


def _get_callbacks() -> Tuple[Any, Any, Any, int]:
    """The C entry points of exports, made on first use (so that a platform refusing cffi
    callbacks, e.g. without writable+executable memory, still imports runtime_py)."""
    global _callbacks
    if _callbacks is None:
        try:
            legacy = dl.callback("void(DLManagedTensor *)", _deleter)
            versioned = dl.callback("void(DLManagedTensorVersioned *)", _deleter)
            destructor = dl.callback("void(void *)", _capsule_destructor)
        except (MemoryError, RuntimeError) as exc:
            raise _capsule.CapsuleError(f"cffi cannot make callbacks here: {exc}") from None
        _callbacks = (legacy, versioned, destructor, int(dl.cast("uintptr_t", destructor)))
    return _callbacks


def export(tensor: Any, addr: int, versioned: bool, flags: int,
           on_release: Optional[Callable[[], None]]) -> Any:
    """A capsule describing `tensor` (at `addr`) that keeps it alive until released;
    on_release runs then (or at once if this fails)."""
    try:
        legacy_deleter, versioned_deleter, _, destructor = _get_callbacks()
    except BaseException:
        if on_release is not None:  # every failure lets go of what the caller held for us
            on_release()
        raise
    shape, strides = tensor.shape, tensor.strides
    ndim = len(shape)
    managed = dl.new("DLManagedTensorVersioned *" if versioned else "DLManagedTensor *")
    c_shape = dl.new("int64_t[]", list(shape) or [0])
    c_strides = dl.new("int64_t[]", list(strides) or [0])
    t = managed.dl_tensor
    t.data = dl.cast("void *", addr)
    t.device.device_type, t.device.device_id = tensor._device
    t.ndim = ndim
    d = _dt.DTYPES[tensor.dtype]
    t.dtype.code, t.dtype.bits, t.dtype.lanes = d.code, d.bits, 1
    t.shape = c_shape
    t.strides = c_strides  # always given: DLPack 1.2+ wants them even when dense
    t.byte_offset = 0
    managed.manager_ctx = dl.NULL
    if versioned:
        managed.version.major, managed.version.minor = MAX_VERSION
        managed.flags = flags
        managed.deleter = versioned_deleter
    else:
        managed.deleter = legacy_deleter
    key = int(dl.cast("uintptr_t", managed))
    with _exports_lock:
        _exports[key] = (tensor, managed, c_shape, c_strides, on_release)
    try:
        return _capsule.new(key, VERSIONED if versioned else LEGACY, destructor)
    except BaseException:
        _release(key)
        raise

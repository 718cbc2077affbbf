"""The cffi declarations of libruntime and the one place that loads it (cffi ABI mode).

`CDEF` is the block between BEGIN CDEF and END CDEF in include/runtime.h, copied verbatim;
tests/test_ffi_cdef.py keeps the two identical, because ABI mode crashes where API mode would
fail to compile.
"""
from __future__ import annotations

import ctypes.util
import logging
import os
import re
import threading
from typing import Any, List, Optional

import cffi

__all__ = ["CDEF", "ABI_VERSION", "ffi", "get_lib", "library_path", "install_log_callback"]

#: ABI version this package was written against (RT_ABI_VERSION of include/runtime.h).
ABI_VERSION = 4

CDEF = r"""#define RT_ABI_VERSION 4
#define RT_MAX_RANK 16

/* Status codes. Values are fixed forever; new codes are only ever appended. */
typedef enum rt_status {
    RT_OK = 0,
    RT_INVALID_ARGUMENT = 1, /* a caller-supplied value is wrong (dtype, shape, NULL, index) */
    RT_INVALID_STATE = 2,    /* the call is not allowed now (inputs missing, method busy)   */
    RT_INVALID_PROGRAM = 3,  /* program bytes are malformed; the message gives the offset  */
    RT_NOT_FOUND = 4,        /* no method, attribute or op of that name                     */
    RT_UNSUPPORTED = 5,      /* valid request this build cannot serve (device, op, dtype)  */
    RT_OUT_OF_MEMORY = 6,    /* an allocation failed or a memory limit was reached          */
    RT_IO_ERROR = 7,         /* opening or mapping a file failed                            */
    RT_INTERNAL = 8          /* a bug in libruntime; please report it                       */
} rt_status;

/* Element types, DLPack-compatible: code, bits, lanes (lanes is always 1). */
typedef enum rt_dtype_code {
    RT_DTYPE_INT = 0,
    RT_DTYPE_UINT = 1,
    RT_DTYPE_FLOAT = 2,
    RT_DTYPE_BFLOAT = 4,
    RT_DTYPE_BOOL = 6
} rt_dtype_code;

typedef struct rt_dtype {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} rt_dtype;

/* Devices, with DLPack's type codes. */
typedef enum rt_device_type {
    RT_DEVICE_CPU = 1,
    RT_DEVICE_CUDA = 2
} rt_device_type;

typedef struct rt_device {
    int32_t type;  /* rt_device_type */
    int32_t index; /* device ordinal; 0 for the CPU */
} rt_device;

/*
 * A tensor descriptor, after DLPack's DLTensor. `strides` are in elements (not bytes) and may
 * be zero or negative; NULL means dense row-major. Any byte offset is folded into `data`.
 * The descriptor only borrows `sizes`, `strides` and `data`.
 */
typedef struct rt_tensor {
    void *data;
    rt_device device;
    int32_t rank;
    rt_dtype dtype;
    const int64_t *sizes;
    const int64_t *strides;
} rt_tensor;

/* Kinds of values a method holds. Inputs and outputs are tensors or scalars. */
typedef enum rt_value_kind {
    RT_VALUE_NONE = 0,
    RT_VALUE_INT = 1,
    RT_VALUE_DOUBLE = 2,
    RT_VALUE_BOOL = 3,
    RT_VALUE_STRING = 4,
    RT_VALUE_INT_LIST = 5,
    RT_VALUE_DOUBLE_LIST = 6,
    RT_VALUE_TENSOR = 7,
    RT_VALUE_TENSOR_LIST = 8
} rt_value_kind;

/* A scalar input or output: `i` holds ints and bools (0 or 1), `d` doubles. */
typedef struct rt_scalar {
    int32_t kind; /* RT_VALUE_INT, RT_VALUE_DOUBLE or RT_VALUE_BOOL */
    int32_t reserved;
    int64_t i;
    double d;
} rt_scalar;

/* Metadata of one method input, output or attribute. Strings are borrowed from the program. */
typedef struct rt_tensor_info {
    const char *name;        /* "" when the program gives none */
    int32_t kind;            /* rt_value_kind; the fields below apply to tensors */
    rt_dtype dtype;
    int32_t rank;
    int32_t dynamic;         /* 1: sizes are upper bounds; the actual sizes may be smaller */
    int32_t memory_planned;  /* 1: storage lies in the method's planned arenas */
    int32_t is_constant;     /* 1: storage is a constant of the program */
    int64_t sizes[16];       /* static sizes, or upper bounds when dynamic */
    uint8_t dim_order[16];   /* dim_order[0] is the outermost dimension in memory */
    uint64_t nbytes;         /* at the upper bound */
} rt_tensor_info;

/* Summary of one method of a program. Strings are borrowed from the program. */
typedef struct rt_method_info {
    const char *name;
    size_t num_inputs;
    size_t num_outputs;
    size_t num_attributes;
    size_t num_values;
    size_t num_instructions;
    size_t num_arenas;
    uint64_t planned_bytes;  /* sum of the method's arena sizes */
} rt_method_info;

/* Program load flags. */
#define RT_PROGRAM_COPY 1              /* buffer load: copy the bytes instead of borrowing them */
#define RT_PROGRAM_VERIFY_CONSTANTS 2  /* also check the checksum of the constant segment      */

/* Program load options (the _v2 loaders). Initialise with rt_program_options_init(). */
#define RT_PROGRAM_OPTIONS_VERSION 1

typedef struct rt_program_options {
    uint32_t version;               /* RT_PROGRAM_OPTIONS_VERSION */
    uint32_t flags;                 /* RT_PROGRAM_COPY (buffers only), RT_PROGRAM_VERIFY_CONSTANTS */
    const char *const *data_files;  /* paths of data files holding external constants */
    size_t num_data_files;          /* at most 1024 */
} rt_program_options;

/* One input or expected output of a bundled test case. */
typedef struct rt_bundled_value {
    int32_t kind;      /* RT_VALUE_TENSOR, RT_VALUE_INT, RT_VALUE_DOUBLE or RT_VALUE_BOOL */
    int32_t reserved;
    rt_tensor tensor;  /* tensors: dense, row-major (strides NULL), read-only; data and sizes
                          are borrowed from the program */
    rt_scalar scalar;  /* scalars */
} rt_bundled_value;

/* Method load options. Initialise with rt_method_options_init(). */
#define RT_METHOD_OPTIONS_VERSION 1
#define RT_METHOD_PROFILE 1            /* record per-instruction times on every execute */

typedef struct rt_method_options {
    uint32_t version;       /* RT_METHOD_OPTIONS_VERSION */
    uint32_t flags;         /* RT_METHOD_PROFILE */
    rt_device device;       /* default: CPU */
    int32_t num_threads;    /* 0: the global default (rt_set_num_threads) */
    int32_t reserved;
    uint64_t memory_limit;  /* bytes the method may allocate; 0: no limit of ours */
    uint64_t max_steps;     /* instructions one execute may run (loops count each time);
                               0: no limit. Set it when running untrusted programs. */
} rt_method_options;

/* set_input flags. */
#define RT_INPUT_COPY 1         /* always copy, never bind the caller's memory */
#define RT_INPUT_ALLOW_MUTATE 2 /* the method may write into the caller's memory in place */

/* The inputs and output views of one rt_method_run. Set up once, reuse for every call. */
typedef struct rt_run_io {
    const rt_tensor *inputs;  /* num_inputs descriptors (NULL when num_inputs is 0) */
    size_t num_inputs;        /* the method's input count, or 0: run on the bound inputs */
    rt_tensor *outputs;       /* num_outputs views are written here (NULL when 0) */
    size_t num_outputs;       /* the method's output count, or 0: no views */
    uint32_t flags;           /* set_input flags for every tensor input */
    uint32_t reserved;        /* 0 */
} rt_run_io;

/* Log levels for the log callback. */
typedef enum rt_log_level {
    RT_LOG_DEBUG = 0,
    RT_LOG_INFO = 1,
    RT_LOG_WARNING = 2,
    RT_LOG_ERROR = 3
} rt_log_level;

/* `message` is valid only during the call. The callback may run on any thread. */
typedef void (*rt_log_fn)(void *user, int32_t level, const char *message);

/* One profiled instruction. `op_name` is borrowed from the program. */
typedef struct rt_profile_event {
    const char *op_name;
    uint32_t instruction;
    uint32_t reserved;
    uint64_t start_ns;  /* monotonic clock */
    uint64_t end_ns;
} rt_profile_event;

typedef struct rt_program rt_program;
typedef struct rt_method rt_method;

/* ---- library ---------------------------------------------------------------------------- */

/* RT_ABI_VERSION of the built library; compare with the header's to detect a mismatch. */
RT_API uint32_t rt_abi_version(void);
/* "MAJOR.MINOR.PATCH"; static storage. */
RT_API const char *rt_version_string(void);
/* Short constant text for a status code; never NULL. */
RT_API const char *rt_status_string(rt_status status);
/* Message of the last failed call on this thread; "" if none. Valid until the next call on
 * this thread. Never NULL. */
RT_API const char *rt_last_error(void);
/* Install (or, with NULL, remove) the log callback; messages below min_level are dropped.
 * The callback may be called from any thread, several at once, and may itself log, load
 * programs or call this. Once this returns the old callback is not called again; called from
 * inside a callback it does not wait, and the old one may still be running elsewhere. */
RT_API void rt_set_log_callback(rt_log_fn fn, void *user, int32_t min_level);
/* Number of registered ops and their names (static storage; NULL when out of range). */
RT_API size_t rt_op_count(void);
RT_API const char *rt_op_name(size_t index);
/* 1 when the backend ("cpu", "cuda") can run methods in this process, else 0. The first
 * question about "cuda" loads the NVIDIA driver (libcuda.so.1) with dlopen. */
RT_API int32_t rt_backend_available(const char *name);
/* Why rt_backend_available(name) is 0, as a sentence (no libcuda.so.1, cuInit's error, no
 * CUDA device, a build without CUDA kernels, an unknown name); "" when it is available.
 * Static storage; never NULL. */
RT_API const char *rt_backend_unavailable_reason(const char *name);
/* CUDA devices this process can use; 0 when the CUDA backend is unavailable. */
RT_API int32_t rt_cuda_device_count(void);
/* Default number of threads a method uses when its options say 0 (initially: online CPUs).
 * n < 1 resets to the default. */
RT_API void rt_set_num_threads(int32_t n);
RT_API int32_t rt_get_num_threads(void);
/* How long the thread pool's idle workers stay awake after a parallel loop, waiting for the
 * next (the first millisecond spinning, then in short naps), before they sleep until woken:
 * a call within that time finds them ready. us < 0 resets to the default, 1 s; 0 makes
 * them sleep as soon as a loop ends, for processes that share their cores and call rarely. */
RT_API void rt_set_worker_wait_us(int64_t us);

/* ---- programs --------------------------------------------------------------------------- */

/* Map the file read-only and verify it; constants are used in place, never copied. The caller
 * owns *out and releases it with rt_program_release. */
RT_API rt_status rt_program_load_file(rt_program **out, const char *path, uint32_t flags);
/* Verify a program held in memory. Without RT_PROGRAM_COPY the bytes are borrowed: they must
 * stay valid and unchanged until the program is released, and `data` must be 64-byte aligned.
 * With RT_PROGRAM_COPY they are copied into aligned memory owned by the program. */
RT_API rt_status rt_program_load_buffer(rt_program **out, const void *data, size_t size,
                                        uint32_t flags);
/* The same with options: flags, and data files whose entries supply the program's external
 * constants (docs/format.md, "Data files"). Each data file is mapped read-only and verified;
 * its constants are used in place, never copied. Every external constant's key must be in
 * exactly one of them with the size, dtype and shape the program expects, or the load fails
 * naming the key. `options` may be NULL (defaults); the paths are not kept. */
RT_API void rt_program_options_init(rt_program_options *out);
RT_API rt_status rt_program_load_file_v2(rt_program **out, const char *path,
                                         const rt_program_options *options);
RT_API rt_status rt_program_load_buffer_v2(rt_program **out, const void *data, size_t size,
                                           const rt_program_options *options);
/* Reference counting. Methods hold a reference to their program. NULL is a no-op. */
RT_API void rt_program_retain(rt_program *program);
RT_API void rt_program_release(rt_program *program);

RT_API size_t rt_program_method_count(const rt_program *program);
/* Borrowed from the program; NULL when out of range. */
RT_API const char *rt_program_method_name(const rt_program *program, size_t index);
/* Bytes of the constant segment (weights held in the program; data files not included). */
RT_API uint64_t rt_program_constant_bytes(const rt_program *program);
/* Metadata, readable without loading the method. `method` is the method's name. */
RT_API rt_status rt_program_method_info(rt_method_info *out, const rt_program *program,
                                        const char *method);
RT_API rt_status rt_program_input_info(rt_tensor_info *out, const rt_program *program,
                                       const char *method, size_t index);
RT_API rt_status rt_program_output_info(rt_tensor_info *out, const rt_program *program,
                                        const char *method, size_t index);
RT_API rt_status rt_program_attribute_info(rt_tensor_info *out, const rt_program *program,
                                           const char *method, size_t index);
/* The axes of input / output `index` whose size may vary from call to call (bit d: axis d):
 * 0 for a static tensor; for a dynamic one the axes its program marks (the others always have
 * exactly their size), or every axis where the program does not say (format 1.0 and 1.1). */
RT_API rt_status rt_program_input_dynamic_axes(uint32_t *out, const rt_program *program,
                                               const char *method, size_t index);
RT_API rt_status rt_program_output_dynamic_axes(uint32_t *out, const rt_program *program,
                                                const char *method, size_t index);
/* The op that instruction `instruction` of `method` calls (name borrowed from the program);
 * *out is NULL for a jump. */
RT_API rt_status rt_program_instruction_op(const char **out, const rt_program *program,
                                           const char *method, size_t instruction);

/* Bundled test cases of a method (inputs and expected outputs stored in the program). */
RT_API rt_status rt_program_bundled_case_count(size_t *out, const rt_program *program,
                                               const char *method);
/* Input `input` / expected output `output` of case `case_index`. Tensor views are valid while
 * the program lives. */
RT_API rt_status rt_program_bundled_input(rt_bundled_value *out, const rt_program *program,
                                          const char *method, size_t case_index, size_t input);
RT_API rt_status rt_program_bundled_expected(rt_bundled_value *out, const rt_program *program,
                                             const char *method, size_t case_index,
                                             size_t output);

/* ---- methods ---------------------------------------------------------------------------- */

RT_API void rt_method_options_init(rt_method_options *out);
/* Resolve and type-check every instruction, allocate the arenas once. `options` may be NULL.
 * The method keeps the program alive. The caller owns *out (rt_method_destroy). */
RT_API rt_status rt_method_load(rt_method **out, rt_program *program, const char *method,
                                const rt_method_options *options);
/* NULL is a no-op. Outputs and attributes handed out become invalid. */
RT_API void rt_method_destroy(rt_method *method);
/* Borrowed; never NULL for a live method. */
RT_API const char *rt_method_name(const rt_method *method);
RT_API size_t rt_method_input_count(const rt_method *method);
RT_API size_t rt_method_output_count(const rt_method *method);

/* Bind a tensor input. Bound by pointer (zero copy) when dtype, device and layout fit and the
 * method does not write to it (unless RT_INPUT_ALLOW_MUTATE); copied into the method's memory
 * otherwise (or with RT_INPUT_COPY). A bound pointer must stay valid until the input is set
 * again or the method destroyed. Bindings persist across executions. On failure the input is
 * unset and execute refuses to run until it is set again; other inputs keep their bindings. */
RT_API rt_status rt_method_set_input(rt_method *method, size_t index, const rt_tensor *tensor,
                                     uint32_t flags);
/* Bind a scalar input (int, double or bool). */
RT_API rt_status rt_method_set_input_scalar(rt_method *method, size_t index,
                                            const rt_scalar *value);
/* Run every instruction. Fails with RT_INVALID_STATE while an input is unset. */
RT_API rt_status rt_method_execute(rt_method *method);
/* A view of an output after execute: data, sizes and strides are borrowed from the method and
 * valid until its next execute, set_input or destroy. */
RT_API rt_status rt_method_output(rt_tensor *out, rt_method *method, size_t index);
RT_API rt_status rt_method_output_scalar(rt_scalar *out, rt_method *method, size_t index);
/* Bind every input, execute, and view every output in one call: what set_input per input,
 * execute and output per output do, with one entry into the library.
 * inputs[i] binds input i: a tensor input as rt_method_set_input binds it (flags apply to
 * every tensor input); a scalar input given as a 0-d host tensor of int64 (an int or bool),
 * float64 (a double) or bool, read during the call. Inputs are bound in order; a failure
 * leaves those before it bound, it unset and those after it as they were, and nothing runs.
 * outputs[i] receives output i as rt_method_output views it; a scalar output as a 0-d host
 * tensor (int64, float64 or bool) of its value. Views are borrowed from the method until its
 * next set_input, execute, run or destroy. The method reads `io` during the call only. */
RT_API rt_status rt_method_run(rt_method *method, const rt_run_io *io);
/* A view of a named attribute (state that persists across executions). Writable: the caller
 * may update it between executions. Valid until the method is destroyed. */
RT_API rt_status rt_method_attribute(rt_tensor *out, rt_method *method, const char *name);

/* ---- device memory and copies ----------------------------------------------------------- */

/* nbytes of memory on `device` (the host, or a CUDA device's primary context), at least
 * 64-byte aligned. The caller owns *out and frees it with rt_device_free on the same device. */
RT_API rt_status rt_device_alloc(void **out, rt_device device, uint64_t nbytes);
/* NULL is a no-op. */
RT_API void rt_device_free(rt_device device, void *data);
/* Copy the elements of src into dst: the same dtype and sizes, each on the host or on a CUDA
 * device. Host sides may have any strides; a device side must be dense row-major unless both
 * sides are on the same device. Returns when the copy is complete. Copies between two
 * different CUDA devices are refused (RT_UNSUPPORTED). */
RT_API rt_status rt_tensor_copy(const rt_tensor *dst, const rt_tensor *src);

/* Profiling (methods loaded with RT_METHOD_PROFILE): events of the last execute. */
RT_API size_t rt_method_profile_event_count(const rt_method *method);
RT_API rt_status rt_method_profile_event(rt_profile_event *out, const rt_method *method,
                                         size_t index);
"""

ffi = cffi.FFI()
# RT_API expands to a visibility attribute in C; cffi's parser does not know it.
ffi.cdef(re.sub(r"\bRT_API\b", "", CDEF))

_LOGGER = logging.getLogger("runtime_py")
_RT_TO_LOGGING = {0: logging.DEBUG, 1: logging.INFO, 2: logging.WARNING, 3: logging.ERROR}

_lock = threading.Lock()
_lib: Any = None
_lib_path: Optional[str] = None
# The installed ffi.callback; referenced forever, since C may call it at any time.
_log_callback: Any = None


def to_str(ptr: Any) -> str:
    """Decode a borrowed `const char *` (NULL gives "")."""
    if ptr == ffi.NULL:
        return ""
    return ffi.string(ptr).decode("utf-8", "replace")


def _packaged_names() -> List[str]:
    import sys

    if sys.platform == "darwin":
        return ["libruntime.dylib", "libruntime.so"]
    if sys.platform == "win32":
        return ["runtime.dll", "libruntime.dll"]
    return ["libruntime.so"]


def _package_dirs() -> List[str]:
    """This file's folder, then the package's other __path__ entries: an editable install
    (scikit-build-core's redirect mode) adds the folder CMake installed the library into."""
    import sys

    dirs = [os.path.dirname(os.path.abspath(__file__))]
    package = sys.modules.get(__name__.rpartition(".")[0])
    for entry in list(getattr(package, "__path__", None) or ()):
        entry = os.path.abspath(entry)
        if entry not in dirs:
            dirs.append(entry)
    return dirs


def _candidates(failures: List[str]) -> List[str]:
    """Paths to try, in order: $RUNTIME_PY_LIBRARY alone if set; else packaged, then system."""
    env = os.environ.get("RUNTIME_PY_LIBRARY")
    if env:
        return [env]
    paths = []
    for here in _package_dirs():
        for name in _packaged_names():
            path = os.path.join(here, name)
            if os.path.exists(path):
                paths.append(path)
            else:
                failures.append(f"{path}: no such file (build it with `python3 build.py` or "
                                f"`pip install -e .`)")
    found = ctypes.util.find_library("runtime")
    if found:
        paths.append(found)
    else:
        failures.append("ctypes.util.find_library('runtime'): nothing found")
    return paths


def _open(path: str) -> Any:
    """dlopen one candidate and check that its ABI is the one this package knows."""
    lib = ffi.dlopen(path)
    try:
        version = int(lib.rt_abi_version())
    except AttributeError:
        raise OSError("it exports no rt_abi_version(); not a libruntime") from None
    if version != ABI_VERSION:
        raise OSError(
            f"its ABI version is {version}, but this runtime_py knows ABI version "
            f"{ABI_VERSION}; rebuild the library (python3 build.py) or install the matching "
            f"runtime_py"
        )
    return lib


def _load() -> None:
    global _lib, _lib_path
    failures: List[str] = []
    for path in _candidates(failures):
        try:
            lib = _open(path)
        except OSError as exc:
            failures.append(f"{path}: {exc}")
            continue
        _lib_path = path
        _lib = lib
        install_log_callback()
        return
    where = "RUNTIME_PY_LIBRARY" if os.environ.get("RUNTIME_PY_LIBRARY") else "the usual places"
    raise OSError(
        f"runtime_py could not load libruntime from {where}:\n  " + "\n  ".join(failures)
    )


def get_lib() -> Any:
    """The loaded library, opened on first use and cached; OSError says why it can't load."""
    lib = _lib
    if lib is not None:
        return lib
    with _lock:
        if _lib is None:
            _load()
    return _lib


def library_path() -> Optional[str]:
    """The path the library was loaded from, or None before it is loaded."""
    return _lib_path


def _forward_log(user: Any, level: int, message: Any) -> None:
    try:
        _LOGGER.log(_RT_TO_LOGGING.get(level, logging.ERROR), "%s", to_str(message))
    except Exception:  # never let an exception cross back into C
        pass


def _min_level() -> int:
    effective = _LOGGER.getEffectiveLevel()
    if effective <= logging.DEBUG:
        return 0
    if effective <= logging.INFO:
        return 1
    if effective <= logging.WARNING:
        return 2
    return 3


def install_log_callback() -> None:
    """Forward libruntime's log to logging.getLogger("runtime_py").

    The minimum level is taken from the logger's effective level now; call again after
    changing it. Done automatically when the library loads.
    """
    global _log_callback
    lib = _lib if _lib is not None else get_lib()
    if _log_callback is None:
        try:
            _log_callback = ffi.callback("rt_log_fn", _forward_log)
        except Exception as exc:  # e.g. a platform forbidding writable+executable memory
            _LOGGER.warning("runtime_py: cannot install the log callback: %s", exc)
            return
    lib.rt_set_log_callback(_log_callback, ffi.NULL, _min_level())


_cuda_driver: Any = None


def cuda_stream_synchronize(stream: int) -> int:
    """cuStreamSynchronize(stream) through the NVIDIA driver, loaded on first use (libruntime
    loads its own copy for its backend; this one serves producers' streams handed to us);
    the CUresult. OSError when the driver cannot be loaded."""
    global _cuda_driver
    with _lock:
        if _cuda_driver is None:
            driver = cffi.FFI()
            driver.cdef("int cuStreamSynchronize(void *stream);")
            _cuda_driver = (driver, driver.dlopen("libcuda.so.1"))
    driver, lib = _cuda_driver
    return int(lib.cuStreamSynchronize(driver.cast("void *", stream)))


def from_buffer(obj: Any) -> Any:
    """(keepalive, char pointer) of a C-contiguous buffer, never exporting from a memoryview.

    A cffi buffer exported from a memoryview crashes CPython's garbage collector when both end
    up in one reference cycle (an exception's traceback suffices): the memoryview is cleared
    while exported, then freed when the export goes. So for a memoryview we export from the
    object under it and offset the pointer, or copy when that object isn't a plain buffer.
    """
    if not isinstance(obj, memoryview):
        keep = ffi.from_buffer(obj)
        return keep, keep
    base = obj.obj
    if base is not None and not isinstance(base, memoryview):
        try:
            whole = ffi.from_buffer(base)
        except (TypeError, BufferError, ValueError):
            whole = None
        if whole is not None:
            part = ffi.from_buffer(obj)
            try:
                offset = int(ffi.cast("uintptr_t", part)) - int(ffi.cast("uintptr_t", whole))
                size = len(part)
            finally:
                ffi.release(part)
            if 0 <= offset and offset + size <= len(whole):
                return whole, whole + offset
            ffi.release(whole)
    keep = ffi.from_buffer(obj.tobytes())
    return keep, keep

"""Exceptions of runtime_py: one base class, one subclass per rt_status, each also a builtin.

Every error carries `.code` (the rt_status value) and `.message` (the library's text from
rt_last_error(), which names the method, input, op and instruction where they apply).
"""
from __future__ import annotations

from typing import Any, Dict, NoReturn, Optional, Type

__all__ = [
    "Error",
    "InvalidArgument",
    "InvalidState",
    "InvalidProgram",
    "NotFound",
    "Unsupported",
    "OutOfMemory",
    "RuntimeIOError",
    "Internal",
    "ClosedError",
    "VerificationError",
]

# rt_status values (include/runtime.h); fixed forever.
OK = 0
INVALID_ARGUMENT = 1
INVALID_STATE = 2
INVALID_PROGRAM = 3
NOT_FOUND = 4
UNSUPPORTED = 5
OUT_OF_MEMORY = 6
IO_ERROR = 7
INTERNAL = 8


class Error(Exception):
    """Base class of every error runtime_py raises on behalf of libruntime."""

    default_code: int = INTERNAL

    def __init__(self, message: str, code: Optional[int] = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = self.default_code if code is None else code

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> Any:
        return (type(self), (self.message, self.code))


class InvalidArgument(Error, ValueError):
    """A caller-supplied value is wrong (dtype, shape, NULL, index)."""

    default_code = INVALID_ARGUMENT


class InvalidState(Error, RuntimeError):
    """The call is not allowed now (inputs missing, method busy)."""

    default_code = INVALID_STATE


class InvalidProgram(Error, ValueError):
    """Program bytes are malformed; the message gives the offset."""

    default_code = INVALID_PROGRAM


class NotFound(Error, KeyError):
    """No method, attribute or op of that name."""

    default_code = NOT_FOUND

    def __str__(self) -> str:  # KeyError would repr-quote the message
        return self.message


class Unsupported(Error, NotImplementedError):
    """A valid request this build cannot serve (device, op, dtype)."""

    default_code = UNSUPPORTED


class OutOfMemory(Error, MemoryError):
    """An allocation failed or a memory limit was reached."""

    default_code = OUT_OF_MEMORY


class RuntimeIOError(Error, OSError):
    """Opening or mapping a file failed."""

    default_code = IO_ERROR

    def __init__(self, message: str, code: Optional[int] = None) -> None:
        Error.__init__(self, message, code)

    def __str__(self) -> str:  # OSError would format (errno, strerror)
        return self.message


class Internal(Error, RuntimeError):
    """A bug in libruntime; please report it."""

    default_code = INTERNAL


class ClosedError(Error, ValueError):
    """An operation on a program or method that was closed (like I/O on a closed file)."""

    default_code = INVALID_STATE


class VerificationError(Error, AssertionError):
    """A bundled test case produced outputs that differ from its expected outputs. Carries
    `output` (index), `name`, and for an element mismatch the worst element's `index` (a
    tuple), `got`, `expected`, `tolerance`, plus `mismatched` and `total` element counts.
    Its `.code` is RT_INVALID_ARGUMENT: the program computes other values than it claims."""

    default_code = INVALID_ARGUMENT

    def __init__(self, message: str, code: Optional[int] = None, *, output: int = -1,
                 name: str = "", index: Any = None, got: Any = None, expected: Any = None,
                 tolerance: Any = None, mismatched: int = 0, total: int = 0) -> None:
        super().__init__(message, code)
        self.output = output
        self.name = name
        self.index = index
        self.got = got
        self.expected = expected
        self.tolerance = tolerance
        self.mismatched = mismatched
        self.total = total

    def __reduce__(self) -> Any:
        return (_rebuild_verification, (self.message, self.code, dict(self.__dict__)))


def _rebuild_verification(message: str, code: int, state: Dict[str, Any]) -> "VerificationError":
    err = VerificationError(message, code)
    err.__dict__.update(state)
    return err


_BY_CODE: Dict[int, Type[Error]] = {
    INVALID_ARGUMENT: InvalidArgument,
    INVALID_STATE: InvalidState,
    INVALID_PROGRAM: InvalidProgram,
    NOT_FOUND: NotFound,
    UNSUPPORTED: Unsupported,
    OUT_OF_MEMORY: OutOfMemory,
    IO_ERROR: RuntimeIOError,
    INTERNAL: Internal,
}


def error_class(code: int) -> Type[Error]:
    """The exception class for an rt_status (Error for codes newer than this package)."""
    return _BY_CODE.get(int(code), Error)


def raise_status(status: int) -> NoReturn:
    """Raise the exception for a failed status, with the library's last error message."""
    from ._ffi import get_lib, to_str

    lib = get_lib()
    code = int(status)
    message = to_str(lib.rt_last_error())
    if not message:
        message = to_str(lib.rt_status_string(code))
    raise error_class(code)(message, code)


def _check(status: int) -> None:
    """Raise the matching Error unless `status` is RT_OK."""
    if status:
        raise_status(status)

"""What the library offers the whole process: its ops, its backends, its thread defaults
(libruntime/library.c)."""
from __future__ import annotations

from typing import Tuple

from .errors import InvalidArgument


def registered_ops() -> Tuple[str, ...]:
    """Names of the ops this build of libruntime can run."""
    from ._ffi import get_lib, to_str

    lib = get_lib()
    return tuple(to_str(lib.rt_op_name(i)) for i in range(lib.rt_op_count()))


def set_num_threads(n: int) -> None:
    """Default number of threads of methods loaded with num_threads=0 (n < 1: the default)."""
    from ._ffi import get_lib

    get_lib().rt_set_num_threads(int(n))


def set_worker_wait(seconds: float) -> None:
    """How long the thread pool's idle workers stay awake after a parallel loop (spinning for
    the first millisecond, then napping) before they sleep until woken. A call made within that
    time finds them ready; one made after waits for them to wake, which in a VM can cost more
    than the call. Default 1; 0 sleeps at once (for processes that share their cores and
    call rarely); a negative value restores the default. Process-wide."""
    from ._ffi import get_lib

    seconds = float(seconds)
    if seconds != seconds:
        raise InvalidArgument("set_worker_wait: seconds is NaN")
    us = -1 if seconds < 0 else int(min(seconds * 1e6, 2.0**62))
    get_lib().rt_set_worker_wait_us(us)


def get_num_threads() -> int:
    """The current default number of threads."""
    from ._ffi import get_lib

    return int(get_lib().rt_get_num_threads())


def backend_available(name: str) -> bool:
    """Whether a backend ("cpu", "cuda") can run methods in this process."""
    from ._ffi import get_lib

    return bool(get_lib().rt_backend_available(name.encode("utf-8")))

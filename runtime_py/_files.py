"""Writing files that other processes may have mapped."""
from __future__ import annotations

import os
import secrets
from typing import Any


def write_atomically(path: Any, data: bytes) -> None:
    """Write `data` to `path` as a new file renamed over the old one: a process that has the
    old file mapped (a loaded program, a data file) keeps reading the old bytes, where writing
    in place would change them under it, or truncate them into a SIGBUS. The file gets the
    permissions a plain open() would give it (0666 less the umask)."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise

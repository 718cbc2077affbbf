"""The two errors the ExecuTorch importer raises."""
from __future__ import annotations

from ..errors import InvalidProgram, Unsupported


class ConversionError(Unsupported):
    """The program uses something the importer or runtime cannot run (a delegate, an op, a
    dtype, an argument value); the message names the method, instruction and op."""


class MalformedPte(InvalidProgram):
    """The .pte bytes are not a well-formed ExecuTorch program; the message names the byte
    offset and the table and field being read."""

"""Python numbers packed as bfloat16, by input binding (lists of floats) and by the ExecuTorch
importer (scalars in a program), through one packer: rounded to nearest even through float32,
and a NaN kept a NaN with its sign (its mantissa rounded alone could carry into the sign and
exponent: 0x7FFFFFFF used to become -0.0). References are hand-computed bits."""
from __future__ import annotations

import struct

import pytest

import runtime_py as rt
from runtime_py.compiler import ProgramBuilder
from runtime_py.executorch._convert import pack_scalar

pytestmark = pytest.mark.core


def f32(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


CASES = [  # (float, expected bfloat16 bits)
    (1.0, 0x3F80),
    (1.0 + 2.0 ** -8, 0x3F80),      # a tie: to the even mantissa below
    (1.0 + 3 * 2.0 ** -8, 0x3F82),  # a tie: to the even mantissa above
    (-2.5, 0xC020),
    (f32(0x7F7FFFFF), 0x7F80),      # the largest float32 rounds to infinity
    (float("inf"), 0x7F80),
    (-0.0, 0x8000),
    (f32(0x7FFFFFFF), 0x7FFF),      # a NaN with every mantissa bit set
    (f32(0xFFFFFFFF), 0xFFFF),      # and its negative
    (f32(0x7F800001), 0x7FC0),      # a signalling NaN becomes quiet
]


def test_input_lists_pack_bfloat16_by_rounding_to_nearest_even():
    b = ProgramBuilder()
    m = b.method("forward")
    m.output(m.copy(m.input("x", "bfloat16", (len(CASES),))))
    with rt.Program.load(b.to_bytes()) as p, p.load_method("forward") as f:
        (y,) = f([value for value, _ in CASES])
        got = struct.unpack(f"<{len(CASES)}H", y.tobytes())
    assert [hex(g) for g in got] == [hex(bits) for _, bits in CASES]


@pytest.mark.parametrize("value,bits", CASES, ids=[hex(b) for _, b in CASES])
def test_the_executorch_importer_packs_the_same_bits(value, bits):
    assert struct.unpack("<H", pack_scalar(value, "bfloat16"))[0] == bits

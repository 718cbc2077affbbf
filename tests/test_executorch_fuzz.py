"""Randomly corrupted and truncated .pte files (hypothesis): conversion gives a runtime_py
error or a program that loads (or is refused cleanly), never another exception or a crash.
Deterministic cases are in test_executorch_hostile.py."""
from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import runtime_py as rt
from runtime_py import executorch as et

DATA = Path(__file__).parent / "data" / "executorch"
SMALL = {name: (DATA / f"{name}.pte").read_bytes()
         for name in ("add", "counter", "two_methods", "channels_last", "lstm")}


def _convert_cleanly(data: bytes) -> None:
    """Convert; when that works, the program must also load (or be refused cleanly)."""
    try:
        program_bytes = et.convert(data)
    except rt.Error as e:
        assert str(e)
        return
    try:
        rt.Program.load(program_bytes).close()
    except rt.Error as e:
        assert str(e)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(SMALL)), data=st.data())
def test_random_byte_flips_give_clean_errors(name, data):
    raw = bytearray(SMALL[name])
    flips = data.draw(st.lists(st.tuples(st.integers(0, len(raw) - 1), st.integers(0, 255)),
                               min_size=1, max_size=8))
    for pos, byte in flips:
        raw[pos] = byte
    _convert_cleanly(bytes(raw))


@settings(max_examples=100, deadline=None)
@given(name=st.sampled_from(sorted(SMALL)), cut=st.floats(0, 1, exclude_max=True))
def test_random_truncations_give_clean_errors(name, cut):
    raw = SMALL[name]
    try:
        converted = et.convert(raw[:int(len(raw) * cut)])
    except rt.Error as e:
        assert str(e)
    else:  # only unreferenced trailing padding may be cut
        assert converted == et.convert(raw)

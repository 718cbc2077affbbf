"""Memory planning: place every planned tensor of a method in one arena so that tensors whose
lifetimes overlap never share bytes, and tensors that are never live together may.

Lifetimes are instruction intervals. Inputs are live from the start, outputs to the end, and a
value used inside a loop (a backward jump) stays live for the whole loop, because the loop may
read it again on its next iteration. Placement is greedy by size, largest first, at the lowest
aligned offset that fits (the approach ExecuTorch's greedy planner and TFLite's arena use).
"""
from __future__ import annotations

from typing import Dict, List, NamedTuple, Sequence, Tuple

ALIGNMENT = 64


class Interval(NamedTuple):
    start: int
    end: int  # inclusive


class Plan(NamedTuple):
    offsets: Dict[int, int]  # value index -> byte offset in arena 0
    arena_size: int
    unplanned_size: int  # sum of every tensor's aligned size: the cost without reuse


def _align(n: int) -> int:
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def lifetimes(num_instructions: int, uses: Dict[int, List[int]], inputs: Sequence[int],
              outputs: Sequence[int], loops: Sequence[Tuple[int, int]]) -> Dict[int, Interval]:
    """Interval per value from the instructions that use it, widened for inputs, outputs and
    loops (pairs of (first, last) instruction of each backward jump's range)."""
    live: Dict[int, Interval] = {}
    for value, at in uses.items():
        live[value] = Interval(min(at), max(at))
    for value in inputs:
        # The whole method: an input the library copied into the arena must still hold its
        # values when the method runs again without being bound anew.
        live[value] = Interval(-1, num_instructions)
    for value in outputs:
        old = live.get(value, Interval(num_instructions, num_instructions))
        live[value] = Interval(old.start, num_instructions)
    changed = True
    while changed:  # nested loops can widen each other: repeat until stable
        changed = False
        for first, last in loops:
            for value, iv in live.items():
                if iv.start <= last and iv.end >= first and (iv.start > first or iv.end < last):
                    live[value] = Interval(min(iv.start, first), max(iv.end, last))
                    changed = True
    return live


def plan(sizes: Dict[int, int], live: Dict[int, Interval]) -> Plan:
    """Offsets for values of the given byte sizes and lifetimes."""
    order = sorted(sizes, key=lambda v: (-sizes[v], v))
    placed: List[Tuple[int, int, Interval]] = []  # (offset, end offset, lifetime)
    offsets: Dict[int, int] = {}
    arena = 0
    for value in order:
        size = _align(max(sizes[value], 1))
        iv = live.get(value, Interval(0, 0))
        conflicts = sorted((o, e) for o, e, other in placed
                           if other.start <= iv.end and iv.start <= other.end)
        offset = 0
        for o, e in conflicts:
            if offset + size <= o:
                break
            offset = max(offset, e)
        offsets[value] = offset
        placed.append((offset, offset + size, iv))
        arena = max(arena, offset + size)
    unplanned = sum(_align(max(s, 1)) for s in sizes.values())
    return Plan(offsets, arena, unplanned)

"""Einsum lowered onto transpose, reshape, matmul, mul and reduce_sum.

One operand: sum the labels the output drops, then transpose into the output order. Two
operands: labels in both inputs and the output are batch dimensions (kept apart, so that
ellipsis dimensions broadcast as in matmul); labels in both inputs only are contracted;
the rest belong to one side. Each input is transposed to [batch, own, contracted], its own and
contracted labels flattened, multiplied with matmul, and the result unflattened and transposed
into the output order. Without contracted labels (outer and elementwise products) the operands
are aligned to the output order instead and multiplied with broadcasting. A label repeated in
one operand takes its diagonal first (where with an identity mask, then reduce_sum). More
operands contract pairwise from the left. Dynamic shapes are refused.
"""
from __future__ import annotations

import math
from typing import List, Sequence, Tuple

import numpy as np

from ...library import registered_ops
from .._registry import lowers
from .common import NUMERIC, check_attrs, require_dtype, reshape

_MATMUL_DTYPES = ("float32", "float64", "int32", "int64")


def _letters(term: str) -> bool:
    """Only ASCII letters besides one '...' (an empty term is a scalar)."""
    rest = term.replace("...", "")
    return all(c.isascii() and c.isalpha() for c in rest)


def _parse(cv, equation: str, ranks: Sequence[int]) -> Tuple[List[List[str]], List[str]]:
    """Each input's labels and the output's, with '...' expanded into fresh labels (one per
    broadcast dimension, aligned from the right as numpy does)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise cv.fail(f"equation '{equation}' names {len(terms)} operands, the node has "
                      f"{len(ranks)}")
    ellipsis_rank = 0
    parsed: List[Tuple[str, int]] = []
    for term, rank in zip(terms, ranks):
        if term.count("...") > 1 or not _letters(term):
            raise cv.fail(f"equation '{equation}': cannot parse the term '{term}'")
        letters = len(term.replace("...", ""))
        if ("..." in term and letters > rank) or ("..." not in term and letters != rank):
            raise cv.fail(f"equation '{equation}': the term '{term}' does not fit an operand "
                          f"of rank {rank}")
        if "..." in term:
            ellipsis_rank = max(ellipsis_rank, rank - letters)
        parsed.append((term, rank - letters))
    ell = [chr(0x100 + i) for i in range(ellipsis_rank)]  # fresh labels, never letters

    def expand(term: str, count: int) -> List[str]:
        head, dots, tail = term.partition("...")
        return list(head) + (ell[ellipsis_rank - count:] if dots else []) + list(tail)

    inputs = [expand(term, count) for term, count in parsed]
    if arrow:
        if rhs.count("...") > 1 or not _letters(rhs):
            raise cv.fail(f"equation '{equation}': cannot parse the output '{rhs}'")
        output = expand(rhs, ellipsis_rank)
    else:  # implicit output: '...' then the labels used once, in alphabetical order
        counts = [lab for labels in inputs for lab in labels if lab not in ell]
        output = ell + sorted(lab for lab in set(counts) if counts.count(lab) == 1)
    if len(set(output)) != len(output):
        raise cv.fail(f"equation '{equation}': the output repeats a label")
    known = {lab for labels in inputs for lab in labels}
    if any(lab not in known for lab in output):
        raise cv.fail(f"equation '{equation}': an output label appears in no input")
    return inputs, output


def _sizes(cv, equation, inputs, shapes, ell) -> dict:
    sizes: dict = {}
    for labels, shape in zip(inputs, shapes):
        for lab, size in zip(labels, shape):
            old = sizes.get(lab, size)
            if old != size and not (lab in ell and 1 in (old, size)):
                raise cv.fail(f"equation '{equation}': label '{lab}' has sizes {old} and {size}")
            sizes[lab] = max(old, size) if lab in ell else size
    return sizes


def _sum_out(cv, equation, x, labels: List[str], keep: Sequence[str]):
    """x with the labels that are not in `keep` summed away (needs the runtime's reduce_sum)."""
    drop = [i for i, lab in enumerate(labels) if lab not in keep]
    if not drop:
        return x, labels
    if "reduce_sum" not in registered_ops():
        raise cv.fail(f"equation '{equation}' sums over a label of one operand; the runtime has "
                      f"no reduce_sum op")
    require_dtype(cv, x, NUMERIC)
    x = cv.tensor(x)
    shape = [s for i, s in enumerate(x.shape) if i not in drop]
    (y,) = cv.m.call("reduce_sum", x, drop, False, outputs=[(x.dtype, shape, x.dynamic)])
    return y, [lab for lab in labels if lab in keep]


def _diagonals(cv, equation, x, labels: List[str]):
    """x with each label that repeats in it reduced to one dimension (its diagonal): the
    elements off the diagonal are replaced by 0 with where, then summed away."""
    labels = list(labels)
    while len(set(labels)) != len(labels):
        if not {"where", "reduce_sum"} <= set(registered_ops()):
            raise cv.fail(f"equation '{equation}': a repeated label (a diagonal) needs the "
                          f"runtime's where and reduce_sum ops")
        require_dtype(cv, x, NUMERIC)
        x = cv.tensor(x)
        first = next(i for i, lab in enumerate(labels) if labels.index(lab) != i)
        lab = labels[first]
        i0 = labels.index(lab)
        n = x.shape[i0]
        mask_shape = [n if d in (i0, first) else 1 for d in range(len(labels))]
        mask = cv.tensor(np.eye(n, dtype=bool).reshape(mask_shape))
        zero = cv.tensor(np.zeros((), np.dtype(x.dtype)))
        (masked,) = cv.m.call("where", mask, x, zero, outputs=[(x.dtype, x.shape, x.dynamic)])
        shape = [s for d, s in enumerate(x.shape) if d != first]
        (x,) = cv.m.call("reduce_sum", masked, [first], False,
                         outputs=[(x.dtype, shape, x.dynamic)])
        del labels[first]
    return x, labels


def _transpose(cv, x, labels: List[str], order: List[str]):
    perm = [labels.index(lab) for lab in order]
    if perm == list(range(len(perm))):
        return x
    return cv.m.transpose(cv.tensor(x), perm)


@lowers("Einsum")
def einsum(cv, node, inputs, attrs):
    check_attrs(cv, attrs, ("equation",))
    equation = attrs.get("equation", b"")
    equation = equation.decode() if isinstance(equation, bytes) else str(equation)
    if not inputs or any(x is None for x in inputs):
        raise cv.fail(f"equation '{equation}': every operand must be present")
    if any(cv.is_dynamic(x) for x in inputs):
        raise cv.fail(f"equation '{equation}': dynamic input shapes are not supported")
    for x in inputs:
        require_dtype(cv, x, NUMERIC + ("bool",) if len(inputs) == 1 else _MATMUL_DTYPES)
    if len({cv.dtype_of(x) for x in inputs}) > 1:
        raise cv.fail(f"equation '{equation}': operands of dtypes "
                      f"{', '.join(cv.dtype_of(x) for x in inputs)}")
    shapes = [cv.shape_of(x) for x in inputs]
    labels, output = _parse(cv, equation, [len(s) for s in shapes])
    ell = {chr(0x100 + i) for i in range(16)}
    sizes = _sizes(cv, equation, labels, shapes, ell)
    inputs = list(inputs)
    for i in range(len(inputs)):
        inputs[i], labels[i] = _diagonals(cv, equation, inputs[i], labels[i])
    if len(inputs) == 1:
        x, lab = _sum_out(cv, equation, inputs[0], labels[0], output)
        return [_transpose(cv, x, lab, output)]
    # More operands contract left to right, keeping the labels used later.
    x, lx = inputs[0], labels[0]
    for i in range(1, len(inputs)):
        later = set(output).union(*labels[i + 1:])
        keep = output if i == len(inputs) - 1 else list(dict.fromkeys(
            lab for lab in lx + labels[i] if lab in later))
        x, lx = _contract(cv, equation, x, lx, inputs[i], labels[i], keep, sizes), keep
    return [x]


def _contract(cv, equation, a, la, b, lb, output, sizes):
    """The two-operand einsum of a (labels la) and b (labels lb) into the labels `output`."""
    own_a, own_b = dict(zip(la, cv.shape_of(a))), dict(zip(lb, cv.shape_of(b)))
    # Labels of one operand that neither the other operand nor the output has are summed first.
    a, la = _sum_out(cv, equation, a, la, set(lb) | set(output))
    b, lb = _sum_out(cv, equation, b, lb, set(la) | set(output))
    batch = [lab for lab in output if lab in la and lab in lb]
    left = [lab for lab in output if lab in la and lab not in lb]
    right = [lab for lab in output if lab in lb and lab not in la]
    contracted = [lab for lab in la if lab in lb and lab not in output]
    if any(own_a[lab] != own_b[lab] for lab in contracted):
        raise cv.fail(f"equation '{equation}': summing '...' dimensions that broadcast is not "
                      f"supported")
    if not contracted:
        return _product(cv, a, la, own_a, b, lb, own_b, output)
    k = math.prod(sizes[lab] for lab in contracted)
    m = math.prod(sizes[lab] for lab in left)
    n = math.prod(sizes[lab] for lab in right)
    # Batch sizes stay each operand's own (1 broadcasts in matmul).
    a = _transpose(cv, a, la, batch + left + contracted)
    a = reshape(cv, cv.tensor(a), [own_a[lab] for lab in batch] + [m, k])
    b = _transpose(cv, b, lb, batch + contracted + right)
    b = reshape(cv, cv.tensor(b), [own_b[lab] for lab in batch] + [k, n])
    y = cv.m.matmul(a, b)
    y = reshape(cv, y, [max(own_a[lab], own_b[lab]) for lab in batch]
                + [sizes[lab] for lab in left + right])
    return _transpose(cv, y, batch + left + right, output)


def _product(cv, a, la, own_a, b, lb, own_b, output):
    """No contraction (outer or elementwise products): each operand in output order, with 1s
    for the labels it lacks, multiplied with broadcasting."""
    def aligned(x, labels, own):
        x = _transpose(cv, x, labels, [lab for lab in output if lab in labels])
        return reshape(cv, cv.tensor(x), [own.get(lab, 1) for lab in output])

    return cv.m.mul(aligned(a, la, own_a), aligned(b, lb, own_b))

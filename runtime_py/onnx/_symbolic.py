"""Symbolic sizes for the ONNX importer.

A graph exported with dynamic axes computes its shapes at run time: Shape, then Gather, Concat,
arithmetic, and the result feeds Reshape, Expand, Range or ConstantOfShape. The converter keeps
every size as a `Dim`, a polynomial with integer coefficients over *atoms*: the sizes of the
graph inputs (one atom per ONNX symbolic name, so that inputs sharing `batch` share it), sizes
measured on a tensor whose shape nothing better describes, and opaque terms (a division or a
minimum that the bounds cannot settle). Polynomials in a normal form make equal sizes compare
equal (`s * b` and `b * s`; `(s + 1) - 1` and `s`), which is what lets a position table sliced
to `s` broadcast against a tensor of length `s`; interval arithmetic over the atoms' bounds
gives every size its upper bound, which the program plans memory for.

Our own small algebra rather than sympy: real graphs need +, -, *, exact and truncating
division, min and max over a few atoms, and bounds; sympy would add a large import and an
assumptions system whose answers (integer, positive) we would have to translate anyway.
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

Monomial = Tuple[int, ...]  # sorted atom ids; a repeated id is a power


class Atom:
    """An unknown size: its bounds, a name for messages, and how the program measures it at
    run time (`source`, filled in by the converter: (tensor, axis) or an opaque expression)."""

    __slots__ = ("id", "name", "lo", "hi", "source")

    def __init__(self, ident: int, name: str, lo: int, hi: int, source: Any) -> None:
        self.id, self.name, self.lo, self.hi, self.source = ident, name, lo, hi, source


class Dim:
    """A polynomial over atoms: {monomial: coefficient}, zero coefficients dropped."""

    __slots__ = ("terms", "space")

    def __init__(self, space: "SymbolSpace", terms: Dict[Monomial, int]) -> None:
        self.space = space
        self.terms = {m: c for m, c in terms.items() if c}

    # ---- structure ----------------------------------------------------------------------

    @property
    def constant(self) -> Optional[int]:
        """The value when the polynomial has no atom, else None."""
        if not self.terms:
            return 0
        if len(self.terms) == 1 and () in self.terms:
            return self.terms[()]
        return None

    def key(self) -> Tuple[Tuple[Monomial, int], ...]:
        return tuple(sorted(self.terms.items()))

    def __eq__(self, other: object) -> bool:  # structural: equal polynomials
        other = self.space.dim(other) if isinstance(other, int) else other
        return isinstance(other, Dim) and self.key() == other.key()

    def __hash__(self) -> int:
        return hash(self.key())

    def __repr__(self) -> str:
        return self.space.text(self)

    # ---- ring arithmetic ----------------------------------------------------------------

    def _combine(self, other: Any, sign: int) -> "Dim":
        o = self.space.dim(other)
        terms = dict(self.terms)
        for m, c in o.terms.items():
            terms[m] = terms.get(m, 0) + sign * c
        return Dim(self.space, terms)

    def __add__(self, other: Any) -> "Dim":
        return self._combine(other, 1)

    __radd__ = __add__

    def __sub__(self, other: Any) -> "Dim":
        return self._combine(other, -1)

    def __rsub__(self, other: Any) -> "Dim":
        return self.space.dim(other)._combine(self, -1)

    def __neg__(self) -> "Dim":
        return Dim(self.space, {m: -c for m, c in self.terms.items()})

    def __mul__(self, other: Any) -> "Dim":
        o = self.space.dim(other)
        terms: Dict[Monomial, int] = {}
        for m1, c1 in self.terms.items():
            for m2, c2 in o.terms.items():
                m = tuple(sorted(m1 + m2))
                terms[m] = terms.get(m, 0) + c1 * c2
        return Dim(self.space, terms)

    __rmul__ = __mul__


Size = Union[int, Dim]


def as_int(d: Any) -> Optional[int]:
    """The integer value of an int or a constant Dim, else None."""
    if isinstance(d, Dim):
        return d.constant
    return int(d)


class SymbolSpace:
    """The atoms of one conversion and the operations that need their bounds."""

    def __init__(self) -> None:
        self.atoms: List[Atom] = []
        self._opaque: Dict[Any, Atom] = {}

    def dim(self, value: Any) -> Dim:
        if isinstance(value, Dim):
            return value
        return Dim(self, {(): int(value)} if int(value) else {})

    def atom(self, name: str, lo: int, hi: int, source: Any) -> Dim:
        a = Atom(len(self.atoms), name, lo, hi, source)
        self.atoms.append(a)
        return Dim(self, {(a.id,): 1})

    @staticmethod
    def simplest(d: Size) -> Size:
        """An int where the Dim is constant."""
        if isinstance(d, Dim):
            c = d.constant
            return d if c is None else c
        return int(d)

    # ---- bounds ---------------------------------------------------------------------------

    def bounds(self, d: Size) -> Tuple[int, int]:
        """(lowest, highest) value of d over its atoms' bounds, by interval arithmetic."""
        if not isinstance(d, Dim):
            return int(d), int(d)
        lo = hi = 0
        for m, c in d.terms.items():
            mlo, mhi = 1, 1
            for ident in m:
                a = self.atoms[ident]
                products = (mlo * a.lo, mlo * a.hi, mhi * a.lo, mhi * a.hi)
                mlo, mhi = min(products), max(products)
            lo += min(c * mlo, c * mhi)
            hi += max(c * mlo, c * mhi)
        return lo, hi

    def assume_size(self, d: Size) -> None:
        """Record that d is a tensor's size, so >= 0: where d is c * atom + c0 (c > 0), the
        atom's lower bound rises to what makes d >= 0. (A conv's output length
        `samples / 10 - 1` then tells the bounds that samples / 10 >= 1.)"""
        d = self.dim(d)
        varying = [(m, c) for m, c in d.terms.items() if m]
        if len(varying) != 1 or len(varying[0][0]) != 1 or varying[0][1] <= 0:
            return
        ((ident,), c) = varying[0]
        need = -(d.terms.get((), 0) // c)  # ceil(-c0 / c)
        atom = self.atoms[ident]
        if atom.lo < need <= atom.hi:
            atom.lo = need

    def known_le(self, a: Size, b: Size) -> bool:
        """a <= b for every value of the atoms."""
        return self.bounds(self.dim(b) - self.dim(a))[0] >= 0

    def equal(self, a: Size, b: Size) -> Optional[bool]:
        """True or False when provable, else None."""
        diff = self.dim(a) - self.dim(b)
        if diff.constant == 0:
            return True
        lo, hi = self.bounds(diff)
        return False if lo > 0 or hi < 0 else None

    # ---- operations needing bounds ---------------------------------------------------------

    def _opaque_atom(self, op: str, args: Sequence[Size], lo: int, hi: int) -> Dim:
        key = (op,) + tuple(self.dim(a).key() for a in args)
        atom = self._opaque.get(key)
        if atom is None:
            text = f"{op}({', '.join(self.text(a) for a in args)})"
            d = self.atom(text, lo, hi, (op, tuple(self.simplest(a) for a in args)))
            atom = self.atoms[-1]
            self._opaque[key] = atom
            return d
        return Dim(self, {(atom.id,): 1})

    def minimum(self, a: Size, b: Size) -> Size:
        if self.known_le(a, b):
            return self.simplest(a)
        if self.known_le(b, a):
            return self.simplest(b)
        (alo, ahi), (blo, bhi) = self.bounds(a), self.bounds(b)
        return self._opaque_atom("min", sorted((a, b), key=self.text), min(alo, blo),
                                 min(ahi, bhi))

    def maximum(self, a: Size, b: Size) -> Size:
        if self.known_le(a, b):
            return self.simplest(b)
        if self.known_le(b, a):
            return self.simplest(a)
        (alo, ahi), (blo, bhi) = self.bounds(a), self.bounds(b)
        return self._opaque_atom("max", sorted((a, b), key=self.text), max(alo, blo),
                                 max(ahi, bhi))

    def divide(self, a: Size, b: Size, valid_from_zero: bool = False) -> Size:
        """Integer division truncating toward zero (ONNX Div on integers and our div op);
        exact where every coefficient of a is a multiple of a constant b. valid_from_zero: a
        negative a is an error at run time anyway (a window longer than its input), so only
        a >= 0 need be bounded."""
        ca, cb = as_int(a), as_int(b)
        if cb == 0:
            raise ZeroDivisionError("integer division by zero in a shape computation")
        if ca is not None and cb is not None:
            q = abs(ca) // abs(cb)
            return q if (ca >= 0) == (cb > 0) else -q
        if cb is not None:
            da = self.dim(a)
            if all(c % cb == 0 for c in da.terms.values()):
                return self.simplest(Dim(self, {m: c // cb for m, c in da.terms.items()}))
        exact = self.exact_quotient(a, b)
        if exact is not None:
            return exact
        alo, ahi = self.bounds(a)
        blo, bhi = self.bounds(b)
        if valid_from_zero:
            alo = max(alo, 0)
        if alo < 0 or blo < 1:
            raise ValueError(f"cannot bound the division {self.text(a)} / {self.text(b)}")
        if cb is not None and cb > 0:
            return self._floor_divide(self.dim(a), cb)
        return self._opaque_atom("div", (a, b), alo // bhi, ahi // blo)

    def _floor_divide(self, a: Dim, b: int) -> Size:
        """a // b for a >= 0 (where truncation is floor) in a normal form: every coefficient
        c = q * b + r moves q out of the division, so that `(s - 10) / 5` is `s / 5 - 2`,
        and a quotient of a quotient is one quotient (`(s / 5) / 2` is `s / 10`), the forms
        exporters write the same length in."""
        pulled: Dict[Monomial, int] = {}
        rest: Dict[Monomial, int] = {}
        for m, c in a.terms.items():
            q, r = divmod(c, b)
            pulled[m], rest[m] = q, r
        out = Dim(self, pulled)
        remainder = Dim(self, rest)
        if remainder.constant is not None:
            return self.simplest(out + remainder.constant // b)
        inner = self._divided_atom(remainder)
        if inner is not None:
            x, d = inner
            return self.simplest(out + self._floor_divide(self.dim(x), d * b))
        lo, hi = self.bounds(remainder)
        return self.simplest(out + self._opaque_atom("div", (remainder, b), lo // b, hi // b))

    def _divided_atom(self, d: Dim) -> Optional[Tuple[Size, int]]:
        """(x, k) when d is the opaque atom div(x, k) for a constant k, else None."""
        if len(d.terms) != 1:
            return None
        ((m, c),) = d.terms.items()
        if c != 1 or len(m) != 1:
            return None
        source = self.atoms[m[0]].source
        if isinstance(source, tuple) and len(source) == 2 and source[0] == "div" \
                and as_int(source[1][1]) is not None and as_int(source[1][1]) > 0:
            return source[1][0], as_int(source[1][1])
        return None

    def exact_quotient(self, a: Size, b: Size) -> Optional[Size]:
        """a / b when it is exact: b a monomial dividing every term of a
        (`64 * batch * (s - 1) / (16 * batch)`), or a monomial quotient q with q * b == a
        (`32 * b * (s - 1) / (16 * b * (s - 1))`); else None."""
        da, db = self.dim(a), self.dim(b)
        if not db.terms:
            return None
        mb, cb = min(db.terms.items())
        if len(db.terms) == 1:  # a monomial divisor: term by term
            out: Dict[Monomial, int] = {}
            for ma, ca in da.terms.items():
                rest = list(ma)
                if ca % cb or any(ident not in rest or rest.remove(ident) for ident in mb):
                    return None
                out[tuple(rest)] = out.get(tuple(rest), 0) + ca // cb
            return self.simplest(Dim(self, out))
        for ma, ca in da.terms.items():
            rest = list(ma)
            if ca % cb or any(ident not in rest or rest.remove(ident) for ident in mb):
                continue
            q = Dim(self, {tuple(rest): ca // cb})
            if q * db == da:
                return self.simplest(q)
        return None

    def modulo(self, a: Size, b: Size) -> Size:
        """Python's % (ONNX Mod with fmod=0) for a constant positive b."""
        ca, cb = as_int(a), as_int(b)
        if ca is not None and cb is not None:
            if cb == 0:
                raise ZeroDivisionError("integer modulo by zero in a shape computation")
            return ca % cb
        if cb is not None and cb > 0 and all(c % cb == 0 for c in self.dim(a).terms.values()):
            return 0
        lo, hi = self.bounds(b)
        if lo < 1:
            raise ValueError(f"cannot bound {self.text(a)} mod {self.text(b)}")
        return self._opaque_atom("mod", (a, b), 0, hi - 1)

    # ---- text -----------------------------------------------------------------------------

    def text(self, d: Any) -> str:
        if not isinstance(d, Dim):
            return str(int(d))
        if not d.terms:
            return "0"
        parts = []
        for m, c in sorted(d.terms.items(), key=lambda t: (-len(t[0]), t[0])):
            names = "*".join(self.atoms[i].name for i in m)
            if not names:
                parts.append(str(c))
            elif c == 1:
                parts.append(names)
            elif c == -1:
                parts.append("-" + names)
            else:
                parts.append(f"{c}*{names}")
        return " + ".join(parts).replace("+ -", "- ")


def broadcast_dims(space: SymbolSpace, shapes: Iterable[Sequence[Size]]) -> Tuple[Size, ...]:
    """numpy broadcasting of symbolic shapes: a 1 takes the other size; equal sizes stay; two
    different unknown sizes give their maximum (the program checks they agree at run time)."""
    shapes = [tuple(s) for s in shapes]
    rank = max((len(s) for s in shapes), default=0)
    out: List[Size] = []
    for axis in range(rank):
        size: Size = 1
        for s in shapes:
            i = axis - (rank - len(s))
            if i < 0:
                continue
            d = space.simplest(s[i])
            if as_int(d) == 1:
                continue
            if as_int(size) == 1 or space.equal(size, d):
                size = d
            elif as_int(d) is not None and as_int(size) is None:
                size = d  # a fixed size > 1 decides (the unknown one must be 1 or equal)
            elif as_int(size) is None:
                size = space.maximum(size, d)
        out.append(size)
    return tuple(out)

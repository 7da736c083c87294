# SPDX-License-Identifier: BSD-2-Clause
"""Small combinational building blocks shared by several components."""

from amaranth.hdl import Const, Mux, Signal
from amaranth.utils import ceil_log2

__all__ = ["wire", "first_set"]


def wire(m, value, width, name, keep=False):
    """``value`` as a named comb Signal. Intermediate vectors are wires so that bit selects do not
    copy the expression behind them (Amaranth pushes a slice down into its operands). With
    ``keep``, synthesis keeps the wire (a LUT output of its own), so that the logic is mapped with
    the structure written."""
    sig = Signal(width, name=name, attrs={"keep": 1} if keep else {})
    m.d.comb += sig.eq(value)
    return sig


def first_set(m, vec, n, name):
    """``(any, index)`` of the lowest set bit of the ``n``-bit ``vec`` (a log-depth tree)."""
    width = max(1, ceil_log2(n))
    vec = wire(m, vec, n, f"{name}_in")

    def tree(lo, hi):
        if hi - lo == 1:
            return vec[lo], Const(lo, width)
        mid = lo + (1 << ceil_log2(hi - lo) - 1)
        any_lo, idx_lo = tree(lo, mid)
        any_hi, idx_hi = tree(mid, hi)
        return (wire(m, any_lo | any_hi, 1, f"{name}_any_{lo}_{hi}"),
                wire(m, Mux(any_lo, idx_lo, idx_hi), width, f"{name}_idx_{lo}_{hi}"))

    return tree(0, n)

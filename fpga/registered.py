# SPDX-License-Identifier: BSD-2-Clause
"""A register on every port of a block, so that an out-of-context build times the block's own
port paths (docs/protocol.md section 8: every block boundary registered)."""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In

__all__ = ["Registered"]


class Registered(wiring.Component):
    """``inner`` with one register on each input and each output.

    Out of context, nextpnr times paths between registers only: a block whose ports reach its
    own logic or block RAM directly (``rtl.common.memory.BlockRam``: the address, data and
    enables go straight into the DP16KD, ``r_data`` straight out of it) would show the Fmax of
    its few internal registers. Between registers, the figure is that of the block in a design
    whose neighbours register their outputs, as the project's blocks do.

    Parameters
    ----------
    inner : wiring.Component
        A component whose members are plain ports (no interfaces).

    Ports
    -----
    ``inner``'s, same names, directions and shapes; ``clk``, ``rst``.

    Latency and throughput
    ----------------------
    One cycle more on every input and every output; one transfer per cycle, as ``inner``.
    """

    def __init__(self, inner):
        if not isinstance(inner, wiring.Component):
            raise TypeError(f"Registered: inner must be a wiring.Component, not "
                            f"{type(inner).__name__}")
        nested = [name for name, m in inner.signature.members.items() if not m.is_port]
        if nested:
            raise ValueError(f"Registered: {type(inner).__name__} has interface members "
                             f"{nested}; only plain ports can be registered")
        self.inner = inner
        super().__init__(dict(inner.signature.members))

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = inner = self.inner
        for name, member in self.signature.members.items():
            outer, theirs = getattr(self, name), getattr(inner, name)
            reg = Signal(member.shape, init=member.init, name=f"{name}_q")
            if member.flow == In:
                m.d.sync += reg.eq(outer)
                m.d.comb += theirs.eq(reg)
            else:
                m.d.sync += reg.eq(theirs)
                m.d.comb += outer.eq(reg)
        return m

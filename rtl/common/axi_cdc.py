# SPDX-License-Identifier: BSD-2-Clause
"""An AXI4 master crossing from one clock domain to another (issue [nic-fit] item 2): one
:class:`rtl.common.stream_cdc.StreamCdc` per channel."""

from amaranth.hdl import Module
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .axi import axi4, axi4_read, axi4_write
from .stream_cdc import StreamCdc

__all__ = ["AxiCdc", "CHANNELS"]

# channel -> (signal suffixes carried, direction: True from master to slave)
CHANNELS = {
    "aw": (("id", "addr", "len", "size", "burst", "lock", "cache", "prot"), True),
    "w": (("data", "strb", "last"), True),
    "b": (("id", "resp"), False),
    "ar": (("id", "addr", "len", "size", "burst", "lock", "cache", "prot"), True),
    "r": (("id", "data", "resp", "last"), False),
}


class AxiCdc(wiring.Component):
    """An AXI4 master in ``s_domain`` (a block's ``m_axi``, joined to this block's ``s_axi``)
    carried to ``m_axi`` in ``m_domain`` (where the memory, the slave, runs): AW, W and AR
    cross from ``s_domain`` to ``m_domain``, B and R back, each through its own
    :class:`rtl.common.stream_cdc.StreamCdc` of ``depth`` entries (payload: the channel's
    signals but ``valid`` and ``ready``). Channels are independent, as AXI4 allows: a write's W
    beats may reach the slave before its AW (AXI4 permits it; a slave that needs AW first
    waits for it), and responses keep their order per channel.

    Parameters
    ----------
    data_width, addr_width (default 64), id_width (default 1)
        As :func:`rtl.common.axi.axi4`.
    depth : power of two, at least 4 (default 16)
        Entries per channel (see :class:`StreamCdc` for the depth full rate needs).
    s_domain (default ``"sync"``), m_domain (default ``"mem"``) : str, different
    read, write : bool (default True, True)
        Which halves to carry: both (``axi4``), the write half only (``axi4_write``: AW, W, B)
        or the read half only (``axi4_read``: AR, R).

    Ports
    -----
    s_axi : In(axi4(...)) (or the half), ``s_domain``: the master's side.
    m_axi : Out(axi4(...)) (or the half), ``m_domain``: the slave's side.
    Clocks and resets: those of both domains (``clk``/``rst`` for ``sync``, ``mem_clk``/
    ``mem_rst`` for ``mem`` at a Verilog top).

    Reset
    -----
    Each channel's write side owns its FIFO's reset (:class:`StreamCdc`): the ``s_domain``
    reset empties AW, W and AR, the ``m_domain`` reset empties B and R. Reset both together (a
    burst cut by a reset of one side alone is not completed by the other), for at least 4
    cycles of the slower clock.

    Latency and throughput
    ----------------------
    Each channel: 2 to 3 cycles of the receiving side's clock from a handshake on one side to
    ``valid`` on the other (see :class:`StreamCdc`), so a read's first R beat reaches ``s_axi``
    2 to 3 ``m_domain`` cycles + the slave's latency + 2 to 3 ``s_domain`` cycles after AR;
    a write's B likewise. Each channel moves one beat per cycle of the slower clock once
    ``depth`` covers the round trip (depth 16: up to a clock ratio of about 4). No
    outstanding-transaction limit beyond the master's and the FIFO depths.
    """

    def __init__(self, data_width, addr_width=64, id_width=1, depth=16, *, s_domain="sync",
                 m_domain="mem", read=True, write=True):
        if not (read or write):
            raise ValueError("AxiCdc: at least one of read and write must be True")
        try:
            if read and write:
                sig = axi4(data_width, addr_width, id_width)
            elif write:
                sig = axi4_write(data_width, addr_width, id_width)
            else:
                sig = axi4_read(data_width, addr_width, id_width)
        except ValueError as exc:
            raise ValueError(f"AxiCdc: {exc}") from None
        self.data_width, self.addr_width, self.id_width = data_width, addr_width, id_width
        self.s_domain, self.m_domain = s_domain, m_domain
        self.channels = [c for c in CHANNELS
                         if (write and c in ("aw", "w", "b")) or (read and c in ("ar", "r"))]
        members = sig.members
        self.parts = {}
        for c in self.channels:
            fields, forward = CHANNELS[c]
            layout = data.StructLayout({f: members[c + f].shape for f in fields})
            try:
                self.parts[c] = StreamCdc(layout, depth,
                                          w_domain=s_domain if forward else m_domain,
                                          r_domain=m_domain if forward else s_domain)
            except ValueError as exc:
                raise ValueError(f"AxiCdc: {exc}") from None
        self.depth = depth
        super().__init__({"s_axi": In(sig), "m_axi": Out(sig)})

    def elaborate(self, platform):
        m = Module()
        for c in self.channels:
            fields, forward = CHANNELS[c]
            part = m.submodules[f"{c}_cdc"] = self.parts[c]
            # The side that drives valid (and the fields) and the side that drives ready.
            src, dst = (self.s_axi, self.m_axi) if forward else (self.m_axi, self.s_axi)
            m.d.comb += [getattr(part.i.payload, f).eq(getattr(src, c + f)) for f in fields]
            m.d.comb += [part.i.valid.eq(getattr(src, c + "valid")),
                         getattr(src, c + "ready").eq(part.i.ready)]
            m.d.comb += [getattr(dst, c + f).eq(getattr(part.o.payload, f)) for f in fields]
            m.d.comb += [getattr(dst, c + "valid").eq(part.o.valid),
                         part.o.ready.eq(getattr(dst, c + "ready"))]
        return m

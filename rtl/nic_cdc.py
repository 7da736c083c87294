# SPDX-License-Identifier: BSD-2-Clause
"""The NIC engine with optional clock-domain crossings at its plane ports and its AXI4 master
(issue [nic-fit] item 2): the core, the links and the memory may run at different clocks."""

from amaranth.hdl import Module
from amaranth.lib import wiring

from rtl.common.axi_cdc import AxiCdc
from rtl.common.flat_top import forward
from rtl.common.stream import connect_beats
from rtl.common.stream_cdc import MIN_DEPTH, StreamCdc
from rtl.nic_engine import NicEngine

__all__ = ["NicCdc"]


class NicCdc(wiring.Component):
    """:class:`rtl.nic_engine.NicEngine` in the ``sync`` domain (the core clock), with each
    plane's transmit and receive AXI-Stream port in a ``link`` domain (``link_clock``) and the
    AXI4 master in a ``mem`` domain (``memory_clock``), through
    :class:`rtl.common.stream_cdc.StreamCdc` and :class:`rtl.common.axi_cdc.AxiCdc`.

    Parameters
    ----------
    *args, **kwargs
        The engine's, unchanged (:class:`rtl.nic_engine.NicEngine`).
    link_clock, memory_clock : bool (default False)
        Put the plane ports in ``link`` and the AXI4 master in ``mem``. With both False this
        is the engine itself: the same ports, pure wiring.
    cdc_depth : power of two, at least 4 (default 16)
        Entries of each crossing's FIFO.

    Ports
    -----
    Exactly the engine's, plus the clocks and resets of the domains used: ``link_clk`` and
    ``link_rst`` (with ``link_clock``: ``m_axis<p>_*`` and ``s<p>_axis_*`` in that domain),
    ``mem_clk`` and ``mem_rst`` (with ``memory_clock``: ``m_axi_*`` in that domain). Everything
    else (host streams, configuration, ``plane_down``/``plane_up``, traces) stays in ``sync``.

    Receive planes. ``s<p>_axis`` still never backpressures: its crossing is
    ``StreamCdc(always_ready=True)``, which drops and marks bad a frame that meets a full FIFO
    (the engine's receive front counts it as a bad frame). The engine takes a beat every core
    cycle, so with a core clock at least as fast as the link clock nothing is dropped.

    Reset. Assert ``rst``, ``link_rst`` and ``mem_rst`` together for at least 4 cycles of the
    slowest clock (:class:`StreamCdc`: each FIFO's write side owns its reset).

    Latency and throughput
    ----------------------
    The engine's, plus on each crossing 2 to 3 cycles of the receiving clock (an AXI4 read's
    round trip: 2 to 3 ``mem`` cycles to the memory, 2 to 3 core cycles back). Each crossing
    moves one beat per cycle of the slower of its two clocks (``cdc_depth`` 16: up to a clock
    ratio of about 4).
    """

    def __init__(self, *args, link_clock=False, memory_clock=False, cdc_depth=16, **kwargs):
        if (not isinstance(cdc_depth, int) or isinstance(cdc_depth, bool) or cdc_depth < MIN_DEPTH
                or cdc_depth & (cdc_depth - 1)):
            raise ValueError(f"NicCdc: StreamCdc: depth must be a power of two of at least "
                             f"{MIN_DEPTH}, not {cdc_depth!r}")
        self.engine = NicEngine(*args, **kwargs)
        self.link_clock, self.memory_clock = bool(link_clock), bool(memory_clock)
        self.cdc_depth = cdc_depth
        eng = self.engine
        self.parts = {}
        try:
            if self.link_clock:
                for p in range(eng.n_planes):
                    shape = getattr(eng, f"m_axis{p}").p.shape()
                    self.parts[f"tx{p}_cdc"] = StreamCdc(shape, cdc_depth, w_domain="sync",
                                                         r_domain="link")
                    shape = getattr(eng, f"s{p}_axis").p.shape()
                    self.parts[f"rx{p}_cdc"] = StreamCdc(shape, cdc_depth, w_domain="link",
                                                         r_domain="sync", always_ready=True)
            if self.memory_clock:
                self.parts["axi_cdc"] = AxiCdc(eng.core_width, 64, 1, cdc_depth,
                                               s_domain="sync", m_domain="mem")
        except (TypeError, ValueError) as exc:
            raise ValueError(f"NicCdc: {exc}") from None
        self.n_qps, self.n_planes, self.data_width = eng.n_qps, eng.n_planes, eng.data_width
        self.core_width, self.pmtu, self.clk_hz = eng.core_width, eng.pmtu, eng.clk_hz
        super().__init__(eng.signature)

    def elaborate(self, platform):
        m = Module()
        eng = self.engine
        m.submodules.engine = eng
        crossed = set()
        if self.link_clock:
            for p in range(self.n_planes):
                tx = m.submodules[f"tx{p}_cdc"] = self.parts[f"tx{p}_cdc"]
                rx = m.submodules[f"rx{p}_cdc"] = self.parts[f"rx{p}_cdc"]
                wiring.connect(m, getattr(eng, f"m_axis{p}"), tx.i)
                wiring.connect(m, tx.o, wiring.flipped(getattr(self, f"m_axis{p}")))
                wiring.connect(m, wiring.flipped(getattr(self, f"s{p}_axis")), rx.i)
                connect_beats(m, rx.o, getattr(eng, f"s{p}_axis"))
                crossed |= {f"m_axis{p}", f"s{p}_axis"}
        if self.memory_clock:
            axi = m.submodules.axi_cdc = self.parts["axi_cdc"]
            wiring.connect(m, eng.m_axi, axi.s_axi)
            wiring.connect(m, axi.m_axi, wiring.flipped(self.m_axi))
            crossed.add("m_axi")
        for name, member in self.signature.members.items():
            if name not in crossed:
                forward(m, getattr(self, name), getattr(eng, name), member)
        return m

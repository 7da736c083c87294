# SPDX-License-Identifier: BSD-2-Clause
"""Any block with a configuration port, with an AXI4-Lite slave at its Verilog boundary instead.

Golden model: ``models/axil_config.py``; bench: ``tb/test_axil_config.py``.
"""

from amaranth.hdl import Module, Shape
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .axil_config import AXIL_ADDR_WIDTH_DEFAULT, AxilConfig, axil_members, check_bridge_params
from .common.config import READ_LATENCY
from .common.flat_top import forward

__all__ = ["AxilTop", "CFG_MEMBERS", "AXIL_PREFIX"]

CFG_MEMBERS = ("cfg_addr", "cfg_wdata", "cfg_we", "cfg_rdata")
AXIL_PREFIX = "s_axil"


class AxilTop(wiring.Component):
    """``inner`` with its configuration port replaced by an AXI4-Lite slave
    (:class:`rtl.axil_config.AxilConfig`).

    Every member of ``inner``'s signature other than ``cfg_addr``, ``cfg_wdata``, ``cfg_we`` and
    ``cfg_rdata`` is exposed unchanged (same name, direction, shape; nested signatures too) and
    wired straight through, so a Verilog top keeps its stream and status ports and gains
    ``s_axil_*`` (:func:`rtl.axil_config.axil_members`). Word ``a`` of ``inner``'s map is at byte
    address ``4 a``; the bridge's rules, responses, latency and throughput are those of
    :class:`~rtl.axil_config.AxilConfig` with ``addr_width = len(inner.cfg_addr)``.

    Parameters
    ----------
    inner : wiring.Component
        The block. Its signature must hold ``cfg_addr`` In(1..30), ``cfg_wdata`` In(32),
        ``cfg_we`` In(1) and ``cfg_rdata`` Out(32), and no member named ``s_axil_*``.
    read_latency : 1..8
        Cycles from ``cfg_addr`` to ``cfg_rdata`` in ``inner`` (default 1, the ConfigMap
        convention; a top that muxes several blocks through register stages gives more).
    axil_addr_width : int
        Bits of the AXI4-Lite addresses (default 32), at least ``len(inner.cfg_addr) + 2``.

    Ports
    -----
    ``inner``'s ports without ``cfg_*``, ``s_axil_*``, and ``clk``, ``rst`` (the ``sync``
    domain, shared by the bridge and ``inner``).
    """

    def __init__(self, inner, read_latency=READ_LATENCY, axil_addr_width=AXIL_ADDR_WIDTH_DEFAULT):
        if not isinstance(inner, wiring.Component):
            raise ValueError(f"AxilTop: inner must be an amaranth wiring.Component, not "
                             f"{type(inner).__name__}")
        members = inner.signature.members
        expected = {"cfg_addr": In, "cfg_wdata": In, "cfg_we": In, "cfg_rdata": Out}
        for name, flow in expected.items():
            member = members[name] if name in members else None
            if member is None or not member.is_port or member.flow != flow:
                raise ValueError(f"AxilTop: {type(inner).__name__} has no configuration port "
                                 f"member {name} ({flow.name}); see rtl/common/config.py")
        widths = {name: Shape.cast(members[name].shape).width for name in CFG_MEMBERS}
        if widths["cfg_wdata"] != 32 or widths["cfg_rdata"] != 32 or widths["cfg_we"] != 1:
            raise ValueError(f"AxilTop: {type(inner).__name__}'s configuration port must have "
                             f"32-bit cfg_wdata and cfg_rdata and a 1-bit cfg_we, not {widths}")
        clash = sorted(name for name in members if name.startswith(AXIL_PREFIX + "_"))
        if clash:
            raise ValueError(f"AxilTop: {type(inner).__name__} already has members {clash}")
        addr_width = widths["cfg_addr"]
        check_bridge_params("AxilTop", addr_width, read_latency, axil_addr_width)
        self.inner = inner
        self.addr_width = addr_width
        self.read_latency = read_latency
        self.axil_addr_width = axil_addr_width
        kept = {name: member for name, member in members.items() if name not in CFG_MEMBERS}
        super().__init__({**kept, **axil_members(AXIL_PREFIX, axil_addr_width)})

    def elaborate(self, platform):
        m = Module()
        inner = self.inner
        m.submodules.inner = inner
        m.submodules.bridge = bridge = AxilConfig(addr_width=self.addr_width,
                                                  read_latency=self.read_latency,
                                                  axil_addr_width=self.axil_addr_width)
        # Every other member of inner, straight through.
        for name, member in inner.signature.members.items():
            if name not in CFG_MEMBERS:
                forward(m, getattr(self, name), getattr(inner, name), member)
        # The AXI4-Lite port to the bridge, the bridge to inner's configuration port.
        for name, member in axil_members(AXIL_PREFIX, self.axil_addr_width).items():
            ours, theirs = getattr(self, name), getattr(bridge, name)
            m.d.comb += theirs.eq(ours) if member.flow == In else ours.eq(theirs)
        m.d.comb += [
            inner.cfg_addr.eq(bridge.m_cfg_addr),
            inner.cfg_wdata.eq(bridge.m_cfg_wdata),
            inner.cfg_we.eq(bridge.m_cfg_we),
            bridge.m_cfg_rdata.eq(inner.cfg_rdata),
        ]
        return m

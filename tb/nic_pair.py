# SPDX-License-Identifier: BSD-2-Clause
"""Two NIC engine tops in one toplevel for the two-NIC bench (``tb/test_nic_engine.py``)."""

from amaranth.hdl import Module
from amaranth.lib import wiring

from rtl.common.flat_top import forward
from rtl.nic_cdc import NicCdc
from rtl.nic_engine import NicEngine

__all__ = ["NicPair", "PREFIXES"]

PREFIXES = ("a", "b")


class NicPair(wiring.Component):
    """NICs A and B (:class:`rtl.nic_engine.NicEngine`, the same parameters), every port of NIC
    X named ``<x>_<port>`` (``a_s_wr_tdata``, ``b_m_axis0_tvalid``, ...). Nothing joins them:
    the bench carries their frames through the fabric model. ``params`` go to both NICs.

    With ``link_period_ns`` and ``mem_period_ns`` (the bench's clock periods) each NIC is a
    :class:`rtl.nic_cdc.NicCdc` with both crossings: the plane ports of both NICs in the ``link``
    domain (``link_clk``, ``link_rst``), the AXI4 masters in ``mem`` (``mem_clk``, ``mem_rst``)."""

    def __init__(self, link_period_ns=None, mem_period_ns=None, **params):
        if link_period_ns is None and mem_period_ns is None:
            self.nics = [NicEngine(**params) for _ in PREFIXES]
        else:
            self.nics = [NicCdc(**params, link_clock=link_period_ns is not None,
                                memory_clock=mem_period_ns is not None) for _ in PREFIXES]
        members = {}
        for prefix, nic in zip(PREFIXES, self.nics):
            for name, member in nic.signature.members.items():
                members[f"{prefix}_{name}"] = member
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        for prefix, nic in zip(PREFIXES, self.nics):
            m.submodules[f"nic_{prefix}"] = nic
            for name, member in nic.signature.members.items():
                forward(m, getattr(self, f"{prefix}_{name}"), getattr(nic, name), member)
        return m

# SPDX-License-Identifier: BSD-2-Clause
"""Two NIC engine tops in one toplevel for the two-NIC bench (``tb/test_nic_engine.py``)."""

from amaranth.hdl import Module
from amaranth.lib import wiring

from rtl.common.flat_top import forward
from rtl.nic_engine import NicEngine

__all__ = ["NicPair", "PREFIXES"]

PREFIXES = ("a", "b")


class NicPair(wiring.Component):
    """NICs A and B (:class:`rtl.nic_engine.NicEngine`, the same parameters), every port of NIC
    X named ``<x>_<port>`` (``a_s_wr_tdata``, ``b_m_axis0_tvalid``, ...). Nothing joins them:
    the bench carries their frames through the fabric model. ``params`` go to both NICs."""

    def __init__(self, **params):
        self.nics = [NicEngine(**params) for _ in PREFIXES]
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

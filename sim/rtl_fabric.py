# SPDX-License-Identifier: BSD-2-Clause
"""The RTL fabric of issue 8: H NIC engine tops and P planes of RTL switches, cabled per
:class:`models.fabric_topology.Topology` with a fault-injectable :class:`rtl.link.Link` on every
wire direction, every configuration port behind one AXI4-Lite slave.

The controller (``sim/rtl_controller.py``) drives it under Verilator through cocotb;
``sim/tests/test_rtl_fabric.py`` is its test.
"""

import hashlib
import os
from pathlib import Path

from amaranth.back import verilog
from amaranth.hdl import (ClockSignal, Const, Instance, Module, ResetSignal, Shape, Signal,
                          Value)
from amaranth.lib import wiring
from amaranth.lib.wiring import In
from amaranth.utils import bits_for

from models.fabric_topology import HOST, T0, T1
from models.rx_front import engine_header_slots
from rtl.axil_config import AxilConfig, axil_members
from rtl.common.flat_top import forward
from rtl.common.stream import connect_beats
from rtl.link import Link
from rtl.nic_engine import ADDR_WIDTH as NIC_ADDR_WIDTH
from rtl.nic_engine import NicEngine
from rtl.switch import Switch

__all__ = ["RtlFabric", "AddressMap", "SharedPart", "NIC_DEFAULTS", "SWITCH_DEFAULTS", "LINK_DEFAULTS",
           "HOST_PORTS", "READ_LATENCY", "UP", "DOWN"]

# Small defaults: a fast Verilator build (two NICs of 64 bits, short queues). header_slots None:
# the receive engine's bound for the topology's planes (models.rx_front.engine_header_slots; 16
# at 2 planes; with 8 a NIC dropped small frames, counted but not NACKed).
NIC_DEFAULTS = dict(n_qps=2, data_width=64, pmtu=1024, clk_hz=16_000_000, wrs_per_qp=4, slots=4,
                    backups=2, ev_min_active=2, max_outstanding=8, n_regions=2,
                    buffer_bytes=8192, header_slots=None, mpr=128, wimm_max=16, ring=32,
                    probe_entries=4, wr_depth=4, timer_bits=10)
SWITCH_DEFAULTS = dict(data_limit=8192, kmin=2048, kmax=6144, max_frame=2048,
                       ingress_bytes=4096, table_depth=8)
LINK_DEFAULTS = dict(delay_max=16, rate_max=15)
HOST_PORTS = ("s_wr", "m_cpl", "m_axi", "plane_down")   # NIC ports out as h<h>_<port>
NODE_WINDOW_BITS = 16        # word-address window of a switch or a link
MAX_ADDR_WIDTH = 30          # word-address bits of the AXI4-Lite bridge, at most
READ_LATENCY = 3             # decoder input register, the node's ConfigMap, output register
UP, DOWN = "up", "down"      # a link's directions: from its lower-tier end, towards it


class AddressMap:
    """The fabric's configuration word addresses (AXI4-Lite byte address = 4 x word).

    Word-address bit ``A - 1`` (``A`` = :attr:`addr_width`) picks a region:

    - 0, the NICs: NIC ``h`` at ``h << 25``, its own 25-bit map (``rtl/nic_engine.py``) below;
    - 1, switches and links: node ``i`` at ``1 << (A - 1) | i << 16``, its own map below (a
      switch's 16-bit map, ``rtl/switch.py``; a link's, ``rtl/link.py``). Node order: per plane,
      the T0s, then the T1s; then the links of :meth:`Topology.links` in order, each as its
      ``up`` direction (lower tier to upper: host to T0, T0 to T1) and then ``down``.

    Words beyond a node's own map, and nodes that do not exist, read 0 and ignore writes.
    """

    def __init__(self, topology):
        self.topology = topology
        self.nic_bits = bits_for(topology.hosts - 1)
        self.switches = [(T0, p, s) for p in range(topology.planes) for s in range(topology.t0s)]
        self.switches += [(T1, p, j) for p in range(topology.planes) for j in range(topology.t1s)]
        self.switches.sort(key=lambda node: (node[1], node[0] != T0, node[2]))
        self.links = [(link, direction) for link in topology.links() for direction in (UP, DOWN)]
        self.node_bits = bits_for(len(self.switches) + len(self.links) - 1)
        self.addr_width = 1 + max(self.nic_bits + NIC_ADDR_WIDTH,
                                  self.node_bits + NODE_WINDOW_BITS)
        if self.addr_width > MAX_ADDR_WIDTH:
            raise ValueError(f"RtlFabric: {topology.hosts} hosts and "
                             f"{len(self.switches) + len(self.links)} switches and links need "
                             f"{self.addr_width} word-address bits; the AXI4-Lite bridge has "
                             f"{MAX_ADDR_WIDTH}")
        self._node = {node: i for i, node in enumerate(self.switches + self.links)}

    def nic(self, host, addr=0):
        """Word address of word ``addr`` of NIC ``host``."""
        return host << NIC_ADDR_WIDTH | addr

    def _other(self, node, addr):
        return 1 << (self.addr_width - 1) | self._node[node] << NODE_WINDOW_BITS | addr

    def switch(self, role, plane, index, addr=0):
        """Word address of word ``addr`` of switch ``(role, plane, index)`` (role T0 or T1)."""
        return self._other((role, plane, index), addr)

    def link(self, link, direction, addr=0):
        """Word address of word ``addr`` of ``direction`` (UP or DOWN) of ``link``
        (a :class:`models.fabric_topology.LinkId`)."""
        return self._other((link, direction), addr)

    def windows(self):
        """Every node as ``(node, base word address, window bits)``, NICs first."""
        out = [((HOST, h), self.nic(h), NIC_ADDR_WIDTH) for h in range(self.topology.hosts)]
        out += [(node, self._other(node, 0), NODE_WINDOW_BITS) for node in self._node]
        return out


class SharedPart(wiring.Component):
    """Stands in the fabric for ``part`` (the same signature) by an instance of the Verilog
    module ``module``, which :meth:`RtlFabric.part_sources` converts once for every part of the
    same kind and parameters. So a fabric of H NICs and S switches of two kinds elaborates,
    converts and compiles one NIC and two switches, not H + S (the NICs and switches are most of
    the fabric's Verilog; the links stay inline, as ``sim/rtl_scenario.py`` taps them).

    The instance's ports are the part's own Verilog port names (the signature's member paths
    joined by ``__``; constant members, such as an always-ready stream's ``ready``, are no
    ports), plus ``clk`` and ``rst``.
    """

    def __init__(self, part, module):
        self.part, self.module = part, module
        super().__init__(part.signature)

    def elaborate(self, platform):
        m = Module()
        ports = {"i_clk": ClockSignal(), "i_rst": ResetSignal()}
        for path, member, value in self.signature.flatten(self):
            if isinstance(value, Const):        # an always-ready stream's ready: no port
                continue
            name = "__".join(str(step) for step in path)
            ports[("i_" if member.flow == In else "o_") + name] = value
        m.submodules.part = Instance(self.module, **ports)
        return m


def _module_name(kind, params):
    """A Verilog module name for a part of ``kind`` with ``params``: the kind and a short hash
    of the parameters, so the parts of one fabric never share a name."""
    digest = hashlib.sha1(repr(sorted(params.items())).encode()).hexdigest()[:8]
    return f"{kind}_{digest}"


class RtlFabric(wiring.Component):
    """H RTL NICs (:class:`rtl.nic_engine.NicEngine`, one port per plane) and, per plane, S T0
    and T T1 RTL switches (:class:`rtl.switch.Switch`) cabled as ``topology`` says, a
    :class:`rtl.link.Link` on every direction of every cable, one AXI4-Lite slave for every
    configuration port.

    Parameters
    ----------
    topology : :class:`models.fabric_topology.Topology`
        Hosts, planes, T0s and T1s (a switch has 2..8 ports: a T0 ``H / S + T``, a T1 ``S``).
    nic, switch, link : dict
        Parameters of every NIC (``n_planes`` is the topology's), every switch (``ports`` and
        ``fabric_facing`` come from the topology) and every link (``data_width`` is the NICs'),
        over :data:`NIC_DEFAULTS`, :data:`SWITCH_DEFAULTS` and :data:`LINK_DEFAULTS`.
    shared : bool
        True (the default): the NICs and switches are :class:`SharedPart` instances of one
        Verilog module per kind, which :meth:`part_sources` writes (pass it as ``run_bench``'s
        ``extra_sources``); False: every part is elaborated inline.

    Ports
    -----
    ``clk``, ``rst``: the one ``sync`` domain.
    ``s_axil_*``: the AXI4-Lite slave (32-bit data, 32-bit addresses) to every configuration
    port, by :class:`AddressMap` (word ``a`` at byte ``4 a``); :class:`rtl.axil_config.AxilConfig`
    with read latency :data:`READ_LATENCY` behind it.
    ``h<h>_s_wr_*``: NIC h's work requests; ``h<h>_m_cpl_*``: its completions; ``h<h>_m_axi_*``:
    its AXI4 master to host memory; ``h<h>_plane_down``: its plane-down inputs, one bit per
    plane, docs/protocol.md 4.6 (see :class:`rtl.nic_engine.NicEngine`).

    Wiring
    ------
    A frame leaves a NIC or switch port into its link's ``s_axis`` (the port's ``tready`` is the
    link's, low only when the link's FIFO is full) and the link's ``m_axis`` drives the other
    end's ingress, which never backpressures (the link's ``m_axis_tready`` is 1). NIC plane port
    p goes to its T0 of plane p; T0 uplink ``H / S + j`` to T1 j's port s. A switch egress has no
    ``tuser``: its links carry 0. The NICs' host EV input is idle. A cut link is found by the
    transport, as in a real fabric; ``h<h>_plane_down`` tells a NIC its port is down.

    Latency
    -------
    A link adds ``max(delay, 2)`` cycles (its ``delay`` register, reset 0); a switch its own
    store-and-forward latency (``rtl/switch.py``). Configuration reads take
    :data:`READ_LATENCY` cycles behind the bridge.
    """

    def __init__(self, topology, nic=None, switch=None, link=None, shared=True):
        self.topology = topology
        self.shared = shared
        self.map = AddressMap(topology)
        self.nic_params = {**NIC_DEFAULTS, **(nic or {}), "n_planes": topology.planes}
        if self.nic_params["header_slots"] is None:
            self.nic_params["header_slots"] = engine_header_slots(
                topology.planes, self.nic_params["data_width"], self.nic_params["pmtu"])
        self.switch_params = {**SWITCH_DEFAULTS, **(switch or {})}
        width = self.nic_params["data_width"]
        self.link_params = {**LINK_DEFAULTS, **(link or {}), "data_width": width}
        for role in (T0, T1):
            ports = topology.switch_ports(role)
            if not 2 <= ports <= 8:
                raise ValueError(f"RtlFabric: a {role.upper()} of this topology has {ports} "
                                 f"ports; a switch has 2..8")
        try:
            self.nics = [NicEngine(**self.nic_params) for _ in range(topology.hosts)]
            self.switches = {
                node: Switch(ports=topology.switch_ports(node[0]), data_width=width,
                             fabric_facing=tuple(topology.fabric_facing(node[0], k) for k in
                                                 range(topology.switch_ports(node[0]))),
                             **self.switch_params)
                for node in self.map.switches}
            self.links = {node: Link(**self.link_params) for node in self.map.links}
        except (TypeError, ValueError) as exc:
            raise ValueError(f"RtlFabric: {exc}") from None
        for node in self.switches:
            width = Shape.cast(self.switches[node].signature.members["cfg_addr"].shape).width
            if width > NODE_WINDOW_BITS:
                raise ValueError(f"RtlFabric: a switch map of {width} address bits does not fit "
                                 f"its {NODE_WINDOW_BITS}-bit window")
        # The stand-ins of the NICs and switches (shared=True), by part.
        self._standins = {}
        if shared:
            nic_module = _module_name("nic_engine", self.nic_params)
            for engine in self.nics:
                self._standins[id(engine)] = SharedPart(engine, nic_module)
            for node, sw in self.switches.items():
                ports = self.topology.switch_ports(node[0])
                params = dict(self.switch_params, ports=ports,
                              data_width=self.nic_params["data_width"],
                              fabric_facing=tuple(self.topology.fabric_facing(node[0], k)
                                                  for k in range(ports)))
                self._standins[id(sw)] = SharedPart(sw, _module_name("switch", params))
        members = dict(axil_members("s_axil", 32))
        for h, engine in enumerate(self.nics):
            for name in HOST_PORTS:
                members[f"h{h}_{name}"] = engine.signature.members[name]
        super().__init__(members)

    def _unit(self, part):
        """What the fabric instantiates for ``part``: its stand-in (shared) or the part."""
        return self._standins.get(id(part), part)

    def part_sources(self, folder):
        """Convert each distinct shared part to Verilog once, as ``<folder>/<module>.v``, and
        return the files (the fabric's own Verilog instantiates them). Empty when the fabric is
        not ``shared``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        parts = {}
        for standin in self._standins.values():
            parts.setdefault(standin.module, standin.part)
        files = []
        for module, part in sorted(parts.items()):
            path = folder / f"{module}.v"
            ports = [Value.cast(value) for _, _, value in part.signature.flatten(part)
                     if not isinstance(value, Const)]
            text = verilog.convert(part, name=module, ports=ports, emit_src=False)
            scratch = path.with_suffix(f".v.{os.getpid()}")
            scratch.write_text(text)
            os.replace(scratch, path)
            files.append(path)
        return files

    def _endpoint(self, node, port):
        """``(component, egress prefix, ingress prefix)`` of port ``port`` of ``node``."""
        role, plane, index = node
        if role == HOST:
            return self._unit(self.nics[index]), f"m_axis{plane}", f"s{plane}_axis"
        return self._unit(self.switches[node]), f"m{port}_axis", f"s{port}_axis"

    def elaborate(self, platform):
        m = Module()
        for h, part in enumerate(self.nics):
            engine = self._unit(part)
            m.submodules[f"nic{h}"] = engine
            for name in HOST_PORTS:
                forward(m, getattr(self, f"h{h}_{name}"), getattr(engine, name),
                        engine.signature.members[name])
            m.d.comb += engine.s_ev.valid.eq(0)
        for (role, plane, index), sw in self.switches.items():
            m.submodules[f"{role}_p{plane}_{index}"] = self._unit(sw)

        # --- cables: a link on each direction ---------------------------------------------------
        for (cable, direction), link in self.links.items():
            a_node, a_port, b_node, b_port = cable.a, cable.a_port, cable.b, cable.b_port
            if direction == DOWN:
                a_node, a_port, b_node, b_port = b_node, b_port, a_node, a_port
            m.submodules[f"link_{a_node[0]}{a_node[2]}_{b_node[0]}{b_node[2]}_p{a_node[1]}"] = link
            src, out, _ = self._endpoint(a_node, a_port)
            dst, _, into = self._endpoint(b_node, b_port)
            # The far end's ingress never backpressures, so the link's output is always taken.
            connect_beats(m, getattr(src, out), link.s_axis)
            connect_beats(m, link.m_axis, getattr(dst, into))

        # --- configuration: AXI4-Lite bridge, then an address decoder --------------------------
        aw = self.map.addr_width
        bridge = m.submodules.axil = AxilConfig(addr_width=aw, read_latency=READ_LATENCY,
                                                axil_addr_width=32)
        for name, member in axil_members("s_axil", 32).items():
            ours, theirs = getattr(self, name), getattr(bridge, name)
            m.d.comb += theirs.eq(ours) if member.flow == In else ours.eq(theirs)
        addr, wdata, we = Signal(aw), Signal(32), Signal()
        m.d.sync += [addr.eq(bridge.m_cfg_addr), wdata.eq(bridge.m_cfg_wdata),
                     we.eq(bridge.m_cfg_we)]
        nodes = {(HOST, h): self._unit(engine) for h, engine in enumerate(self.nics)}
        nodes.update({node: self._unit(sw) for node, sw in self.switches.items()})
        nodes.update(self.links)
        rdata = Const(0, 32)
        for node, base, window in self.map.windows():
            unit = nodes[node]
            width = len(unit.cfg_addr)
            selected = Signal(name="cfg_sel")
            chosen = Signal(name="cfg_chosen")
            m.d.comb += selected.eq((addr[window:] == base >> window) &
                                    (addr[width:window] == 0 if width < window else 1))
            m.d.sync += chosen.eq(selected)
            m.d.comb += [unit.cfg_addr.eq(addr[:width]), unit.cfg_wdata.eq(wdata),
                         unit.cfg_we.eq(we & selected)]
            rdata = rdata | (unit.cfg_rdata & chosen.replicate(32))
        out = Signal(32)
        m.d.sync += out.eq(rdata)
        m.d.comb += bridge.m_cfg_rdata.eq(out)
        return m

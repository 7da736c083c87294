# SPDX-License-Identifier: BSD-2-Clause
"""The cocotb-side controller of the RTL fabric (``sim/rtl_fabric.py``): configures every switch,
link and NIC through the one AXI4-Lite slave (cocotbext-axi ``AxiLiteMaster``) from the
:class:`models.fabric_topology.Topology`, runs each host (memory, work requests, completions),
checks the receivers' memory and applies link faults (cut, heal, loss, slow) by writing the
links' registers.

Every node is reached through the driver API over its window of the slave
(:class:`verif.driver.AxiLiteAccess`): switches as :class:`verif.driver.Switch` (own uSID, route
table, counters by name), links as :class:`verif.driver.Link`, NICs as :class:`verif.driver.Nic`,
whose :meth:`~verif.driver.Nic.configure` is the two-NIC bench's set-up (``tb/test_nic_engine.py``):
EV sets by :func:`models.fabric_nic.draw_ev_sets`, one memory region per QP at
:func:`models.fabric_nic.region_base`. QP q of host h talks to QP q of host
``(2 q + 1 - h) mod H`` (H even: a pairing, never the host itself).
"""

import logging
import time

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge

from models.fabric_nic import draw_ev_sets
from models.fabric_topology import HOST, T0, T1
from models.link import COUNTERS as LINK_COUNTERS
from models.records import CompletionStatus
from models.reliability import QpConfig
from models.switch import INGRESS_COUNTERS
from sim.rtl_fabric import DOWN, UP, AddressMap
from verif.driver import AxiLiteAccess, Link, Nic, Switch
from verif.host_traffic import HostTraffic

__all__ = ["Controller", "Host", "QP_CONFIG", "CYCLE_PS", "NIC_COUNTERS", "peer_of"]

# The two-NIC bench's QP parameters, but a timeout of 2^8 ticks (4196 cycles at the NICs' 16 MHz
# tick clock) instead of 2^7: through RTL switches with one plane, eight outstanding messages of up
# to 2 PMTU per NIC port once took longer than 2^7 ticks (2098 cycles) to be acknowledged on a
# lossless fabric, and the timer retransmitted for nothing.
QP_CONFIG = dict(w_max=32, mpr=128, timeout_exp=8, retry_limit=3, probe_period=16)
CYCLE_PS = 4000                   # 250 MHz
# The reliability counters the controller sums (models/reliability.py COUNTERS): packets sent and
# retransmitted, SACKs and NACKs taken, timeouts, retransmissions asked, EVs marked ASSUMED_BAD,
# probes sent, EVs recovered, QPs in error.
NIC_COUNTERS = ("send", "send_retx", "sack", "nack", "timeout", "retx", "marked", "probe",
                "recovered", "qp_error")
# The receive front's per-plane drop counters (models/rx_front.py PLANE_COUNTERS), summed as
# rx_<name>: frames dropped bad, frames dropped for want of a header slot (v1 sends no NACK for
# them: the sender's timer recovers them), frames kept as a header only.
RX_DROP_COUNTERS = ("dropped_bad", "dropped_no_room", "no_buffer")
LOSS_SCALE = 1 << 16              # a link's ``loss`` register: frames with LFSR value below it


def peer_of(host, qpn, hosts):
    """The host QP ``qpn`` of ``host`` talks to (its QP ``qpn``)."""
    return (2 * qpn + 1 - host) % hosts


class Host(HostTraffic):
    """One host: its memory (``AxiRam`` on ``h<h>_m_axi``), work requests, completions; QP q
    talks to host ``peers[q]``."""

    def __init__(self, dut, rng, host, p, peers):
        super().__init__(dut, rng, p, f"h{host}", sorted(peers), f"host {host}")
        self.host, self.peers = host, peers


class Controller:
    """The fabric's controller: configuration, hosts, faults, checks and counters."""

    def __init__(self, dut, rng, topology, nic_params, peers=None, qp_config=None):
        """``peers``: ``{host: {qpn: peer host}}`` (QP q of a host talks to QP q of its peer;
        symmetric), by default every QP of every host paired by :func:`peer_of`;
        ``qp_config``: :class:`models.reliability.QpConfig` of every QP (default
        :data:`QP_CONFIG`)."""
        from cocotbext.axi import AxiLiteBus, AxiLiteMaster

        hosts = topology.hosts
        if peers is None:
            if hosts % 2:
                raise ValueError(f"Controller: QPs pair hosts; {hosts} hosts is odd")
            peers = {h: {q: peer_of(h, q, hosts) for q in range(nic_params["n_qps"])}
                     for h in range(hosts)}
        for h, table in peers.items():
            for q, peer in table.items():
                if not 0 <= q < nic_params["n_qps"] or peers.get(peer, {}).get(q) != h:
                    raise ValueError(f"Controller: QP {q} of host {h} -> host {peer} is not "
                                     f"one of {nic_params['n_qps']} QPs paired both ways")
        self.dut, self.rng, self.topo, self.p = dut, rng, topology, nic_params
        self.map = AddressMap(topology)
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
        for channel in ("write_if", "read_if"):
            getattr(self.axil, channel).log.setLevel(logging.WARNING)
        self.access = AxiLiteAccess(self.axil)
        self._drivers = {}
        self.hosts = [Host(dut, rng, h, nic_params, peers.get(h, {})) for h in range(hosts)]
        self.qp_config = qp_config or QpConfig(**QP_CONFIG)
        self.cycle = 0
        self.faults = []            # (cycle, what)
        self.planes_down = [0] * hosts

    # --- configuration ---------------------------------------------------------------------------

    def _driver(self, key, make):
        if key not in self._drivers:
            self._drivers[key] = make()
        return self._drivers[key]

    def nic(self, host):
        """The :class:`verif.driver.Nic` of host ``host``'s NIC (its window of the slave)."""
        return self._driver(("nic", host), lambda: Nic(
            self.access.window(self.map.nic(host)), self.p, name=f"NIC {host}"))

    def switch(self, role, plane, index):
        """The :class:`verif.driver.Switch` of switch ``(role, plane, index)``."""
        return self._driver((role, plane, index), lambda: Switch(
            self.access.window(self.map.switch(role, plane, index)),
            ports=self.topo.switch_ports(role), name=f"{role.upper()} {index} of plane {plane}"))

    def link(self, cable, direction):
        """The :class:`verif.driver.Link` of ``direction`` (UP or DOWN) of ``cable``."""
        return self._driver((cable, direction), lambda: Link(
            self.access.window(self.map.link(cable, direction)),
            name=f"link {cable.a}-{cable.b} {direction}"))

    async def start(self):
        """Clock and reset, the per-cycle task, then every table of the fabric."""
        from verif.bench import start

        await start(self.dut)
        cocotb.start_soon(self._run())
        began = time.monotonic()
        await self.configure()
        self.dut._log.info("configured the fabric in %d cycles (%.1f s)", self.cycle,
                           time.monotonic() - began)

    async def configure(self):
        topo = self.topo
        for role, plane, index in self.map.switches:
            sw = self.switch(role, plane, index)
            await sw.set_own_usid(topo.own_usid(role, plane, index))
            await sw.write_routes(topo.routes(role, plane, index))     # in key order
        delay = round(topo.link_delay_ns * 1000 / CYCLE_PS)
        for cable, direction in self.map.links:
            await self.link(cable, direction).set("delay", delay)
        ev_sets = {}
        for host in self.hosts:
            ev_sets[host.host] = {
                q: draw_ev_sets(self.rng, topo.planes, topo.t1s, self.p["slots"],
                                self.p["backups"], topo.same_t0(host.host, peer))
                for q, peer in host.peers.items()}
        for host in self.hosts:
            if not host.peers:
                continue
            peer_starts = {q: self.hosts[peer].start_psns[q] for q, peer in host.peers.items()}
            await self.nic(host.host).configure(topo, host.host, host.peers, host.start_psns,
                                                peer_starts, ev_sets[host.host], self.qp_config)

    # --- running ---------------------------------------------------------------------------------

    async def _run(self):
        clk = self.dut.clk
        while True:
            await RisingEdge(clk)
            self.cycle += 1
            for host in self.hosts:
                host.completions(self.cycle)

    async def run_until_idle(self, limit_cycles, progress_every=20000, label=str):
        """Post work until every message completed; raise after ``limit_cycles``. Every
        ``progress_every`` cycles the progress is logged, the time as ``label(cycle)``."""
        end = self.cycle + limit_cycles
        next_report = self.cycle + progress_every
        while not all(host.idle() for host in self.hosts):
            if self.cycle >= end:
                raise AssertionError(f"messages still pending after {limit_cycles} cycles: "
                                     f"{self.progress()}")
            for host in self.hosts:
                host.post()
            await ClockCycles(self.dut.clk, 16)
            if self.cycle >= next_report:
                self.dut._log.info("%s: %s", label(self.cycle), self.progress())
                next_report += progress_every
        await ClockCycles(self.dut.clk, 200)

    async def keep_posting(self, cycles):
        end = self.cycle + cycles
        while self.cycle < end:
            for host in self.hosts:
                host.post()
            await ClockCycles(self.dut.clk, 16)

    def progress(self):
        return "; ".join(f"host {h.host}: {len(h.done)} done, "
                         f"{sum(map(len, h.pending.values()))} pending, "
                         f"{sum(map(len, h.backlog.values()))} backlog" for h in self.hosts)

    # --- checks ----------------------------------------------------------------------------------

    def check_memory(self):
        """Every completed message OK and its bytes in its peer's memory; the immediates of the
        Writes with Immediate completed at the receiver in order. Returns (messages, bytes)."""
        messages = size = 0
        imms = {}
        for host in self.hosts:
            for msg, status in host.done:
                q = msg["qpn"]
                assert status == CompletionStatus.OK, f"host {host.host} QP {q}: status {status}"
                peer = self.hosts[host.peers[q]]
                got = peer.ram.read(msg["remote_va"], msg["length"])
                assert got == msg["data"], f"host {host.host} QP {q}: memory of host " \
                    f"{peer.host} differs at {msg['remote_va']:#x} ({msg['length']} bytes)"
                if msg["has_imm"]:
                    imms.setdefault((peer.host, q), []).append(msg["imm"])
                messages += 1
                size += msg["length"]
        got = {}
        for host in self.hosts:
            for rec in host.recv_cpls:
                got.setdefault((host.host, rec["qpn"]), []).append(rec["imm"])
        assert got == imms, "receive completions differ from the Writes with Immediate sent"
        return messages, size

    # --- faults ----------------------------------------------------------------------------------

    def uplink(self, plane, t0, t1):
        """The cable between T0 ``t0`` and T1 ``t1`` of ``plane``."""
        return self._cable((T0, plane, t0), (T1, plane, t1))

    def host_cable(self, host, plane):
        """The cable between host ``host``'s NIC port ``plane`` and its T0."""
        return self._cable((HOST, plane, host), (T0, plane, self.topo.t0_of(host)))

    def _cable(self, a, b):
        for cable in self.topo.links():
            if cable.a == a and cable.b == b:
                return cable
        raise ValueError(f"no cable {a} - {b}")

    def set_plane_down(self, host, plane, down):
        """Tell NIC ``host`` its port ``plane`` is down (or up again), docs/protocol.md 4.6: the
        NIC's ``plane_down`` input, a wire (the link's loss of signal), not a register."""
        mask = 1 << plane
        self.planes_down[host] = self.planes_down[host] | mask if down else \
            self.planes_down[host] & ~mask
        getattr(self.dut, f"h{host}_plane_down").value = self.planes_down[host]
        self.faults.append((self.cycle, f"host {host} plane {plane} "
                                        f"{'down' if down else 'up'}"))

    async def _set(self, cable, name, value, directions):
        self.faults.append((self.cycle, f"{cable.a}-{cable.b} {name}={value}"))
        for direction in directions:
            await self.link(cable, direction).set(name, value)

    async def cut(self, cable, directions=(UP, DOWN)):
        await self._set(cable, "up", 0, directions)

    async def heal(self, cable, directions=(UP, DOWN)):
        await self._set(cable, "up", 1, directions)

    async def lossy(self, cable, fraction, directions=(UP, DOWN)):
        """Drop about ``fraction`` of the frames (the link's LFSR draws per frame)."""
        await self._set(cable, "loss", min(LOSS_SCALE - 1, round(fraction * LOSS_SCALE)),
                        directions)

    async def slow(self, cable, rate, directions=(UP, DOWN)):
        """At most one beat per ``rate + 1`` cycles (0: full rate)."""
        await self._set(cable, "rate", rate, directions)

    # --- counters --------------------------------------------------------------------------------

    async def counters(self):
        """The NICs' reliability counters and receive drops, the switches' egress and ingress
        counters and the links' counters, each summed over the fabric."""
        out = {}
        for host in self.hosts:
            nic = self.nic(host.host)
            for name in NIC_COUNTERS:
                out[f"nic_{name}"] = out.get(f"nic_{name}", 0) + await nic.counter(
                    f"reliability.{name}")
            for name in RX_DROP_COUNTERS:
                for plane in range(self.topo.planes):
                    out[f"rx_{name}"] = out.get(f"rx_{name}", 0) + await nic.counter(
                        f"rx_front.{name}", plane)
        for role, plane, index in self.map.switches:
            sw = self.switch(role, plane, index)
            for port in range(self.topo.switch_ports(role)):
                for name in ("forwarded", "trimmed", "ecn_marked", "dropped_full"):
                    out[f"switch_{name}"] = out.get(f"switch_{name}", 0) + await sw.counter(
                        f"egress.{name}", port)
                for name in INGRESS_COUNTERS:
                    out[f"switch_{name}"] = out.get(f"switch_{name}", 0) + await sw.counter(
                        f"ingress.{name}", port)
        for cable, direction in self.map.links:
            link = self.link(cable, direction)
            for name in LINK_COUNTERS[:3]:
                out[f"link_{name}"] = out.get(f"link_{name}", 0) + await link.counter(name)
        return out

# SPDX-License-Identifier: BSD-2-Clause
"""Play a scenario file (``sim/scenarios/*.yaml``, its ``rtl`` form) on the RTL fabric
(``sim/rtl_fabric.py``) under cocotb, and write what people look at.

``sim/rtl_run.py`` builds the fabric and runs the cocotb test :func:`scenario` of this module;
the pure-Python parts (the QP plan, the NIC parameters, the fault timeline) are here too, so that
a test can check them without a simulator.

How a scenario maps onto the RTL fabric:

- **time**: one cycle is 4 ns (250 MHz, :data:`sim.rtl_controller.CYCLE_PS`); time zero is the
  end of configuration (every table written through AXI4-Lite), when the first work requests
  are posted. A link of the RTL fabric carries one 64-bit beat per cycle: 16 Gb/s, so the
  scenario's ``topology.link_gbps`` must be 16 for the fabric model to run the same fabric.
- **NICs** (:func:`nic_params`): the scenario's ``nic`` settings become the NIC engine's
  parameters (PMTU, EV slots and backups, the floor of active EVs, MPR, probe list, work-request
  FIFO) and every QP's registers. The NICs count time in ticks of 1.024 us of a 15.625 MHz clock
  (``clk_hz``): 16 cycles, 16 times faster than at 250 MHz, so every tick count is multiplied by
  16 (``timeout_exp = timeout_k + 4``, ``probe_period x 16``) and a timeout lasts as long in
  simulated time as in the model.
- **traffic** (:func:`qp_plan`): each unordered pair of hosts that exchanges a flow gets one QP
  number at both ends, the smallest free at both (QP q of a host talks to QP q of its peer);
  every flow ``src -> dst`` posts ``messages`` Writes of ``message_bytes`` (about 30% with
  immediate) on its QP, at most ``wrs_per_qp`` outstanding per QP.
- **faults** (:func:`fault_timeline`): ``link`` and ``flap`` cut and heal both directions of the
  T0-T1 cable; ``port`` tells the NIC its plane is down (``h<h>_plane_down``) and cuts its cable;
  ``path`` makes every T1 -> T0 direction of that T1 drop ``loss`` of its frames (a frame through
  the T1 crosses exactly one of them); ``link_impair`` makes both directions of the cable drop
  ``loss``. The RTL links have no trim, CE, delay or jitter impairment: a scenario asking for one
  is refused with a clear error.
- **switches**: the scenario's ``switch`` settings (data limit, trim size, Kmin, Kmax) become
  every switch's parameters.

What is recorded (``$MRC_SCENARIO``'s ``out`` folder):

- ``plane<p>.pcapng``: every frame that arrives at either end of every host cable of plane p
  (interfaces ``host<h>-tx``, the NIC's frames arriving at its T0, and ``host<h>-rx``, frames
  arriving at the NIC), timestamped at its last beat, as ``sim/model_run.py`` writes them;
- ``goodput.png``: the bytes each host's NIC writes into its memory (AXI4 W beats, by ``wstrb``)
  per ``bin_us``, in Gb/s, the faults marked;
- ``summary.txt`` and ``summary.json``: messages, bytes, counters of the NICs, switches and links,
  the route-around time of every hard fault (from the start of each outage to the last data
  frame that entered the broken cable), the goodput table, speed of the simulation.

Checks (the run fails otherwise): every message completes with status OK and its bytes are in
the receiver's memory byte for byte, every immediate completes at its receiver; the scenario's
``route_around_us``, ``min_trims``, ``min_ecn_marks``, ``min_retransmitted``,
``min_ev_recovered`` and ``min_goodput_raw`` (a receiving host's goodput: the bytes written into
its memory x 8 / the time from zero to its last byte written, against P x 16 Gb/s).
"""

import json
import os
import random
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import cocotb

from models.fabric import load_scenario
from models.reliability import QpConfig
from sim.rtl_fabric import DOWN, NIC_DEFAULTS, UP

__all__ = ["qp_plan", "nic_params", "qp_config", "switch_params", "fault_timeline", "Action",
           "CLK_HZ", "TICK_SCALE", "LINK_GBPS", "scenario"]

CLK_HZ = 15_625_000          # the NICs' tick: 1.024 us of this clock = 16 cycles
TICK_SCALE = 16              # ticks of the RTL NIC per model tick (1.024 us at 250 MHz)
TICK_SHIFT = 4
LINK_GBPS = 16               # 64 bits per cycle at 250 MHz
CYCLES_PER_US = 250
MAX_HOST_RUN_US = 20_000     # a scenario that has not finished by then fails
PROGRESS_US = 10             # a progress line per 10 us of simulated time (about 10 s of wall)


def qp_plan(flows, hosts):
    """``{host: {qpn: peer}}`` for the flows ``[(src, dst), ...]``: one QP per unordered pair,
    numbered greedily (the smallest number free at both hosts), and ``{(src, dst): qpn}``."""
    peers = {h: {} for h in range(hosts)}
    of_flow = {}
    for src, dst in flows:
        pair = (min(src, dst), max(src, dst))
        if pair not in of_flow:
            q = 0
            while q in peers[src] or q in peers[dst]:
                q += 1
            peers[src][q], peers[dst][q] = dst, src
            of_flow[pair] = q
        of_flow[(src, dst)] = of_flow[pair]
    return peers, {flow: of_flow[flow] for flow in flows}


def nic_params(scenario, n_qps):
    """The NIC engine parameters of the RTL fabric for ``scenario`` and ``n_qps`` QPs."""
    nic = scenario.nic
    if nic.transport != "mrc":
        raise ValueError(f"rtl scenario: the RTL NIC sprays (mrc); transport {nic.transport!r} "
                         f"runs only on the model")
    return {**NIC_DEFAULTS, "n_qps": n_qps, "n_regions": n_qps, "pmtu": nic.pmtu,
            "slots": nic.slots, "backups": nic.backup, "ev_min_active": nic.ev_min_active,
            "mpr": nic.mpr, "probe_entries": nic.probe_entries, "wr_depth": nic.wr_depth,
            "clk_hz": CLK_HZ}


def qp_config(scenario):
    """Every QP's reliability registers: the scenario's, tick counts x :data:`TICK_SCALE`."""
    nic = scenario.nic
    return QpConfig(w_max=nic.w_max, mpr=nic.mpr, timeout_exp=nic.timeout_k + TICK_SHIFT,
                    retry_limit=nic.retry_limit, probe_period=nic.probe_period * TICK_SCALE)


def switch_params(scenario):
    """Every switch's queue parameters from the scenario's ``switch`` settings."""
    sw = scenario.switch
    return dict(data_limit=sw.data_limit, control_limit=sw.control_limit,
                trim_size=sw.trim_size, kmin=sw.kmin, kmax=sw.kmax)


def check_fabric(scenario):
    """Refuse what the RTL fabric cannot play, with the reason."""
    topo = scenario.topology
    if topo.link_gbps != LINK_GBPS:
        raise ValueError(f"rtl scenario {scenario.name}: topology.link_gbps must be {LINK_GBPS} "
                         f"(a 64-bit link at 250 MHz), not {topo.link_gbps}")
    for fault in scenario.faults:
        if fault.kind in ("path", "link_impair"):
            extra = [name for name in ("trim", "ce", "delay_ns", "jitter_ns")
                     if getattr(fault, name)]
            if extra:
                raise ValueError(f"rtl scenario {scenario.name}: the RTL link drops frames but "
                                 f"has no {', '.join(extra)} impairment")


@dataclass(frozen=True)
class Action:
    """One step of the fault timeline at ``cycle`` (from time zero): ``op`` is ``cut``,
    ``heal``, ``loss`` (``value`` the fraction), ``plane_down`` or ``plane_up``; ``cable`` a
    ``("uplink", plane, t0, t1)`` or ``("host", host, plane)`` tuple, ``directions`` the link
    directions it touches; ``fault`` the index of the scenario fault, ``window`` its outage."""
    cycle: int
    op: str
    cable: tuple
    directions: tuple = (UP, DOWN)
    value: float = 0.0
    fault: int = 0
    window: int = 0


def fault_timeline(scenario):
    """Every fault of ``scenario`` as :class:`Action` objects in time order."""
    out = []
    for i, fault in enumerate(scenario.faults):
        for w, (start, end) in enumerate(fault.windows()):
            begin = round(start * CYCLES_PER_US)
            finish = None if end is None else round(end * CYCLES_PER_US)
            if fault.kind in ("link", "flap", "link_impair"):
                cable = ("uplink", fault.plane, fault.t0, fault.t1)
                cables = [(cable, (UP, DOWN))]
            elif fault.kind == "switch":
                # A T1 restart: every cable of the T1 cut, both ways, until its table is
                # rewritten (windows() ends there). The RTL controller does not wipe and
                # rewrite the RTL switch's table: for the frames the two look the same (dropped
                # at the switch, counted as cut instead of no route).
                cables = [(("uplink", fault.plane, t0, fault.t1), (UP, DOWN))
                          for t0 in range(scenario.topology.t0s)]
            elif fault.kind == "port":
                cables = [(("host", fault.host, fault.plane), (UP, DOWN))]
            else:   # path: every T1 -> T0 direction of the T1
                cables = [(("uplink", fault.plane, t0, fault.t1), (DOWN,))
                          for t0 in range(scenario.topology.t0s)]
            for cable, directions in cables:
                if fault.kind in ("path", "link_impair"):
                    out.append(Action(begin, "loss", cable, directions, fault.loss, i, w))
                    if finish is not None:
                        out.append(Action(finish, "loss", cable, directions, 0.0, i, w))
                    continue
                if fault.kind == "port":
                    out.append(Action(begin, "plane_down", cable, directions, 0, i, w))
                out.append(Action(begin, "cut", cable, directions, 0, i, w))
                if finish is not None:
                    out.append(Action(finish, "heal", cable, directions, 0, i, w))
                    if fault.kind == "port":
                        out.append(Action(finish, "plane_up", cable, directions, 0, i, w))
    return sorted(out, key=lambda a: a.cycle)


def setup():
    """The scenario, its out folder and label, from ``$MRC_SCENARIO`` (JSON)."""
    spec = json.loads(os.environ["MRC_SCENARIO"])
    scenario = load_scenario(spec["path"], rtl=True)
    if spec.get("seed") is not None:
        scenario = scenario.with_changes(seed=spec["seed"])
    return scenario, Path(spec["out"])


def flows_of(scenario):
    """The scenario's flows, drawn as the fabric model draws them (same seed, same pattern)."""
    return scenario.traffic.flows(scenario.topology.hosts, random.Random(scenario.seed))


# --- cocotb side ----------------------------------------------------------------------------------

class FrameTap:
    """Frames through one frame stream of a link inside the fabric: ``side`` ``m_axis`` (frames
    leaving the link: arriving at the far end) or ``s_axis`` (frames entering it). Inside the
    hierarchy a stream is Amaranth's ``<side>__valid``, ``<side>__ready`` and the packed beat
    ``<side>__payload`` (:class:`rtl.common.stream.Beat`: data, keep, last, user from bit 0).
    ``on_frame(cycle, frame)`` gets each frame at its last beat."""

    def __init__(self, link, side, on_frame, data_width):
        self.valid = getattr(link, f"{side}__valid")
        self.ready = getattr(link, f"{side}__ready") if side == "s_axis" else None
        self.payload = getattr(link, f"{side}__payload")
        self.width = data_width // 8
        self.on_frame = on_frame
        self.parts = bytearray()

    def sample(self, cycle):
        if not int(self.valid.value) or (self.ready is not None and not int(self.ready.value)):
            return
        payload = int(self.payload.value)
        data_bits = 8 * self.width
        data = payload & ((1 << data_bits) - 1)
        keep = payload >> data_bits & ((1 << self.width) - 1)
        last = payload >> (data_bits + self.width) & 1
        beat = data.to_bytes(self.width, "little")
        if keep == (1 << self.width) - 1:
            self.parts += beat
        else:
            self.parts += bytes(b for k, b in enumerate(beat) if keep >> k & 1)
        if last:
            frame, self.parts = bytes(self.parts), bytearray()
            self.on_frame(cycle, frame)


class WriteTap:
    """Bytes one host's NIC writes into its memory (AXI4 W beats, counted by ``wstrb``), per
    cycle bin of ``bin_cycles``."""

    def __init__(self, dut, host, bin_cycles):
        self.valid = getattr(dut, f"h{host}_m_axi_wvalid")
        self.ready = getattr(dut, f"h{host}_m_axi_wready")
        self.strb = getattr(dut, f"h{host}_m_axi_wstrb")
        self.bin_cycles = bin_cycles
        self.bins = []
        self.total = 0
        self.last = 0            # the cycle of the last byte written

    def sample(self, cycle):
        if int(self.valid.value) and int(self.ready.value):
            count = bin(int(self.strb.value)).count("1")
            self.last = cycle
            k = max(cycle, 0) // self.bin_cycles
            while len(self.bins) <= k:
                self.bins.append(0)
            self.bins[k] += count
            self.total += count


def link_instance(dut, cable, direction):
    """The cocotb handle of the link of ``cable`` (:class:`models.fabric_topology.LinkId`) in
    ``direction`` (names as :meth:`sim.rtl_fabric.RtlFabric.elaborate` gives them; the fabric
    itself is ``inner`` under the Verilog top that gives its ports AXI-Stream names)."""
    a, b = (cable.a, cable.b) if direction == UP else (cable.b, cable.a)
    return getattr(dut.inner, f"link_{a[0]}{a[2]}_{b[0]}{b[2]}_p{a[1]}")


@cocotb.test()
async def scenario(dut):
    """Play the scenario of ``$MRC_SCENARIO`` on the fabric; check and record it."""
    from cocotb.triggers import RisingEdge

    from sim.rtl_controller import CYCLE_PS, Controller
    from sim.rtl_report import Recorder
    from verif.bench import make_rng, params

    scen, out = setup()
    p = params()
    topo = scen.topology
    flows = flows_of(scen)
    peers, qp_of = qp_plan(flows, topo.hosts)
    ctl = Controller(dut, make_rng(dut), topo, p, peers=peers, qp_config=qp_config(scen))
    bin_cycles = round(scen.bin_us * CYCLES_PER_US)
    rec = Recorder(scen, out, CYCLE_PS)
    began = time.monotonic()
    await ctl.start()
    zero = ctl.cycle
    taps = [WriteTap(dut, h, bin_cycles) for h in range(topo.hosts)]
    with ExitStack() as stack:
        writers = rec.open_pcaps(stack)
        for plane in range(topo.planes):
            for h in range(topo.hosts):
                cable = ctl.host_cable(h, plane)
                for direction, name in ((UP, f"host{h}-tx"), (DOWN, f"host{h}-rx")):
                    iface = writers[plane].interface(name, rec.describe(plane, h, direction))
                    taps.append(FrameTap(link_instance(dut, cable, direction), "m_axis",
                                         rec.pcap_sink(writers[plane], iface),
                                         p["data_width"]))
        actions = fault_timeline(scen)
        rec.plan(actions)
        cables = {}
        for action in actions:
            if action.op in ("cut", "loss") and action.cable not in cables:
                cable = ctl.uplink(*action.cable[1:]) if action.cable[0] == "uplink" else \
                    ctl.host_cable(*action.cable[1:])
                cables[action.cable] = cable
                for direction in action.directions:
                    taps.append(FrameTap(link_instance(dut, cable, direction), "s_axis",
                                         rec.entry_sink(action.cable), p["data_width"]))

        async def sample():
            while True:
                await RisingEdge(dut.clk)
                now = ctl.cycle - zero
                for tap in taps:
                    tap.sample(now)

        async def faults():
            for action in actions:
                while ctl.cycle - zero < action.cycle:
                    await RisingEdge(dut.clk)
                cable = cables.get(action.cable)
                rec.action(action, ctl.cycle - zero)
                dut._log.info("%.2f us: %s %s %s%s", (ctl.cycle - zero) / CYCLES_PER_US,
                              action.op, action.cable, "/".join(action.directions),
                              f" {action.value:g}" if action.op == "loss" else "")
                if action.op == "cut":
                    await ctl.cut(cable, action.directions)
                elif action.op == "heal":
                    await ctl.heal(cable, action.directions)
                elif action.op == "loss":
                    await ctl.lossy(cable, action.value, action.directions)
                else:
                    host, plane = action.cable[1:]
                    ctl.set_plane_down(host, plane, action.op == "plane_down")

        cocotb.start_soon(sample())
        fault_task = cocotb.start_soon(faults())
        for (src, dst), q in qp_of.items():
            ctl.hosts[src].add_messages(
                scen.traffic.messages, lambda pmtu: (scen.traffic.message_bytes,), qps=[q])
        await ctl.run_until_idle(MAX_HOST_RUN_US * CYCLES_PER_US,
                                 progress_every=PROGRESS_US * CYCLES_PER_US,
                                 label=lambda c: f"{(c - zero) / CYCLES_PER_US:.1f} us")
        end = ctl.cycle - zero
        if not fault_task.done():
            dut._log.error("the run ended before every fault of the scenario was applied")
            fault_task.cancel()
        messages, size = ctl.check_memory()
        counters = await ctl.counters()
    wall = time.monotonic() - began
    summary = rec.finish(ctl, taps[:topo.hosts], messages, size, counters, end, wall,
                         flows, qp_of)
    dut._log.info("\n%s", summary.text)
    for problem in summary.failed:
        dut._log.error("check failed: %s", problem)
    assert not summary.failed, summary.failed

# SPDX-License-Identifier: BSD-2-Clause
"""The fabric model: H hosts, P planes of T0 and T1 switches, links and faults, driven by
scenario files (``sim/scenarios/*.yaml``, schema in ``docs/scenarios.md``).

    python -m models.fabric sim/scenarios/link_down.yaml [--reduced] [--mode light|bytes]
        [--transport mrc|ecmp|oblivious] [--nscc] [--seed N] [--lone] [--reference]
        [--timeline]

runs a scenario and prints its summary (topology, traffic, settings and seed as metrics.md asks;
per-flow goodput, retransmissions, trims, ECN marks, EV state changes, the time from each fault
to the last data packet on the broken path, the checks of the scenario).

The pieces: :mod:`models.fabric_topology` (hosts, planes, T0s, T1s, uSID tables and carriers),
:mod:`models.fabric_net` (the event loop, switches with the uN stage and
:class:`models.switch_queue.EgressPort` queues, wires with faults; bytes or light packets),
:mod:`models.fabric_nic` (model NICs: the spray EV table of :mod:`models.spray`, the reliability
block of :mod:`models.reliability`, the receive tracker of :mod:`models.rx_tracker`; or the
ECMP baseline). This module reads scenarios (:class:`Scenario`), builds and runs them
(:class:`FabricRun`) and measures them as ``docs/metrics.md`` defines
(:class:`Result`). The cocotb bench that joins RTL NIC tops uses :class:`FrameFabric`: frames in
from the NICs' plane ports, frames out to them, faults, time driven by the bench.

Nothing here imports cocotb, Amaranth or scapy.
"""

import argparse
import copy
import random
import sys
import time
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import yaml

from .fabric_net import PS_PER_US, FrameTap, Impairment, Network, ps
from .fabric_nic import ECMP, TICK_PS, TRANSPORTS, Flow, Message, Nic, NicConfig, unloaded_rtt_ns
from .fabric_topology import T0, Topology
from .records import RetxCause
from .spray import ev_t1
from .switch_queue import CONTROL_BURST, DATA_LIMIT_DEFAULT, KMAX_DEFAULT, KMIN_DEFAULT, \
    TRIM_SIZE_DEFAULT, PortConfig

__all__ = ["Scenario", "Traffic", "Fault", "SwitchSettings", "Checks", "FabricRun", "Result",
           "FrameFabric", "schedule_fault", "load_scenario", "run_scenario", "lone_goodputs",
           "failure_loss", "main", "PATTERNS", "FAULT_KINDS", "MODES", "FORMS"]

PATTERNS = ("all_to_all", "permutation", "incast", "pairs")
FAULT_KINDS = ("link", "flap", "port", "path", "link_impair", "switch")
MODES = ("light", "bytes")
FORMS = ("reduced", "rtl")    # override blocks of a scenario file: short test form, RTL form
RECOVERY_BAND = 0.05          # metrics.md: goodput back within 5% of its level after the fault


def _from_dict(cls, data, where):
    """``cls(**data)`` refusing unknown keys with a message naming them and ``where``."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError(f"scenario: {where} must be a mapping, not {data!r}")
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"scenario: unknown key(s) {unknown} in {where}; known: {sorted(known)}")
    try:
        return cls(**data)
    except TypeError as error:
        raise ValueError(f"scenario: {where}: {error}") from None


@dataclass(frozen=True)
class SwitchSettings:
    """Every switch port's queue settings (docs/protocol.md 7 defaults)."""
    data_limit: int = DATA_LIMIT_DEFAULT
    control_limit: int | None = None
    trim_size: int = TRIM_SIZE_DEFAULT
    kmin: int = KMIN_DEFAULT
    kmax: int = KMAX_DEFAULT
    control_burst: int = CONTROL_BURST

    def __post_init__(self):
        self.port_config(0, 0, True)     # PortConfig checks every value

    def port_config(self, role, port, fabric_facing):
        """The PortConfig of one switch port (each port its own LFSR seed, non-zero)."""
        return PortConfig(fabric_facing=fabric_facing, data_limit=self.data_limit,
                          control_limit=self.control_limit, trim_size=self.trim_size,
                          kmin=self.kmin, kmax=self.kmax, control_burst=self.control_burst,
                          lfsr_seed=(0xACE1 + 0x1F3 * port + (0x777 if role == T0 else 0))
                          % 0xFFFF + 1)


@dataclass(frozen=True)
class Traffic:
    """Who sends what: ``pattern`` all_to_all (every ordered pair of ``hosts``, all hosts when
    empty), permutation (a random derangement of the hosts, drawn from the seed), incast
    (``senders`` -> ``receiver``) or pairs (``pairs``: [src, dst] lists); every flow sends
    ``messages`` Writes of ``message_bytes`` from ``start_us`` (plus a random delay in
    ``[0, stagger_us)`` per flow)."""
    pattern: str = "all_to_all"
    message_bytes: int = 65536
    messages: int = 4
    start_us: float = 0.0
    stagger_us: float = 0.0
    hosts: tuple = ()
    senders: tuple = ()
    receiver: int = 0
    pairs: tuple = ()

    def __post_init__(self):
        if self.pattern not in PATTERNS:
            raise ValueError(f"scenario: traffic pattern must be one of {PATTERNS}, "
                             f"not {self.pattern!r}")
        if not isinstance(self.message_bytes, int) or not 0 <= self.message_bytes < 1 << 31:
            raise ValueError("scenario: message_bytes must be an integer 0..2^31-1")
        if not isinstance(self.messages, int) or self.messages < 1:
            raise ValueError("scenario: messages must be a positive integer")
        if self.start_us < 0 or self.stagger_us < 0:
            raise ValueError("scenario: start_us and stagger_us must be >= 0")
        object.__setattr__(self, "hosts", tuple(self.hosts))
        object.__setattr__(self, "senders", tuple(self.senders))
        object.__setattr__(self, "pairs", tuple(tuple(p) for p in self.pairs))
        if self.pattern == "incast" and (not self.senders or self.receiver in self.senders):
            raise ValueError("scenario: incast needs senders, none of them the receiver")
        if self.pattern == "pairs" and (not self.pairs or
                                        any(len(p) != 2 or p[0] == p[1] for p in self.pairs)):
            raise ValueError("scenario: pairs needs [src, dst] lists with src != dst")

    def flows(self, hosts, rng):
        """The (src, dst) pairs of the pattern over ``hosts`` hosts."""
        if self.pattern == "all_to_all":
            members = self.hosts or tuple(range(hosts))
            pairs = [(a, b) for a in members for b in members if a != b]
        elif self.pattern == "permutation":
            while True:
                order = list(range(hosts))
                rng.shuffle(order)
                if all(a != b for a, b in enumerate(order)):
                    break
            pairs = list(enumerate(order))
        elif self.pattern == "incast":
            pairs = [(s, self.receiver) for s in self.senders]
        else:
            pairs = list(self.pairs)
        for a, b in pairs:
            if not (0 <= a < hosts and 0 <= b < hosts):
                raise ValueError(f"scenario: flow {a} -> {b} names a host outside 0..{hosts - 1}")
        return pairs


@dataclass(frozen=True)
class Fault:
    """One fault (see docs/scenarios.md): ``link`` (T0 ``t0`` - T1 ``t1`` of ``plane`` cut at
    ``at_us``, healed at ``until_us`` if given), ``flap`` (that link cut for ``down_us`` then up
    for ``up_us``, ``count`` times from ``at_us``), ``port`` (host ``host``'s NIC port on
    ``plane`` down, docs/protocol.md 4.6, and its cable cut), ``path`` (path (``plane``, ``t1``): the
    impairment ``loss``/``trim``/``ce``/``delay_ns``/``jitter_ns`` on every frame through T1
    ``t1``), ``link_impair`` (the impairment on both directions of a T0-T1 link) or ``switch``
    (T1 ``t1`` of ``plane`` restarts: down with all its ports and its route table lost from
    ``at_us``, up again at ``until_us`` with an empty table, which the controller rewrites
    ``rewrite_us`` later)."""
    kind: str
    at_us: float = 0.0
    until_us: float | None = None
    plane: int = 0
    t0: int = 0
    t1: int = 0
    host: int = 0
    loss: float = 0.0
    trim: float = 0.0
    ce: float = 0.0
    delay_ns: float = 0.0
    jitter_ns: float = 0.0
    down_us: float = 0.0
    up_us: float = 0.0
    count: int = 1
    rewrite_us: float = 0.0

    def __post_init__(self):
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"scenario: fault kind must be one of {FAULT_KINDS}, "
                             f"not {self.kind!r}")
        if self.at_us < 0 or (self.until_us is not None and self.until_us <= self.at_us):
            raise ValueError("scenario: a fault needs 0 <= at_us < until_us")
        if self.kind == "flap" and (self.down_us <= 0 or self.up_us <= 0 or self.count < 1):
            raise ValueError("scenario: a flap needs down_us > 0, up_us > 0 and count >= 1")
        if self.kind == "switch" and (self.until_us is None or self.rewrite_us < 0):
            raise ValueError("scenario: a switch restart needs until_us and rewrite_us >= 0")
        if self.kind in ("path", "link_impair"):
            self.impairment()

    def impairment(self):
        return Impairment(loss=self.loss, trim=self.trim, ce=self.ce, delay_ns=self.delay_ns,
                          jitter_ns=self.jitter_ns)

    @property
    def hard(self):
        """True when the fault takes a path away entirely (the route-around time applies)."""
        return self.kind in ("link", "flap", "port", "switch") or \
            (self.kind in ("path", "link_impair") and self.loss >= 1.0)

    def windows(self):
        """The ``(start_us, end_us or None)`` intervals during which the fault is active (a
        switch restart: until its table is rewritten)."""
        if self.kind == "switch":
            return [(self.at_us, self.until_us + self.rewrite_us)]
        if self.kind == "flap":
            period = self.down_us + self.up_us
            return [(self.at_us + k * period, self.at_us + k * period + self.down_us)
                    for k in range(self.count)]
        return [(self.at_us, self.until_us)]

    def check_topology(self, topo):
        if not 0 <= self.plane < topo.planes:
            raise ValueError(f"scenario: fault plane {self.plane} outside 0..{topo.planes - 1}")
        if self.kind in ("link", "flap", "link_impair") and not 0 <= self.t0 < topo.t0s:
            raise ValueError(f"scenario: fault t0 {self.t0} outside 0..{topo.t0s - 1}")
        if self.kind in ("link", "flap", "path", "link_impair", "switch") and \
                not 0 <= self.t1 < topo.t1s:
            raise ValueError(f"scenario: fault t1 {self.t1} outside 0..{topo.t1s - 1}")
        if self.kind == "port" and not 0 <= self.host < topo.hosts:
            raise ValueError(f"scenario: fault host {self.host} outside 0..{topo.hosts - 1}")

    def affects(self, topo, src, dst, plane, ev):
        """True when a data packet from ``src`` to ``dst`` on ``plane`` and ``ev`` goes through
        the faulty element."""
        if plane != self.plane:
            return False
        if self.kind == "port":
            return self.host in (src, dst)
        if topo.same_t0(src, dst) or ev_t1(ev) != self.t1:
            return False
        if self.kind in ("path", "switch"):
            return True
        return topo.crosses(src, dst, self.t0)


@dataclass(frozen=True)
class Checks:
    """The claims a scenario run must meet (docs/scenarios.md). ``complete``: every message
    completes without error, every byte lands (bytes mode: the receiver's memory equals the
    sender's buffer) and every frame is accounted; ``route_around_us``: the last data packet a
    sender puts on a hard fault's broken path comes at most this long after the fault starts
    (each down interval of a flap); ``min_trims``, ``min_ecn_marks``, ``min_retransmitted``,
    ``min_ev_recovered``, ``min_ev_marked`` (EVs marked ASSUMED_BAD), ``min_used_after`` (data
    packets put on each ended fault's element after it ended): counts the run must reach;
    ``min_goodput_raw``: every receiving host's goodput at least this fraction of its raw line
    rate (P x link rate). A hard fault's outage that no data packet met fails the route-around
    check (it would prove nothing) unless ``idle_faults_ok``. Profile-2 claims (metrics.md, the
    aggregate goodput series in bins of ``series_bin_us``, warm-up ``warmup_us``):
    ``min_bin_fraction``, no full bin from the first fault's start to the last flow's end below
    this fraction of the pre-fault level; ``min_mean_goodput_raw``, the mean of the full bins
    from the end of warm-up to the last flow's end at least this fraction of the aggregate raw
    line rate of the receiving hosts; ``max_sacks_per_data``, SACK frames (probe answers
    excluded) per data frame sent. Congestion-control claims ([cc], over the full series bins
    from ``settle_rtts`` unloaded RTTs to the first flow's end, while every flow runs):
    ``max_trim_fraction``, trimmed packets received per data packet sent; ``min_fairness``,
    Jain's index over the flows' goodputs; ``min_bottleneck_goodput``, every receiving host's
    goodput as a fraction of its raw line rate (its downlinks, the incast's bottleneck);
    ``min_victim_fraction``, the goodput of the flow ``victim`` (``[src, dst]``) against its
    goodput in the same run without the other flows (multi_tenant)."""
    complete: bool = True
    route_around_us: float | None = None
    min_trims: int = 0
    min_ecn_marks: int = 0
    min_retransmitted: int = 0
    min_ev_recovered: int = 0
    min_ev_marked: int = 0
    min_used_after: int = 0
    min_goodput_raw: float | None = None
    idle_faults_ok: bool = False
    min_bin_fraction: float | None = None
    min_mean_goodput_raw: float | None = None
    max_sacks_per_data: float | None = None
    max_trim_fraction: float | None = None
    min_fairness: float | None = None
    min_bottleneck_goodput: float | None = None
    settle_rtts: float = 3.0
    victim: tuple = ()
    min_victim_fraction: float | None = None
    series_bin_us: float = 2.0
    warmup_us: float = 5.0


def _deep_merge(base, overrides):
    out = copy.deepcopy(base)
    for key, value in (overrides or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


@dataclass(frozen=True)
class Scenario:
    """A scenario file (docs/scenarios.md). ``reduced`` holds overrides for the short form the
    default tests run."""
    name: str
    description: str = ""
    seed: int = 1
    mode: str = "light"
    duration_us: float = 1000.0
    bin_us: float = 10.0
    topology: Topology = field(default_factory=Topology)
    switch: SwitchSettings = field(default_factory=SwitchSettings)
    nic: NicConfig = field(default_factory=NicConfig)
    traffic: Traffic = field(default_factory=Traffic)
    faults: tuple = ()
    checks: Checks = field(default_factory=Checks)

    def __post_init__(self):
        if self.mode not in MODES:
            raise ValueError(f"scenario: mode must be one of {MODES}, not {self.mode!r}")
        if self.duration_us <= 0 or self.bin_us <= 0:
            raise ValueError("scenario: duration_us and bin_us must be positive")
        for fault in self.faults:
            fault.check_topology(self.topology)

    @classmethod
    def from_dict(cls, data, reduced=False, rtl=False):
        """A scenario from the mapping of a YAML file; with ``reduced`` its ``reduced``
        overrides applied first, with ``rtl`` its ``rtl`` overrides (the form the RTL fabric
        runs, ``sim/rtl_run.py``; an error if the file has none)."""
        if not isinstance(data, dict):
            raise ValueError("scenario: the file must hold a mapping")
        if reduced and rtl:
            raise ValueError("scenario: pick the reduced or the rtl form, not both")
        data = dict(data)
        overrides = {form: data.pop(form, None) for form in FORMS}
        if rtl and not overrides["rtl"]:
            raise ValueError("scenario: the file has no 'rtl' form")
        if reduced or rtl:
            data = _deep_merge(data, overrides["reduced" if reduced else "rtl"])
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"scenario: unknown top-level key(s) {unknown}; known: "
                             f"{sorted(known | set(FORMS))}")
        if "name" not in data:
            raise ValueError("scenario: 'name' is required")
        faults = data.get("faults") or []
        if not isinstance(faults, list):
            raise ValueError("scenario: faults must be a list")
        return cls(
            name=data["name"], description=data.get("description", ""),
            seed=data.get("seed", 1), mode=data.get("mode", "light"),
            duration_us=data.get("duration_us", 1000.0), bin_us=data.get("bin_us", 10.0),
            topology=_from_dict(Topology, data.get("topology"), "topology"),
            switch=_from_dict(SwitchSettings, data.get("switch"), "switch"),
            nic=_from_dict(NicConfig, data.get("nic"), "nic"),
            traffic=_from_dict(Traffic, data.get("traffic"), "traffic"),
            faults=tuple(_from_dict(Fault, f, f"faults[{i}]") for i, f in enumerate(faults)),
            checks=_from_dict(Checks, data.get("checks"), "checks"))

    def with_changes(self, **changes):
        """A copy with top-level fields replaced (``nic`` and ``topology`` as mappings of
        field changes or as objects)."""
        for name in ("nic", "topology", "traffic", "switch", "checks"):
            if isinstance(changes.get(name), dict):
                changes[name] = replace(getattr(self, name), **changes[name])
        return replace(self, **changes)


def load_scenario(path, reduced=False, rtl=False):
    """The :class:`Scenario` of a YAML file (its ``reduced`` or ``rtl`` form on request)."""
    with open(path) as f:
        return Scenario.from_dict(yaml.safe_load(f), reduced=reduced, rtl=rtl)


class _FaultWatch:
    """For one fault: the data packets put on its broken element while it is active."""

    def __init__(self, fault, topology):
        self.fault = fault
        self.topology = topology
        self.windows = [(ps(a * 1000), None if b is None else ps(b * 1000))
                        for a, b in fault.windows()]
        self.last = [None] * len(self.windows)     # last data packet on it, per window
        self.packets = 0
        self.after = 0                             # data packets on it after the last window

    def observe(self, packet, now):
        for k, (start, end) in enumerate(self.windows):
            if start <= now and (end is None or now < end):
                if self.fault.affects(self.topology, packet.src, packet.dst, packet.plane,
                                      packet.ev):
                    self.last[k] = now
                    self.packets += 1
                return
        end = self.windows[-1][1]
        if end is not None and now >= end and \
                self.fault.affects(self.topology, packet.src, packet.dst, packet.plane, packet.ev):
            self.after += 1

    def route_around_us(self):
        """Per window: from the fault's start to the last data packet on it (0 when none)."""
        return [0.0 if last is None else (last - start) / PS_PER_US
                for (start, _), last in zip(self.windows, self.last)]


def schedule_fault(network, fault, nic_port=None):
    """Put ``fault``'s changes on ``network``'s event loop (each at its time). A ``port`` fault
    cuts the host's cable on the fabric side and calls ``nic_port(plane, up)`` for the NIC side
    (docs/protocol.md 4.6), when given."""
    loop = network.loop

    def at(time_us, action):
        loop.at(max(ps(time_us * 1000), loop.now), lambda _: action())

    if fault.kind in ("link", "flap"):
        for start, end in fault.windows():
            at(start, lambda: network.set_link(fault.plane, fault.t0, fault.t1, False))
            if end is not None:
                at(end, lambda: network.set_link(fault.plane, fault.t0, fault.t1, True))
    elif fault.kind == "switch":
        at(fault.at_us, lambda: network.set_switch(fault.plane, fault.t1, False))
        at(fault.until_us, lambda: network.set_switch(fault.plane, fault.t1, True))
        at(fault.until_us + fault.rewrite_us,
           lambda: network.rewrite_table(fault.plane, fault.t1))
    elif fault.kind == "port":
        def port(up):
            network.set_host_link(fault.host, fault.plane, up)
            if nic_port is not None:
                nic_port(fault.plane, up)
        at(fault.at_us, lambda: port(False))
        if fault.until_us is not None:
            at(fault.until_us, lambda: port(True))
    else:
        wires = network.path_wires(fault.plane, fault.t1) if fault.kind == "path" else \
            network.link_wires(fault.plane, fault.t0, fault.t1)
        handle = []
        at(fault.at_us, lambda: handle.append(network.impair(wires, fault.impairment())))
        if fault.until_us is not None:
            at(fault.until_us, lambda: network.repair(handle.pop()))


class FrameFabric:
    """The fabric for RTL NIC engine tops (bytes mode, the cocotb bench of issue [reliability]
    and [system]): frames in from the NICs' plane ports, frames out to them, faults, with the
    bench driving time.

    ``send(host, plane, frame, time_ps)``: the frame's last byte left that port at ``time_ps``
    (the RTL serialized it); ``advance(time_ps)`` runs the fabric up to then and returns the
    frames delivered meanwhile as ``(time_ps, host, plane, frame)``; ``fault(Fault)`` schedules
    a fault (a ``port`` fault cuts the fabric side only: the bench takes the NIC's port down).
    Times never go backwards.
    """

    def __init__(self, topology, switch=None, seed=0):
        self.network = Network(topology, (switch or SwitchSettings()).port_config, seed=seed)
        self.loop = self.network.loop
        self.taps = [FrameTap(self.loop) for _ in range(topology.hosts)]
        for host, tap in enumerate(self.taps):
            self.network.attach(host, tap)

    def send(self, host, plane, frame, time_ps):
        self.loop.run(until=time_ps)
        return self.network.inject(host, plane, frame)

    def advance(self, time_ps):
        self.loop.run(until=time_ps)
        out = []
        for host, tap in enumerate(self.taps):
            out += [(t, host, plane, frame) for t, plane, frame in tap.take()]
        out.sort(key=lambda item: item[0])
        return out

    def fault(self, fault):
        fault.check_topology(self.network.topology)
        schedule_fault(self.network, fault)

    def counters(self):
        return self.network.counters()


class FabricRun:
    """One scenario built and ready to run: the network, the NICs, the flows and the faults.

    ``flows`` (optional) keeps only the flows with those indices (for lone-flow runs);
    ``faults`` False leaves the faults out (the no-failure reference of metrics.md).
    """

    def __init__(self, scenario, flows=None, faults=True):
        self.scenario = sc = scenario
        topo = sc.topology
        self.network = Network(topo, sc.switch.port_config, seed=sc.seed)
        self.loop = self.network.loop
        bytes_mode = sc.mode == "bytes"
        rng = random.Random(sc.seed)
        pairs = sc.traffic.flows(topo.hosts, rng)
        keep = range(len(pairs)) if flows is None else flows
        qps_per_flow = topo.planes if sc.nic.transport == ECMP else 1
        send_qps = [0] * topo.hosts
        for index in keep:
            send_qps[pairs[index][0]] += qps_per_flow
        self.nics = [Nic(h, self.network, sc.nic, send_qps=send_qps[h], bytes_mode=bytes_mode,
                         bin_ps=ps(sc.bin_us * 1000), series_ps=ps(sc.checks.series_bin_us * 1000))
                     for h in range(topo.hosts)]
        self.flows = []
        for index in keep:
            # Each flow draws from its own generator, so a flow alone gets the same start, PSNs
            # and EV sets as in the whole run; the buffer (bytes mode) from another, so that both
            # modes draw the same.
            draw = random.Random(f"{sc.seed}/flow/{index}")
            src, dst = pairs[index]
            start = ps((sc.traffic.start_us + draw.random() * sc.traffic.stagger_us) * 1000)
            flow = Flow(index, src, dst, [sc.traffic.message_bytes] * sc.traffic.messages, start)
            if bytes_mode:
                flow.buffer = random.Random(f"{sc.seed}/data/{index}").randbytes(flow.total_bytes)
            for plane in range(qps_per_flow):
                start_psn = draw.randrange(1 << 24)
                receiver = self.nics[dst].add_recv_qp(src, len(self.nics[src].send_qps), flow,
                                                      start_psn, flow.total_bytes)
                sender = self.nics[src].add_send_qp(dst, receiver, flow, start_psn, draw, plane)
                flow.qps.append((sender, receiver))
            self.flows.append(flow)
            self.loop.at(start, self._post, flow)
        self.faults = sc.faults if faults else ()
        for fault in self.faults:
            self._schedule_fault(fault)
        self.watches = [_FaultWatch(fault, topo) for fault in self.faults]
        if self.watches:
            for nic in self.nics:
                nic.on_data = self._observe
        self.finished = False
        self.end = None
        self.loop.at(TICK_PS, self._tick)

    # --- driving ---------------------------------------------------------------------------------

    def _post(self, flow):
        """Post the flow's messages, spread over its QPs (one QP for MRC, one per plane for
        ECMP: message k goes on QP k mod count)."""
        nic = self.nics[flow.src]
        offset = 0
        for k, size in enumerate(flow.sizes):
            sender, _ = flow.qps[k % len(flow.qps)]
            nic.post(sender, Message(k & 0xFFFF, size, offset, self.scenario.nic.pmtu))
            offset += size

    def _tick(self, _):
        for nic in self.nics:
            nic.tick()
        if all(f.done for f in self.flows):
            self.finished = True
            self.end = self.loop.now
            self.loop.halt()
        else:
            self.loop.at(self.loop.now + TICK_PS, self._tick)

    def _observe(self, nic, packet):
        now = self.loop.now
        for watch in self.watches:
            watch.observe(packet, now)

    def _schedule_fault(self, fault):
        schedule_fault(self.network, fault, self.nics[fault.host].set_port)

    def run(self):
        """Run until every flow is done or ``duration_us`` passes; returns the :class:`Result`."""
        wall = time.perf_counter()
        limit = ps(self.scenario.duration_us * 1000)
        self.loop.run(until=limit)
        return Result(self, time.perf_counter() - wall)


class Result:
    """The measurements of one run (metrics.md definitions; times in us, rates in Gb/s)."""

    def __init__(self, run, wall_s):
        self.run = run
        sc = run.scenario
        topo = sc.topology
        self.scenario = sc
        self.wall_s = wall_s
        self.events = run.loop.events
        self.sim_us = run.loop.now / PS_PER_US
        self.finished = run.finished
        self.flows = run.flows
        self.host_line_gbps = topo.planes * topo.link_gbps
        self.goodputs = [f.goodput_gbps() for f in run.flows]
        self.aggregate_gbps = sum(self.goodputs)
        self.counters = {}
        for nic in run.nics:
            for name, value in nic.counters.items():
                self.counters[name] = self.counters.get(name, 0) + value
        self.retx_causes = {}
        for nic in run.nics:
            for cause, value in nic.retx_causes.items():
                self.retx_causes[cause] = self.retx_causes.get(cause, 0) + value
        self.fabric = run.network.counters()
        self.trims = self.fabric.get("trimmed", 0) + self.fabric.get("wire_trimmed", 0)
        self.ecn_marks = self.fabric.get("ecn_marked", 0) + self.fabric.get("wire_ce_marked", 0)
        self.route_around = [(w.fault, w.route_around_us(), w.packets) for w in run.watches]
        self.checks = self._checks()

    # --- derived figures -------------------------------------------------------------------------

    def receiver_goodputs(self):
        """Goodput per receiving host (Gb/s): the payload bytes placed there x 8 / the time from
        the first packet sent by any flow to it to the last byte placed (its flows taken as one,
        as metrics.md takes a flow)."""
        spans = {}
        for flow in self.flows:
            if flow.first_sent is None or flow.last_placed is None:
                continue
            first, last, placed = spans.get(flow.dst, (flow.first_sent, flow.last_placed, 0))
            spans[flow.dst] = (min(first, flow.first_sent), max(last, flow.last_placed),
                               placed + flow.placed_bytes)
        return {host: placed * 8 / ((last - first) / 1000) if last > first else 0.0
                for host, (first, last, placed) in spans.items()}

    def timeline(self):
        """Aggregate goodput per bin of ``bin_us`` (Gb/s), from time 0 to the end."""
        bin_ps = ps(self.scenario.bin_us * 1000)
        bins = {}
        for nic in self.run.nics:
            for k, value in nic.timeline.items():
                bins[k] = bins.get(k, 0) + value
        last = max(bins) if bins else -1
        return [bins.get(k, 0) * 8 / (bin_ps / 1000) for k in range(last + 1)]

    def host_timeline(self):
        """Goodput per receiving host per bin of ``bin_us`` (Gb/s): ``{host: [bin values]}``."""
        bin_ns = self.scenario.bin_us * 1000
        bins = 1 + max((k for nic in self.run.nics for k in nic.timeline), default=-1)
        return {nic.host: [nic.timeline.get(k, 0) * 8 / bin_ns for k in range(bins)]
                for nic in self.run.nics if nic.timeline}

    def timeline_table(self):
        """The goodput of every receiving host over time, one row per bin (text)."""
        series = self.host_timeline()
        hosts = sorted(series)
        lines = ["time (us) | " + " | ".join(f"host {h}" for h in hosts) + " | total (Gb/s)"]
        for k in range(len(next(iter(series.values()), []))):
            values = [series[h][k] for h in hosts]
            lines.append(f"{k * self.scenario.bin_us:9g} | " +
                         " | ".join(f"{v:6.1f}" for v in values) + f" | {sum(values):.1f}")
        return "\n".join(lines)

    def series(self):
        """The aggregate goodput series of metrics.md (Gb/s per bin of the checks'
        ``series_bin_us``, default 2 us), from time 0 to the last bin with data."""
        bin_ps = ps(self.scenario.checks.series_bin_us * 1000)
        bins = {}
        for nic in self.run.nics:
            for k, value in nic.series.items():
                bins[k] = bins.get(k, 0) + value
        last = max(bins) if bins else -1
        return [bins.get(k, 0) * 8 / (bin_ps / 1000) for k in range(last + 1)]

    def _full_bins(self, start_us, end_us):
        """Indices of the series bins lying wholly in [start_us, end_us]."""
        width = self.scenario.checks.series_bin_us
        first = int(-(-start_us // width))
        return range(first, int(end_us // width))

    def last_end_us(self):
        """The last flow's end (its last byte placed), in us."""
        ends = [f.last_placed for f in self.flows if f.last_placed is not None]
        return max(ends) / PS_PER_US if ends else 0.0

    def pre_fault_level(self):
        """metrics.md: the mean of the aggregate series from the end of warm-up to the start of
        the first fault (None without a fault or with no full bin there)."""
        if not self.run.faults:
            return None
        series = self.series()
        bins = [k for k in self._full_bins(self.scenario.checks.warmup_us,
                                           self.run.faults[0].at_us) if k < len(series)]
        return sum(series[k] for k in bins) / len(bins) if bins else None

    def first_end_us(self):
        """The first flow's end (its last byte placed), in us: until then every flow runs."""
        ends = [f.last_placed for f in self.flows if f.last_placed is not None]
        return min(ends) / PS_PER_US if ends else 0.0

    def lowest_bin_after_fault(self, to_last_end=False):
        """``(lowest bin after the first fault / pre-fault level, its start in us)`` over the
        full bins from the fault's start to the first flow's end, while every flow still runs
        (docs/metrics.md, "No bin below"), or with ``to_last_end`` to the last flow's end as the
        definition's text says, tail bins with fewer flows included; None without a fault."""
        level = self.pre_fault_level()
        if level is None:
            return None
        series = self.series()
        width = self.scenario.checks.series_bin_us
        end = self.last_end_us() if to_last_end else self.first_end_us()
        bins = [k for k in self._full_bins(self.run.faults[0].at_us, end) if k < len(series)]
        if not bins or not level:
            return None
        k = min(bins, key=lambda b: series[b])
        return series[k] / level, k * width

    def mean_goodput_after_warmup(self):
        """The mean of the aggregate series over the full bins from the end of warm-up to the
        last flow's end, as a fraction of the receiving hosts' aggregate raw line rate."""
        series = self.series()
        bins = [k for k in self._full_bins(self.scenario.checks.warmup_us, self.last_end_us())
                if k < len(series)]
        receivers = len({f.dst for f in self.flows})
        if not bins or not receivers:
            return 0.0
        return sum(series[k] for k in bins) / len(bins) / (receivers * self.host_line_gbps)

    def settled_bins(self):
        """The full series bins from ``settle_rtts`` unloaded RTTs (the topology's longest,
        :func:`models.fabric_nic.unloaded_rtt_ns`) to the first flow's end."""
        sc = self.scenario
        start = sc.checks.settle_rtts * unloaded_rtt_ns(sc.topology, sc.nic.pmtu) / 1000
        return self._full_bins(start, self.first_end_us())

    def trim_fraction(self):
        """Trimmed packets received per data packet sent, over :meth:`settled_bins`."""
        bins = self.settled_bins()
        sent = sum(f.sent_series.get(k, 0) for f in self.flows for k in bins)
        trimmed = sum(f.trim_series.get(k, 0) for f in self.flows for k in bins)
        return trimmed / sent if sent else 0.0

    def fairness(self):
        """Jain's index (metrics.md) over the flows' goodputs in :meth:`settled_bins`."""
        bins = self.settled_bins()
        x = [sum(f.series.get(k, 0) for k in bins) for f in self.flows]
        return sum(x) ** 2 / (len(x) * sum(v * v for v in x)) if any(x) else 0.0

    def bottleneck_goodput(self):
        """The lowest receiving host's goodput in :meth:`settled_bins` as a fraction of its raw
        line rate (P x link rate)."""
        bins = self.settled_bins()
        if not bins:
            return 0.0
        width_ns = self.scenario.checks.series_bin_us * 1000
        per_host = {}
        for f in self.flows:
            per_host[f.dst] = per_host.get(f.dst, 0) + sum(f.series.get(k, 0) for k in bins)
        return min(per_host.values()) * 8 / (len(bins) * width_ns) / self.host_line_gbps

    def victim_fraction(self):
        """``(fraction, goodput, alone)``: the goodput of the checks' ``victim`` flow, and the
        same flow's in the same fabric alone (Gb/s); None when no flow is the victim."""
        victim = tuple(self.scenario.checks.victim)
        fid = next((f.fid for f in self.flows if (f.src, f.dst) == victim), None)
        if fid is None:
            return None
        goodput = next(f for f in self.flows if f.fid == fid).goodput_gbps()
        alone = run_scenario(self.scenario.with_changes(checks={"min_victim_fraction": None}),
                             flows=[fid], faults=False).goodputs[0]
        return (goodput / alone if alone else 0.0), goodput, alone

    def sacks_per_data(self):
        """SACK frames sent (probe answers excluded) per data frame sent."""
        c = self.counters
        return (c["sacks_sent"]) / max(1, c["data_sent"])

    def recovery_us(self):
        """For the first fault (metrics.md, time to route around): from its start until the
        aggregate goodput per bin is back within 5% of its level after the fault, the level being
        the mean of the later half of the bins from the fault to the first flow's end; None
        without a fault or with fewer than 4 such bins."""
        if not self.run.faults:
            return None
        fault = self.run.faults[0]
        series = self.timeline()
        bin_us = self.scenario.bin_us
        start = int(fault.at_us // bin_us) + 1
        ends = [f.last_placed for f in self.flows if f.last_placed is not None]
        stop = int(min(ends) / PS_PER_US // bin_us) if ends else len(series)
        after = series[start:stop]
        if len(after) < 4:
            return None
        level = sum(after[len(after) // 2:]) / len(after[len(after) // 2:])
        for k, value in enumerate(after):
            if abs(value - level) <= RECOVERY_BAND * level:
                return (start + k) * bin_us - fault.at_us
        return None

    def memory_ok(self):
        """Bytes mode: every receiver region equals the sender's buffer; light mode: every
        receiver QP placed each PSN of its messages exactly once (the tracker never places a
        PSN twice) and every byte."""
        for flow in self.flows:
            if flow.placed_bytes != flow.total_bytes:
                return False
        if self.scenario.mode != "bytes":
            return True
        for flow in self.flows:
            offset = 0
            for k, size in enumerate(flow.sizes):
                _, receiver = flow.qps[k % len(flow.qps)]
                memory = self.run.nics[flow.dst].recv_qps[receiver].memory
                if memory[offset:offset + size] != flow.buffer[offset:offset + size]:
                    return False
                offset += size
        return True

    def frames_accounted(self):
        """Every frame the NICs put on their wires is delivered to a NIC, dropped and counted
        by a switch or a wire, or still in the fabric: ``(ok, detail)``."""
        net = self.run.network
        wires = [w for s in net.switches.values() for w in s.wires]
        host_wires = list(net.host_wires.values())
        injected = sum(w.counters["frames"] for w in host_wires)
        delivered = sum(net.down_wires[k].counters["delivered"] for k in net.down_wires)
        lost = sum(w.counters["lost"] + w.counters["lost_cut"] for w in wires + host_wires)
        on_wires = sum(w.in_flight() for w in wires + host_wires)
        dropped = sum(self.fabric.get(name, 0) for name in (
            "dropped_full", "dropped_port_down", "dropped_malformed", "dropped_no_route",
            "dropped_hop_limit"))
        queued = net.queued()
        ok = injected == delivered + lost + dropped + on_wires + queued
        return ok, (f"injected {injected} = delivered {delivered} + lost on wires {lost} + "
                    f"dropped by switches {dropped} + on wires {on_wires} + queued {queued}")

    def _checks(self):
        checks = self.scenario.checks
        out = []
        if checks.complete:
            done = all(f.done and f.errors == 0 for f in self.flows)
            out.append(("every message completes", done,
                        f"{sum(f.completed for f in self.flows)} of "
                        f"{sum(f.messages for f in self.flows)} completed, "
                        f"{sum(f.errors for f in self.flows)} errors"))
            out.append(("every byte placed" + (" (memory equal)" if self.scenario.mode ==
                                               "bytes" else ""), self.memory_ok(),
                        f"{sum(f.placed_bytes for f in self.flows)} of "
                        f"{sum(f.total_bytes for f in self.flows)} bytes"))
            ok, detail = self.frames_accounted()
            out.append(("every frame accounted", ok, detail))
        if self.scenario.faults and not self.run.faults:
            # The reference run without the faults (metrics.md, loss caused by a failure): the
            # claims about the faults do not apply to it.
            checks = replace(checks, route_around_us=None, min_retransmitted=0, min_ev_marked=0,
                             min_ev_recovered=0, min_used_after=0, min_bin_fraction=None,
                             min_trims=0)
        if checks.route_around_us is not None:
            hard = [(times, watch) for (fault, times, _), watch in
                    zip(self.route_around, self.run.watches) if fault.hard]
            worst = max((max(times) for times, _ in hard), default=0.0)
            idle = sum(last is None for _, watch in hard for last in watch.last)
            ok = worst <= checks.route_around_us and (checks.idle_faults_ok or
                                                      (hard and not idle))
            detail = f"worst {worst:.2f} us"
            if idle or not hard:
                detail += f"; {idle} outage(s) met no data packet" if hard else \
                    "; no hard fault"
            out.append((f"route around within {checks.route_around_us:g} us", ok, detail))
        for name, value, low in (("trims", self.trims, checks.min_trims),
                                 ("ECN marks", self.ecn_marks, checks.min_ecn_marks),
                                 ("retransmissions", self.counters["retransmitted"],
                                  checks.min_retransmitted),
                                 ("EV recoveries", self.counters["ev_recovered"],
                                  checks.min_ev_recovered),
                                 ("EVs marked bad", self.counters["ev_marked"],
                                  checks.min_ev_marked)):
            if low:
                out.append((f"{name} >= {low}", value >= low, f"{value}"))
        if checks.min_used_after:
            ended = [(w.fault, w.after) for w in self.run.watches if w.windows[-1][1] is not None]
            fewest = min((after for _, after in ended), default=0)
            out.append((f"the faulty element carries data again after the fault (>= "
                        f"{checks.min_used_after} packets)",
                        bool(ended) and fewest >= checks.min_used_after,
                        f"{fewest} data packets after it ended" if ended else "no ended fault"))
        if checks.min_bin_fraction is not None:
            low = self.lowest_bin_after_fault()
            tail = self.lowest_bin_after_fault(to_last_end=True)
            out.append((f"no {checks.series_bin_us:g} us bin after the fault below "
                        f"{checks.min_bin_fraction:g} of the pre-fault level",
                        low is not None and low[0] >= checks.min_bin_fraction,
                        "no fault or no bin" if low is None else
                        f"lowest {low[0]:.3f} at {low[1]:g} us until the first flow ends (pre-"
                        f"fault {self.pre_fault_level():.1f} Gb/s); with the tail to the last "
                        f"flow's end {tail[0]:.3f} at {tail[1]:g} us"))
        if checks.min_mean_goodput_raw is not None:
            mean = self.mean_goodput_after_warmup()
            out.append((f"mean goodput after warm-up >= {checks.min_mean_goodput_raw:.0%} of "
                        f"raw line rate", mean >= checks.min_mean_goodput_raw, f"{mean:.1%}"))
        if checks.max_sacks_per_data is not None:
            ratio = self.sacks_per_data()
            out.append((f"SACKs per data frame <= {checks.max_sacks_per_data:g}",
                        ratio <= checks.max_sacks_per_data, f"{ratio:.3f}"))
        bins = self.settled_bins()
        span = (f"from {bins.start * checks.series_bin_us:g} to "
                f"{bins.stop * checks.series_bin_us:g} us")
        if checks.max_trim_fraction is not None:
            value = self.trim_fraction()
            out.append((f"trimmed packets <= {checks.max_trim_fraction:.0%} of data packets "
                        f"after {checks.settle_rtts:g} RTTs", value <= checks.max_trim_fraction,
                        f"{value:.2%} {span}"))
        if checks.min_fairness is not None:
            value = self.fairness()
            out.append((f"Jain's fairness of the flows >= {checks.min_fairness:g}",
                        value >= checks.min_fairness, f"{value:.3f} {span}"))
        if checks.min_bottleneck_goodput is not None:
            value = self.bottleneck_goodput()
            out.append((f"bottleneck goodput >= {checks.min_bottleneck_goodput:.0%} of its line "
                        f"rate", value >= checks.min_bottleneck_goodput, f"{value:.1%} {span}"))
        if checks.min_victim_fraction is not None:
            victim = self.victim_fraction()
            out.append((f"victim flow {list(checks.victim)} keeps >= "
                        f"{checks.min_victim_fraction:.0%} of its goodput alone",
                        victim is not None and victim[0] >= checks.min_victim_fraction,
                        "no such flow" if victim is None else
                        f"{victim[0]:.1%} ({victim[1]:.1f} of {victim[2]:.1f} Gb/s)"))
        if checks.min_goodput_raw is not None:
            worst = min(self.receiver_goodputs().values()) / self.host_line_gbps
            out.append((f"receiver goodput >= {checks.min_goodput_raw:.0%} of raw line rate",
                        worst >= checks.min_goodput_raw, f"worst {worst:.1%}"))
        return out

    @property
    def ok(self):
        return all(ok for _, ok, _ in self.checks)

    # --- text ------------------------------------------------------------------------------------

    def summary(self):
        """The summary table printed by the CLI."""
        sc = self.scenario
        topo = sc.topology
        nic = sc.nic
        tr = sc.traffic
        lines = [
            f"scenario {sc.name} ({sc.mode} mode, seed {sc.seed}): {sc.description}".rstrip(": "),
            f"topology: {topo.describe()}",
            f"traffic: {tr.pattern}, {len(self.flows)} flows of {tr.messages} x "
            f"{tr.message_bytes} B, start {tr.start_us:g} us (+ up to {tr.stagger_us:g} us)",
            f"NIC: {nic.transport}, PMTU {nic.pmtu}, W_max {nic.w_max}, MPR {nic.mpr}, "
            f"A {nic.slots}, B {nic.backup}, timeout {nic.timeout_us:g} us (k {nic.timeout_k}), "
            f"probe period {nic.probe_period} ticks, port FIFO {nic.port_fifo}, NSCC "
            f"{f'on ({nic.nscc_style})' if nic.nscc else 'off'}",
            f"switch: data queue {sc.switch.data_limit} B, trim {sc.switch.trim_size} B, "
            f"Kmin {sc.switch.kmin} B, Kmax {sc.switch.kmax} B",
        ]
        for fault in sc.faults:
            lines.append(f"fault: {_describe_fault(fault)}")
        lines.append(f"run: {'all flows done' if self.finished else 'time limit'} at "
                     f"{self.sim_us:.1f} us simulated, {self.events} events in "
                     f"{self.wall_s:.2f} s ({self.events / max(self.wall_s, 1e-9):,.0f} events/s, "
                     f"{self.sim_us / max(self.wall_s, 1e-9):,.1f} simulated us per s)")
        g = sorted(self.goodputs)
        if g:
            lines.append(f"goodput per flow (Gb/s): min {g[0]:.1f}, median {g[len(g) // 2]:.1f}, "
                         f"max {g[-1]:.1f}; aggregate {self.aggregate_gbps:.1f}; host line rate "
                         f"{self.host_line_gbps:g}")
        c = self.counters
        causes = ", ".join(f"{_cause_name(k)} {v}" for k, v in sorted(self.retx_causes.items()))
        lines += [
            f"data packets sent {c['data_sent']}, retransmitted {c['retransmitted']}"
            f"{' (' + causes + ')' if causes else ''}, flushed {c['flushed']}",
            f"trims {self.trims}, ECN marks {self.ecn_marks}, SACKs {c['sacks_sent']}, NACKs "
            f"{c['nacks_sent']}, probes {c['probes_sent']}, duplicates {c['duplicates']}",
            f"EV events: SKIP {c['ev_skip']}, BAD {c['ev_bad']} ({c['ev_marked']} EVs marked), "
            f"RECOVERED {c['ev_recovered']}; QP errors {c['qp_errors']}",
            f"fabric drops: full {self.fabric.get('dropped_full', 0)}, port down "
            f"{self.fabric.get('dropped_port_down', 0)}, lost on wires "
            f"{self.fabric.get('wire_lost', 0) + self.fabric.get('wire_lost_cut', 0)}",
        ]
        for fault, times, packets in self.route_around:
            shown = ", ".join(f"{t:.2f}" for t in times)
            lines.append(f"route around ({fault.kind}): last data packet on the broken path "
                         f"{shown} us after the fault; {packets} data packets on it while active")
        recovery = self.recovery_us()
        if recovery is not None:
            lines.append(f"aggregate goodput back within 5% of its post-fault level "
                         f"{recovery:.1f} us after the fault")
        for name, ok, detail in self.checks:
            lines.append(f"check {'PASS' if ok else 'FAIL'}: {name} ({detail})")
        return "\n".join(lines)


def _cause_name(cause):
    names = {v: k.lower() for k, v in vars(RetxCause).items() if not k.startswith("_")}
    return names.get(cause, str(cause))


def _describe_fault(fault):
    where = {"link": f"T0 {fault.t0} - T1 {fault.t1} link of plane {fault.plane} cut",
             "flap": f"T0 {fault.t0} - T1 {fault.t1} link of plane {fault.plane} flaps "
                     f"({fault.count} x {fault.down_us:g} us down, {fault.up_us:g} us up)",
             "port": f"host {fault.host} NIC port on plane {fault.plane} down",
             "path": f"path (plane {fault.plane}, T1 {fault.t1})",
             "link_impair": f"T0 {fault.t0} - T1 {fault.t1} link of plane {fault.plane}",
             "switch": f"T1 {fault.t1} of plane {fault.plane} restarts (down with all its ports, "
                       f"its table lost; rewritten {fault.rewrite_us:g} us after it returns)"}
    text = where[fault.kind]
    if fault.kind in ("path", "link_impair"):
        parts = [f"{name} {getattr(fault, name):g}" for name in ("loss", "trim", "ce")
                 if getattr(fault, name)]
        parts += [f"{name} {getattr(fault, name):g}" for name in ("delay_ns", "jitter_ns")
                  if getattr(fault, name)]
        text += ": " + ", ".join(parts)
    until = f" until {fault.until_us:g} us" if fault.until_us is not None else ""
    return f"{text} at {fault.at_us:g} us{until}"


def run_scenario(scenario, flows=None, faults=True):
    """Build and run ``scenario``; returns its :class:`Result`."""
    return FabricRun(scenario, flows=flows, faults=faults).run()


def lone_goodputs(scenario, run):
    """Lone-flow goodput (metrics.md) of every flow of ``run``: the same flow alone in the same
    fabric with the same settings, without faults. The fabric is symmetric, so flows between
    hosts under one T0 share one lone run and flows across T1s another (the first flow of each
    kind is run alone); returns one value per flow of ``run``."""
    topo = scenario.topology
    cache = {}
    out = []
    for flow in run.flows:
        kind = topo.same_t0(flow.src, flow.dst)
        if kind not in cache:
            cache[kind] = run_scenario(scenario, flows=[flow.fid], faults=False).goodputs[0]
        out.append(cache[kind])
    return out


def failure_loss(scenario, result=None):
    """The loss caused by the scenario's faults (metrics.md): ``1 - aggregate goodput with them
    / aggregate goodput of the same run (seed, traffic) without them``. ``result`` is the run
    with the faults when already made. Returns ``(loss, result with, result without)``."""
    with_faults = result if result is not None else run_scenario(scenario)
    without = run_scenario(scenario, faults=False)
    return 1 - with_faults.aggregate_gbps / without.aggregate_gbps, with_faults, without


def main(argv=None):
    ap = argparse.ArgumentParser(description="Run a fabric scenario on the fabric model.")
    ap.add_argument("scenario", type=Path, help="a scenario file (sim/scenarios/*.yaml)")
    ap.add_argument("--reduced", action="store_true", help="apply the file's reduced overrides")
    ap.add_argument("--mode", choices=MODES, help="override the packet mode")
    ap.add_argument("--transport", choices=TRANSPORTS, help="override the transport")
    ap.add_argument("--nscc", action="store_true",
                    help="congestion control on every sender QP (docs/protocol.md 5.1)")
    ap.add_argument("--seed", type=int, help="override the seed")
    ap.add_argument("--lone", action="store_true",
                    help="also run the lone flows and print each flow against its lone goodput")
    ap.add_argument("--reference", action="store_true",
                    help="also run without the faults and print the loss they cause")
    ap.add_argument("--timeline", action="store_true",
                    help="also print each receiving host's goodput per bin of bin_us")
    args = ap.parse_args(argv)
    try:
        scenario = load_scenario(args.scenario, reduced=args.reduced)
    except (OSError, ValueError, yaml.YAMLError) as error:
        sys.exit(f"fabric: {error}")
    changes = {}
    if args.mode:
        changes["mode"] = args.mode
    if args.seed is not None:
        changes["seed"] = args.seed
    if args.transport:
        changes["nic"] = {"transport": args.transport}
    if args.nscc:
        changes.setdefault("nic", {})["nscc"] = True
    scenario = scenario.with_changes(**changes)
    result = run_scenario(scenario)
    print(result.summary())
    if args.timeline:
        print(result.timeline_table())
    if args.lone:
        lone = lone_goodputs(scenario, result.run)
        fractions = [g / l for g, l in zip(result.goodputs, lone)]
        print(f"goodput / lone-flow goodput: min {min(fractions):.3f}, mean "
              f"{sum(fractions) / len(fractions):.3f}")
    if args.reference and scenario.faults:
        loss, _, without = failure_loss(scenario, result)
        print(f"loss caused by the faults {loss:.2%} (aggregate {result.aggregate_gbps:.1f} Gb/s, "
              f"{without.aggregate_gbps:.1f} without); capacity share of one T0-T1 link "
              f"{scenario.topology.capacity_share():.2%}")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())

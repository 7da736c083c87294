# SPDX-License-Identifier: BSD-2-Clause
"""The fabric model: topology and uSID routing, the switch queues against EgressPort, wires and
their faults, frames through the fabric (bytes mode, the RTL bench's interface), the reliability
block's light-mode entry points, every scenario file in its reduced form with its claims, the
two modes giving the same run, and the claims at scale (issue [system] item 6): MRC spraying at
95% of lone-flow goodput on a full-bisection permutation with the ECMP baseline reported, and the
loss of one failed T0-T1 link within its capacity share plus one point.

The default tests run reduced forms; the 64 hosts x 8 planes forms are marked ``full``.
"""

import random
from pathlib import Path

import pytest
import yaml
from dataclasses import replace

from hypothesis import HealthCheck, assume, given, settings, strategies as st

from models.fabric import (Fault, FrameFabric, Scenario, SwitchSettings, load_scenario,
                           failure_loss, lone_goodputs, main, run_scenario)
from models.fabric_net import (EventLoop, FabricPort, Impairment, Network, Packet, Wire, ps)
from models.fabric_nic import (FastEvTable, FastReliability, FastRxTracker, LightSack, NicConfig,
                               draw_ev_sets, ecmp_path, unloaded_rtt_ns)
from models.fabric_topology import T0, T1, Topology, frame_between, nic_address, plane_address
from models.layouts import NETH, Dscp, Ecn, HOP_LIMIT_DEFAULT, NackReason, Opcode
from models.packets import Addresses, build_frame, data_packet, parse_frame
from models.records import CompletionStatus, EvEvent, RetxCause, ext_to_int, int_to_ext
from models.nscc import STAMP_NS, NsccConfig
from models.reliability import QpConfig, Reliability
from models.rx_tracker import Arrival, Nack, Probe, RxState, RxTracker, Sack, psn_add
from models.spray import EvTable, ev_path, ev_t1, make_ev
from models.switch_queue import EgressPort, PortConfig, Verdict
from models.reliability_world import World, run_model
from models.tests.strategies import reliability_scenarios
from models.usid import Role, carrier_usids, decode, encode

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "sim" / "scenarios").glob("*.yaml"))
CLAIM_FILES = ("permutation.yaml", "permutation_link_down.yaml", "htsim_permutation.yaml")
SMALL = Topology(hosts=4, planes=2, t0s=2, t1s=2)


# --- Topology and routing ------------------------------------------------------------------------

def test_topology_placement_and_tables():
    topo = Topology(hosts=16, planes=4, t0s=4, t1s=4)
    assert topo.full_bisection and topo.hosts_per_t0 == 4
    assert [topo.t0_of(h) for h in (0, 3, 4, 15)] == [0, 0, 1, 3]
    assert topo.capacity_share() == 2 / (4 * 4 * 4)
    routes = topo.routes(T0, 2, 1)
    assert routes[topo.key(encode(2, Role.T1, 3))] == topo.uplink_port(3)
    assert routes[topo.key(encode(2, Role.HOST, 1))] == 1
    assert topo.routes(T1, 2, 0) == {topo.key(encode(2, Role.T0, s)): s for s in range(4)}
    assert len(topo.links()) == 4 * (16 + 4 * 4)
    usids = carrier_usids(topo.carrier(make_ev(2, 3, 9), 1, 14))[1]
    assert [decode(u) for u in usids] == [(2, Role.T0, 0), (2, Role.T1, 3), (2, Role.T0, 3),
                                           (2, Role.HOST, 2)]


@pytest.mark.parametrize("bad", [dict(hosts=5, t0s=2), dict(planes=17), dict(t1s=0),
                                 dict(link_gbps=0), dict(hosts=1), dict(link_delay_ns=-1)])
def test_topology_refuses_bad_parameters(bad):
    with pytest.raises(ValueError):
        Topology(**bad)


def light_packet(topo, src, dst, ev, size=1134):
    return Packet(size, topo.carrier(ev, src, dst), HOP_LIMIT_DEFAULT, Dscp.TRIMMABLE, Ecn.ECT0,
                  src=src, dst=dst, plane=ev & 0xF, ev=ev)


def test_every_path_reaches_its_host_in_both_modes():
    """Light packets and real frames from every host to every host on every path arrive at the
    right host, on the EV's plane, with the Hop Limit down by the switches crossed, the carrier
    exhausted to HOST(port), and (frames) the ICRC still good."""
    topo = Topology(hosts=8, planes=2, t0s=2, t1s=4)
    fabric = FrameFabric(topo)
    net = Network(topo, SwitchSettings().port_config)
    got = {}

    class Sink:
        def __init__(self, host):
            self.host = host

        def receive(self, packet, plane):
            got.setdefault(self.host, []).append((plane, packet))

    for h in range(topo.hosts):
        net.attach(h, Sink(h))
    sent = 0
    for src in range(topo.hosts):
        for dst in range(topo.hosts):
            if src == dst:
                continue
            for plane in range(topo.planes):
                for j in range(topo.t1s):
                    ev = make_ev(plane, j, 5)
                    net.inject(src, plane, light_packet(topo, src, dst, ev))
                    fabric.send(src, plane, frame_between(topo, src, dst, ev), fabric.loop.now)
                    sent += 1
                    net.loop.run()
    frames = fabric.advance(ps(1e6))
    assert sum(len(v) for v in got.values()) == sent == len(frames)
    for host, items in got.items():
        for plane, packet in items:
            assert packet.dst == host and packet.plane == plane
            hops = 1 if topo.same_t0(packet.src, host) else 3
            assert packet.hop_limit == HOP_LIMIT_DEFAULT - hops
            assert carrier_usids(packet.da)[1] == (encode(plane, Role.HOST, topo.port_of(host)),)
    for _, host, plane, frame in frames:
        parsed = parse_frame(frame, inner_dst=nic_address(host))
        assert parsed.icrc_ok and ev_path(parsed.ev)[0] == plane
        src = parsed.inner["src"] & 0xFFFF
        assert parsed.outer["hop_limit"] == HOP_LIMIT_DEFAULT - (1 if topo.same_t0(src, host)
                                                                 else 3)
        assert carrier_usids(parsed.outer["dst"])[1] == \
            (encode(plane, Role.HOST, topo.port_of(host)),)


def test_switch_drops_are_counted_by_reason():
    topo = SMALL
    net = Network(topo, SwitchSettings().port_config)
    ev = make_ev(0, 1, 1)
    expiring = light_packet(topo, 0, 3, ev)
    expiring.hop_limit = 2                     # the T1 sees 1 on arrival
    lost = light_packet(topo, 0, 3, ev)
    lost.da = topo.carrier(make_ev(0, 1, 1), 0, 3) ^ (1 << 60)   # an unknown T0 uSID
    short = Packet.from_frame(b"\x00" * 40)
    for packet in (expiring, lost, short):
        net.inject(0, 0, packet)
    net.loop.run()
    counters = net.counters()
    assert counters["dropped_hop_limit"] == 1
    assert counters["dropped_no_route"] == 1
    assert counters["dropped_malformed"] == 1


# --- Queues: FabricPort is EgressPort ------------------------------------------------------------

@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3000), st.sampled_from(
    [Dscp.TRIMMABLE, Dscp.TRIMMABLE_RETX, Dscp.NO_TRIM, Dscp.CONTROL]),
    st.sampled_from([Ecn.ECT0, Ecn.NOT_ECT])), min_size=1, max_size=120),
    st.booleans(), st.integers(1, 0xFFFF))
def test_fabric_port_decides_as_egress_port(ops, fabric_facing, seed):
    """The same frames, enqueued and dequeued in the same order, through EgressPort (bytes),
    FabricPort with frames and FabricPort with light packets, and through the switches' fast
    entry points (``admit`` and ``pull``, light packets): the same verdicts, the same frames out
    (light: the same sizes, DSCPs and ECN), the same counters."""
    topo = SMALL
    cfg = PortConfig(fabric_facing=fabric_facing, data_limit=12000, kmin=2000, kmax=8000,
                     lfsr_seed=seed)
    reference, frames_port, light_port = EgressPort(cfg), FabricPort(cfg), FabricPort(cfg)
    fast_port = FabricPort(cfg)
    for psn, (dequeues, size, dscp, ecn) in enumerate(ops):
        frame = bytearray(frame_between(topo, 0, 3, make_ev(0, 1, 2), psn, b"\x11" * size))
        frame[15] = (frame[15] & 0x0F) | (dscp & 0x3) << 6 | ecn << 4     # TC low bits
        frame[14] = (frame[14] & 0xF0) | dscp >> 2
        frame = bytes(frame)
        light = Packet(len(frame), 0, 64, dscp, ecn)
        a = reference.enqueue(frame)
        b = frames_port.enqueue(Packet.from_frame(frame))
        c = light_port.enqueue(light)
        d = fast_port.admit(Packet(len(frame), 0, 64, dscp, ecn))
        assert a.verdict == b.verdict == c.verdict
        assert d == (a.verdict in (Verdict.DATA, Verdict.CONTROL, Verdict.TRIMMED))
        for _ in range(dequeues):
            x, y, z = reference.dequeue(), frames_port.dequeue(), light_port.dequeue()
            w = fast_port.pull()
            assert (x is None) == (y is None) == (z is None) == (w is None)
            if x is not None:
                assert x.frame == y.frame.frame
                assert (len(x.frame), y.frame.dscp, y.frame.ecn) == \
                    (z.frame.size, z.frame.dscp, z.frame.ecn) == (w.size, w.dscp, w.ecn)
        assert reference.occupancy == fast_port.occupancy
    assert reference.counters == frames_port.counters == light_port.counters == \
        fast_port.counters
    assert reference.lfsr == light_port.lfsr == fast_port.lfsr


# --- The event loop ------------------------------------------------------------------------------

def test_event_loop_order_until_and_halt():
    """Events run in time order, ties in scheduling order (also those scheduled for now while
    running); ``until`` stops after that time and leaves ``now`` there; ``halt`` returns after
    the current event; times are integer picoseconds."""
    loop = EventLoop()
    log = []

    def record(tag):
        log.append((loop.now, tag))
        if tag == "b":
            loop.at(loop.now, record, "b-now")
        if tag == "halt":
            loop.halt()

    for time, tag in ((30, "c"), (10, "a"), (10, "b"), (20, "halt"), (20, "after-halt"),
                      (1 << 50, "far")):
        loop.at(time, record, tag)
    assert loop.run() == 4 and loop.now == 20
    assert log == [(10, "a"), (10, "b"), (10, "b-now"), (20, "halt")]
    assert loop.run(until=25) == 1 and loop.now == 25 and loop.next_time() == 30
    assert loop.run(until=1 << 50) == 2 and log[-1] == (1 << 50, "far")
    assert loop.pending() == 0 and loop.events == 7
    with pytest.raises(ValueError):
        loop.at(5, record, "past")
    with pytest.raises(TypeError):
        loop.run(until=2.5)


# --- Wires and faults -----------------------------------------------------------------------------

class Collect:
    def __init__(self, loop):
        self.loop = loop
        self.got = []

    def receive(self, packet, port):
        self.got.append((self.loop.now, packet))


class Feed:
    def __init__(self, packets):
        self.packets = list(packets)

    def pull(self):
        return self.packets.pop(0) if self.packets else None

    def sent(self):
        pass

    def waiting(self):
        return bool(self.packets)


def wire_run(packets, impairment=None, cut_at=None, seed=3):
    loop = EventLoop()
    sink = Collect(loop)
    wire = Wire(loop, "w", 100.0, ps(100), 24, Feed(packets), sink, 0, seed=seed)
    if impairment is not None:
        wire.impairments.append(impairment)
    if cut_at is not None:
        loop.at(cut_at, lambda _: wire.cut())
    wire.kick()
    loop.run()
    return wire, sink.got


def test_wire_serializes_at_line_rate():
    packets = [Packet(1000 + i, 0, 64, Dscp.TRIMMABLE, Ecn.ECT0, psn=i) for i in range(5)]
    wire, got = wire_run(packets)
    ends = [sum((1000 + k + 24) * 80 for k in range(i + 1)) for i in range(5)]
    assert [t for t, _ in got] == [end + ps(100) for end in ends]
    assert wire.in_flight() == 0 and wire.counters["delivered"] == 5


def test_wire_faults_loss_trim_ce_jitter_and_cut():
    def packets():
        return [Packet.from_frame(frame_between(SMALL, 0, 3, make_ev(0, 1, 4), i), psn=i)
                for i in range(400)]

    wire, got = wire_run(packets(), Impairment(loss=0.25))
    assert 60 < wire.counters["lost"] < 140 and len(got) + wire.counters["lost"] == 400
    assert [p.psn for _, p in got] == sorted(p.psn for _, p in got)
    again, got_again = wire_run(packets(), Impairment(loss=0.25))
    assert [p.psn for _, p in got] == [p.psn for _, p in got_again]       # seeded

    wire, got = wire_run(packets(), Impairment(trim=0.5, ce=0.5))
    trimmed = [p for _, p in got if p.dscp == Dscp.TRIMMED]
    marked = [p for _, p in got if p.ecn == Ecn.CE]
    assert 150 < len(trimmed) < 250 and 150 < len(marked) < 250
    for packet in trimmed:
        parsed = parse_frame(packet.frame)
        assert parsed.trimmed and len(packet.frame) == 256 and parsed.bth["psn"] == packet.psn

    wire, got = wire_run(packets(), Impairment(jitter_ns=5000))
    order = [p.psn for _, p in got]
    assert sorted(order) == list(range(400)) and order != sorted(order)

    wire, got = wire_run(packets(), cut_at=ps(20_000))
    assert wire.counters["lost_cut"] == 400 - len(got) > 0
    assert all(t <= ps(20_000) for t, _ in got)


@pytest.mark.parametrize("bad", [dict(loss=1.5), dict(trim=-0.1), dict(delay_ns=-1),
                                 dict(trim_size=100)])
def test_impairment_refuses_bad_values(bad):
    with pytest.raises(ValueError):
        Impairment(**bad)


def test_link_cut_and_heal_on_the_network():
    topo = SMALL
    net = Network(topo, SwitchSettings().port_config)
    got = []

    class Sink:
        def receive(self, packet, plane):
            got.append(packet.psn)

    for h in range(topo.hosts):
        net.attach(h, Sink())
    ev_cut, ev_ok = make_ev(0, 1, 1), make_ev(0, 0, 1)
    net.set_link(0, 0, 1, False)
    for psn, ev in enumerate((ev_cut, ev_ok, ev_cut)):
        packet = light_packet(topo, 0, 3, ev)
        packet.psn = psn
        net.inject(0, 0, packet)
    net.loop.run()
    assert got == [1] and net.counters()["dropped_port_down"] == 2
    net.set_link(0, 0, 1, True)
    packet = light_packet(topo, 0, 3, ev_cut)
    packet.psn = 9
    net.inject(0, 0, packet)
    net.loop.run()
    assert got == [1, 9]


def test_frame_fabric_for_rtl_benches():
    """The interface the cocotb bench uses: frames in at their send time, frames out in time
    order, a path fault and a link cut scheduled by Fault records, counters."""
    topo = Topology(hosts=2, planes=2, t0s=2, t1s=2)
    fabric = FrameFabric(topo, seed=5)
    fabric.fault(Fault(kind="path", plane=1, t1=1, loss=1.0, at_us=0))
    fabric.fault(Fault(kind="link", plane=0, t0=0, t1=0, at_us=1, until_us=2))
    times = []
    for k in range(8):
        ev = make_ev(k % 2, k // 2 % 2, k)
        fabric.send(0, k % 2, frame_between(topo, 0, 1, ev, k), ps(400 * k))
        times.append(ps(400 * k))
    out = fabric.advance(ps(10_000))
    assert [t for t, *_ in out] == sorted(t for t, *_ in out)
    psns = sorted(parse_frame(frame).bth["psn"] for *_, frame in out)
    # plane 1 T1 1 (k = 3, 7) lost; plane 0 T1 0 (k = 0 before the cut, k = 4 at 1.6 us cut)
    assert psns == [0, 1, 2, 5, 6]
    assert all(host == 1 for _, host, _, _ in out)
    counters = fabric.counters()
    assert counters["wire_lost"] == 2 and counters["dropped_port_down"] == 1


# --- The fast forms of the NIC's golden models (same outputs, same states) -----------------------

class TwinReliability:
    """:class:`Reliability` fed FEEDBACK_RECORDs and :class:`FastReliability` fed the parsed
    SACKs (as :class:`LightSack`) and NACKs, in lockstep: :meth:`take` asserts that both gave
    the same output records and hold the same state."""

    def __init__(self, **params):
        self.slow, self.fast = Reliability(**params), FastReliability(**params)
        self.counters = self.slow.counters

    def setup(self, *args):
        self.slow.setup(*args)
        self.fast.setup(*args)

    def send(self, rec):
        self.slow.send(rec)
        self.fast.send(rec)

    def feedback(self, rec):
        self.slow.feedback(rec)
        if rec["opcode"] == Opcode.SACK:
            sack = Sack.from_ext(int_to_ext(rec["ext"], 36))
            self.fast.sack(rec["qpn"], LightSack(*(getattr(sack, f) for f in LightSack._fields)))
        elif rec["opcode"] == Opcode.NACK:
            neth = NETH.unpack(int_to_ext(rec["ext"], NETH.size))
            self.fast.nack(rec["qpn"], Nack(neth["nack_reason"], neth["nack_psn"],
                                            neth["entropy"]))
        else:
            self.fast.feedback(rec)

    def marked(self, rec):
        self.slow.marked(rec)
        self.fast.marked(rec)

    def work_request(self, rec):
        self.slow.work_request(rec)
        self.fast.work_request(rec)

    def tick(self):
        self.slow.tick()
        self.fast.tick()

    def take(self):
        out = self.slow.take()
        assert self.fast.take() == out
        slow, fast = self.slow, self.fast
        assert (slow.now, slow.probe_id, slow.probes) == (fast.now, fast.probe_id, fast.probes)
        for a, b in zip(slow.qps, fast.qps):
            assert (a is None) == (b is None)
            if a is not None:
                assert (a.cack, a.next_psn, a.error, a.wrs, a.entries, a.in_flight, a.credit,
                        a.ackreq_psn, a.announced) == \
                    (b.cack, b.next_psn, b.error, b.wrs, b.entries, b.in_flight, b.credit,
                     b.ackreq_psn, b.announced)
                if slow.profile == 2:
                    counted = [e for e in a.entries.values() if e.counted]
                    assert a.in_flight == len(counted) <= a.cfg.w_max
                    assert (a.bytes_in_flight, a.charged, a.acked_bytes) == \
                        (b.bytes_in_flight, b.charged, b.acked_bytes)
                    assert a.bytes_in_flight == sum(e.cost for e in counted)
                    if a.cc is not None:
                        assert vars(a.cc) == vars(b.cc)
        assert slow.counters == fast.counters
        return out


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reliability_scenarios())
def test_fast_reliability_equals_reliability(case):
    """The closed loop of ``reliability_world`` (loss, trims, CE marks, NO_PKT_BUFFER and
    PSN_OOR_WINDOW NACKs, dead paths, planes down with flushed packets, a wrong R_Key, a doomed
    QP, PSNs and ticks wrapping) run by both blocks at once: every output record, counter and
    QP state the same after every input and tick."""
    twin_loop(*case)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reliability_scenarios())
def test_fast_reliability_equals_reliability_with_nscc(case):
    """The same with congestion control on every QP (profile 2): NSCC's state, the bytes in
    flight and the byte credit the same in both blocks after every input and tick."""
    sc, cfgs, seed = case
    assume(sc.profile == 2)
    twin_loop(sc, [replace(c, cc=NsccConfig.scaled(100, 2000, 4096)) for c in cfgs], seed)


def twin_loop(sc, cfgs, seed):
    rng = random.Random(seed)
    starts = [rng.choice((rng.randrange(1 << 24), (1 << 24) - rng.randint(1, 40)))
              for _ in cfgs]
    tick0 = rng.choice((0, rng.randrange(1 << 32), (1 << 32) - 3))
    world = World(rng, sc, starts, wr_depth=8, tick0=tick0)
    twin = TwinReliability(n_qps=len(cfgs), ring=16, probe_entries=8, wr_depth=8,
                           timer_bits=8, now=tick0, profile=sc.profile)
    for q, cfg in enumerate(cfgs):
        twin.setup(q, starts[q], True, cfg)
    for stream, records in twin.take().items():
        for rec in records:
            world.output(stream, rec)
    run_model(world, twin, 400_000)
    world.check_end()


@pytest.mark.parametrize("profile", [1, 2])
def test_fast_reliability_timers_in_psn_order_across_the_wrap(profile):
    """PSNs sent in one tick across the PSN wrap time out together: the retransmissions, BAD
    events and the retry-limit error come in PSN order from both blocks; NACKs put PSNs on
    their own timers (NO_PKT_BUFFER) or behind cack_psn (PSN_OOR_WINDOW). Profile 2: the first
    timeout of a path declares the other PSNs on it lost (PATH_LOST, not charged)."""
    twin = TwinReliability(n_qps=2, ring=16, timer_bits=8, profile=profile)
    start = (1 << 24) - 3
    for qpn in (0, 1):
        twin.setup(qpn, start, True, QpConfig(w_max=16, timeout_exp=2, retry_limit=1,
                                              probe_period=3))
        twin.work_request({"qpn": qpn, "req_id": 5})
    for k in range(6):
        for qpn in (1, 0):
            twin.send({"qpn": qpn, "psn": psn_add(start, k), "ev": make_ev(0, k % 3, k),
                       "rtx": 0, "flushed": 0, "req_id": 5, "last": int(k == 5)})
    nack = {"qpn": 1, "opcode": Opcode.NACK, "ecn": 0}
    twin.feedback(dict(nack, ext=ext_to_int(Nack(NackReason.NO_PKT_BUFFER, psn_add(start, 4),
                                                 make_ev(0, 1, 4)).ext_bytes())))
    twin.feedback(dict(nack, ext=ext_to_int(Nack(NackReason.PSN_OOR_WINDOW, psn_add(start, 5),
                                                 make_ev(0, 2, 5)).ext_bytes())))
    outputs = []
    for _ in range(12):
        twin.tick()
        outputs.append(twin.take())
        for rec in outputs[-1]["retx"]:
            twin.send({"qpn": rec["qpn"], "psn": rec["psn"], "ev": make_ev(1, 0, 9), "rtx": 1,
                       "flushed": 0, "req_id": 5, "last": 0})
    timeout, other = RetxCause.TIMEOUT, RetxCause.NACK_OTHER
    assert [(r["qpn"], r["psn"], r["cause"]) for r in outputs[2]["retx"]] == \
        [(1, psn_add(start, 4), other)]
    if profile == 1:
        assert [(r["qpn"], r["psn"], r["cause"]) for r in outputs[3]["retx"]] == \
            [(0, psn_add(start, k), timeout) for k in range(6)] + \
            [(1, psn_add(start, k), timeout) for k in range(4)] + \
            [(1, psn_add(start, 5), other)]
        assert [r["status"] for out in outputs for r in out["cpl"]] == \
            [CompletionStatus.RETRY_EXCEEDED] * 2
    else:
        # EVs on paths (0, 0), (0, 1), (0, 2) for k mod 3: PSNs k and k + 3 share a path, so
        # k + 3 is declared lost with k (PSN 4 waits on its NACK, PSN 5 behind cack_psn).
        lost = RetxCause.PATH_LOST
        assert [(r["qpn"], r["psn"], r["cause"]) for r in outputs[3]["retx"]] == \
            [(0, psn_add(start, 0), timeout), (0, psn_add(start, 3), lost),
             (0, psn_add(start, 1), timeout), (0, psn_add(start, 4), lost),
             (0, psn_add(start, 2), timeout), (0, psn_add(start, 5), lost),
             (1, psn_add(start, 0), timeout), (1, psn_add(start, 3), lost),
             (1, psn_add(start, 1), timeout), (1, psn_add(start, 2), timeout),
             (1, psn_add(start, 5), other)]
        assert [r["kind"] for r in outputs[3]["ev"]] == [EvEvent.BAD] * 6


def random_arrival(rng, tracker):
    """A data packet near the tracker's window (duplicates, gaps, beyond it, trimmed, CE,
    Write-with-Immediate, a bad R_Key now and then)."""
    psn = psn_add(tracker.cack_psn, rng.choice((1, 1, 2, rng.randint(-70, 70),
                                                 rng.randint(-3, tracker.config.mpr + 80))))
    return Arrival(psn=psn, ev=make_ev(rng.randrange(4), rng.randrange(8), rng.randrange(1 << 20)),
                   ecn=rng.choice((Ecn.ECT0, Ecn.ECT0, Ecn.ECT0, Ecn.CE, Ecn.NOT_ECT)),
                   dscp=rng.choice((Dscp.TRIMMABLE,) * 8 + (Dscp.TRIMMABLE_RETX, Dscp.TRIMMED,
                                                             Dscp.TRIMMED_LASTHOP)),
                   ackreq=int(rng.random() < 0.2), rtx=int(rng.random() < 0.1),
                   opcode=rng.choice((Opcode.WRITE_MIDDLE,) * 12 + (Opcode.WRITE_ONLY_IMM,)),
                   msn=rng.randrange(1 << 16), imm=rng.randrange(1 << 32),
                   payload_length=rng.randrange(4097), access_ok=rng.random() > 0.01)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2 ** 24 - 1), st.sampled_from([128, 1024]), st.integers(0, 10 ** 6),
       st.sampled_from([1, 2, 2]), st.sampled_from([1024, 4096, 32768]))
def test_fast_rx_tracker_equals_rx_tracker(start, mpr, seed, profile, sack_bytes):
    """Random data packets, probes and ticks to :class:`RxTracker` and :class:`FastRxTracker`
    (either profile): the same result and the same state after every input, through both
    entry points."""
    rng = random.Random(seed)
    params = dict(mpr=mpr, wimm_max=3, profile=profile, sack_bytes=sack_bytes)
    slow = RxTracker(start, **params)
    fast, fields = FastRxTracker(start, **params), FastRxTracker(start, **params)
    for _ in range(300):
        kind = rng.random()
        if kind < 0.8:
            arrival = random_arrival(rng, slow)
            expected = slow.arrive(arrival)
            got = fields.arrive_fields(arrival.psn, arrival.ev, arrival.ecn, arrival.dscp,
                                       arrival.ackreq, arrival.rtx, arrival.opcode,
                                       arrival.payload_length, arrival.access_ok)
            if arrival.opcode != Opcode.WRITE_ONLY_IMM:
                assert fast.arrive(arrival) == expected
            else:                       # the completion's MSN and immediate: the record path
                fast.arrive(arrival)
                got = got[:1] + (got[1] if got[1] is None or isinstance(got[1], Sack)
                                 else got[1].sack(),) + got[2:]
                expected = replace(expected, completions=())
        elif kind < 0.9:
            probe = Probe(ev=rng.randrange(1 << 32), probe_id=rng.randrange(1 << 16),
                          ecn=rng.choice((Ecn.ECT0, Ecn.CE)),
                          dscp=rng.choice((Dscp.TRIMMABLE, Dscp.TRIMMED)))
            expected = slow.probe(probe)
            assert fast.probe(probe) == expected
            got = fields.probe_fields(probe.ev, probe.probe_id, probe.ecn, probe.dscp)
        else:
            expected = slow.tick()
            assert fast.tick() == expected
            got = fields.tick_fields()
        sack = got[1] if got[1] is None or isinstance(got[1], Sack) else got[1].sack()
        assert (got[0], sack, got[2]) == (expected.verdict, expected.sack, expected.nack)
        assert slow.state == fast.state
        assert slow.counters == fast.counters
    assert slow.counters == fields.counters


def test_fast_rx_tracker_state_edges():
    """States reachable only after long runs or set directly: a SACK whose bitmap base lies half
    the PSN space ahead (the bit-by-bit path), the out-of-order count and the placed bytes
    wrapping; both trackers agree."""
    for trigger_ahead, profile in [(t, p) for t in ((1 << 23) - 70, (1 << 23) - 10,
                                                      (1 << 23) + 5) for p in (1, 2)]:
        state = RxState(cack_psn=100, bitmap=0b1011 << 5, uncovered=True, ticks=1,
                        last_psn=psn_add(100, trigger_ahead), last_ev=7)
        slow = RxTracker(0, mpr=128, profile=profile)
        fast = FastRxTracker(0, mpr=128, profile=profile)
        slow.state = fast.state = state
        assert fast.tick() == slow.tick()
        assert fast.state == slow.state
    slow, fast = RxTracker(0, mpr=128, profile=1), FastRxTracker(0, mpr=128, profile=1)
    slow.state = fast.state = RxState(cack_psn=5, ooo_count=(1 << 15) - 1,
                                      placed_bytes=(1 << 32) - 10)
    arrival = Arrival(psn=9, ev=3, payload_length=4096)
    assert fast.arrive(arrival) == slow.arrive(arrival)
    assert fast.state == slow.state and fast.state.ooo_count == 0


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4), st.sampled_from([1, 4, 16]), st.integers(0, 3),
       st.integers(0, 10 ** 6), st.sampled_from([1, 2, 2]))
def test_fast_ev_table_equals_ev_table(planes, slots, backup, seed, profile):
    """Random choices (room masks, avoided EVs), EV events, planes going down and up and states
    written directly on :class:`EvTable` and :class:`FastEvTable` (either profile): the same
    choices and the same states."""
    rng = random.Random(seed)
    t1s, floor = 4, min(rng.randint(0, 3), planes * slots)
    tables = [cls(planes, t1s, slots=slots, backup=backup, ev_min_active=floor, profile=profile)
              for cls in (EvTable, FastEvTable)]
    sets = draw_ev_sets(rng, planes, t1s, slots, backup, same_t0=rng.random() < 0.2)
    for table in tables:
        table.configure_qp(0, *sets)
    known = [ev for plane in sets[0] + sets[2] for ev in plane]
    for _ in range(300):
        kind = rng.random()
        if kind < 0.6:
            room = rng.randrange(1 << planes)
            avoid = rng.choice([None, None, rng.choice(known)])
            choices = [table.choose(0, room, avoid) for table in tables]
            assert choices[0] == choices[1]
        elif kind < 0.9:
            event = rng.choice((EvEvent.SKIP, EvEvent.SKIP, EvEvent.BAD, EvEvent.RECOVERED,
                                EvEvent.DENY, EvEvent.ALLOW))
            ev = rng.choice(known)
            assert tables[0].event(0, ev, event) == tables[1].event(0, ev, event)
        elif kind < 0.97:
            plane, up = rng.randrange(planes), rng.random() < 0.6
            for table in tables:
                table.set_plane_up(plane, up)
        else:                           # a state written directly (no refill)
            plane, slot, state = rng.randrange(planes), rng.randrange(slots), rng.randrange(4)
            for table in tables:
                table.set_state(0, plane, slot, state)
        assert tables[0].qp(0) == tables[1].qp(0)


# --- NIC helpers ----------------------------------------------------------------------------------

def test_ev_sets_spread_over_t1s_and_ecmp_hash_spreads():
    """EV sets (issue [feedback-v2-model] item 3): with T a power of two dividing A, slot s
    holds T1 s mod T, so any T consecutive rotation positions under one mask reach every T1
    once; otherwise as evenly as the counts allow; the ECMP hash reaches every T1."""
    evs, seeds, pools = draw_ev_sets(random.Random(1), planes=4, t1s=8, slots=16, backup=8,
                                     same_t0=False)
    for p in range(4):
        assert [ev_path(ev) for ev in evs[p]] == [(p, s % 8) for s in range(16)]
        assert [ev_path(ev) for ev in pools[p]] == [(p, b % 8) for b in range(8)]
        assert len(set(evs[p] + pools[p])) == 24 and 0 < seeds[p] < 1 << 16
        for mask in range(16):
            for start in range(16 - 8 + 1):
                assert {ev_t1(evs[p][r ^ mask]) for r in range(start, start + 8)} == set(range(8))
    for t1s, slots in ((3, 16), (6, 4), (5, 5), (8, 4), (12, 16)):
        evs, _, _ = draw_ev_sets(random.Random(t1s), 2, t1s, slots, 2, same_t0=False)
        for plane in evs:
            counts = [sum(ev_t1(ev) == j for ev in plane) for j in range(t1s)]
            assert max(counts) - min(counts) <= 1, (t1s, slots, counts)
    same, _, _ = draw_ev_sets(random.Random(1), 2, 8, 16, 8, same_t0=True)
    assert all(ev_path(ev)[1] == 0 for plane in same for ev in plane)
    picks = [ecmp_path(a, b, 0xC000 | q, 8, 0) for a in range(16) for b in range(16)
             for q in range(2)]
    assert set(picks) == set(range(8))
    assert picks == [ecmp_path(a, b, 0xC000 | q, 8, 0) for a in range(16) for b in range(16)
                     for q in range(2)]


@pytest.mark.parametrize("bad", [dict(pmtu=300), dict(transport="tcp"), dict(slots=12),
                                 dict(w_max=0), dict(mpr=100), dict(nscc=1),
                                 dict(nscc=True, profile=1), dict(nscc_target_ns=0),
                                 dict(nscc_base_rtt_ns="1 us")])
def test_nic_config_refuses_bad_values(bad):
    with pytest.raises(ValueError):
        NicConfig(**bad)


def test_nscc_parameters_per_qp_path():
    """Each sender QP's NSCC is scaled from its NIC's rate and its own path's unloaded RTT
    (through a T1, or inside one T0); ``nscc_base_rtt_ns`` and ``nscc_target_ns`` override."""
    topo = Topology(hosts=4, planes=4, t0s=2, t1s=2)
    cross, inside = unloaded_rtt_ns(topo, 4096), unloaded_rtt_ns(topo, 4096, same_t0=True)
    assert 2000 < cross < 2400 and abs(inside - cross / 2) < 1
    cfg = NicConfig(nscc=True)
    far, near = cfg.qp_config(1, topo).cc, cfg.qp_config(1, topo, same_t0=True).cc
    assert far.base_rtt == round(cross / STAMP_NS) and near.base_rtt == round(inside / STAMP_NS)
    assert far.cwnd_max > near.cwnd_max > 0
    fixed = NicConfig(nscc=True, nscc_base_rtt_ns=5000, nscc_target_ns=800).qp_config(1, topo).cc
    assert (fixed.base_rtt, fixed.target) == (round(5000 / STAMP_NS), 50)
    assert NicConfig().qp_config(1, topo).cc is None
    with pytest.raises(ValueError, match="topology"):
        cfg.qp_config(1)


# --- Scenario files -------------------------------------------------------------------------------

def test_every_scenario_file_is_listed():
    names = {path.name for path in SCENARIOS}
    assert {"steady_all_to_all.yaml", "link_down.yaml", "port_down.yaml", "lossy_path.yaml",
            "incast_trim.yaml", "flapping_link.yaml", *CLAIM_FILES} <= names


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_scenario_files_load(path):
    full, reduced = load_scenario(path), load_scenario(path, reduced=True)
    assert full.name == reduced.name == path.stem
    assert full.topology.hosts >= reduced.topology.hosts


@pytest.mark.parametrize("change, message", [
    ({"colour": 1}, "unknown top-level"),
    ({"nic": {"w_maxx": 3}}, "unknown key"),
    ({"traffic": {"pattern": "ring"}}, "pattern"),
    ({"faults": [{"kind": "meteor"}]}, "fault kind"),
    ({"faults": [{"kind": "link", "plane": 9}]}, "fault plane"),
    ({"faults": [{"kind": "flap", "down_us": 0, "up_us": 1}]}, "flap"),
    ({"mode": "quantum"}, "mode"),
])
def test_scenario_errors_name_the_problem(change, message):
    data = yaml.safe_load((ROOT / "sim" / "scenarios" / "link_down.yaml").read_text())
    data.update(change)
    with pytest.raises(ValueError, match=message):
        Scenario.from_dict(data)


@pytest.mark.parametrize("path", [p for p in SCENARIOS if p.name not in CLAIM_FILES],
                         ids=lambda p: p.stem)
def test_scenario_reduced_meets_its_claims(path):
    """Every message completes, every byte lands, every frame is accounted (delivered, dropped
    and counted, or still on its way: probes and late feedback may be when the last message
    completes), no work is left at a sender, and the scenario's own claims hold (route-around
    time, trims, retransmissions, recoveries, goodput)."""
    scenario_meets_its_claims(load_scenario(path, reduced=True))


@pytest.mark.full
@pytest.mark.parametrize("path", [p for p in SCENARIOS if p.name not in CLAIM_FILES and
                                  p.name != "fault_soak.yaml"], ids=lambda p: p.stem)
def test_scenario_full_meets_its_claims(path):
    """The same on the full form of every scenario (the 64 x 8 files and the fault soak have
    their own tests)."""
    scenario_meets_its_claims(load_scenario(path))


@pytest.mark.full
@pytest.mark.parametrize("profile", [1, 2])
def test_fault_soak_holds_for_a_millisecond(profile):
    """[verify]'s fault soak on the fabric model (``sim/scenarios/fault_soak.yaml``, its full
    form: 8 hosts x 4 planes): 5% loss both ways on three T0-T1 links, 10% trims on a path, a
    link flapping four times and a host's plane port down and up, under all-to-all traffic that
    lasts over a millisecond of simulated time. Nothing lost or misplaced (every message OK,
    every byte in the receiver's memory, every frame accounted), no QP in the error state, each
    outage left before it ends, and the faults did bite (trims, retransmissions, EVs marked and
    recovered). Measured 2026-12-02: 1,333 us (profile 2) and 1,330 us (profile 1) simulated,
    12,670 and 8,511 retransmissions, 12,037 and 7,995 trims, 1,408 and 1,342 EVs marked and as
    many recovered, worst route-around 58.3 and 58.7 us of the 60 us outages; about 30 s each."""
    scenario = load_scenario(ROOT / "sim" / "scenarios" / "fault_soak.yaml").with_changes(
        nic={"profile": profile})
    result = run_scenario(scenario)
    print(result.summary())
    assert result.last_end_us() >= 1000, f"the traffic ended at {result.last_end_us():.0f} us"
    assert result.counters["qp_errors"] == 0
    failed = [(name, detail) for name, ok, detail in result.checks if not ok]
    assert not failed, failed


def scenario_meets_its_claims(scenario):
    result = run_scenario(scenario)
    print(result.summary())
    assert result.finished
    failed = [(name, detail) for name, ok, detail in result.checks if not ok]
    assert not failed, failed
    assert all(not qp.messages and not qp.backlog for nic in result.run.nics
               for qp in nic.send_qps)


def test_bytes_mode_equals_light_mode_and_memory_matches():
    """The link-down scenario with real frames (built by models.packets, routed by the uN stage,
    trimmed and marked as bytes, parsed at the NICs) runs exactly as with light packets, and
    every receiver's memory equals the sender's buffer."""
    scenario = load_scenario(ROOT / "sim" / "scenarios" / "link_down.yaml", reduced=True)
    scenario = scenario.with_changes(traffic={"messages": 2})
    light = run_scenario(scenario)
    frames = run_scenario(scenario.with_changes(mode="bytes"))
    assert frames.ok and light.ok
    assert frames.counters == light.counters
    assert frames.fabric == light.fabric
    assert [f.last_placed for f in frames.flows] == [f.last_placed for f in light.flows]
    assert frames.memory_ok()
    assert any(name.startswith("every byte placed (memory equal)") for name, _, _ in
               frames.checks)


def test_same_seed_same_run_other_seed_other_run():
    scenario = load_scenario(ROOT / "sim" / "scenarios" / "lossy_path.yaml", reduced=True)
    a, b = run_scenario(scenario), run_scenario(scenario)
    assert a.counters == b.counters and a.goodputs == b.goodputs
    c = run_scenario(scenario.with_changes(seed=99))
    assert c.counters != a.counters


def test_cli_prints_the_summary(capsys):
    code = main([str(ROOT / "sim" / "scenarios" / "incast_trim.yaml"), "--reduced",
                 "--timeline"])
    out = capsys.readouterr().out
    assert code == 0
    assert "topology: 4 hosts x 4 planes" in out and "check PASS: trims" in out
    assert "time (us) | host 0 | total (Gb/s)" in out
    assert "FAIL" not in out


# --- The claims at scale (issues [system] item 6 and [feedback-v2-model]) ---------------------

SPRAY_SEEDS = (7, 8, 9)
LONE_FLOOR = 0.9                # metrics.md: a lone flow at 4 KB PMTU reaches 0.9 of raw line rate


def permutation(reduced, messages, seed=None):
    scenario = load_scenario(ROOT / "sim" / "scenarios" / "permutation.yaml", reduced=reduced)
    scenario = scenario.with_changes(traffic={"messages": messages})
    return scenario if seed is None else scenario.with_changes(seed=seed)


def spraying_claim(scenario, min_fraction=0.95, mean_fraction=0.975):
    """MRC: every flow at >= ``min_fraction`` of its lone-flow goodput and the mean at >=
    ``mean_fraction``; the lone flow meets the lone-flow floor of metrics.md; the ECMP baseline
    in the same fabric and traffic is reported, and is worse than MRC. Completion, every byte
    and every frame (``ok``) are asserted first, for both transports."""
    mrc = run_scenario(scenario)
    assert mrc.ok, mrc.summary()
    lone = lone_goodputs(scenario, mrc.run)
    fractions = [g / l for g, l in zip(mrc.goodputs, lone)]
    ecmp_scenario = scenario.with_changes(nic={"transport": "ecmp"})
    ecmp = run_scenario(ecmp_scenario)
    assert ecmp.ok, ecmp.summary()
    ecmp_lone = lone_goodputs(ecmp_scenario, ecmp.run)
    ecmp_fractions = [g / l for g, l in zip(ecmp.goodputs, ecmp_lone)]
    ecmp_loss = 1 - ecmp.aggregate_gbps / sum(ecmp_lone)
    mean = sum(fractions) / len(fractions)
    raw = mrc.host_line_gbps
    print(f"{scenario.topology.describe()}; {len(mrc.flows)} flows of "
          f"{scenario.traffic.messages} x {scenario.traffic.message_bytes} B, seed "
          f"{scenario.seed}")
    print(f"MRC: goodput / lone-flow goodput min {min(fractions):.4f} mean {mean:.4f} (lone "
          f"{min(lone):.1f}-{max(lone):.1f} Gb/s, {max(lone) / raw:.3f} of raw line rate); "
          f"SACKs per data frame {mrc.sacks_per_data():.3f}, trims {mrc.trims}")
    print(f"ECMP: goodput / lone-flow goodput min {min(ecmp_fractions):.4f}, loss from hash "
          f"collisions {ecmp_loss:.2%} of the lone-flow aggregate")
    if scenario.nic.pmtu == 4096:
        assert min(lone) >= LONE_FLOOR * raw, (min(lone), raw)
    assert min(fractions) >= min_fraction, sorted(fractions)[:5]
    assert mean >= mean_fraction, mean
    assert ecmp_loss > 0 and min(ecmp_fractions) < min(fractions)
    return fractions, ecmp_loss


def failure_claim(scenario, slack, ratio):
    """One T0-T1 link of one plane fails: the loss it causes (metrics.md) is at most its
    capacity share + ``slack``, and at most ``ratio`` x the share (a bound near the measured
    magnitude, test audit #5); the run's own checks (route-around within one timeout plus 5 us,
    EVs marked, completion) hold."""
    loss, with_fault, without = failure_loss(scenario)
    share = scenario.topology.capacity_share()
    print(f"{scenario.topology.describe()}, seed {scenario.seed}: loss caused by the failure "
          f"{loss:.2%}, capacity share {share:.2%} (loss / share {loss / share:.2f}); route "
          f"around {with_fault.route_around[0][1][0]:.2f} us")
    assert with_fault.ok, [c for c in with_fault.checks if not c[1]]
    assert without.ok
    assert loss <= share + slack, (loss, share)
    assert loss <= ratio * share, (loss, share)
    return loss, share


def test_spraying_at_line_rate_reduced():
    spraying_claim(permutation(reduced=True, messages=8).with_changes(
        topology={"hosts": 8, "t0s": 2}))


def test_link_failure_costs_its_capacity_share_reduced():
    scenario = load_scenario(ROOT / "sim" / "scenarios" / "permutation_link_down.yaml",
                             reduced=True)
    # measured 0.78% against a share of 3.12%
    failure_claim(scenario.with_changes(traffic={"messages": 6}), slack=0.0, ratio=0.5)


LINK_DOWN = ROOT / "sim" / "scenarios" / "link_down.yaml"


@pytest.mark.parametrize("form", ["reduced", "rtl"])
def test_link_down_costs_at_most_its_share(form):
    """link_down (issue [feedback-v2-model]): the loss the cut causes, against the same run
    without it, is at most its capacity share + 1 point; its own checks hold (no 2 us bin
    after the cut below half the pre-fault level, route-around, completion)."""
    scenario = load_scenario(LINK_DOWN, reduced=form == "reduced", rtl=form == "rtl")
    loss, with_fault, _ = failure_loss(scenario)
    share = scenario.topology.capacity_share()
    print(f"link_down {form}: loss {loss:.2%}, share {share:.2%}, lowest bin "
          f"{with_fault.lowest_bin_after_fault()}")
    assert with_fault.ok, [c for c in with_fault.checks if not c[1]]
    assert loss <= share + 0.01
    assert loss <= 0.5 * share                  # measured 0.29 (reduced), 0.29 (rtl) of it


@pytest.mark.full
def test_link_down_full_costs_at_most_its_share():
    scenario = load_scenario(LINK_DOWN)
    loss, with_fault, _ = failure_loss(scenario)
    share = scenario.topology.capacity_share()
    print(f"link_down full: loss {loss:.2%}, share {share:.2%}")
    assert with_fault.ok and loss <= share + 0.01 and loss <= 0.5 * share


def test_a_fault_that_meets_no_data_fails_the_route_around_check():
    """Test audit #2: an outage no data packet met proves nothing and fails the check, unless
    the scenario opts out (``idle_faults_ok``)."""
    scenario = load_scenario(LINK_DOWN, reduced=True)
    late = scenario.with_changes(faults=(replace(scenario.faults[0], at_us=5000),),
                                 duration_us=6000)
    result = run_scenario(late)
    check = next(c for c in result.checks if c[0].startswith("route around"))
    assert not check[1] and "met no data packet" in check[2]
    allowed = run_scenario(late.with_changes(checks={"idle_faults_ok": True,
                                                     "min_retransmitted": 0,
                                                     "min_ev_marked": 0,
                                                     "min_bin_fraction": None}))
    assert allowed.ok, allowed.checks


@pytest.mark.full
@pytest.mark.parametrize("seed", SPRAY_SEEDS)
def test_spraying_at_line_rate_64x8(seed):
    """Issue [feedback-v2-model]: at 64 x 8 every flow at >= 0.95 of its lone-flow goodput and
    the mean at >= 0.975, in each of three seeds."""
    spraying_claim(permutation(reduced=False, messages=16, seed=seed))


@pytest.mark.full
def test_link_failure_costs_its_capacity_share_64x8():
    """One T0-T1 link cut at 64 x 8: loss <= its share + 0.5 point, routed around within one
    timeout plus 5 us (the scenario's check)."""
    scenario = load_scenario(ROOT / "sim" / "scenarios" / "permutation_link_down.yaml")
    failure_claim(scenario.with_changes(traffic={"messages": 16}), slack=0.005, ratio=2.0)


# --- Congestion control (issue [cc], docs/protocol.md 5.1, docs/scenarios.md 8) ---------------

INCAST = ROOT / "sim" / "scenarios" / "incast_trim.yaml"
NSCC_ON = {"nscc": True}
CC_TARGETS = {"max_trim_fraction": 0.02, "min_fairness": 0.98, "min_bottleneck_goodput": 0.9}


def cc_figures(result):
    return (f"trimmed {result.trim_fraction():.2%} of data packets, Jain {result.fairness():.3f}, "
            f"bottleneck {result.bottleneck_goodput():.1%} of line rate, trims {result.trims}, "
            f"goodputs {[round(g) for g in result.goodputs]} Gb/s")


def test_nscc_incast_trims_far_less_reduced():
    """incast_trim (reduced) with NSCC on every sender: every message still completes and every
    byte lands, the trimmed share after 3 RTTs falls from 71% to 6.5%, and the receiver's
    downlinks carry more goodput (0.955 of line rate against 0.835)."""
    off = run_scenario(load_scenario(INCAST, reduced=True))
    on = run_scenario(load_scenario(INCAST, reduced=True).with_changes(
        nic=NSCC_ON, checks={"min_trims": 0, "min_retransmitted": 0}))
    print(f"NSCC off: {cc_figures(off)}\nNSCC on: {cc_figures(on)}")
    assert off.ok and on.ok, [c for c in on.checks if not c[1]]
    assert off.trim_fraction() >= 0.6 and on.trim_fraction() <= 0.12      # 0.714, 0.065
    assert on.bottleneck_goodput() >= 0.9 > off.bottleneck_goodput()       # 0.955, 0.835
    assert on.counters["data_sent"] < off.counters["data_sent"] / 2


def test_nscc_incast_meets_the_cc_targets():
    """Issue [cc]: after 3 RTTs trimmed packets <= 2% of data packets, Jain's index of the
    incast flows >= 0.98, the bottleneck >= 0.9 of its line rate (the full form). Reported:
    an expected failure while a target is not met (docs/scenarios.md 8)."""
    on = run_scenario(load_scenario(INCAST).with_changes(
        nic=NSCC_ON, checks=dict(CC_TARGETS, min_trims=0, min_retransmitted=0)))
    print(f"incast_trim with NSCC: {cc_figures(on)}")
    missed = [(name, detail) for name, ok, detail in on.checks if not ok]
    assert on.finished and all(f.done and not f.errors for f in on.flows)
    if missed:
        pytest.xfail(f"[cc] targets not met: {missed}")


def nscc_spraying(scenario):
    """MRC with NSCC: each flow's goodput / its lone-flow goodput (lone also with NSCC)."""
    scenario = scenario.with_changes(nic=NSCC_ON)
    mrc = run_scenario(scenario)
    assert mrc.ok, mrc.summary()
    lone = lone_goodputs(scenario, mrc.run)
    fractions = [g / l for g, l in zip(mrc.goodputs, lone)]
    mean = sum(fractions) / len(fractions)
    print(f"{scenario.topology.describe()}, seed {scenario.seed}, NSCC on: goodput / lone-flow "
          f"goodput min {min(fractions):.4f} mean {mean:.4f} (lone {min(lone):.1f}-"
          f"{max(lone):.1f} Gb/s), trims {mrc.trims}")
    if scenario.nic.pmtu == 4096:
        assert min(lone) >= LONE_FLOOR * mrc.host_line_gbps
    return min(fractions), mean


def test_nscc_spraying_reduced():
    """NSCC on, 8 hosts x 4 planes: every flow >= 0.95 of its lone-flow goodput, the mean >=
    0.975 (measured 0.9935 and 0.9950, as without NSCC)."""
    low, mean = nscc_spraying(permutation(reduced=True, messages=8).with_changes(
        topology={"hosts": 8, "t0s": 2}))
    assert low >= 0.95 and mean >= 0.975


@pytest.mark.full
@pytest.mark.parametrize("seed", SPRAY_SEEDS)
def test_nscc_spraying_64x8(seed):
    """Issue [cc]: at 64 x 8 with NSCC on, every flow >= 0.96 and the mean >= 0.98 of its
    lone-flow goodput. Asserted: completion and the floors measured (docs/scenarios.md 8);
    an expected failure while the issue's target is not met."""
    low, mean = nscc_spraying(permutation(reduced=False, messages=16, seed=seed))
    assert low >= 0.8 and mean >= 0.9
    if low < 0.96 or mean < 0.98:
        pytest.xfail(f"[cc] target not met: min {low:.4f} (>= 0.96), mean {mean:.4f} (>= 0.98)")


MULTI_TENANT = ROOT / "sim" / "scenarios" / "multi_tenant.yaml"


def victim_runs(form):
    scenario = load_scenario(MULTI_TENANT, reduced=form == "reduced", rtl=form == "rtl")
    scenario = scenario.with_changes(checks={"min_victim_fraction": None})
    runs = [run_scenario(scenario.with_changes(nic={"nscc": nscc})) for nscc in (False, True)]
    for nscc, run in zip(("off", "on"), runs):
        fraction, goodput, alone = run.victim_fraction()
        print(f"multi_tenant {form}, NSCC {nscc}: victim {fraction:.3f} of its goodput alone "
              f"({goodput:.1f} of {alone:.1f} Gb/s), trims {run.trims}, ECN marks "
              f"{run.ecn_marks}")
        assert run.ok, [c for c in run.checks if not c[1]]
    return runs


@pytest.mark.parametrize("form", ["reduced", "rtl"])
def test_multi_tenant_victim_keeps_its_goodput(form):
    """Issue [cc] item 3: beside a 7 -> 1 incast across the T1s (rtl form: 2 -> 1), the victim
    flow keeps >= 0.9 of its goodput alone with NSCC on (measured 0.958 reduced, 0.911 rtl form;
    NSCC off 0.932 and 0.885), and NSCC trims far less."""
    off, on = victim_runs(form)
    assert on.victim_fraction()[0] >= 0.9
    assert on.victim_fraction()[0] > off.victim_fraction()[0]
    assert on.trims < off.trims / 2


@pytest.mark.full
def test_multi_tenant_victim_keeps_its_goodput_full():
    """The full form, 16 hosts x 4 planes (measured: 0.978 with NSCC, 0.964 without)."""
    off, on = victim_runs("full")
    assert on.victim_fraction()[0] >= 0.9 and off.victim_fraction()[0] >= 0.9


# --- The cross-check against htsim on its own topology (issue [cc] item 4) ------------------------

HTSIM = ROOT / "sim" / "scenarios" / "htsim_permutation.yaml"
# htsim's UEC model (NSCC, 64 EVs, 4150 B MTU), mean goodput / isolated flow, 5 seeds.
HTSIM_MEANS = {"oblivious": 0.903, "ecmp": 0.640}
HTSIM_SEEDS = (1, 2, 3, 4, 5)


def htsim_run(reduced, seed, transport, style):
    """One transport with NSCC on (``style``: htsim's own parameters, or the project's) on
    htsim's topology: ``(min, mean)`` of goodput / lone-flow goodput, lone with the same."""
    scenario = load_scenario(HTSIM, reduced=reduced).with_changes(
        seed=seed, nic={"transport": transport, "nscc": True, "nscc_style": style})
    result = run_scenario(scenario)
    assert result.ok, [c for c in result.checks if not c[1]]
    lone = lone_goodputs(scenario, result.run)
    fractions = [g / l for g, l in zip(result.goodputs, lone)]
    low, mean = min(fractions), sum(fractions) / len(fractions)
    print(f"htsim topology{' (reduced)' if reduced else ''}, seed {seed}, {transport}, NSCC "
          f"({style}): min {low:.3f} mean {mean:.3f}, lone {min(lone):.1f}-{max(lone):.1f} "
          f"Gb/s, trims {result.trims}, ECN marks {result.ecn_marks}")
    return low, mean


def test_htsim_topology_reduced():
    """32 hosts of htsim's topology, 2 MB flows: every transport completes; ECMP loses to hash
    collisions, oblivious spraying and MRC do not (measured, seed 1: ECMP mean 0.81, oblivious
    0.98, MRC 0.99)."""
    ecmp = htsim_run(True, 1, "ecmp", "htsim")
    oblivious = htsim_run(True, 1, "oblivious", "htsim")
    mrc = htsim_run(True, 1, "mrc", "project")
    assert ecmp[1] < 0.9 < oblivious[1] <= mrc[1] + 0.01
    assert mrc[0] >= 0.95


@pytest.mark.full
def test_htsim_topology_cross_check():
    """Issue [cc] item 4: htsim's topology, 128 hosts, 10 MB flows, 5 seeds. MRC with NSCC: mean
    >= 0.96 and every flow >= 0.93 in each seed (asserted). The model's oblivious spraying and
    ECMP (NSCC with htsim's parameters), their means over the 5 seeds within 4 points of htsim's:
    an expected failure while not (docs/scenarios.md 8). About 12 minutes."""
    means = {transport: [] for transport in HTSIM_MEANS}
    for seed in HTSIM_SEEDS:
        low, mean = htsim_run(False, seed, "mrc", "project")
        assert mean >= 0.96 and low >= 0.93, (seed, low, mean)
        for transport in HTSIM_MEANS:
            means[transport].append(htsim_run(False, seed, transport, "htsim")[1])
    missed = []
    for transport, reference in HTSIM_MEANS.items():
        got = sum(means[transport]) / len(means[transport])
        print(f"{transport}: mean over {len(HTSIM_SEEDS)} seeds {got:.3f}, htsim {reference:.3f}")
        if abs(got - reference) > 0.04:
            missed.append(f"{transport} mean {got:.3f} against htsim's {reference:.3f}")
    if missed:
        pytest.xfail("; ".join(missed))

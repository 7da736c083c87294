# SPDX-License-Identifier: BSD-2-Clause
"""The egress port model of the trimming switch: the ECN vectors, trimming, admission and drops,
a 3 -> 1 incast, the statistics of ECN marking, the dequeue order and port down."""

import random

import pytest

from models.layouts import (BTH, BTH_OFFSET, ETH, ETHERTYPE_IPV6, EXT_OFFSET, INNER_OFFSET, IPV6,
                            METH, NEXT_HEADER_IPV6, OUTER_OFFSET, RETH, UDP, UDP_OFFSET, Dscp, Ecn,
                            NackReason, Opcode)
from models.packets import build_frame
from models.records import ext_to_int
from models.rx_tracker import Arrival, RxTracker
from models import conformance as vectors
from models.switch_queue import (EgressPort, PortConfig, Queue, Verdict, ecn_mark, ecn_threshold,
                                 frame_bytes, lfsr_step)

ECN_VECTOR = vectors.load("ecn.json")
IPG = 20            # preamble and inter-packet gap, in byte times, for the incast timing


def raw_frame(length, dscp=Dscp.TRIMMABLE, ecn=Ecn.ECT0, fill=0):
    """A frame of ``length`` bytes: Ethernet and outer IPv6 headers (the only ones the queue reads)
    and ``fill`` bytes."""
    eth = ETH.pack(dst=0x0200_0000_0001, src=0x0200_0000_0002, ethertype=ETHERTYPE_IPV6)
    outer = IPV6.pack(version=6, dscp=dscp, ecn=ecn, payload_length=length - INNER_OFFSET,
                      next_header=NEXT_HEADER_IPV6, hop_limit=64, src=1, dst=2)
    return eth + outer + bytes([fill]) * (length - INNER_OFFSET)


def data_frame(payload_length, psn=0, qpn=1, dscp=Dscp.TRIMMABLE, ecn=Ecn.ECT0):
    """A real WRITE_MIDDLE frame of models.packets (payload bytes count up from ``psn``)."""
    ext = METH.pack(rqmsn=0, msn=qpn) + RETH.pack(va=0x1000 * psn, rkey=0xCAFE,
                                                  dma_length=1 << 20)
    payload = bytes((psn + i) & 0xFF for i in range(payload_length))
    hdr = {"eth_dst": 0x0200_0000_0001, "eth_src": 0x0200_0000_0002, "dscp": dscp, "ecn": ecn,
           "flow_label": 0x1234, "hop_limit": 63, "outer_src": 0xFD00 << 112,
           "outer_dst": 0xFD00_0200 << 96, "inner_src": 5, "inner_dst": 9, "udp_sport": 0xABCD,
           "opcode": Opcode.WRITE_MIDDLE, "dest_qpn": qpn, "psn": psn, "ext": ext_to_int(ext),
           "length": payload_length}
    return build_frame(hdr, payload)


def parse(frame):
    """Every header of a data frame, through the RETH."""
    return {"eth": ETH.unpack(frame), "outer": IPV6.unpack(frame[OUTER_OFFSET:]),
            "inner": IPV6.unpack(frame[INNER_OFFSET:]), "udp": UDP.unpack(frame[UDP_OFFSET:]),
            "bth": BTH.unpack(frame[BTH_OFFSET:]), "meth": METH.unpack(frame[EXT_OFFSET:]),
            "reth": RETH.unpack(frame[EXT_OFFSET + METH.size:])}


def fill_data(port, target, dscp=Dscp.NO_TRIM):
    """Enqueue frames of at most 4000 B until the data queue holds exactly ``target`` bytes."""
    while port.occupancy[Queue.DATA] < target:
        n = min(4000, target - port.occupancy[Queue.DATA])
        if 0 < target - port.occupancy[Queue.DATA] - n < INNER_OFFSET:
            n -= INNER_OFFSET
        assert port.enqueue(raw_frame(n, dscp)).verdict == Verdict.DATA


def lfsr_unstep(state):
    """The LFSR state one step before ``state`` (the taps set bit 15 exactly after a tap step)."""
    return ((state ^ 0xB400) << 1 | 1) if state >> 15 else state << 1


# --- ECN -----------------------------------------------------------------------------------------

def test_ecn_vector_rule():
    """vectors/ecn.json with the pure functions: the LFSR step and the marking rule."""
    v = ECN_VECTOR
    state = v["lfsr_seed"]
    for f in v["frames"]:
        assert f["lfsr_before"] == state
        state = lfsr_step(state)
        assert f["lfsr_after"] == state
        assert ecn_mark(f["q"], state, v["kmin"], v["kmax"]) == f["mark"], f


def test_ecn_vector_through_the_port():
    """vectors/ecn.json through enqueue: frame i is q[i+1] bytes long, and everything before it is
    dequeued before frame i+1 arrives, so every frame sees the vector's q. A first frame of q[0]
    bytes makes the initial q; the seed is one step before the vector's. A q under 54 bytes cannot
    be made of whole frames: such a frame arrives on an empty queue instead, in the same region
    (q <= Kmin, never marked), and still steps the LFSR."""
    v = ECN_VECTOR
    frames = v["frames"]
    port = EgressPort(kmin=v["kmin"], kmax=v["kmax"], lfsr_seed=lfsr_unstep(v["lfsr_seed"]),
                      data_limit=1 << 16)
    reachable = [f["q"] if f["q"] >= INNER_OFFSET else 0 for f in frames]
    assert all(q < v["kmin"] for q, f in zip(reachable, frames) if q != f["q"])
    port.enqueue(raw_frame(reachable[0]))
    for f, q, size in zip(frames, reachable, reachable[1:] + [0]):
        while port.occupancy[Queue.DATA] > q:
            port.dequeue()
        assert port.lfsr == f["lfsr_before"]
        adm = port.enqueue(raw_frame(size or 1000))
        assert (adm.verdict, adm.q_data, adm.lfsr, adm.mark) == \
            (Verdict.DATA, q, f["lfsr_after"], f["mark"])
        assert IPV6.unpack(adm.frame[OUTER_OFFSET:])["ecn"] == (Ecn.CE if f["mark"] else Ecn.ECT0)
    assert port.counters["ecn_marked"] == sum(f["mark"] for f in frames)


def test_ecn_marked_fraction_follows_the_linear_rule():
    """10,000 data frames on a queue whose occupancy wanders at random over 0..28,000 bytes (a
    random target; frames of 64..4199 B are dequeued down to it or enqueued up to it).
    Exact: q <= Kmin never marks, q >= Kmax always marks, each decision is the rule on (q, r).
    Statistical: in each of the 8 bands of 2048 bytes between Kmin and Kmax (each must hold at
    least 400 frames; this seed gives 463 to 1024), the marked fraction is within 3.5 binomial
    standard deviations at p = 0.5, i.e. 1.75 / sqrt(count) (0.055 to 0.081), of the mean of
    threshold / 65536 over the band's frames; over all frames between Kmin and Kmax, within
    1.75 / sqrt(count) too (0.021). The seed is fixed, so the test is deterministic; the bound says
    how far the LFSR may stray from the linear rule."""
    min_count = 400
    rng = random.Random(20260521)
    port = EgressPort()
    cfg = port.config
    bands = {}
    state = cfg.lfsr_seed
    frames = 0
    while frames < 10_000:
        target = rng.randrange(28_000)
        while port.occupancy[Queue.DATA] > target:
            port.dequeue()
        while port.occupancy[Queue.DATA] < target and frames < 10_000:
            adm = port.enqueue(raw_frame(rng.randrange(64, 4200)))
            frames += 1
            state = lfsr_step(state)
            assert adm.verdict == Verdict.DATA and adm.lfsr == state
            assert adm.mark == ecn_mark(adm.q_data, adm.lfsr, cfg.kmin, cfg.kmax)
            if adm.q_data <= cfg.kmin:
                assert not adm.mark
            elif adm.q_data >= cfg.kmax:
                assert adm.mark
            else:
                band = bands.setdefault((adm.q_data - cfg.kmin) // 2048, [0, 0, 0.0])
                band[0] += 1
                band[1] += adm.mark
                band[2] += ecn_threshold(adm.q_data, cfg.kmin, cfg.kmax) / 65536
    assert sorted(bands) == list(range(8))
    totals = [sum(column) for column in zip(*bands.values())]
    for band, (count, marked, expected) in sorted(bands.items()) + [("all", totals)]:
        assert count >= min_count, band
        assert abs(marked - expected) / count < 1.75 / count ** 0.5, (band, count, marked, expected)


def test_not_ect_ce_and_host_facing():
    """Not-ECT frames are never marked (the LFSR still steps); CE frames stay CE and count;
    host-facing ports never mark nor step."""
    port = EgressPort()
    fill_data(port, port.config.kmax)
    lfsr, marked = port.lfsr, port.counters["ecn_marked"]
    adm = port.enqueue(raw_frame(200, ecn=Ecn.NOT_ECT))
    assert adm.mark and adm.lfsr == lfsr_step(lfsr) == port.lfsr
    assert IPV6.unpack(adm.frame[OUTER_OFFSET:])["ecn"] == Ecn.NOT_ECT
    assert port.counters["ecn_marked"] == marked
    adm = port.enqueue(raw_frame(200, ecn=Ecn.CE))
    assert adm.mark and adm.frame == raw_frame(200, ecn=Ecn.CE)
    assert port.counters["ecn_marked"] == marked + 1

    host = EgressPort(fabric_facing=False)
    fill_data(host, host.config.kmax)
    adm = host.enqueue(raw_frame(200))
    assert (adm.verdict, adm.lfsr, adm.mark) == (Verdict.DATA, None, False)
    assert host.lfsr == host.config.lfsr_seed and host.counters["ecn_marked"] == 0
    assert IPV6.unpack(adm.frame[OUTER_OFFSET:])["ecn"] == Ecn.ECT0


# --- Trimming and admission ----------------------------------------------------------------------

@pytest.mark.parametrize("fabric_facing, dscp", [(True, Dscp.TRIMMED),
                                                 (False, Dscp.TRIMMED_LASTHOP)])
@pytest.mark.parametrize("payload", [0, 100, 1000, 4096])
def test_trimmed_frames_parse(fabric_facing, dscp, payload):
    """A trimmable frame that does not fit: its first 256 bytes (or all of it) with the three
    lengths rewritten and the outer DSCP remarked, every other header byte kept; the receive
    tracker NACKs it by that DSCP."""
    port = EgressPort(fabric_facing=fabric_facing)
    fill_data(port, port.config.data_limit - 100)
    frame = data_frame(payload, psn=77, dscp=Dscp.TRIMMABLE_RETX)
    lfsr = port.lfsr
    adm = port.enqueue(frame)
    kept = min(len(frame), 256)
    assert (adm.verdict, adm.queue, adm.length) == (Verdict.TRIMMED, Queue.CONTROL, len(frame))
    assert (adm.q_data, adm.q_control) == (port.config.data_limit - 100, 0)
    assert len(adm.frame) == kept and port.occupancy[Queue.CONTROL] == kept
    assert port.lfsr == lfsr and port.counters["trimmed"] == 1
    got, want = parse(adm.frame), parse(frame)
    assert got["outer"] == dict(want["outer"], payload_length=kept - 54, dscp=dscp)
    assert got["inner"] == dict(want["inner"], payload_length=kept - 94)
    assert got["udp"] == dict(want["udp"], length=kept - 94)
    for name in ("eth", "bth", "meth", "reth"):
        assert got[name] == want[name]
    assert adm.frame[134:] == frame[134:kept]
    assert frame_bytes(adm.frame) == kept
    nack = RxTracker(76).arrive(Arrival(psn=got["bth"]["psn"], ev=1, dscp=got["outer"]["dscp"]))
    assert nack.nack.reason == (NackReason.TRIMMED if fabric_facing else
                                NackReason.TRIMMED_LASTHOP)


def test_trim_to_headers():
    """TRIM_SIZE 134 keeps exactly the headers through RETH."""
    port = EgressPort(trim_size=134, data_limit=1000)
    fill_data(port, 1000)
    adm = port.enqueue(data_frame(300))
    got = parse(adm.frame)
    assert len(adm.frame) == 134 and got["outer"]["payload_length"] == 80
    assert got["inner"]["payload_length"] == got["udp"]["length"] == 40


def test_drops_when_full():
    port = EgressPort(data_limit=2000, control_limit=500)
    fill_data(port, 1900)
    q = port.occupancy[Queue.DATA]
    for frame, verdict, queue in [
            (raw_frame(100, Dscp.NO_TRIM), Verdict.DATA, Queue.DATA),      # exactly fits
            (raw_frame(101, Dscp.NO_TRIM), Verdict.DROPPED_FULL, Queue.DATA),
            (raw_frame(133, Dscp.TRIMMABLE), Verdict.DROPPED_FULL, Queue.DATA),   # < 134 B
            (data_frame(1000), Verdict.TRIMMED, Queue.CONTROL),                  # 256 B
            (raw_frame(244, Dscp.CONTROL), Verdict.CONTROL, Queue.CONTROL),      # 500 B now
            (raw_frame(60, Dscp.CONTROL), Verdict.DROPPED_FULL, Queue.CONTROL),
            (data_frame(1000), Verdict.DROPPED_FULL, Queue.CONTROL)]:            # trimmed, no room
        adm = port.enqueue(frame)
        assert (adm.verdict, adm.queue) == (verdict, queue)
        assert (adm.frame is None) == (verdict == Verdict.DROPPED_FULL)
    assert port.occupancy == {Queue.DATA: q + 100, Queue.CONTROL: 500}
    assert port.counters["dropped_full"] == 4 and port.counters["trimmed"] == 1


@pytest.mark.parametrize("frame", [raw_frame(100)[:-1], raw_frame(100) + b"\0", b"\0" * 53])
def test_malformed_dropped(frame):
    port = EgressPort()
    assert port.enqueue(frame).verdict == Verdict.MALFORMED
    assert port.counters["dropped_malformed"] == 1 and port.dequeue() is None


@pytest.mark.parametrize("params, word", [
    ({"trim_size": 133}, "trim_size"), ({"data_limit": 0}, "data_limit"),
    ({"control_limit": 200}, "trim_size"), ({"kmin": 10, "kmax": 10}, "kmin"),
    ({"kmin": -1}, "kmin"), ({"lfsr_seed": 0}, "lfsr_seed"), ({"lfsr_seed": 1 << 16}, "lfsr_seed"),
    ({"control_burst": 0}, "control_burst"), ({"data_limit": 4096.0}, "data_limit")])
def test_bad_parameters_raise(params, word):
    with pytest.raises(ValueError, match=word):
        EgressPort(**params)


def test_default_limits():
    cfg = PortConfig()
    assert (cfg.data_limit, cfg.control_limit, cfg.trim_size, cfg.kmin, cfg.kmax) == \
        (32768, 65536, 256, 8192, 24576)
    with pytest.raises(ValueError, match="either"):
        EgressPort(cfg, trim_size=300)


# --- Incast --------------------------------------------------------------------------------------

def run_incast(port, rng, frames_per_sender):
    """Three senders at line rate into one port draining at line rate, in byte times (a frame is
    admitted when its last byte has arrived). Returns the admissions in order and the departures."""
    arrivals = []
    for sender in range(3):
        t = rng.randrange(100)
        for psn in range(frames_per_sender):
            frame = data_frame(rng.choice([4096, 4096, 2048, 1000, 0]), psn=psn, qpn=sender)
            t += len(frame) + IPG
            arrivals.append((t, sender, psn, frame))
    arrivals.sort(key=lambda a: a[0])
    admissions, departures = [], []
    free_at = 0

    def drain(until):
        nonlocal free_at
        while free_at <= until:
            dep = port.dequeue()
            if dep is None:
                free_at = until
                return
            departures.append(dep)
            free_at += len(dep.frame) + IPG

    for t, sender, psn, frame in arrivals:
        drain(t)
        admissions.append((sender, psn, frame, port.enqueue(frame)))
    drain(float("inf"))
    return admissions, departures


@pytest.mark.parametrize("control_limit", [None, 1024])
def test_incast_3_to_1(control_limit):
    """Trimming starts only when the data queue is full; while the control queue has room nothing
    is lost; every frame leaves once, whole (possibly CE-marked) or trimmed; data keeps flowing."""
    port = EgressPort(control_limit=control_limit)
    cfg = port.config
    admissions, departures = run_incast(port, random.Random(7), 150)
    verdicts = [adm.verdict for *_, adm in admissions]
    first_trim = verdicts.index(Verdict.TRIMMED)
    assert set(verdicts[:first_trim]) == {Verdict.DATA}
    for sender, psn, frame, adm in admissions:
        if adm.verdict == Verdict.TRIMMED:
            assert adm.q_data + len(frame) > cfg.data_limit        # the data queue was full for it
        if adm.verdict == Verdict.DROPPED_FULL:
            assert adm.queue == Queue.CONTROL
            assert adm.q_control + min(len(frame), cfg.trim_size) > cfg.control_limit
    assert set(verdicts) <= {Verdict.DATA, Verdict.TRIMMED, Verdict.DROPPED_FULL}
    if control_limit is None:
        assert Verdict.DROPPED_FULL not in verdicts
    else:
        assert Verdict.DROPPED_FULL in verdicts
    assert port.counters["trimmed"] == verdicts.count(Verdict.TRIMMED) > 100
    assert port.counters["dropped_full"] == verdicts.count(Verdict.DROPPED_FULL)
    assert port.counters["forwarded"] == len(departures) == len(admissions) - \
        port.counters["dropped_full"]
    # Every admitted frame leaves exactly once, as it was admitted.
    sent = {(s, p): adm.frame for s, p, _, adm in admissions if adm.frame is not None}
    out = {}
    for dep in departures:
        bth = BTH.unpack(dep.frame[BTH_OFFSET:])
        key = (bth["dest_qpn"], bth["psn"])
        assert key not in out
        out[key] = dep.frame
    assert out == sent
    # Data frames still flow once trimming has started (the control queue does not starve them).
    queues = [d.queue for d in departures]
    assert queues[queues.index(Queue.CONTROL):].count(Queue.DATA) > 20
    assert port.occupancy == {Queue.DATA: 0, Queue.CONTROL: 0}


# --- Dequeue order and port down -----------------------------------------------------------------

def test_anti_starvation_order():
    port = EgressPort()
    for _ in range(40):
        port.enqueue(raw_frame(100, Dscp.CONTROL))
    for _ in range(5):
        port.enqueue(raw_frame(200, Dscp.NO_TRIM))
    order = "".join("C" if port.dequeue().queue == Queue.CONTROL else "D" for _ in range(45))
    assert order == "C" * 16 + "D" + "C" * 16 + "D" + "C" * 8 + "DDD"
    assert port.dequeue() is None
    # Control frames served while no data waits do not count toward the 16.
    for _ in range(10):
        port.enqueue(raw_frame(100, Dscp.CONTROL))
    for _ in range(10):
        assert port.dequeue().queue == Queue.CONTROL
    for _ in range(20):
        port.enqueue(raw_frame(100, Dscp.CONTROL))
    port.enqueue(raw_frame(200, Dscp.NO_TRIM))
    order = "".join("C" if port.dequeue().queue == Queue.CONTROL else "D" for _ in range(21))
    assert order == "C" * 16 + "D" + "C" * 4


def test_port_down_flushes_and_drops():
    port = EgressPort()
    for _ in range(3):
        port.enqueue(raw_frame(300, Dscp.NO_TRIM))
        port.enqueue(raw_frame(150, Dscp.CONTROL))
    assert port.set_up(False) == 6
    assert port.occupancy == {Queue.DATA: 0, Queue.CONTROL: 0} and port.dequeue() is None
    for dscp in (Dscp.TRIMMABLE, Dscp.CONTROL):
        adm = port.enqueue(raw_frame(300, dscp))
        assert (adm.verdict, adm.frame) == (Verdict.DROPPED_PORT_DOWN, None)
    assert port.counters["dropped_port_down"] == 8
    assert port.set_up(True) == 0
    assert port.enqueue(raw_frame(300)).verdict == Verdict.DATA
    assert port.dequeue().queue == Queue.DATA and port.counters["forwarded"] == 1

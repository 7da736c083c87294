# SPDX-License-Identifier: BSD-2-Clause
"""models.switch: ingress checks, the arbiter order, the uN stage per ingress, egress ports behind
it (trimming by port role, ECN vectors through the switch, port down), and conservation of frames
under any order of grants, admissions and dequeues."""

import random

import pytest
from hypothesis import given, settings, strategies as st

from models.layouts import (ETH, ETHERTYPE_IPV6, INNER_OFFSET, IPV6, METH, NEXT_HEADER_IPV6,
                            RETH, Dscp, Ecn, Opcode)
from models.packets import build_frame, parse_frame
from models.records import ext_to_int
from models.switch import (EGRESS_COUNTERS, INGRESS_COUNTERS, MALFORMED, OVERFLOW, STORED,
                           SwitchConfig, SwitchModel, check_frame, port_width)
from models.switch_queue import Queue, Verdict
from models import conformance as vectors
from models.un_stage import DST_BYTE, HOP_LIMIT_BYTE
from models.usid import DEFAULT_BLOCK, Role, carrier, encode

OWN = encode(1, Role.T0, 3)
HOSTS = [encode(1, Role.HOST, i) for i in range(8)]     # HOST(i) is routed to port i


def configured(ports=4, **params):
    """A switch whose own uSID is OWN and whose table sends HOST(i) to port i."""
    model = SwitchModel(ports=ports, **params)
    model.un.set_own(usid=OWN)
    for port in range(ports):
        model.un.set_entry(port, DEFAULT_BLOCK << 16 | HOSTS[port], port)
    return model


def frame_to(port, payload=100, dscp=Dscp.TRIMMABLE, ecn=Ecn.ECT0, psn=0, hop_limit=64,
             qpn=1):
    """A WRITE_MIDDLE frame whose carrier is OWN | HOST(port)."""
    ext = METH.pack(rqmsn=0, msn=qpn) + RETH.pack(va=0x1000 * psn, rkey=0xCAFE, dma_length=1 << 20)
    hdr = {"eth_dst": 0x0200_0000_0001, "eth_src": 0x0200_0000_0002, "dscp": dscp, "ecn": ecn,
           "flow_label": 0x1234, "hop_limit": hop_limit, "outer_src": 0xFD00 << 112,
           "outer_dst": carrier([OWN, HOSTS[port]]), "inner_src": 5, "inner_dst": 9,
           "udp_sport": 0xABCD, "opcode": Opcode.WRITE_MIDDLE, "dest_qpn": qpn, "psn": psn,
           "ext": ext_to_int(ext), "length": payload}
    return build_frame(hdr, bytes((psn + i) & 0xFF for i in range(payload)))


def raw_frame(length, port=0, dscp=Dscp.NO_TRIM, ecn=Ecn.ECT0):
    """``length`` bytes: Ethernet and an outer IPv6 header routed to ``port``, then zeros."""
    eth = ETH.pack(dst=1, src=2, ethertype=ETHERTYPE_IPV6)
    outer = IPV6.pack(version=6, dscp=dscp, ecn=ecn, payload_length=length - INNER_OFFSET,
                      next_header=NEXT_HEADER_IPV6, hop_limit=64, src=1,
                      dst=carrier([OWN, HOSTS[port]]))
    return eth + outer + bytes(length - INNER_OFFSET)


def forward_all(model, order=None):
    """Grant every stored frame (round-robin over the ingress ports unless ``order`` is given)
    and admit each forwarded frame at once; returns the admissions in order."""
    admissions = []
    ports = order if order is not None else _round_robin(model)
    for port in ports:
        result = model.grant(port)
        if not isinstance(result, str):
            admissions.append(model.admit(result.port))
    return admissions


def _round_robin(model):
    port = 0
    while any(model.stored):
        if model.stored[port]:
            yield port
        port = (port + 1) % model.ports


def drain(model, port):
    out = []
    while (dep := model.dequeue(port)) is not None:
        out.append(dep.frame)
    return out


# --- Ingress -------------------------------------------------------------------------------------

def test_ingress_checks_in_order():
    good = frame_to(0)
    assert check_frame(good) is None
    assert check_frame(good, bad=True) == "bad"
    assert check_frame(good[:53]) == "short"
    assert check_frame(b"") == "short"
    assert check_frame(raw_frame(5000)) == "oversize"
    assert check_frame(raw_frame(5000), max_frame=5000) is None
    assert check_frame(good[:-1]) == "length"
    assert check_frame(good + b"\0") == "length"
    assert check_frame(b"\xff" * 60) == "length"


def test_arrive_counts_per_ingress():
    model = configured()
    good = frame_to(1)
    assert model.arrive(2, good) == STORED
    assert model.arrive(2, good[:40]) == MALFORMED
    assert model.arrive(2, good, bad=True) == MALFORMED
    assert model.arrive(3, good[:-2]) == MALFORMED
    assert model.arrive(3, good, overflow=True) == OVERFLOW
    assert model.arrive(3, good[:10], overflow=True) == OVERFLOW     # overflow is known first
    assert model.ingress_counters(2) == dict.fromkeys(INGRESS_COUNTERS, 0) | {
        "dropped_malformed": 2}
    assert model.ingress_counters(3) == dict.fromkeys(INGRESS_COUNTERS, 0) | {
        "dropped_malformed": 1, "dropped_overflow": 2}
    assert dict(model.malformed[2]) == {"short": 1, "bad": 1}
    assert dict(model.malformed[3]) == {"length": 1}
    assert [len(s) for s in model.stored] == [0, 0, 1, 0]


# --- Core: arbiter order and uN stage ------------------------------------------------------------

def test_forwarding_through_the_switch():
    """Frames from every ingress to every egress: the uN rewrite, the arbiter's order per egress,
    every counter."""
    model = configured()
    sent = {}
    for ingress in range(4):
        for egress in range(4):
            frame = frame_to(egress, payload=16 * ingress + egress, qpn=ingress)
            sent[ingress, egress] = frame
            assert model.arrive(ingress, frame) == STORED
    order = [3, 1, 0, 2] * 4
    admissions = forward_all(model, order)
    assert [a.verdict for a in admissions] == [Verdict.DATA] * 16
    for egress in range(4):
        out = drain(model, egress)
        assert len(out) == 4
        for ingress, frame in zip((3, 1, 0, 2), out):
            want = bytearray(sent[ingress, egress])
            want[HOP_LIMIT_BYTE] -= 1
            want[DST_BYTE:DST_BYTE + 16] = carrier([HOSTS[egress]]).to_bytes(16, "big")
            assert frame == bytes(want)
        assert model.egress_counters(egress) == dict.fromkeys(EGRESS_COUNTERS, 0) | {
            "forwarded": 4}
    assert model.empty()


def test_un_drops_are_charged_to_the_ingress():
    model = configured(ports=3)
    model.un.set_entry(3, DEFAULT_BLOCK << 16 | HOSTS[3], 3)       # a port the switch lacks
    not_ipv6 = bytearray(frame_to(0))
    not_ipv6[12:14] = b"\x08\x00"
    frames = {0: [bytes(not_ipv6), frame_to(1, hop_limit=1), frame_to(1, hop_limit=0)],
              1: [frame_to(3), raw_frame(200, port=7), frame_to(2)],
              2: [frame_to(0, hop_limit=2)]}
    for ingress, items in frames.items():
        for frame in items:
            model.arrive(ingress, frame)
    results = [model.grant(p) for p in (0, 0, 0, 1, 1, 1, 2)]
    assert results[:5] == ["not_ipv6", "hop_limit", "hop_limit", "no_route", "no_route"]
    assert [r.port for r in results[5:]] == [2, 0]
    assert model.ingress_counters(0) == {"dropped_no_route": 0, "dropped_hop_limit": 2,
                                         "dropped_malformed": 1, "dropped_overflow": 0}
    assert model.ingress_counters(1)["dropped_no_route"] == 2
    assert model.ingress_counters(2) == dict.fromkeys(INGRESS_COUNTERS, 0)
    assert dict(model.malformed[0]) == {"not_ipv6": 1}
    assert model.un.counters["forwarded"] == 3      # the stage itself forwarded port 3
    assert model.admit(2).frame[HOP_LIMIT_BYTE] == 63
    assert model.admit(0).frame[HOP_LIMIT_BYTE] == 1


def test_trace_mismatches_raise():
    model = configured()
    with pytest.raises(ValueError, match="holds none"):
        model.grant(0)
    with pytest.raises(ValueError, match="no frame"):
        model.admit(0)
    model.arrive(0, frame_to(2))
    model.grant(0)
    with pytest.raises(ValueError, match="goes to port 2"):
        model.admit(1)
    with pytest.raises(ValueError, match="port"):
        model.dequeue(4)


# --- Egress behind the switch --------------------------------------------------------------------

@pytest.mark.parametrize("fabric_facing, dscp", [(True, Dscp.TRIMMED),
                                                 (False, Dscp.TRIMMED_LASTHOP)])
def test_incast_trims_by_port_role(fabric_facing, dscp):
    """Three ingress ports send to port 0 with nothing dequeued: the data queue fills with whole
    frames, then every frame is trimmed into the control queue with the port's DSCP and the
    three lengths rewritten; nothing is lost while the control queue has room."""
    model = configured(fabric_facing=(fabric_facing, True, True, True), data_limit=8192)
    for psn in range(10):
        for ingress in (1, 2, 3):
            model.arrive(ingress, frame_to(0, payload=1024, psn=psn, qpn=ingress))
    admissions = forward_all(model)
    verdicts = [a.verdict for a in admissions]
    first = verdicts.index(Verdict.TRIMMED)
    assert verdicts == [Verdict.DATA] * first + [Verdict.TRIMMED] * (30 - first)
    assert admissions[first].q_data + 1162 > 8192 >= admissions[first - 1].q_data + 1162
    out = []
    while (dep := model.dequeue(0)) is not None:
        out.append(dep)
    # control first, one data frame after 16 control frames while data waits
    assert [d.queue for d in out] == [Queue.CONTROL] * 16 + [Queue.DATA] + \
        [Queue.CONTROL] * (30 - first - 16) + [Queue.DATA] * (first - 1)
    for dep in out:
        p = parse_frame(dep.frame)
        if dep.queue == Queue.CONTROL:
            assert p.trimmed and p.outer["dscp"] == dscp
            assert p.outer["payload_length"] == 256 - 54
            assert p.inner["payload_length"] == p.udp["length"] == 256 - 94
            assert p.reth["rkey"] == 0xCAFE and len(p.payload) == 256 - 134
        else:
            assert not p.trimmed and p.icrc_ok and len(p.payload) == 1024
    assert model.egress_counters(0) == {"forwarded": 30, "trimmed": 30 - first, "ecn_marked": 0,
                                        "dropped_full": 0, "dropped_port_down": 0}


def test_port_down_flushes_only_its_port():
    model = configured()
    for psn in range(6):
        model.arrive(0, frame_to(2, psn=psn))
        model.arrive(1, frame_to(3, psn=psn))
    forward_all(model)
    assert model.set_up(2, False) == 6
    model.arrive(0, frame_to(2, psn=9))
    model.arrive(1, frame_to(3, psn=9))
    admissions = forward_all(model)
    assert [a.verdict for a in admissions] == [Verdict.DROPPED_PORT_DOWN, Verdict.DATA]
    assert drain(model, 2) == [] and len(drain(model, 3)) == 7
    assert model.egress_counters(2)["dropped_port_down"] == 7
    assert model.egress_counters(3) == dict.fromkeys(EGRESS_COUNTERS, 0) | {"forwarded": 7}
    model.set_up(2, True)
    model.arrive(0, frame_to(2))
    assert forward_all(model)[0].verdict == Verdict.DATA and len(drain(model, 2)) == 1


def test_ecn_vector_through_the_switch():
    """vectors/ecn.json at egress port 1 behind ingress checks and the uN stage: frame i is
    q[i+1] bytes long and everything before it is dequeued so that each frame sees the vector's
    q (a q under 54 bytes is made by an empty queue instead: no mark either way)."""
    v = vectors.load("ecn.json")
    model = configured(data_limit=1 << 16, kmin=v["kmin"], kmax=v["kmax"], max_frame=65589)
    model.set_lfsr(1, v["lfsr_seed"])
    qs = [f["q"] if f["q"] >= INNER_OFFSET else 0 for f in v["frames"]]
    egress = model.egress[1]
    model.arrive(0, raw_frame(qs[0], port=1))
    forward_all(model)
    model.set_lfsr(1, v["lfsr_seed"])
    for f, q, size in zip(v["frames"], qs, qs[1:] + [0]):
        while egress.occupancy[Queue.DATA] > q:
            model.dequeue(1)
        assert egress.lfsr == f["lfsr_before"]
        model.arrive(2, raw_frame(size or 1000, port=1))
        (adm,) = forward_all(model)
        assert (adm.q_data, adm.lfsr, adm.mark) == (q, f["lfsr_after"], f["mark"])
    assert model.egress_counters(1)["ecn_marked"] == sum(f["mark"] for f in v["frames"])


def test_ecn_only_on_fabric_facing_ports():
    model = configured(fabric_facing=(True, False, True, True), data_limit=40000)
    for port in (0, 1):
        for _ in range(30):
            model.arrive(2, frame_to(port, payload=1000))
    admissions = forward_all(model)
    fabric, host = admissions[:30], admissions[30:]
    assert any(a.mark for a in fabric) and all(a.lfsr is not None for a in fabric)
    assert not any(a.mark for a in host) and all(a.lfsr is None for a in host)
    assert model.egress_counters(1)["ecn_marked"] == 0
    assert model.egress_counters(0)["ecn_marked"] == sum(a.mark for a in fabric)
    model.set_fabric_facing(1, True)
    model.arrive(2, frame_to(1, payload=1000))
    assert forward_all(model)[0].mark


def test_configuration_writes():
    model = configured()
    seed = model.egress[0].lfsr
    model.set_lfsr(0, 0x10000)                 # low 16 bits 0: ignored
    assert model.egress[0].lfsr == seed
    model.set_lfsr(0, 0x1_1234)
    assert model.egress[0].lfsr == 0x1234
    model.set_ecn_thresholds(0, kmin=100, kmax=200)
    assert (model.egress[0].config.kmin, model.egress[0].config.kmax) == (100, 200)
    with pytest.raises(ValueError, match="kmin"):
        model.set_ecn_thresholds(0, kmin=300)


@pytest.mark.parametrize("params, word", [
    ({"ports": 1}, "ports"), ({"ports": 9}, "ports"), ({"ports": 4.0}, "ports"),
    ({"fabric_facing": (True,) * 3}, "fabric_facing"), ({"lfsr_seeds": (1, 2)}, "lfsr_seeds"),
    ({"lfsr_seeds": (0, 1, 1, 1)}, "lfsr_seed"), ({"trim_size": 133}, "trim_size"),
    ({"max_frame": 137}, "max_frame"), ({"data_limit": 0}, "data_limit"),
    ({"kmin": 5, "kmax": 5}, "kmin")])
def test_bad_parameters_raise(params, word):
    with pytest.raises(ValueError, match=word):
        SwitchConfig(**params)


def test_defaults():
    cfg = SwitchConfig()
    assert (cfg.ports, cfg.fabric_facing, cfg.data_limit, cfg.control_limit, cfg.trim_size,
            cfg.kmin, cfg.kmax, cfg.max_frame) == (4, (True,) * 4, 32768, None, 256, 8192,
                                                    24576, 4352)
    assert cfg.port_config(2).control_limit == 65536
    assert [port_width(k) for k in (2, 3, 4, 5, 8)] == [1, 2, 2, 3, 3]
    with pytest.raises(ValueError, match="either"):
        SwitchModel(cfg, ports=2)


# --- Conservation under any interleaving ---------------------------------------------------------

FRAME_KINDS = ("good", "trimmable", "control", "short", "length", "bad", "hop", "miss",
               "not_ipv6")


def make_frame(rng, kind, egress):
    if kind in ("good", "trimmable", "control"):
        dscp = {"good": Dscp.NO_TRIM, "trimmable": Dscp.TRIMMABLE, "control": Dscp.CONTROL}[kind]
        return frame_to(egress, payload=rng.randrange(0, 1500), dscp=dscp,
                        ecn=rng.choice((Ecn.NOT_ECT, Ecn.ECT0, Ecn.CE)), psn=rng.randrange(99))
    if kind == "short":
        return frame_to(egress)[:rng.randrange(1, 54)]
    if kind == "length":
        return frame_to(egress, payload=40)[:-rng.randrange(1, 20)]
    if kind == "hop":
        return frame_to(egress, hop_limit=rng.randrange(2))
    if kind == "miss":
        return raw_frame(rng.randrange(54, 300), port=7)
    frame = bytearray(frame_to(egress))
    frame[14] = 0x40 | frame[14] & 0xF
    return bytes(frame)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2 ** 32 - 1))
def test_every_frame_is_accounted_once(seed):
    """Random frames (good and bad) at random ingress ports, grants in a random order among the
    ports holding frames, admissions and dequeues interleaved at random, ports going down and
    up: every frame arrived is, exactly once, dropped under one counter or dequeued (trimmed or
    whole), and every dequeued frame is one that was admitted, in its queue's order."""
    rng = random.Random(seed)
    model = configured(data_limit=6000, control_limit=3000, trim_size=rng.choice((134, 256)),
                       fabric_facing=tuple(rng.random() < 0.5 for _ in range(4)))
    arrived = 0
    overflow = 0
    expected = {(p, q): [] for p in range(4) for q in (Queue.DATA, Queue.CONTROL)}
    dequeued = 0
    for _ in range(300):
        action = rng.random()
        if action < 0.4:
            overflow_now = rng.random() < 0.05
            model.arrive(rng.randrange(4), make_frame(rng, rng.choice(FRAME_KINDS),
                                                      rng.randrange(4)),
                         bad=rng.random() < 0.03, overflow=overflow_now)
            arrived += 1
            overflow += overflow_now
        elif action < 0.6:
            ready = [p for p in range(4) if model.stored[p]]
            if ready:
                model.grant(rng.choice(ready))
        elif action < 0.8:
            if model.pending:
                port = model.pending[0].port
                adm = model.admit(port)
                if adm.frame is not None:
                    expected[port, adm.queue].append(adm.frame)
        elif action < 0.97:
            port = rng.randrange(4)
            dequeued += check_dequeue(model, port, expected)
        else:
            port = rng.randrange(4)
            model.set_up(port, not model.egress[port].up)
            if not model.egress[port].up:
                expected[port, Queue.DATA].clear()
                expected[port, Queue.CONTROL].clear()
    for port in range(4):
        model.set_up(port, True)
        while check_dequeue(model, port, expected):
            dequeued += 1
    assert not any(expected.values())
    ingress = sum(sum(model.ingress_counters(p).values()) for p in range(4))
    egress = [model.egress_counters(p) for p in range(4)]
    dropped = sum(c["dropped_full"] + c["dropped_port_down"] for c in egress)
    forwarded = sum(c["forwarded"] for c in egress)
    in_core = sum(len(s) for s in model.stored) + len(model.pending)
    assert forwarded == dequeued
    assert arrived == ingress + dropped + forwarded + in_core
    assert overflow == sum(model.ingress_counters(p)["dropped_overflow"] for p in range(4))


def check_dequeue(model, port, expected):
    """Dequeue one frame of ``port`` and check it is the oldest admitted one of its queue."""
    dep = model.dequeue(port)
    if dep is None:
        return False
    assert dep.frame == expected[port, dep.queue].pop(0)
    return True

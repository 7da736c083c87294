# SPDX-License-Identifier: BSD-2-Clause
"""models.tx_engine: the composed transmit engine. With everything GOOD and no backpressure each
plane's share and each slot's use stay within one packet of even; frames carry the host memory's
payload on their EV's path; retransmissions avoid the old EV; the PSN limit stops new packets;
control frames take their EV's plane; per-plane checking of sent and flushed frames."""

import random

import pytest
from hypothesis import given, settings, strategies as st

from models.header_inserter import OutFrame
from models.layouts import Opcode
from models.packets import parse_frame
from models.records import RetxCause
from models.segmenter import HostMemory
from models.spray import make_ev
from models.tx_engine import TxEngineModel, frame_opcode
from models.tx_path import QpContext
from models.usid import carrier_usids, decode


def engine(n_qps=2, n_planes=4, slots=4, pmtu=256, seed=1):
    rng = random.Random(seed)
    memory = HostMemory(1 << 16, 64, bytes(rng.getrandbits(8) for _ in range(1 << 16)))
    model = TxEngineModel(memory, n_qps=n_qps, n_planes=n_planes, data_width=64, pmtu=pmtu,
                          slots=slots, backups=2, num_t1=16)
    model.set_nic(own_host=5, own_t0=1, macs=[(0x0200 + p, 0x0300 + p) for p in range(n_planes)])
    for q in range(n_qps):
        evs = [[make_ev(p, (s + q) % 16, rng.getrandbits(20)) for s in range(slots)]
               for p in range(n_planes)]
        model.configure_qp(q, start_psn=100 * q, context=QpContext(0x40 + q, 9, 2, 7),
                           evs=evs, seeds=[rng.randrange(1, 1 << 16) for _ in range(n_planes)])
        model.psn_limit({"qpn": q, "psn_limit": 100 * q + 10_000})
    return model, memory


def write(model, qpn, length, req_id, local_addr=0x100, imm=None):
    assert model.work_request(dict(qpn=qpn, local_addr=local_addr, remote_va=0x7000_0000,
                                   rkey=0x55, length=length, has_imm=int(imm is not None),
                                   imm=imm or 0, req_id=req_id))


@pytest.mark.parametrize("n_planes,slots", [(4, 4), (2, 16), (3, 8), (1, 4)])
def test_even_spread_with_everything_good(n_planes, slots):
    model, _ = engine(n_qps=2, n_planes=n_planes, slots=slots)
    for q in range(2):
        write(model, q, 256 * 97, req_id=q)
    sent = model.run()
    assert len(sent) == 2 * 97
    for q in range(2):
        sends = [s for s, _ in sent if s["qpn"] == q]
        planes = [sum(s["plane"] == p for s in sends) for p in range(n_planes)]
        assert max(planes) - min(planes) <= 1, planes
        for p in range(n_planes):
            uses = [sum(s["plane"] == p and s["slot"] == k for s in sends) for k in range(slots)]
            assert max(uses) - min(uses) <= 1, (p, uses)
        # the planes are visited round-robin
        assert [s["plane"] for s in sends[:n_planes]] == list(range(n_planes))


def test_frames_carry_the_payload_on_their_path():
    model, memory = engine()
    write(model, 0, 700, req_id=7, local_addr=0x300, imm=0xABCD)
    sent = model.run()
    assert [frame_opcode(f.data) for _, f in sent] == [Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE,
                                                       Opcode.WRITE_LAST_IMM]
    for index, (send, frame) in enumerate(sent):
        parsed = parse_frame(frame.data)
        assert parsed.icrc_ok and not frame.bad
        assert parsed.payload == memory.data[0x300 + 256 * index:0x300 + 256 * index +
                                             send["length"]]
        assert parsed.bth["psn"] == send["psn"] == index
        assert parsed.reth["va"] == 0x7000_0000 + 256 * index
        assert parsed.udp["sport"] == send["ev"] >> 16
        assert all(decode(u).plane == send["plane"]
                   for u in carrier_usids(parsed.outer["dst"])[1])
        assert send["req_id"] == 7 and send["offset"] == 256 * index
        assert send["last"] == (index == 2)
        assert any(e.frame == frame for e in model.expected[send["plane"]])


def test_retransmission_avoids_the_old_ev():
    model, _ = engine(n_planes=1, slots=2)
    write(model, 0, 100, req_id=1)
    (first, _), = model.run()
    for cause in (RetxCause.NACK_TRIMMED, RetxCause.TIMEOUT, RetxCause.FLUSHED):
        assert model.retx_request(dict(qpn=0, psn=first["psn"], avoid_ev=first["ev"],
                                       cause=cause))
        (again, frame), = model.run()
        assert again["rtx"] == 1 and again["ev"] != first["ev"]
        assert parse_frame(frame.data).bth["rtx"] == 1


def test_psn_limit_stops_new_packets():
    model, _ = engine(n_qps=1)
    model.psn_limit({"qpn": 0, "psn_limit": 3})
    write(model, 0, 256 * 6, req_id=1)
    assert [s["psn"] for s, _ in model.run()] == [0, 1, 2]
    model.psn_limit({"qpn": 0, "psn_limit": 6})
    assert [s["psn"] for s, _ in model.run()] == [3, 4, 5]


def test_nothing_choosable_waits():
    model, _ = engine(n_qps=1, n_planes=2, slots=4)
    for p in range(2):
        for ev in model.table.qp(0).planes[p].evs:
            model.ev_event({"qpn": 0, "ev": ev, "kind": 3})      # DENY, no backup left after
    write(model, 0, 10, req_id=1)
    assert model.choose(0, 0b11)["found"] == 0
    assert model.run() == []
    assert model.path.counters["retries"] == 2


@settings(max_examples=30, deadline=None)
@given(ev=st.integers(0, (1 << 32) - 1), opcode=st.sampled_from((Opcode.SACK, Opcode.NACK,
                                                                  Opcode.PROBE)))
def test_control_frames_take_their_plane(ev, opcode):
    model, _ = engine(n_planes=4)
    frame = model.control(dict(qpn=1, opcode=opcode, ev=ev, ext=0))
    if ev & 0xF >= 4:
        assert frame is None
        return
    assert model.expected[ev & 0xF][-1].control and model.expected[ev & 0xF][-1].frame == frame
    assert parse_frame(frame.data).bth["dest_qpn"] == 0x41


def test_check_plane_sent_and_flushed():
    model, _ = engine(n_planes=1)
    write(model, 0, 256 * 4, req_id=1)
    sent = model.run()
    ctrl = model.control(dict(qpn=0, opcode=Opcode.NACK, ev=0, ext=0))
    sends = [s for s, _ in sent]
    frames = [f for _, f in sent]
    flushed = [dict(sends[1], flushed=1), dict(sends[2], flushed=1)]
    model.check_plane(0, [frames[0], frames[3], ctrl], flushed, 0)
    model.check_plane(0, [frames[0], ctrl, frames[3]], flushed, 0)
    model.check_plane(0, [frames[0], frames[3]], flushed, 1)
    with pytest.raises(AssertionError):
        model.check_plane(0, [frames[0], frames[3], ctrl], flushed[:1], 0)
    with pytest.raises(AssertionError):
        model.check_plane(0, [frames[3], frames[0]], flushed, 1)
    with pytest.raises(AssertionError):
        model.check_plane(0, [frames[0], frames[3], ctrl, OutFrame(b"x", False)], flushed, 0)


def test_configure_checks_the_context():
    model, _ = engine()
    with pytest.raises(ValueError):
        model.configure_qp(0, start_psn=0, context=(1, 2, 3, 4), evs=[], seeds=[])

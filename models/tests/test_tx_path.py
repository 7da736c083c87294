# SPDX-License-Identifier: BSD-2-Clause
"""models.tx_path: path building reproduces every frame of the conformance vectors from a QP
context, random packets give frames whose every field follows the profile (read back by
models.packets.parse_frame; scapy reads them in verif/tests/test_scapy_reading.py), the send and plane frame records, the control path and
every bad input's defined answer."""

import pytest
from hypothesis import given, settings, strategies as st

from models.layouts import (CONTROL_OPCODES, DATA_OPCODES, IMM_OPCODES, IMMDT, METH, RETH, Dscp,
                            Ecn, Opcode, ext_length, ip6, mac)
from models.packets import build_frame, frame_length, parse_frame
from models.records import SEND_RECORD, TX_PACKET, ext_to_int
from models.spray import Choice
from models import conformance as vectors
from models.tx_path import (COUNTERS, QpContext, TxPathModel, drop_header, nic_address,
                            plane_address)
from models.usid import carrier_usids, decode, ev_carrier

QPN = 3


def vector_model(case):
    """A model configured for one vector case: own and peer hosts from the inner addresses, the
    T0s and the peer's port from the carrier, the MACs of the case's plane."""
    _, usids = carrier_usids(ip6(case["outer_dst"]))
    decoded = [decode(u) for u in usids]
    own_t0, peer_t0 = decoded[0].index, decoded[-2].index if len(decoded) == 4 else decoded[0].index
    model = TxPathModel(n_qps=4, n_planes=8)
    model.set_nic(own_host=ip6(case["inner_src"]) & 0xFFFF_FFFF, own_t0=own_t0)
    plane = case["ev"] & 0xF
    model.set_port(plane, mac(case["eth_src"]), mac(case["eth_dst"]))
    model.set_qp(QPN, QpContext(peer_qpn=case["dest_qpn"],
                                peer_host=ip6(case["inner_dst"]) & 0xFFFF_FFFF,
                                peer_t0=peer_t0, peer_port=decoded[-1].index))
    return model


def test_conformance_vectors():
    """Every frame of packets.json comes out of path building (data: from a TX_PACKET with the
    METH, RETH and ImmDt of the case and the EV as the choice; control: from a CONTROL_RECORD)."""
    cases = vectors.load("packets.json")
    for case in cases:
        model = vector_model(case)
        opcode = case["opcode"]
        body = bytes.fromhex(case["ext_hex"])
        n_ext = ext_length(opcode)
        ev = case["ev"]
        if opcode in DATA_OPCODES:
            meth, reth = METH.unpack(body), RETH.unpack(body[METH.size:])
            imm = IMMDT.unpack(body[METH.size + RETH.size:])["imm"] if opcode in IMM_OPCODES else 0
            payload = body[n_ext:len(body) - case["padcnt"]]
            pkt = dict(qpn=QPN, psn=case["psn"], opcode=opcode, rtx=case.get("rtx", 0),
                       length=len(payload), imm=imm, **meth, **reth)
            assert model.packet(pkt) is None
            result = model.data(pkt, Choice(ev & 0xF, 1, ev, 1), tick=0, room_mask=0xFF)
            header = result.header
        else:
            payload = b""
            result = model.control(dict(qpn=QPN, opcode=opcode, ev=ev, ext=ext_to_int(body)))
            header = result.header
        assert build_frame(header, payload).hex() == case["frame_hex"], case["name"]


def configured(n_planes=4, one_t0=False):
    model = TxPathModel(n_qps=8, n_planes=n_planes, max_payload=1024)
    model.set_nic(own_host=0x0A0B0C0D, own_t0=17)
    for p in range(n_planes):
        model.set_port(p, 0x020000000000 | p, 0x02FF00000000 | p)
    for q in range(0, 8, 2):       # odd QPs stay disabled
        model.set_qp(q, QpContext(peer_qpn=0x100 + q, peer_host=0x1000 + q,
                                  peer_t0=17 if one_t0 else 40 + q, peer_port=5 + q))
    return model


def packets(planes=4):
    fields = {name: st.integers(0, (1 << width) - 1) for name, width in TX_PACKET.fields}
    fields.update(qpn=st.sampled_from([0, 2, 4, 6]), opcode=st.sampled_from(DATA_OPCODES),
                  length=st.integers(0, 1024))
    return st.fixed_dictionaries(fields)


def evs(planes):
    return st.builds(lambda p, j, salt: p | j << 4 | salt << 12, st.integers(0, planes - 1),
                     st.integers(0, 255), st.integers(0, (1 << 20) - 1))


@settings(max_examples=120, deadline=None)
@given(pkt=packets(), ev=evs(4), slot=st.integers(0, 15), tick=st.integers(0, (1 << 32) - 1),
       room=st.integers(0, 255), one_t0=st.booleans())
def test_data_packet_fields(pkt, ev, slot, tick, room, one_t0):
    model = configured(one_t0=one_t0)
    assert model.packet(pkt) is None
    plane = ev & 0xF
    result = model.data(pkt, Choice(plane, slot, ev, 0), tick, room)
    payload = bytes(range(256)) * 5
    frame = build_frame(result.header, payload[:pkt["length"]])
    parsed = parse_frame(frame, inner_dst=nic_address(0x1000 + pkt["qpn"]))
    q = pkt["qpn"]
    assert parsed.icrc_ok
    assert parsed.eth["src"] == 0x020000000000 | plane and parsed.eth["dst"] == 0x02FF00000000 | plane
    assert parsed.outer["src"] == plane_address(plane, 0x0A0B0C0D)
    assert parsed.outer["dst"] == ev_carrier(ev, 17, 17 if one_t0 else 40 + q, 5 + q)
    assert len(carrier_usids(parsed.outer["dst"])[1]) == (2 if one_t0 else 4)
    assert all(decode(u).plane == plane for u in carrier_usids(parsed.outer["dst"])[1])
    assert parsed.inner["src"] == nic_address(0x0A0B0C0D)
    for ip in (parsed.outer, parsed.inner):
        assert ip["flow_label"] == ev & 0xFFFF
        assert ip["dscp"] == (Dscp.TRIMMABLE_RETX if pkt["rtx"] else Dscp.TRIMMABLE)
        assert ip["ecn"] == Ecn.ECT0
    assert parsed.outer["hop_limit"] == 64
    assert parsed.udp["sport"] == ev >> 16
    bth = parsed.bth
    assert (bth["opcode"], bth["dest_qpn"], bth["psn"], bth["rtx"]) == \
        (pkt["opcode"], 0x100 + q, pkt["psn"], pkt["rtx"])
    last = pkt["opcode"] in (Opcode.WRITE_LAST, Opcode.WRITE_LAST_IMM, Opcode.WRITE_ONLY,
                             Opcode.WRITE_ONLY_IMM)
    assert bth["ackreq"] == last
    assert parsed.meth == {"rqmsn": pkt["rqmsn"], "msn": pkt["msn"]}
    assert parsed.reth == {"va": pkt["va"], "rkey": pkt["rkey"], "dma_length": pkt["dma_length"]}
    assert (parsed.immdt == {"imm": pkt["imm"]}) if pkt["opcode"] in IMM_OPCODES else \
        parsed.immdt is None
    assert parsed.payload == payload[:pkt["length"]]
    assert result.send == {
        "qpn": q, "psn": pkt["psn"], "ev": ev, "plane": plane, "slot": slot,
        "req_id": pkt["req_id"], "offset": pkt["offset"], "length": pkt["length"], "tick": tick,
        "room_mask": room, "rtx": pkt["rtx"], "flushed": 0, "last": int(last)}
    assert result.plane_frame == {"plane": plane, "frame_bytes": len(frame), "data": 1,
                                  "send": SEND_RECORD.pack(result.send)}


@settings(max_examples=80, deadline=None)
@given(opcode=st.sampled_from(CONTROL_OPCODES), ev=evs(4), ext=st.integers(0, (1 << 288) - 1),
       qpn=st.sampled_from([0, 2, 4, 6]), one_t0=st.booleans())
def test_control_frames(opcode, ev, ext, qpn, one_t0):
    model = configured(one_t0=one_t0)
    result = model.control(dict(qpn=qpn, opcode=opcode, ev=ev, ext=ext))
    frame = build_frame(result.header)
    parsed = parse_frame(frame)
    plane = ev & 0xF
    assert parsed.icrc_ok and len(frame) == frame_length(opcode, 0)
    assert parsed.ext == ext.to_bytes(36, "little")[:ext_length(opcode)]
    assert parsed.outer["dst"] == ev_carrier(ev, 17, 17 if one_t0 else 40 + qpn, 5 + qpn)
    assert parsed.outer["src"] == plane_address(plane, 0x0A0B0C0D)
    assert parsed.eth["src"] == 0x020000000000 | plane
    probe = opcode == Opcode.PROBE
    assert parsed.outer["dscp"] == (Dscp.TRIMMABLE if probe else Dscp.CONTROL)
    assert parsed.outer["ecn"] == (Ecn.ECT0 if probe else Ecn.NOT_ECT)
    assert (parsed.bth["psn"], parsed.bth["ackreq"], parsed.bth["rtx"]) == (0, 0, 0)
    assert parsed.bth["dest_qpn"] == 0x100 + qpn
    assert parsed.udp["sport"] == ev >> 16 and parsed.outer["flow_label"] == ev & 0xFFFF
    assert result.plane_frame == {"plane": plane, "frame_bytes": len(frame), "data": 0,
                                  "send": SEND_RECORD.pack(qpn=qpn, ev=ev, plane=plane)}
    assert model.counters["controls_sent"] == 1


def test_bad_packets_give_drop_headers():
    model = configured()
    good = dict(qpn=2, opcode=Opcode.WRITE_ONLY, length=1024)
    assert model.packet(good) is None
    assert model.packet(dict(good, opcode=Opcode.SACK)) == drop_header(1024)
    assert model.packet(dict(good, opcode=0x11, length=7)) == drop_header(7)
    assert model.packet(dict(good, length=1025)) == drop_header(1025)
    assert model.packet(dict(good, qpn=3)) == drop_header(1024)        # disabled
    model.retry()
    assert model.counters == {**dict.fromkeys(COUNTERS, 0), "packets_in": 5, "drop_packet": 3,
                              "drop_packet_qp": 1, "retries": 1}
    assert drop_header(5)["opcode"] == 0


def test_bad_control_records_are_dropped():
    model = configured(n_planes=2)
    assert model.control(dict(qpn=0, opcode=Opcode.WRITE_ONLY, ev=0)) is None
    assert model.control(dict(qpn=1, opcode=Opcode.NACK, ev=0)) is None
    assert model.control(dict(qpn=0, opcode=Opcode.NACK, ev=2)) is None      # plane 2 of 2
    assert model.control(dict(qpn=0, opcode=Opcode.NACK, ev=1)) is not None
    assert model.counters == {**dict.fromkeys(COUNTERS, 0), "controls_in": 4, "drop_control": 1,
                              "drop_control_qp": 1, "drop_control_plane": 1, "controls_sent": 1}


def test_configuration_is_checked():
    with pytest.raises(ValueError):
        TxPathModel(n_planes=9)
    with pytest.raises(ValueError):
        TxPathModel(max_payload=4097)
    model = TxPathModel(n_qps=2, n_planes=2)
    with pytest.raises(ValueError):
        model.set_qp(2, QpContext(1, 1, 1, 1))
    with pytest.raises(ValueError):
        QpContext(peer_qpn=1 << 24, peer_host=0, peer_t0=0, peer_port=0)
    with pytest.raises(ValueError):
        QpContext(peer_qpn=0, peer_host=0, peer_t0=1024, peer_port=0)
    with pytest.raises(ValueError):
        model.set_port(2, 0, 0)
    with pytest.raises(ValueError):
        model.set_nic(own_host=1 << 32, own_t0=0)
    model.set_qp(1, QpContext(1, 1, 1, 1))
    model.set_qp(1, None, enabled=False)
    assert not model.enabled(1)


def test_addresses():
    assert plane_address(1, 5) == ip6("fd00:0:1::5")
    assert nic_address(9) == ip6("fd00:ffff::9")

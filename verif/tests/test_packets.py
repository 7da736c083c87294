# SPDX-License-Identifier: BSD-2-Clause
"""Tests of the frame golden model (models/packets.py) and of its scapy cross-check.

- every case of ``vectors/packets.json`` is rebuilt byte for byte from its semantic fields through
  the builders, parses back, and is read by scapy (verif/scapy_check.py) with the same ICRC;
- random packets of every kind (hypothesis) round-trip through build_frame / parse_frame and are
  read field by field by scapy independently;
- edge values of every field, the SACK bitmap-base rule, trimmed frames, and malformed frames
  raising the reason of the first failed shape check of docs/protocol.md section 5.
"""

from ipaddress import IPv6Address

import pytest
from hypothesis import given, settings, strategies as st
from scapy.contrib.roce import BTH as ScapyBTH
from scapy.layers.inet import UDP as ScapyUDP
from scapy.layers.inet6 import IPv6 as ScapyIPv6

from models.layouts import (
    BTH_OFFSET, DATA_OPCODES, EXT_OFFSET, IMM_OPCODES, INNER_OFFSET, OUTER_OFFSET, TRIM_MIN_BYTES,
    UDP_OFFSET, Dscp, Ecn, NackReason, Opcode, SackVerdict, header_length, ip6,
)
from models.packets import (
    FRAME_ERROR_REASONS, PMTU_MAX, Addresses, FrameError, bitmap_psns, build_frame, data_packet,
    frame_length, icrc, nack_packet, parse_frame, path_fields, probe_answer, probe_packet,
    psn_offset, sack_bitmap, sack_packet,
)
from models.records import TX_HEADER
from models import conformance as vectors
from verif.scapy_check import bth_rtx, check_frame

VECTORS = vectors.load("packets.json")
NACK_REASONS = (NackReason.TRIMMED, NackReason.TRIMMED_LASTHOP, NackReason.NO_PKT_BUFFER,
                NackReason.PSN_OOR_WINDOW, NackReason.UNEXP_EVENT)
ADDR = Addresses(eth_dst="02:00:00:ff:00:01", eth_src="02:00:00:05:00:01",
                 outer_src="fd00:0:1::5", outer_dst="fd00:200:1401:1802:1402:1c09::",
                 inner_src="fd00:ffff::5", inner_dst="fd00:ffff::9")
FAST = settings(max_examples=100, deadline=None)

# --- Hypothesis strategies ------------------------------------------------------------------------

u = lambda bits: st.integers(0, (1 << bits) - 1)                                  # noqa: E731
s16 = st.integers(-(1 << 15), (1 << 15) - 1)
addresses = st.builds(Addresses, eth_dst=u(48), eth_src=u(48), outer_src=u(128),
                      outer_dst=u(128), inner_src=u(128), inner_dst=u(128), hop_limit=u(8))
payloads = st.one_of(st.binary(max_size=64), st.binary(min_size=PMTU_MAX - 8, max_size=PMTU_MAX))


@st.composite
def data_args(draw):
    opcode = draw(st.sampled_from(DATA_OPCODES))
    return dict(opcode=opcode, ev=draw(u(32)), dest_qpn=draw(u(24)), psn=draw(u(24)),
                rqmsn=draw(u(16)), msn=draw(u(16)), va=draw(u(64)), rkey=draw(u(32)),
                dma_length=draw(u(32)), payload=draw(payloads), rtx=draw(u(1)),
                imm=draw(u(32)) if opcode in IMM_OPCODES else None)


@st.composite
def sack_args(draw):
    pr = draw(u(1))
    return dict(ev=draw(u(32)), dest_qpn=draw(u(24)), cack_psn=draw(u(24)), mpr=draw(u(8)),
                m=draw(st.sampled_from((SackVerdict.NONE, SackVerdict.SKIP_ONCE))), pr=pr,
                ack_psn_offset=0 if pr else draw(s16), probe_id=draw(u(16)) if pr else 0,
                sack_offset=draw(s16), sack_bitmap=draw(u(64)), ooo_count=draw(u(15)),
                placed_256=draw(u(24)))


nack_args = st.fixed_dictionaries(dict(ev=u(32), dest_qpn=u(24), nack_psn=u(24),
                                       reason=st.sampled_from(NACK_REASONS)))
probe_args = st.fixed_dictionaries(dict(ev=u(32), dest_qpn=u(24), probe_id=u(16)))
packets = st.one_of(
    st.tuples(addresses, data_args()).map(lambda t: data_packet(t[0], **t[1])),
    st.tuples(addresses, sack_args()).map(lambda t: sack_packet(t[0], **t[1])),
    st.tuples(addresses, nack_args).map(lambda t: nack_packet(t[0], **t[1])),
    st.tuples(addresses, probe_args).map(lambda t: probe_packet(t[0], **t[1])),
)

# --- Checks shared by the tests -------------------------------------------------------------------


def scapy_agrees(frame, hdr, payload):
    """scapy's independent reading of ``frame`` matches the record it was built from."""
    pkt = check_frame(frame)
    outer = pkt[ScapyIPv6]
    inner = outer.payload
    udp = pkt[ScapyUDP]
    bth = pkt[ScapyBTH]
    pad = -len(payload) & 3
    udp_len = len(frame) - UDP_OFFSET
    for ip, hop_limit, next_header, plen in ((outer, hdr["hop_limit"], 41, udp_len + 40),
                                             (inner, 64, 17, udp_len)):
        assert ip.version == 6
        assert ip.tc == hdr["dscp"] << 2 | hdr["ecn"]
        assert ip.fl == hdr["flow_label"]
        assert (ip.plen, ip.nh, ip.hlim) == (plen, next_header, hop_limit)
    assert ip6(outer.src) == hdr["outer_src"] and ip6(outer.dst) == hdr["outer_dst"]
    assert ip6(inner.src) == hdr["inner_src"] and ip6(inner.dst) == hdr["inner_dst"]
    assert int(pkt.dst.replace(":", ""), 16) == hdr["eth_dst"]
    assert int(pkt.src.replace(":", ""), 16) == hdr["eth_src"]
    assert (udp.sport, udp.dport, udp.len, udp.chksum) == (hdr["udp_sport"], 4791, udp_len, 0)
    assert (bth.opcode, bth.padcount, bth.version, bth.pkey) == (hdr["opcode"], pad, 0, 0xFFFF)
    assert (bth.solicited, bth.migreq, bth.fecn, bth.becn, bth.resv6) == (0, 0, 0, 0, 0)
    assert (bth.dqpn, bth.ackreq, bth_rtx(bth), bth.psn) == \
        (hdr["dest_qpn"], hdr["ackreq"], hdr["rtx"], hdr["psn"])
    ext = hdr["ext"].to_bytes(36, "little")[:header_length(hdr["opcode"]) - EXT_OFFSET]
    assert bytes(bth.payload) == ext + payload + bytes(pad)


def round_trip(hdr, payload):
    """Build, parse back, compare every field, and let scapy read it; returns the parsed frame."""
    assert set(hdr) == set(TX_HEADER.names)
    frame = build_frame(hdr, payload)
    assert len(frame) == frame_length(hdr["opcode"], len(payload))
    parsed = parse_frame(frame, inner_dst=hdr["inner_dst"])
    assert parsed.tx_header() == hdr
    assert parsed.payload == payload and parsed.pad == bytes(-len(payload) & 3)
    assert parsed.icrc_ok and parsed.icrc == icrc(frame[:-4]) and not parsed.trimmed
    for name in ("dscp", "ecn", "flow_label"):
        assert parsed.inner[name] == parsed.outer[name], name
    assert parsed.inner["hop_limit"] == 64 and parsed.outer["hop_limit"] == hdr["hop_limit"]
    scapy_agrees(frame, hdr, payload)
    return parsed


def relength(frame):
    """``frame`` with its outer, inner and UDP lengths rewritten to its actual length."""
    frame = bytearray(frame)
    n = len(frame)
    frame[OUTER_OFFSET + 4:OUTER_OFFSET + 6] = (n - INNER_OFFSET).to_bytes(2, "big")
    frame[INNER_OFFSET + 4:INNER_OFFSET + 6] = (n - UDP_OFFSET).to_bytes(2, "big")
    frame[UDP_OFFSET + 4:UDP_OFFSET + 6] = (n - UDP_OFFSET).to_bytes(2, "big")
    return bytes(frame)


def trim(frame, keep, dscp=Dscp.TRIMMED):
    """What the trimming switch makes of ``frame`` (docs/protocol.md 7): first ``keep`` bytes, lengths
    rewritten, outer DSCP TRIMMED or TRIMMED_LASTHOP."""
    out = bytearray(relength(frame[:keep]))
    out[OUTER_OFFSET] = 0x60 | dscp >> 2
    out[OUTER_OFFSET + 1] = (dscp & 3) << 6 | out[OUTER_OFFSET + 1] & 0x3F
    return bytes(out)


# --- Conformance vectors --------------------------------------------------------------------------

DATA_CASES = {
    "write_only_100B": dict(rqmsn=0, msn=17, va=0x10000, rkey=0x42, dma_length=100),
    "write_only_0B": dict(rqmsn=0, msn=17, va=0x10000, rkey=0x42, dma_length=0),
    "write_only_imm_7B": dict(rqmsn=3, msn=17, va=0x10000, rkey=0x42, dma_length=7,
                              imm=0xCAFEF00D),
    "write_first_256B": dict(rqmsn=0, msn=17, va=0x10000, rkey=0x42, dma_length=525),
    "write_middle_256B": dict(rqmsn=0, msn=17, va=0x10100, rkey=0x42, dma_length=525),
    "write_last_13B": dict(rqmsn=0, msn=17, va=0x10200, rkey=0x42, dma_length=525),
    "write_last_imm_1B": dict(rqmsn=3, msn=17, va=0x10200, rkey=0x42, dma_length=513,
                              imm=0x01020304),
    "write_only_retransmission": dict(rqmsn=0, msn=18, va=0x20000, rkey=0x42, dma_length=64,
                                      rtx=1),
}
NACK_CASES = {"nack_trimmed": NackReason.TRIMMED,
              "nack_trimmed_lasthop": NackReason.TRIMMED_LASTHOP,
              "nack_no_pkt_buffer": NackReason.NO_PKT_BUFFER,
              "nack_psn_oor_window": NackReason.PSN_OOR_WINDOW,
              "nack_unexp_event": NackReason.UNEXP_EVENT}


def build_case(case):
    """The packet of a vector case, from its semantic fields, through the builders."""
    addr = Addresses(**{k: case[k] for k in ("eth_dst", "eth_src", "outer_src", "outer_dst",
                                             "inner_src", "inner_dst")},
                     hop_limit=case.get("hop_limit", 64))
    common = dict(ev=case["ev"], dest_qpn=case["dest_qpn"])
    name = case["name"]
    if name in DATA_CASES:
        ext = bytes.fromhex(case["ext_hex"])
        n_headers = header_length(case["opcode"]) - EXT_OFFSET
        payload = ext[n_headers:len(ext) - case["padcnt"]]
        return data_packet(addr, opcode=case["opcode"], psn=case["psn"],
                           payload=payload, **common, **DATA_CASES[name])
    if name == "sack_skip_once":
        sack = case["sack"]
        # trigger = cack_psn + ack_psn_offset = 1070; PSNs 1030, 1031 and 1070 received past cack
        offset, bitmap = sack_bitmap(1000, 1070, {1030, 1031, 1070})
        assert (offset, bitmap) == (sack["sack_offset"], int(sack["sack_bitmap"], 16))
        return sack_packet(addr, m=SackVerdict.SKIP_ONCE, cack_psn=1000, ack_psn_offset=70,
                           sack_offset=offset, sack_bitmap=bitmap, mpr=8, ooo_count=3,
                           placed_256=4096, **common)
    if name == "sack_probe_answer":
        return probe_answer(addr, probe_id=0x0102, cack_psn=41, mpr=8, **common)
    if name in NACK_CASES:
        return nack_packet(addr, reason=NACK_CASES[name], nack_psn=5000, **common)
    assert name == "reliability_probe"
    return probe_packet(addr, probe_id=0x0102, **common)


def test_vector_cases_all_covered():
    assert {c["name"] for c in VECTORS} == \
        set(DATA_CASES) | set(NACK_CASES) | {"sack_skip_once", "sack_probe_answer",
                                             "reliability_probe"}


@pytest.mark.parametrize("case", VECTORS, ids=[c["name"] for c in VECTORS])
def test_vector_reproduced_by_builders(case):
    hdr, payload = build_case(case)
    frame = build_frame(hdr, payload)
    assert frame.hex() == case["frame_hex"]
    for name in ("opcode", "psn", "dest_qpn", "dscp", "ecn"):
        assert hdr[name] == case[name], name
    assert (hdr["ackreq"], hdr["rtx"]) == (case.get("ackreq", 0), case.get("rtx", 0))
    assert frame[EXT_OFFSET:-4].hex() == case["ext_hex"]
    parsed = round_trip(hdr, payload)
    assert parsed.ev == case["ev"] and parsed.bth["padcnt"] == case.get("padcnt", 0)


def test_vector_sack_fields_parse_back():
    case = next(c for c in VECTORS if c["name"] == "sack_skip_once")
    parsed = parse_frame(bytes.fromhex(case["frame_hex"]))
    sack = case["sack"]
    for name in ("m", "pr", "cack_psn", "ack_psn_offset", "sack_offset", "mpr"):
        assert parsed.seth[name] == sack[name], name
    assert parsed.seth["sack_bitmap"] == int(sack["sack_bitmap"], 16)
    assert parsed.seth["entropy"] == case["ev"]
    assert parsed.cc_state["ooo_count"] == sack["ooo_count"]
    assert parsed.cc_state["placed_256"] == sack["placed_bytes_256"]
    assert bitmap_psns(parsed.seth["cack_psn"], parsed.seth["sack_offset"],
                       parsed.seth["sack_bitmap"]) == {1030, 1031, 1070}


@pytest.mark.parametrize("case", VECTORS, ids=[c["name"] for c in VECTORS])
def test_scapy_check_on_vectors(case):
    frame = bytes.fromhex(case["frame_hex"])
    pkt = check_frame(frame)
    assert bth_rtx(pkt) == case.get("rtx", 0)
    assert pkt[ScapyBTH].psn == case["psn"] and pkt[ScapyBTH].dqpn == case["dest_qpn"]
    assert str(IPv6Address(pkt[ScapyIPv6].dst)) == str(IPv6Address(case["outer_dst"]))
    corrupted = bytearray(frame)
    corrupted[-5] ^= 0x01                                     # last byte before the ICRC
    with pytest.raises(AssertionError, match="ICRC"):
        check_frame(bytes(corrupted))
    with pytest.raises(AssertionError):
        check_frame(frame + bytes(4))                        # scapy sees trailing padding
    long_plen = (len(frame) - UDP_OFFSET + 4).to_bytes(2, "big")
    with pytest.raises(AssertionError, match="inner IPv6 plen"):
        check_frame(corrupt(frame, INNER_OFFSET + 4, long_plen))


# --- Round trips ----------------------------------------------------------------------------------

@FAST
@given(packets)
def test_round_trip_every_kind(packet):
    round_trip(*packet)


@settings(max_examples=50, deadline=None)
@given(addresses, data_args())
def test_data_semantic_fields(addr, args):
    hdr, payload = data_packet(addr, **args)
    parsed = round_trip(hdr, payload)
    assert parsed.meth == {"rqmsn": args["rqmsn"], "msn": args["msn"]}
    assert parsed.reth == {"va": args["va"], "rkey": args["rkey"], "dma_length": args["dma_length"]}
    assert parsed.immdt == (None if args["imm"] is None else {"imm": args["imm"]})
    assert parsed.seth is parsed.neth is parsed.peth is parsed.cc_state is None
    assert parsed.ev == args["ev"] and parsed.bth["rtx"] == args["rtx"]
    assert parsed.bth["ackreq"] == (args["opcode"] in (Opcode.WRITE_LAST, Opcode.WRITE_LAST_IMM,
                                                       Opcode.WRITE_ONLY, Opcode.WRITE_ONLY_IMM))
    assert parsed.outer["dscp"] == (Dscp.TRIMMABLE_RETX if args["rtx"] else Dscp.TRIMMABLE)
    assert parsed.outer["ecn"] == Ecn.ECT0


@settings(max_examples=50, deadline=None)
@given(addresses, sack_args())
def test_sack_semantic_fields(addr, args):
    parsed = round_trip(*sack_packet(addr, **args))
    for name in ("m", "pr", "ack_psn_offset", "probe_id", "cack_psn", "mpr", "sack_offset",
                 "sack_bitmap"):
        assert parsed.seth[name] == args[name], name
    assert parsed.seth["entropy"] == parsed.ev == args["ev"]
    assert parsed.cc_state == {"ts_echo": 0, "rsvd0": 0, "ooo_count": args["ooo_count"], "r_c": 0,
                               "rcv_cwnd_pen": 0, "placed_256": args["placed_256"]}
    assert (parsed.outer["dscp"], parsed.outer["ecn"]) == (Dscp.CONTROL, Ecn.NOT_ECT)
    assert parsed.bth["psn"] == parsed.bth["ackreq"] == 0 and parsed.payload == b""


@settings(max_examples=40, deadline=None)
@given(addresses, nack_args, probe_args)
def test_nack_and_probe_semantic_fields(addr, nack, probe):
    parsed = round_trip(*nack_packet(addr, **nack))
    assert (parsed.neth["nack_reason"], parsed.neth["nack_psn"], parsed.neth["entropy"]) == \
        (nack["reason"], nack["nack_psn"], nack["ev"])
    assert (parsed.outer["dscp"], parsed.outer["ecn"]) == (Dscp.CONTROL, Ecn.NOT_ECT)
    parsed = round_trip(*probe_packet(addr, **probe))
    assert parsed.peth["probe_id"] == probe["probe_id"] and parsed.ev == probe["ev"]
    assert (parsed.outer["dscp"], parsed.outer["ecn"]) == (Dscp.TRIMMABLE, Ecn.ECT0)
    assert parsed.bth["psn"] == parsed.bth["ackreq"] == 0


@settings(max_examples=40, deadline=None)
@given(addresses, probe_args, u(24), st.sets(u(7)), st.sampled_from((0, 1)))
def test_probe_answer(addr, probe, cack, received_offsets, m):
    received = {(cack + 1 + i) % (1 << 24) for i in received_offsets}
    parsed = round_trip(*probe_answer(addr, **probe, cack_psn=cack, mpr=8, received=received, m=m))
    seth = parsed.seth
    assert (seth["pr"], seth["ack_psn_offset"], seth["sack_offset"]) == (1, 0, 1)
    assert (parsed.seth["probe_id"], parsed.seth["entropy"], parsed.seth["m"]) == \
        (probe["probe_id"], probe["ev"], m)
    assert bitmap_psns(cack, 1, parsed.seth["sack_bitmap"]) == \
        {p for p in received if (p - cack - 1) % (1 << 24) < 64}


# --- Edge values ----------------------------------------------------------------------------------

EDGE_DATA = dict(opcode=Opcode.WRITE_ONLY, ev=0x12345678, dest_qpn=7, psn=1, rqmsn=0, msn=0,
                 va=0, rkey=0, dma_length=0)


@pytest.mark.parametrize("size", [0, 1, 2, 3, 4, 5, 255, PMTU_MAX])
@pytest.mark.parametrize("opcode", DATA_OPCODES)
def test_payload_sizes(size, opcode):
    payload = bytes((i * 7 + 3) & 0xFF for i in range(size))
    args = dict(EDGE_DATA, opcode=opcode, payload=payload, dma_length=size,
                imm=0xFFFFFFFF if opcode in IMM_OPCODES else None)
    parsed = round_trip(*data_packet(ADDR, **args))
    assert parsed.bth["padcnt"] == -size & 3
    assert len(build_frame(*data_packet(ADDR, **args))) == \
        header_length(opcode) + size + (-size & 3) + 4


@pytest.mark.parametrize("field,value", [
    ("psn", 0), ("psn", (1 << 24) - 1), ("dest_qpn", 0), ("dest_qpn", (1 << 24) - 1),
    ("ev", 0), ("ev", (1 << 32) - 1), ("rqmsn", 0xFFFF), ("msn", 0xFFFF), ("va", (1 << 64) - 1),
    ("rkey", (1 << 32) - 1), ("dma_length", (1 << 32) - 1),
])
def test_data_edge_values(field, value):
    parsed = round_trip(*data_packet(ADDR, **dict(EDGE_DATA, **{field: value})))
    assert {"psn": parsed.bth["psn"], "dest_qpn": parsed.bth["dest_qpn"], "ev": parsed.ev,
            **parsed.meth, **parsed.reth}[field] == value


@pytest.mark.parametrize("hop_limit", [0, 1, 64, 255])
def test_hop_limit_edges(hop_limit):
    addr = Addresses(**{**ADDR.fields(), "hop_limit": hop_limit})
    assert round_trip(*data_packet(addr, **EDGE_DATA)).outer["hop_limit"] == hop_limit


@pytest.mark.parametrize("ev", [0, 0xFFFF, 0x10000, (1 << 32) - 1])
def test_path_fields(ev):
    fields = path_fields(ev)
    assert fields == {"flow_label": ev & 0xFFFF, "udp_sport": ev >> 16}
    assert fields["flow_label"] >> 16 == 0                     # {4'b0, EV[15:0]}


@pytest.mark.parametrize("offset", [-(1 << 15), -1, 0, 1, (1 << 15) - 1])
def test_signed_offsets(offset):
    parsed = round_trip(*sack_packet(ADDR, ev=1, dest_qpn=(1 << 24) - 1, cack_psn=(1 << 24) - 1,
                                     mpr=0xFF, ack_psn_offset=offset, sack_offset=-offset - 1,
                                     sack_bitmap=(1 << 64) - 1, ooo_count=(1 << 15) - 1,
                                     placed_256=(1 << 24) - 1))
    assert (parsed.seth["ack_psn_offset"], parsed.seth["sack_offset"]) == (offset, -offset - 1)


@pytest.mark.parametrize("probe_id", [0, 0xFFFF])
def test_probe_id_edges(probe_id):
    assert round_trip(*probe_packet(ADDR, ev=0, dest_qpn=0, probe_id=probe_id)) \
        .peth["probe_id"] == probe_id
    assert round_trip(*probe_answer(ADDR, ev=0, dest_qpn=0, probe_id=probe_id, cack_psn=0,
                                    mpr=8)).seth["probe_id"] == probe_id


@pytest.mark.parametrize("call,match", [
    (lambda: data_packet(ADDR, **dict(EDGE_DATA, opcode=Opcode.SACK)), "not a Write"),
    (lambda: data_packet(ADDR, **dict(EDGE_DATA, opcode=Opcode.WRITE_ONLY_IMM)), "needs ImmDt"),
    (lambda: data_packet(ADDR, **dict(EDGE_DATA, imm=1)), "takes no ImmDt"),
    (lambda: data_packet(ADDR, **dict(EDGE_DATA, payload=bytes(PMTU_MAX + 1))), "PMTU"),
    (lambda: data_packet(ADDR, **dict(EDGE_DATA, rtx=2)), "rtx"),
    (lambda: data_packet(ADDR, **dict(EDGE_DATA, psn=1 << 24)), "PSN"),
    (lambda: data_packet(ADDR, **dict(EDGE_DATA, dest_qpn=1 << 24)), "QPN"),
    (lambda: data_packet(ADDR, **dict(EDGE_DATA, ev=1 << 32)), "EV"),
    (lambda: data_packet(ADDR, **dict(EDGE_DATA, ev=-1)), "EV"),
    (lambda: data_packet(ADDR, **dict(EDGE_DATA, msn=1 << 16)), "does not fit"),
    (lambda: sack_packet(ADDR, ev=0, dest_qpn=0, cack_psn=0, mpr=8,
                         m=SackVerdict.ALWAYS_SKIP), "never sent"),
    (lambda: sack_packet(ADDR, ev=0, dest_qpn=0, cack_psn=0, mpr=8, pr=1, ack_psn_offset=1),
     "ack_psn_offset 0"),
    (lambda: sack_packet(ADDR, ev=0, dest_qpn=0, cack_psn=0, mpr=8, probe_id=1), "probe_id"),
    (lambda: sack_packet(ADDR, ev=0, dest_qpn=0, cack_psn=0, mpr=8, sack_offset=1 << 15),
     "signed 16"),
    (lambda: sack_packet(ADDR, ev=0, dest_qpn=0, cack_psn=0, mpr=8, ack_psn_offset=-(1 << 15) - 1),
     "signed 16"),
    (lambda: nack_packet(ADDR, ev=0, dest_qpn=0, reason=0x03, nack_psn=0), "reason"),
    (lambda: Addresses(**{**ADDR.fields(), "hop_limit": 256}), "hop limit"),
])
def test_builders_refuse_bad_fields(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# --- SACK bitmap rule (docs/protocol.md 2.1) ---------------------------------------------------------------

@pytest.mark.parametrize("cack,trigger,received,expected", [
    (1000, 1070, {1030, 1031, 1070}, (24, 0x0300000000020000)),        # the vector's case
    (1000, 1001, {1001}, (1, 1 << 63)),                                 # block at or below cack
    (1023, 1024, {1024, 1087, 1088}, (1, 1 << 63 | 1)),                 # base = block start
    (41, 41, (), (1, 0)),                                               # probe answer
    (1000, 900, {1001}, (1, 1 << 63)),                                  # duplicate below cack
    ((1 << 24) - 2, 5, {(1 << 24) - 1, 0, 5}, (2, 1 << 63 | 1 << 58)),      # block 0 is ahead
    ((1 << 24) - 10, (1 << 24) - 1, {(1 << 24) - 1, 0, 54, 55}, (1, 1 << 55 | 1 << 54 | 1)),
    ((1 << 24) - 70, (1 << 24) - 1, {(1 << 24) - 1}, (6, 1)),        # block 2^24-64..2^24-1
])
def test_sack_bitmap_cases(cack, trigger, received, expected):
    assert sack_bitmap(cack, trigger, received) == expected


@settings(max_examples=150, deadline=None)
@given(u(24), st.integers(-200, 1024), st.sets(st.integers(-100, 1100), max_size=40))
def test_sack_bitmap_rule(cack, ahead, offsets):
    modulus = 1 << 24
    trigger = (cack + ahead) % modulus
    received = {(cack + i) % modulus for i in offsets}
    offset, bitmap = sack_bitmap(cack, trigger, received)
    base = (cack + offset) % modulus
    assert 1 <= offset <= 1024                                # base is always past cack_psn
    assert base % 64 == 0 or base == (cack + 1) % modulus
    if ahead > 0:
        assert (trigger - base) % modulus < 64                # the trigger is in the bitmap
    window = {(base + i) % modulus for i in range(64)}
    assert bitmap_psns(cack, offset, bitmap) == received & window


def test_psn_offset():
    assert psn_offset(5, (1 << 24) - 3) == 8
    assert psn_offset((1 << 24) - 3, 5) == -8
    assert psn_offset((1 << 15) - 1, 0) == (1 << 15) - 1
    with pytest.raises(ValueError, match="signed 16"):
        psn_offset(1 << 15, 0)


# --- Trimmed frames -------------------------------------------------------------------------------

@pytest.mark.parametrize("opcode", DATA_OPCODES)
@pytest.mark.parametrize("keep", [TRIM_MIN_BYTES, TRIM_MIN_BYTES + 3, 256])
@pytest.mark.parametrize("dscp", [Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP])
def test_trimmed_data_frame(opcode, keep, dscp):
    args = dict(EDGE_DATA, opcode=opcode, payload=bytes(range(200)) * 5, dma_length=1000,
                imm=0xABCD if opcode in IMM_OPCODES else None, va=0x1234, rkey=0x55)
    hdr, payload = data_packet(ADDR, **args)
    whole = parse_frame(build_frame(hdr, payload))
    parsed = parse_frame(trim(build_frame(hdr, payload), keep, dscp))
    assert parsed.trimmed and not parsed.icrc_ok and parsed.icrc == parsed.pad == b""
    assert parsed.outer["dscp"] == dscp
    assert (parsed.bth, parsed.meth, parsed.reth, parsed.inner["src"], parsed.ev) == \
        (whole.bth, whole.meth, whole.reth, whole.inner["src"], whole.ev)
    imm_kept = opcode in IMM_OPCODES and keep >= header_length(opcode)
    assert parsed.immdt == (whole.immdt if imm_kept else None)
    start = header_length(opcode) if imm_kept else TRIM_MIN_BYTES
    assert parsed.payload == build_frame(hdr, payload)[start:keep]


def test_trimmed_short_and_trimmed_probe():
    frame = build_frame(*data_packet(ADDR, **dict(EDGE_DATA, payload=bytes(300))))
    with pytest.raises(FrameError) as err:
        parse_frame(trim(frame, TRIM_MIN_BYTES - 1))
    assert err.value.reason == "trimmed_short"
    probe = build_frame(*probe_packet(ADDR, ev=5, dest_qpn=9, probe_id=3))
    parsed = parse_frame(trim(probe, 256))                    # kept whole, outer DSCP TRIMMED
    assert parsed.trimmed and parsed.icrc_ok and parsed.peth["probe_id"] == 3


# --- Malformed frames -----------------------------------------------------------------------------

def corrupt(frame, offset, value):
    out = bytearray(frame)
    out[offset:offset + len(value)] = value
    return bytes(out)


GOOD = build_frame(*data_packet(ADDR, **dict(EDGE_DATA, payload=bytes(10))))
CORRUPTIONS = {             # reason -> function making a frame that fails (only) that check
    "ethertype": lambda f: corrupt(f, 12, b"\x08\x00"),
    "next_header": lambda f: corrupt(f, OUTER_OFFSET + 6, b"\x11"),
    "length": lambda f: corrupt(f, UDP_OFFSET + 4, (len(f) - UDP_OFFSET + 4).to_bytes(2, "big")),
    "inner_dst": lambda f: corrupt(f, INNER_OFFSET + 39, b"\x01"),
    "udp_port": lambda f: corrupt(f, UDP_OFFSET + 2, b"\x12\xb8"),
    "tver": lambda f: corrupt(f, BTH_OFFSET + 1, bytes([f[BTH_OFFSET + 1] | 1])),
    "pkey": lambda f: corrupt(f, BTH_OFFSET + 2, b"\x7f\xff"),
    "opcode": lambda f: corrupt(f, BTH_OFFSET, b"\xd1"),
}


def test_reasons_listed_in_check_order():
    order = ["short"] + list(CORRUPTIONS) + ["trimmed_short"]
    assert list(FRAME_ERROR_REASONS) == order


@pytest.mark.parametrize("reason", list(CORRUPTIONS))
def test_malformed_single(reason):
    with pytest.raises(FrameError) as err:
        parse_frame(CORRUPTIONS[reason](GOOD), inner_dst=ADDR.inner_dst)
    assert err.value.reason == reason and isinstance(err.value, ValueError)
    assert str(err.value).startswith(reason)


@settings(max_examples=60, deadline=None)
@given(st.sets(st.sampled_from(list(CORRUPTIONS)), min_size=1))
def test_malformed_first_check_wins(reasons):
    frame = GOOD
    for reason in reasons:
        frame = CORRUPTIONS[reason](frame)
    first = next(r for r in CORRUPTIONS if r in reasons)
    with pytest.raises(FrameError) as err:
        parse_frame(frame, inner_dst=ADDR.inner_dst)
    assert err.value.reason == first


@pytest.mark.parametrize("size", [0, 1, 60, 117])
def test_malformed_short(size):
    with pytest.raises(FrameError) as err:
        parse_frame(GOOD[:size])
    assert err.value.reason == "short"


@pytest.mark.parametrize("opcode", [0x00, 0x0A, 0xC5, 0xCC, 0xD1, 0xD8, 0xD9, 0xDF, 0xFF])
def test_unknown_opcodes(opcode):
    with pytest.raises(FrameError) as err:
        parse_frame(corrupt(GOOD, BTH_OFFSET, bytes([opcode])))
    assert err.value.reason == "opcode"


def test_opcode_length_mismatch():
    zero = build_frame(*data_packet(ADDR, **EDGE_DATA))        # 0-byte Write, PadCnt 0
    with pytest.raises(FrameError, match="PadCnt") as err:    # PadCnt 3 with no payload
        parse_frame(corrupt(zero, BTH_OFFSET + 1, b"\x30"))
    assert err.value.reason == "length"
    nack = build_frame(*nack_packet(ADDR, ev=0, dest_qpn=0, reason=1, nack_psn=0))
    for bad in (relength(nack[:-8] + nack[-4:]), relength(nack[:-4] + bytes(4) + nack[-4:])):
        with pytest.raises(FrameError) as err:                # NETH cut, or bytes after it
            parse_frame(bad)
        assert err.value.reason == "length"
    # a data opcode on a frame too short for METH + RETH
    with pytest.raises(FrameError) as err:
        parse_frame(relength(corrupt(build_frame(*probe_packet(ADDR, ev=0, dest_qpn=0,
                                                               probe_id=0)), BTH_OFFSET, b"\xca")))
    assert err.value.reason == "length"


def test_bad_icrc_is_reported_not_raised():
    bad = corrupt(GOOD, len(GOOD) - 5, b"\x55")
    assert not parse_frame(bad).icrc_ok
    masked = corrupt(GOOD, INNER_OFFSET + 7, b"\x00")         # inner Hop Limit: masked by ICRC
    assert parse_frame(masked).icrc_ok
    assert parse_frame(GOOD, inner_dst=str(IPv6Address(ADDR.inner_dst))).icrc_ok


def test_frame_error_reason_checked():
    with pytest.raises(ValueError, match="unknown frame error reason"):
        FrameError("bogus", "x")

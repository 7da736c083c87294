# SPDX-License-Identifier: BSD-2-Clause
"""scapy's independent reading (verif/scapy_check.py) of frames out of the header inserter model
and the path-building model: random records, every field random, read back with their stack,
lengths, ICRC and BTH.RTX."""

import ipaddress
import random

import pytest
from scapy.contrib.roce import BTH
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6

from models.header_inserter import HeaderInserterModel, Packet
from models.layouts import CONTROL_OPCODES, DATA_OPCODES, KNOWN_OPCODES
from models.packets import build_frame
from models.records import TX_HEADER, TX_PACKET
from models.spray import Choice
from models.tx_path import QpContext, TxPathModel
from verif.scapy_check import bth_rtx, check_frame

CASES = 40


def random_record(rng, layout, **fixed):
    """A record of ``layout`` with every field random but those given."""
    rec = {name: rng.getrandbits(width) for name, width in layout.fields}
    rec.update(fixed)
    return rec


@pytest.mark.parametrize("seed", range(4))
def test_scapy_reads_every_good_frame_of_the_header_inserter(seed):
    rng = random.Random(seed)
    payload = bytes(range(256)) * 6
    for _ in range(CASES):
        opcode = rng.choice(KNOWN_OPCODES)
        length = 0 if opcode in CONTROL_OPCODES else rng.randrange(1501)
        rec = random_record(rng, TX_HEADER, opcode=opcode, length=length)
        frame = HeaderInserterModel().push(rec, Packet(payload[:length]) if length else None)
        assert_fields(check_frame(frame.data), rec, payload[:length], frame.data)


def assert_fields(pkt, rec, payload, frame):
    """Every field of the record that scapy names, read by scapy from the frame (audit #14: the
    model's own tests compare its frames with ``build_frame``, which builds them)."""
    def mac(value):
        return ":".join(f"{b:02x}" for b in value.to_bytes(6, "big"))

    def ip6(value):
        return str(ipaddress.IPv6Address(value))

    outer, inner = pkt[IPv6], pkt[IPv6].payload
    got = dict(eth_dst=pkt.dst, eth_src=pkt.src, dscp=outer.tc >> 2, ecn=outer.tc & 3,
               flow_label=outer.fl, hop_limit=outer.hlim, outer_src=outer.src,
               outer_dst=outer.dst, inner_src=inner.src, inner_dst=inner.dst,
               udp_sport=pkt[UDP].sport, opcode=pkt[BTH].opcode, dest_qpn=pkt[BTH].dqpn,
               ackreq=pkt[BTH].ackreq, rtx=bth_rtx(pkt), psn=pkt[BTH].psn)
    want = dict(eth_dst=mac(rec["eth_dst"]), eth_src=mac(rec["eth_src"]), dscp=rec["dscp"],
                ecn=rec["ecn"], flow_label=rec["flow_label"], hop_limit=rec["hop_limit"],
                outer_src=ip6(rec["outer_src"]), outer_dst=ip6(rec["outer_dst"]),
                inner_src=ip6(rec["inner_src"]), inner_dst=ip6(rec["inner_dst"]),
                udp_sport=rec["udp_sport"], opcode=rec["opcode"], dest_qpn=rec["dest_qpn"],
                ackreq=rec["ackreq"], rtx=rec["rtx"], psn=rec["psn"])
    assert got == want
    # inner Traffic Class and Flow Label copied from the outer (docs/protocol.md 1.3)
    assert (inner.tc, inner.fl) == (outer.tc, outer.fl)
    if payload:     # ahead of the pad bytes (BTH PadCnt, read by scapy) and the ICRC
        end = len(frame) - 4 - pkt[BTH].padcount
        assert frame[end - len(payload):end] == payload


@pytest.mark.parametrize("seed", range(4))
def test_scapy_reads_data_frames_of_path_building(seed):
    rng = random.Random(seed)
    model = TxPathModel(n_qps=8, n_planes=4, max_payload=1024)
    model.set_nic(own_host=0x0A0B0C0D, own_t0=17)
    for p in range(4):
        model.set_port(p, 0x020000000000 | p, 0x02FF00000000 | p)
    for q in range(0, 8, 2):
        model.set_qp(q, QpContext(peer_qpn=0x100 + q, peer_host=0x1000 + q, peer_t0=40 + q,
                                  peer_port=5 + q))
    for _ in range(CASES):
        pkt = random_record(rng, TX_PACKET, qpn=rng.choice((0, 2, 4, 6)),
                            opcode=rng.choice(DATA_OPCODES), length=rng.randrange(1025))
        ev = rng.randrange(4) | rng.randrange(256) << 4 | rng.getrandbits(20) << 12
        result = model.data(pkt, Choice(ev & 0xF, 0, ev, 0), 0, 0xF)
        scapy_pkt = check_frame(build_frame(result.header, bytes(pkt["length"])))
        assert bth_rtx(scapy_pkt) == pkt["rtx"]

# SPDX-License-Identifier: BSD-2-Clause
"""scapy's independent reading (verif/scapy_check.py) of frames out of the header inserter model
and the path-building model: random records, every field random, read back with their stack,
lengths, ICRC and BTH.RTX."""

import random

import pytest

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
        check_frame(frame.data)


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

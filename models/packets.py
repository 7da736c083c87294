"""Golden model of MRC frames (profile sections 1, 2 and 6): build from fields, parse back, ICRC.

The core is :func:`build_frame`, which turns a :data:`models.records.TX_HEADER` record (a dict of
its fields) and a payload into the complete Ethernet frame (no preamble, no FCS) with its ICRC,
exactly as the header inserter must; and :func:`icrc`, the RoCEv2 invariant CRC of profile 1.6.
Layouts come from :mod:`models.layouts`; nothing here imports cocotb, Amaranth or scapy.
"""

import zlib

from .layouts import (
    BTH, ETH, IPV6, UDP, ETHERTYPE_IPV6, NEXT_HEADER_IPV6, NEXT_HEADER_UDP, ROCE_UDP_PORT,
    PKEY_DEFAULT, HOP_LIMIT_DEFAULT, INNER_OFFSET, ICRC_MASKED_BITS, ICRC_BYTES, DATA_OPCODES,
    ext_length, pad_count,
)
from .records import TX_HEADER, int_to_ext

__all__ = ["icrc", "build_frame", "frame_length", "ICRC_PREFIX"]

ICRC_PREFIX = b"\xff" * 8


def icrc(frame):
    """The 4 ICRC bytes (stored least-significant byte first) of a frame without its ICRC."""
    covered = bytearray(frame[INNER_OFFSET:])
    for bit, width in ICRC_MASKED_BITS:
        for b in range(bit, bit + width):
            byte = b // 8 - INNER_OFFSET
            covered[byte] |= 0x80 >> (b % 8)
    return zlib.crc32(ICRC_PREFIX + bytes(covered)).to_bytes(4, "little")


def frame_length(opcode, length):
    """Bytes of the whole frame (ICRC included) for ``opcode`` and a payload of ``length`` bytes."""
    return INNER_OFFSET + IPV6.size + UDP.size + BTH.size + ext_length(opcode) + length + \
        pad_count(length) + ICRC_BYTES


def build_frame(hdr, payload=b""):
    """The frame of a :data:`TX_HEADER` record ``hdr`` (dict; missing fields are 0) and payload.

    ``hdr["length"]`` must equal ``len(payload)``; control opcodes take no payload. Raises
    ValueError for an unknown opcode or a length mismatch (the header inserter drops and counts
    such records; see ``models/header_inserter.py``).
    """
    h = {name: 0 for name in TX_HEADER.names}
    h.update(hdr)
    opcode = h["opcode"]
    n_ext = ext_length(opcode)          # raises on an unknown opcode
    if h["length"] != len(payload):
        raise ValueError(f"record length {h['length']} != payload of {len(payload)} B")
    if opcode not in DATA_OPCODES and payload:
        raise ValueError(f"opcode {opcode:#04x} carries no payload")
    pad = pad_count(len(payload))
    body = int_to_ext(h["ext"], n_ext) + bytes(payload) + bytes(pad)
    bth = BTH.pack(opcode=opcode, padcnt=pad, pkey=PKEY_DEFAULT, dest_qpn=h["dest_qpn"],
                   ackreq=h["ackreq"], rtx=h["rtx"], psn=h["psn"])
    udp_len = UDP.size + len(bth) + len(body) + ICRC_BYTES
    udp = UDP.pack(sport=h["udp_sport"], dport=ROCE_UDP_PORT, length=udp_len, checksum=0)
    inner = IPV6.pack(version=6, dscp=h["dscp"], ecn=h["ecn"], flow_label=h["flow_label"],
                      payload_length=udp_len, next_header=NEXT_HEADER_UDP,
                      hop_limit=HOP_LIMIT_DEFAULT, src=h["inner_src"], dst=h["inner_dst"])
    outer = IPV6.pack(version=6, dscp=h["dscp"], ecn=h["ecn"], flow_label=h["flow_label"],
                      payload_length=IPV6.size + udp_len, next_header=NEXT_HEADER_IPV6,
                      hop_limit=h["hop_limit"], src=h["outer_src"], dst=h["outer_dst"])
    eth = ETH.pack(dst=h["eth_dst"], src=h["eth_src"], ethertype=ETHERTYPE_IPV6)
    frame = eth + outer + inner + udp + bth + body
    return frame + icrc(frame)

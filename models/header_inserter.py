# SPDX-License-Identifier: BSD-2-Clause
"""Golden model of the header inserter (NIC transmit side, docs/protocol.md sections 1, 2 and 8).

The block takes a stream of :data:`models.records.TX_HEADER` records and a stream of payload
packets (AXI-Stream, payload bytes only) and emits one complete frame per good record:
:func:`models.packets.build_frame` of the record and its payload, split into beats of W/8 bytes.

Pairing (docs/protocol.md 8): a record with ``length`` 0 owns no payload beats; a record with ``length`` > 0
owns the next payload packet, up to and including its ``tlast`` beat, whatever the packet's size.

Defined answers to bad input (the RTL does exactly this, and the bench compares even these cases):

- unknown opcode (not one of docs/protocol.md 1.4's nine): the record is dropped and counted
  (``drop_opcode``); its packet, if it owns one, is consumed and discarded;
- a control opcode (SACK, NACK, probe) with ``length`` > 0: dropped the same way
  (``drop_ctrl_len``): control packets carry no payload (docs/protocol.md section 2);
- ``length`` above the block's ``max_payload``: dropped the same way (``drop_oversize``);
- a packet shorter than ``length``: the frame is completed with zero bytes up to ``length`` (the
  headers stay true), flagged bad (``tuser[0]`` = 1 on its last beat) and counted
  (``short_payload``);
- a packet longer than ``length``: the excess bytes are discarded up to ``tlast``, the frame is
  flagged bad and counted (``long_payload``);
- a packet whose ``tlast`` beat carries ``tuser[0]`` = 1 (marked bad upstream): counted
  (``payload_bad_in``) and, when a frame is built from it, that frame is flagged bad;
- ``tkeep``: ignored on every beat but the last (all its bytes count); on the last beat the packet
  ends after the run of ones from lane 0 (:func:`packet_bytes`).

Nothing here imports cocotb, Amaranth or scapy.
"""

from dataclasses import dataclass

from .layouts import (
    BTH, IPV6, UDP, ICRC_BYTES, DATA_OPCODES, CONTROL_OPCODES, KNOWN_OPCODES, HOP_LIMIT_DEFAULT,
    ext_length, ip6, mac,
)
from .packets import build_frame
from .records import TX_HEADER, ext_to_int

__all__ = [
    "HeaderInserterModel", "Packet", "OutFrame", "COUNTERS", "INFO", "MAX_PAYLOAD_LIMIT",
    "packet_bytes", "frame_beats", "record_from_vector",
]

# The configuration map (word addresses): 32-bit counters, cleared when written.
COUNTERS = {
    "frames_out": 0x00,       # frames emitted (flagged bad or not)
    "bad_frames_out": 0x01,   # frames emitted with tuser[0] = 1
    "bytes_out": 0x02,        # frame bytes emitted (ICRC included)
    "records_in": 0x03,       # header records accepted
    "drop_opcode": 0x04,      # records dropped: unknown opcode
    "drop_ctrl_len": 0x05,    # records dropped: control opcode with length > 0
    "drop_oversize": 0x06,    # records dropped: length > max_payload
    "short_payload": 0x07,    # frames whose packet was shorter than the record's length
    "long_payload": 0x08,     # frames whose packet was longer than the record's length
    "payload_bad_in": 0x09,   # packets whose tlast beat had tuser[0] = 1
}
# Read-only words describing the instance.
INFO = {"data_width": 0x10, "max_payload": 0x11}

# The largest payload whose frame still fits the 16-bit IPv6 Payload Length (with pad):
# 40 + UDP + BTH + the longest data extension headers + payload + pad + ICRC <= 0xFFFF.
_DATA_OVERHEAD = IPV6.size + UDP.size + BTH.size + max(ext_length(op) for op in DATA_OPCODES) + \
    ICRC_BYTES
MAX_PAYLOAD_LIMIT = (0xFFFF - _DATA_OVERHEAD) & ~3


@dataclass(frozen=True)
class Packet:
    """A payload packet as the block reads it: its bytes and the ``tuser[0]`` of its last beat."""
    data: bytes
    bad: bool = False


@dataclass(frozen=True)
class OutFrame:
    """One emitted frame: its bytes and whether it is flagged bad (tuser[0] on its last beat)."""
    data: bytes
    bad: bool


def packet_bytes(data, keep, data_width):
    """The payload bytes the block takes from a packet sent as ``data`` with per-byte ``keep``
    flags in beats of ``data_width`` bits: every byte of every beat but the last, and on the last
    beat the bytes before its first ``keep`` = 0 lane."""
    lanes = data_width // 8
    if len(data) != len(keep) or not data:
        raise ValueError("a packet has at least one beat and one keep flag per byte")
    last = (len(data) - 1) // lanes * lanes
    n = last
    while n < len(data) and keep[n]:
        n += 1
    return bytes(data[:n])


def record_from_vector(case):
    """The :data:`TX_HEADER` record (dict) and payload of a case of the conformance vectors'
    ``packets.json``: its EV gives the UDP source port and Flow Label, its ``ext_hex`` holds the
    extension headers, the payload and ``padcnt`` pad bytes."""
    opcode = case["opcode"]
    body = bytes.fromhex(case["ext_hex"])
    n_ext = ext_length(opcode)
    payload = body[n_ext:len(body) - case.get("padcnt", 0)]
    record = {
        "eth_dst": mac(case["eth_dst"]), "eth_src": mac(case["eth_src"]),
        "dscp": case["dscp"], "ecn": case["ecn"], "flow_label": case["ev"] & 0xFFFF,
        "hop_limit": case.get("hop_limit", HOP_LIMIT_DEFAULT),
        "outer_src": ip6(case["outer_src"]), "outer_dst": ip6(case["outer_dst"]),
        "inner_src": ip6(case["inner_src"]), "inner_dst": ip6(case["inner_dst"]),
        "udp_sport": case["ev"] >> 16, "opcode": opcode, "dest_qpn": case["dest_qpn"],
        "ackreq": case.get("ackreq", 0), "rtx": case.get("rtx", 0), "psn": case["psn"],
        "ext": ext_to_int(body[:n_ext]), "length": len(payload),
    }
    return record, payload


def frame_beats(frame, data_width):
    """``(data, keep, last, user)`` per beat of an :class:`OutFrame`: ``data`` holds the beat's
    valid bytes, ``keep`` is all ones but on the last beat, ``user`` is 1 only on the last beat of a
    bad frame."""
    lanes = data_width // 8
    beats = []
    for start in range(0, len(frame.data), lanes):
        chunk = frame.data[start:start + lanes]
        last = start + lanes >= len(frame.data)
        beats.append((chunk, (1 << len(chunk)) - 1, int(last), int(last and frame.bad)))
    return beats


class HeaderInserterModel:
    """The header inserter's answers and counters, one record at a time.

    ``data_width`` (64, 128, 256, 512) only shapes :meth:`beats`; ``max_payload`` is the largest
    ``length`` accepted (1..:data:`MAX_PAYLOAD_LIMIT`, default 4096, the profile's largest PMTU).
    """

    def __init__(self, data_width=64, max_payload=4096):
        if data_width not in (64, 128, 256, 512):
            raise ValueError(f"data_width must be 64, 128, 256 or 512, not {data_width!r}")
        if not isinstance(max_payload, int) or not 1 <= max_payload <= MAX_PAYLOAD_LIMIT:
            raise ValueError(f"max_payload must be 1..{MAX_PAYLOAD_LIMIT}, not {max_payload!r}")
        self.data_width = data_width
        self.max_payload = max_payload
        self.counters = dict.fromkeys(COUNTERS, 0)

    def info(self):
        """The read-only words of the configuration map."""
        return {"data_width": self.data_width, "max_payload": self.max_payload}

    def push(self, record, packet=None):
        """Process one record (dict of :data:`TX_HEADER` fields; missing ones are 0) and the
        :class:`Packet` it owns (required when ``length`` > 0, refused otherwise). Returns the
        :class:`OutFrame`, or None when the record is dropped."""
        rec = dict.fromkeys(TX_HEADER.names, 0)
        rec.update(record)
        length, opcode = rec["length"], rec["opcode"]
        if (packet is None) != (length == 0):
            raise ValueError(f"a record of length {length} owns "
                             f"{'a packet' if length else 'no packet'}")
        c = self.counters
        c["records_in"] += 1
        if packet is not None and packet.bad:
            c["payload_bad_in"] += 1
        if opcode not in KNOWN_OPCODES:
            c["drop_opcode"] += 1
            return None
        if opcode in CONTROL_OPCODES and length:
            c["drop_ctrl_len"] += 1
            return None
        if length > self.max_payload:
            c["drop_oversize"] += 1
            return None
        data = packet.data if packet is not None else b""
        bad = packet is not None and packet.bad
        if len(data) < length:
            c["short_payload"] += 1
            bad = True
        elif len(data) > length:
            c["long_payload"] += 1
            bad = True
        payload = (bytes(data) + bytes(length))[:length]
        frame = OutFrame(build_frame(rec, payload), bad)
        c["frames_out"] += 1
        c["bad_frames_out"] += bad
        c["bytes_out"] += len(frame.data)
        return frame

    def beats(self, frame):
        """The beats of ``frame`` at this instance's width (see :func:`frame_beats`)."""
        return frame_beats(frame, self.data_width)

# SPDX-License-Identifier: BSD-2-Clause
"""Golden model of path building and the control-frame path (NIC transmit; docs/protocol.md 1-4.5 and 8).

Path building turns one data packet of the segmenter (a :data:`models.records.TX_PACKET`) and the
spray choice made for it (:class:`models.spray.Choice`) into the :data:`TX_HEADER` record of the
header inserter, the :data:`SEND_RECORD` for the reliability block and the :data:`PLANE_FRAME`
record for the plane splitter. The control-frame path does the same for a
:data:`CONTROL_RECORD` (SACK, NACK, probe answer or probe), which takes no spray choice: it goes
on the plane and T1 of its own ``ev`` (docs/protocol.md 4.5).

Configuration (what the RTL holds in registers and a QP context memory):

- NIC-wide: ``own_host`` (32-bit host id), ``own_t0`` (index of the T0 above this NIC, 10 bits),
  the locator ``block`` (default ``fd00:0200::/32``), and per plane port p the source MAC
  ``src_mac[p]`` and the next hop's MAC ``dst_mac[p]``;
- per QP (:class:`QpContext`): the peer's QPN, host id, T0 index and host port (the downlink port
  of the peer's T0), and an enable bit.

Header fields (docs/protocol.md 1.1-1.3, 2, 3, 4.1, 6):

- Ethernet: ``src_mac[plane]`` -> ``dst_mac[plane]``;
- outer IPv6: source ``fd00:0:<plane>::<own_host>`` (:func:`plane_address`), destination the uSID
  carrier of the EV (:func:`models.usid.ev_carrier` for data, :func:`models.usid.reverse_carrier`
  for control: both ``T0(own) | T1(j) | T0(peer) | HOST(peer port)``, or ``T0 | HOST(peer port)``
  when own and peer T0 are the same), Hop Limit 64, Flow Label ``{4'b0, EV[15:0]}``;
- inner IPv6: ``fd00:ffff::<own_host>`` -> ``fd00:ffff::<peer_host>`` (:func:`nic_address`);
- UDP source port EV[31:16]; BTH DestQP = the peer's QPN;
- data: :func:`models.packets.data_packet` (DSCP TRIMMABLE, or TRIMMABLE_RETX with BTH.RTX for a
  retransmission; ECT(0); AckReq on the LAST and ONLY opcodes; METH, RETH and ImmDt from the
  packet);
- control: SACK and NACK DSCP CONTROL and Not-ECT, probes DSCP TRIMMABLE and ECT(0) (as
  :mod:`models.packets` builds them); PSN 0, AckReq 0, RTX 0; ``ext`` is the record's, as it is
  (the header inserter takes the opcode's extension bytes from it).

Defined answers to bad input (counted, see :data:`COUNTERS`):

- a TX_PACKET whose opcode is not a Write opcode or whose ``length`` exceeds ``max_payload``
  (``drop_packet``), or whose QP is not enabled or not below ``n_qps`` (``drop_packet_qp``), takes
  no spray choice and gives a TX_HEADER with opcode 0 and the packet's ``length`` (every other field
  0): the header inserter drops that record and discards its payload, so the payload stream stays
  paired. No send record, no plane frame;
- a CONTROL_RECORD whose opcode is not SACK, NACK or PROBE (``drop_control``), whose QP is not
  enabled (``drop_control_qp``) or whose EV names a plane not below N (``drop_control_plane``) is
  dropped: nothing goes out.

A control record for a plane that is down goes on: the plane splitter flushes it and counts it.

Nothing here imports cocotb, Amaranth or scapy.
"""

from dataclasses import dataclass

from .layouts import CONTROL_OPCODES, DATA_OPCODES, IMM_OPCODES, Dscp, Ecn, Opcode
from .packets import PMTU_MAX, Addresses, data_packet, frame_length, path_fields
from .records import CONTROL_RECORD, SEND_RECORD, TX_HEADER, TX_PACKET
from .usid import DEFAULT_BLOCK, INDEX_LIMIT, ev_carrier, reverse_carrier

__all__ = [
    "QpContext", "TxPathModel", "DataResult", "ControlResult", "COUNTERS", "MAX_QPS",
    "MAX_PLANES", "plane_address", "nic_address", "drop_header", "PLANE_PREFIX", "NIC_PREFIX",
]

MAX_QPS = 256
MAX_PLANES = 8                      # SEND_RECORD.room_mask and SPRAY_REQUEST.plane_ok are 8 bits
PLANE_PREFIX = 0xFD00 << 112        # fd00:0:<plane>::<host>
NIC_PREFIX = 0xFD00FFFF << 96       # fd00:ffff::<host>

# Counters of the block (word addresses of the RTL configuration map; 32 bits, clear on write).
COUNTERS = {
    "packets_in": 0x10,             # TX_PACKET records accepted
    "data_sent": 0x11,              # data headers sent with a spray choice
    "retries": 0x12,                # spray answers with found = 0 (the packet asks again)
    "drop_packet": 0x13,            # TX_PACKET with a non-Write opcode or length > max_payload
    "drop_packet_qp": 0x14,         # TX_PACKET of a QP not enabled
    "controls_in": 0x15,            # CONTROL_RECORDs accepted
    "controls_sent": 0x16,          # control headers sent
    "drop_control": 0x17,           # CONTROL_RECORD with an opcode not SACK, NACK or PROBE
    "drop_control_qp": 0x18,        # CONTROL_RECORD of a QP not enabled
    "drop_control_plane": 0x19,     # CONTROL_RECORD whose EV's plane is not below N
}

_ACKREQ_OPCODES = (Opcode.WRITE_LAST, Opcode.WRITE_LAST_IMM, Opcode.WRITE_ONLY,
                   Opcode.WRITE_ONLY_IMM)


def _check(name, value, limit):
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < limit:
        raise ValueError(f"{name} = {value!r} is not an integer in 0..{limit - 1}")


def plane_address(plane, host):
    """The sender's address on ``plane``: ``fd00:0:<plane>::<host>`` (docs/protocol.md 1.1)."""
    _check("plane", plane, 1 << 16)
    _check("host", host, 1 << 32)
    return PLANE_PREFIX | plane << 80 | host


def nic_address(host):
    """A NIC's own address ``fd00:ffff::<host>`` (docs/protocol.md 1.2)."""
    _check("host", host, 1 << 32)
    return NIC_PREFIX | host


def drop_header(length):
    """The TX_HEADER that carries a dropped packet's payload to the header inserter's discard:
    opcode 0 (unknown, so dropped there) and the packet's ``length``."""
    return {**dict.fromkeys(TX_HEADER.names, 0), "length": length}


@dataclass(frozen=True)
class QpContext:
    """One QP's context: the peer's QPN, host id, T0 index and host port (the downlink port of the
    peer's T0). Own and peer T0 equal means both hosts sit under one T0 (docs/protocol.md 3)."""
    peer_qpn: int
    peer_host: int
    peer_t0: int
    peer_port: int

    def __post_init__(self):
        _check("peer_qpn", self.peer_qpn, 1 << 24)
        _check("peer_host", self.peer_host, 1 << 32)
        _check("peer_t0", self.peer_t0, INDEX_LIMIT)
        _check("peer_port", self.peer_port, INDEX_LIMIT)


@dataclass(frozen=True)
class DataResult:
    """What one data packet with its choice gives: the three records (dicts of their fields)."""
    header: dict
    send: dict
    plane_frame: dict


@dataclass(frozen=True)
class ControlResult:
    """What one control record gives: its header and plane frame record."""
    header: dict
    plane_frame: dict


class TxPathModel:
    """Path building and the control-frame path of one NIC.

    Parameters: ``n_qps`` (1..256), ``n_planes`` N (1..8), ``max_payload`` (1..4096, the header
    inserter's: longer packets are bad input). Configure with :meth:`set_nic`, :meth:`set_port`
    and :meth:`set_qp`; then :meth:`packet` (is the packet good: ask a spray choice, or its drop
    header), :meth:`data` (the records of a packet and its choice), :meth:`retry` (a choice came
    back empty) and :meth:`control`.
    """

    def __init__(self, n_qps=16, n_planes=8, max_payload=4096):
        _check("n_qps", n_qps - 1, MAX_QPS)
        _check("n_planes", n_planes - 1, MAX_PLANES)
        _check("max_payload", max_payload - 1, PMTU_MAX)
        self.n_qps = n_qps
        self.n_planes = n_planes
        self.max_payload = max_payload
        self.own_host = 0
        self.own_t0 = 0
        self.block = DEFAULT_BLOCK
        self.src_mac = [0] * n_planes
        self.dst_mac = [0] * n_planes
        self.qps = {}
        self.counters = dict.fromkeys(COUNTERS, 0)

    # Configuration -------------------------------------------------------------------------------

    def set_nic(self, own_host, own_t0, block=DEFAULT_BLOCK):
        _check("own_host", own_host, 1 << 32)
        _check("own_t0", own_t0, INDEX_LIMIT)
        _check("block", block, 1 << 32)
        self.own_host, self.own_t0, self.block = own_host, own_t0, block

    def set_port(self, plane, src_mac, dst_mac):
        """The MACs of plane port ``plane``: its own (source) and its next hop's (destination)."""
        _check("plane", plane, self.n_planes)
        _check("src_mac", src_mac, 1 << 48)
        _check("dst_mac", dst_mac, 1 << 48)
        self.src_mac[plane], self.dst_mac[plane] = src_mac, dst_mac

    def set_qp(self, qpn, context, enabled=True):
        """Load QP ``qpn``'s :class:`QpContext` (``None`` and ``enabled`` False: disable it)."""
        _check("qpn", qpn, self.n_qps)
        if enabled:
            self.qps[qpn] = context
        else:
            self.qps.pop(qpn, None)

    def enabled(self, qpn):
        return qpn in self.qps

    # Addresses -----------------------------------------------------------------------------------

    def addresses(self, qpn, ev, control=False):
        """The :class:`models.packets.Addresses` of a frame of QP ``qpn`` sent on ``ev``."""
        ctx = self.qps[qpn]
        plane = ev & 0xF
        carrier = reverse_carrier if control else ev_carrier
        return Addresses(
            eth_dst=self.dst_mac[plane], eth_src=self.src_mac[plane],
            outer_src=plane_address(plane, self.own_host),
            outer_dst=carrier(ev, self.own_t0, ctx.peer_t0, ctx.peer_port, self.block),
            inner_src=nic_address(self.own_host), inner_dst=nic_address(ctx.peer_host))

    # Data packets --------------------------------------------------------------------------------

    def packet(self, pkt):
        """Accept one TX_PACKET (dict; missing fields 0). Returns ``None`` when it is good (it
        takes a spray choice for ``pkt["qpn"]``, avoiding ``avoid_ev`` when ``avoid_valid``), or
        the drop header (:func:`drop_header`) that goes out instead."""
        pkt = {**dict.fromkeys(TX_PACKET.names, 0), **pkt}
        self.counters["packets_in"] += 1
        if pkt["opcode"] not in DATA_OPCODES or pkt["length"] > self.max_payload:
            self.counters["drop_packet"] += 1
            return drop_header(pkt["length"])
        if not self.enabled(pkt["qpn"]):
            self.counters["drop_packet_qp"] += 1
            return drop_header(pkt["length"])
        return None

    def retry(self):
        """A spray answer with nothing found: the packet asks again."""
        self.counters["retries"] += 1

    def data(self, pkt, choice, tick, room_mask):
        """The :class:`DataResult` of a good packet sent on ``choice`` (plane, slot, ev), at
        ``tick`` (the tick counter at the choice), the choice having seen ``room_mask``."""
        pkt = {**dict.fromkeys(TX_PACKET.names, 0), **pkt}
        opcode = pkt["opcode"]
        qpn = pkt["qpn"]
        header, _ = data_packet(
            self.addresses(qpn, choice.ev), opcode=opcode, ev=choice.ev,
            dest_qpn=self.qps[qpn].peer_qpn, psn=pkt["psn"], rqmsn=pkt["rqmsn"], msn=pkt["msn"],
            va=pkt["va"], rkey=pkt["rkey"], dma_length=pkt["dma_length"],
            payload=bytes(pkt["length"]), imm=pkt["imm"] if opcode in IMM_OPCODES else None,
            rtx=pkt["rtx"])
        send = {
            "qpn": qpn, "psn": pkt["psn"], "ev": choice.ev, "plane": choice.plane,
            "slot": choice.slot, "req_id": pkt["req_id"], "offset": pkt["offset"],
            "length": pkt["length"], "tick": tick & 0xFFFF_FFFF, "room_mask": room_mask,
            "rtx": pkt["rtx"], "flushed": 0, "last": int(opcode in _ACKREQ_OPCODES),
        }
        plane_frame = {"plane": choice.plane, "frame_bytes": frame_length(opcode, pkt["length"]),
                       "data": 1, "send": SEND_RECORD.pack(send)}
        self.counters["data_sent"] += 1
        return DataResult(header, send, plane_frame)

    # Control records -----------------------------------------------------------------------------

    def control(self, rec):
        """The :class:`ControlResult` of one CONTROL_RECORD (dict), or ``None`` when dropped."""
        rec = {**dict.fromkeys(CONTROL_RECORD.names, 0), **rec}
        self.counters["controls_in"] += 1
        opcode, qpn, ev = rec["opcode"], rec["qpn"], rec["ev"]
        if opcode not in CONTROL_OPCODES:
            self.counters["drop_control"] += 1
            return None
        if not self.enabled(qpn):
            self.counters["drop_control_qp"] += 1
            return None
        plane = ev & 0xF
        if plane >= self.n_planes:
            self.counters["drop_control_plane"] += 1
            return None
        probe = opcode == Opcode.PROBE
        header = {
            **dict.fromkeys(TX_HEADER.names, 0),
            **self.addresses(qpn, ev, control=True).fields(), **path_fields(ev),
            "dscp": Dscp.TRIMMABLE if probe else Dscp.CONTROL,
            "ecn": Ecn.ECT0 if probe else Ecn.NOT_ECT,
            "opcode": opcode, "dest_qpn": self.qps[qpn].peer_qpn,
            "ext": rec["ext"],
        }
        plane_frame = {"plane": plane, "frame_bytes": frame_length(opcode, 0), "data": 0,
                       "send": SEND_RECORD.pack(qpn=qpn, ev=ev, plane=plane)}
        self.counters["controls_sent"] += 1
        return ControlResult(header, plane_frame)


# SPDX-License-Identifier: BSD-2-Clause
"""Golden model of MRC frames (docs/protocol.md sections 1, 2 and 6): build from fields, parse back, ICRC.

The core is :func:`build_frame`, which turns a :data:`models.records.TX_HEADER` record (a dict of
its fields) and a payload into the complete Ethernet frame (no preamble, no FCS) with its ICRC,
exactly as the header inserter must; and :func:`icrc`, the RoCEv2 invariant CRC of docs/protocol.md 1.6.

Around it:

- builders from semantic fields, one per packet of sections 1 and 2 (:func:`data_packet`,
  :func:`sack_packet`, :func:`probe_answer`, :func:`nack_packet`, :func:`probe_packet`), each
  returning ``(tx_header_dict, payload)`` for :func:`build_frame`. They derive the path fields from
  the EV (:func:`path_fields`), the class fields (DSCP, ECN, AckReq, PSN 0 of control packets) from
  the packet kind, and take the addresses as an :class:`Addresses` parameter (the outer destination
  is the uSID carrier, computed elsewhere);
- :func:`sack_bitmap`, the bitmap-base rule of docs/protocol.md 2.1, and :func:`bitmap_psns`, its reading;
- :func:`parse_frame`, which reads every header back into a :class:`ParsedFrame` or raises a
  :class:`FrameError` whose ``reason`` names the first failed shape check of docs/protocol.md section 5.

Layouts come from :mod:`models.layouts`; nothing here imports cocotb, Amaranth or scapy.
"""

import zlib
from dataclasses import dataclass

from .layouts import (
    BTH, ETH, IPV6, UDP, METH, RETH, IMMDT, SETH, SETH_SIGNED, CC_STATE, NETH, PETH,
    ETHERTYPE_IPV6, NEXT_HEADER_IPV6, NEXT_HEADER_UDP, ROCE_UDP_PORT, PKEY_DEFAULT,
    HOP_LIMIT_DEFAULT, OUTER_OFFSET, INNER_OFFSET, UDP_OFFSET, BTH_OFFSET, EXT_OFFSET,
    ICRC_MASKED_BITS, ICRC_BYTES, DATA_OPCODES, IMM_OPCODES, KNOWN_OPCODES, TRIM_MIN_BYTES,
    Opcode, Dscp, Ecn, NackReason, SackVerdict, ext_headers, ext_length, pad_count, ip6, mac,
)
from .records import TX_HEADER, int_to_ext, ext_to_int

__all__ = [
    "icrc", "build_frame", "frame_length", "ICRC_PREFIX", "PMTU_MAX", "PSN_MODULUS",
    "Addresses", "path_fields", "data_packet", "sack_packet", "probe_answer", "nack_packet",
    "probe_packet", "sack_base", "sack_bitmap", "bitmap_psns", "psn_offset", "FrameError", "FRAME_ERROR_REASONS",
    "ParsedFrame", "parse_frame",
]

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


# --- Builders from semantic fields (docs/protocol.md sections 1, 2 and 6) -------------------------------

PMTU_MAX = 4096              # largest data payload (PMTU 256..4096, docs/protocol.md 1)
PSN_MODULUS = 1 << 24
_ACKREQ_OPCODES = (Opcode.WRITE_LAST, Opcode.WRITE_LAST_IMM, Opcode.WRITE_ONLY,
                   Opcode.WRITE_ONLY_IMM)
_NACK_REASONS = (NackReason.TRIMMED, NackReason.TRIMMED_LASTHOP, NackReason.NO_PKT_BUFFER,
                 NackReason.PSN_OOR_WINDOW, NackReason.UNEXP_EVENT)


@dataclass(frozen=True)
class Addresses:
    """Where a frame goes: Ethernet and both IPv6 headers' addresses, and the outer Hop Limit.

    Addresses are given as text (``"02:00:00:05:00:01"``, ``"fd00:0:1::5"``) or as integers and
    are stored as integers. ``outer_dst`` is the uSID carrier of the path (docs/protocol.md section 3),
    ``outer_src`` the sender's plane address, ``inner_*`` the NICs' own addresses (docs/protocol.md 1.1-1.2).
    """
    eth_dst: object
    eth_src: object
    outer_src: object
    outer_dst: object
    inner_src: object
    inner_dst: object
    hop_limit: int = HOP_LIMIT_DEFAULT

    def __post_init__(self):
        for name in ("eth_dst", "eth_src"):
            object.__setattr__(self, name, mac(getattr(self, name)))
        for name in ("outer_src", "outer_dst", "inner_src", "inner_dst"):
            object.__setattr__(self, name, ip6(getattr(self, name)))
        if not 0 <= self.hop_limit <= 255:
            raise ValueError(f"hop limit {self.hop_limit} is not 0..255")

    def fields(self):
        """The :data:`TX_HEADER` fields these addresses fill."""
        return {"eth_dst": self.eth_dst, "eth_src": self.eth_src, "hop_limit": self.hop_limit,
                "outer_src": self.outer_src, "outer_dst": self.outer_dst,
                "inner_src": self.inner_src, "inner_dst": self.inner_dst}


def path_fields(ev):
    """The fields an EV sets (docs/protocol.md 1.1, 1.3): Flow Label {4'b0, EV[15:0]}, UDP source port
    EV[31:16]."""
    if not 0 <= ev < 1 << 32:
        raise ValueError(f"EV {ev:#x} is not a 32-bit value")
    return {"flow_label": ev & 0xFFFF, "udp_sport": ev >> 16}


def _tx_header(addr, *, ev, opcode, dest_qpn, dscp, ecn, ext, ackreq=0, rtx=0, psn=0, length=0):
    if not 0 <= dest_qpn < 1 << 24:
        raise ValueError(f"QPN {dest_qpn:#x} is not a 24-bit value")
    if not 0 <= psn < PSN_MODULUS:
        raise ValueError(f"PSN {psn:#x} is not a 24-bit value")
    return {**addr.fields(), **path_fields(ev), "dscp": dscp, "ecn": ecn, "opcode": opcode,
            "dest_qpn": dest_qpn, "ackreq": ackreq, "rtx": rtx, "psn": psn,
            "ext": ext_to_int(ext), "length": length}


def data_packet(addr, *, opcode, ev, dest_qpn, psn, rqmsn, msn, va, rkey, dma_length,
                payload=b"", imm=None, rtx=0, ackreq=None):
    """One RDMA Write packet (docs/protocol.md section 1): ``(tx_header_dict, payload)``.

    ``opcode`` is one of the six Write opcodes; ``imm`` is required for the two with ImmDt and
    refused for the others. AckReq is 1 on the last packet of a message (LAST and ONLY opcodes),
    or as ``ackreq`` says when given ((v2) the sender's half-window rule, docs/protocol.md 5).
    A retransmission (``rtx`` = 1) sets BTH.RTX and DSCP TRIMMABLE_RETX, a first transmission DSCP
    TRIMMABLE; both carry ECT(0). ``payload`` is 0..:data:`PMTU_MAX` bytes (pad is added by
    :func:`build_frame`).
    """
    if opcode not in DATA_OPCODES:
        raise ValueError(f"opcode {opcode:#04x} is not a Write opcode")
    if (imm is not None) != (opcode in IMM_OPCODES):
        raise ValueError(f"opcode {opcode:#04x} {'needs' if imm is None else 'takes no'} ImmDt")
    if len(payload) > PMTU_MAX:
        raise ValueError(f"payload of {len(payload)} B exceeds the PMTU of {PMTU_MAX} B")
    if rtx not in (0, 1):
        raise ValueError(f"rtx must be 0 or 1, not {rtx}")
    ext = METH.pack(rqmsn=rqmsn, msn=msn) + RETH.pack(va=va, rkey=rkey, dma_length=dma_length)
    if imm is not None:
        ext += IMMDT.pack(imm=imm)
    dscp = Dscp.TRIMMABLE_RETX if rtx else Dscp.TRIMMABLE
    hdr = _tx_header(addr, ev=ev, opcode=opcode, dest_qpn=dest_qpn, dscp=dscp, ecn=Ecn.ECT0,
                     ext=ext, ackreq=int(opcode in _ACKREQ_OPCODES) if ackreq is None
                     else int(ackreq), rtx=rtx, psn=psn,
                     length=len(payload))
    return hdr, bytes(payload)


def sack_packet(addr, *, ev, dest_qpn, cack_psn, mpr, m=SackVerdict.NONE, ack_psn_offset=0,
                sack_offset=0, sack_bitmap=0, pr=0, probe_id=0, ooo_count=0, placed_256=0,
                entropy=None, tm=0):
    """One SACK (docs/protocol.md 2.1): ``(tx_header_dict, b"")``.

    ``ev`` is the trigger's EV: it is echoed in ``entropy`` and sets the path fields (the SACK goes
    back on the trigger's path); (v2) ``entropy``, when given, is the EV the verdict is about
    instead (2.1, "Path verdict"), and ``tm`` flags a timer SACK. ``mpr`` is the wire field
    (window / 128 PSNs). ``m`` is NONE or
    SKIP_ONCE (ALWAYS_SKIP is never sent, docs/protocol.md 2.1). ``pr`` = 1 (a probe answer, see
    :func:`probe_answer`) needs ``ack_psn_offset`` 0; ``pr`` = 0 needs ``probe_id`` 0. The offsets
    are signed 16-bit; ``sack_offset``/``sack_bitmap`` usually come from :func:`sack_bitmap`.
    DSCP CONTROL, Not-ECT, PSN 0, AckReq 0.
    """
    if m not in (SackVerdict.NONE, SackVerdict.SKIP_ONCE):
        raise ValueError(f"SACK verdict m = {m} is never sent (docs/protocol.md 2.1)")
    if pr not in (0, 1):
        raise ValueError(f"pr must be 0 or 1, not {pr}")
    if pr and ack_psn_offset:
        raise ValueError("a probe answer (pr = 1) has ack_psn_offset 0")
    if not pr and probe_id:
        raise ValueError("probe_id is 0 unless pr = 1")
    for name, value in (("ack_psn_offset", ack_psn_offset), ("sack_offset", sack_offset)):
        if not -(1 << 15) <= value < 1 << 15:
            raise ValueError(f"{name} = {value} is not a signed 16-bit value")
    ext = SETH.pack(m=m, pr=pr, tm=tm, ack_psn_offset=ack_psn_offset,
                    entropy=ev if entropy is None else entropy, probe_id=probe_id,
                    cack_psn=cack_psn, mpr=mpr, sack_offset=sack_offset,
                    sack_bitmap=sack_bitmap) + \
        CC_STATE.pack(ooo_count=ooo_count, placed_256=placed_256)
    return _tx_header(addr, ev=ev, opcode=Opcode.SACK, dest_qpn=dest_qpn, dscp=Dscp.CONTROL,
                      ecn=Ecn.NOT_ECT, ext=ext), b""


def probe_answer(addr, *, ev, dest_qpn, probe_id, cack_psn, mpr, received=(),
                 m=SackVerdict.NONE, ooo_count=0, placed_256=0):
    """The SACK that answers a probe (docs/protocol.md 2.1, 2.3): ``pr`` = 1, ``ack_psn_offset`` 0, the
    probe's EV and ``probe_id`` echoed; the bitmap starts at cack_psn + 1 (the trigger PSN of a
    probe answer is taken as cack_psn) and marks the PSNs of ``received``."""
    sack_offset, bitmap = sack_bitmap(cack_psn, cack_psn, received)
    return sack_packet(addr, ev=ev, dest_qpn=dest_qpn, cack_psn=cack_psn, mpr=mpr, m=m, pr=1,
                       probe_id=probe_id, sack_offset=sack_offset, sack_bitmap=bitmap,
                       ooo_count=ooo_count, placed_256=placed_256)


def nack_packet(addr, *, ev, dest_qpn, reason, nack_psn):
    """One NACK (docs/protocol.md 2.2): ``(tx_header_dict, b"")``. ``ev`` is the NACKed packet's EV
    (echoed in ``entropy``, and its path); ``reason`` one of :class:`NackReason`. DSCP CONTROL,
    Not-ECT."""
    if reason not in _NACK_REASONS:
        raise ValueError(f"NACK reason {reason:#04x} is not one of docs/protocol.md 2.2")
    ext = NETH.pack(nack_reason=reason, entropy=ev, nack_psn=nack_psn)
    return _tx_header(addr, ev=ev, opcode=Opcode.NACK, dest_qpn=dest_qpn, dscp=Dscp.CONTROL,
                      ecn=Ecn.NOT_ECT, ext=ext), b""


def probe_packet(addr, *, ev, dest_qpn, probe_id):
    """One reliability probe (docs/protocol.md 2.3) on the EV under test: ``(tx_header_dict, b"")``.
    DSCP TRIMMABLE and ECT(0), like data, so that it meets the data path's queues."""
    ext = PETH.pack(probe_id=probe_id)
    return _tx_header(addr, ev=ev, opcode=Opcode.PROBE, dest_qpn=dest_qpn, dscp=Dscp.TRIMMABLE,
                      ecn=Ecn.ECT0, ext=ext), b""


# --- SACK bitmap (docs/protocol.md 2.1) -------------------------------------------------------------------

def psn_offset(psn, base):
    """``psn - base`` in 24-bit serial arithmetic as a signed 16-bit offset (raises if it does not
    fit): the form of ``ack_psn_offset`` and ``sack_offset``."""
    diff = (psn - base) % PSN_MODULUS
    if diff >= PSN_MODULUS // 2:
        diff -= PSN_MODULUS
    if not -(1 << 15) <= diff < 1 << 15:
        raise ValueError(f"PSN {psn} is {diff} from {base}: not a signed 16-bit offset")
    return diff


def sack_base(cack_psn, trigger_psn):
    """The bitmap base PSN of a SACK (docs/protocol.md 2.1): ``trigger_psn`` with its low 6 bits cleared,
    or cack_psn + 1 when that is at or below ``cack_psn`` in serial arithmetic."""
    base = trigger_psn & ~63 & (PSN_MODULUS - 1)
    ahead = (base - cack_psn) % PSN_MODULUS
    if ahead == 0 or ahead >= PSN_MODULUS // 2:      # base at or below cack_psn
        base = (cack_psn + 1) % PSN_MODULUS
    return base


def sack_bitmap(cack_psn, trigger_psn, received):
    """``(sack_offset, sack_bitmap)`` of a SACK (docs/protocol.md 2.1).

    The bitmap covers the aligned block of 64 PSNs holding ``trigger_psn`` (its low 6 bits
    cleared), unless that base is at or below ``cack_psn`` in serial arithmetic, in which case the
    base is cack_psn + 1. Bit 63 is the base, bit 0 the base + 63; a bit is set when its PSN is in
    ``received`` (an iterable of PSNs).
    """
    base = sack_base(cack_psn, trigger_psn)
    received = set(received)
    bitmap = 0
    for i in range(64):
        if (base + i) % PSN_MODULUS in received:
            bitmap |= 1 << (63 - i)
    return psn_offset(base, cack_psn), bitmap


def bitmap_psns(cack_psn, sack_offset, sack_bitmap):
    """The PSNs a SACK's bitmap marks as received (bit 63 = cack_psn + sack_offset)."""
    base = cack_psn + sack_offset
    return {(base + i) % PSN_MODULUS for i in range(64) if sack_bitmap >> (63 - i) & 1}


# --- Parsing (docs/protocol.md section 5, shape checks) ---------------------------------------------------

FRAME_ERROR_REASONS = ("short", "ethertype", "next_header", "length", "inner_dst", "udp_port",
                       "tver", "pkey", "opcode", "trimmed_short")


class FrameError(ValueError):
    """A frame that fails a shape check; ``reason`` is one of :data:`FRAME_ERROR_REASONS`:

    - ``short``: fewer bytes than Ethernet, both IPv6 headers, UDP, BTH and an ICRC (118);
    - ``ethertype``: not 0x86DD; ``next_header``: the outer Next Header is not 41;
    - ``length``: an outer or inner IPv6 Payload Length or the UDP length disagrees with the frame's
      length, or the frame is too short for its opcode's headers and PadCnt, or a control frame
      carries bytes after its extension headers;
    - ``inner_dst``: the inner destination is not the receiver's (when it is given);
    - ``udp_port``: UDP destination port not 4791; ``tver``: BTH.TVer not 0;
      ``pkey``: P_Key not 0xFFFF; ``opcode``: not an opcode of docs/protocol.md 1.4;
    - ``trimmed_short``: a trimmed data frame without its headers through RETH (134 B).
    """

    def __init__(self, reason, message):
        if reason not in FRAME_ERROR_REASONS:
            raise ValueError(f"unknown frame error reason {reason!r}")
        super().__init__(f"{reason}: {message}")
        self.reason = reason


@dataclass(frozen=True)
class ParsedFrame:
    """Every header field of one frame (reserved fields included), as :meth:`Header.unpack` gives
    them (SETH offsets signed); extension headers absent for the opcode are None.

    ``ext`` holds the extension headers present as wire bytes. ``payload`` is the payload without
    pad and ``pad`` the pad bytes. ``icrc`` is the frame's last 4 bytes and ``icrc_ok`` whether
    they match :func:`icrc`. A ``trimmed`` frame (outer DSCP
    TRIMMED or TRIMMED_LASTHOP) of a data opcode has no ICRC to check: ``payload`` holds every kept
    byte after the extension headers present (ImmDt is None when it was cut), ``pad`` and ``icrc``
    are empty and ``icrc_ok`` is False. A trimmed control frame (a probe, kept whole) parses fully.
    """
    eth: dict
    outer: dict
    inner: dict
    udp: dict
    bth: dict
    meth: dict = None
    reth: dict = None
    immdt: dict = None
    seth: dict = None
    cc_state: dict = None
    neth: dict = None
    peth: dict = None
    ext: bytes = b""
    payload: bytes = b""
    pad: bytes = b""
    icrc: bytes = b""
    icrc_ok: bool = False
    trimmed: bool = False

    @property
    def ev(self):
        """The EV of the frame's path: UDP source port and the outer Flow Label's low 16 bits."""
        return self.udp["sport"] << 16 | self.outer["flow_label"] & 0xFFFF

    def tx_header(self):
        """The :data:`TX_HEADER` record (dict of every field) that builds this frame again with
        :func:`build_frame` (together with :attr:`payload`)."""
        return {
            "eth_dst": self.eth["dst"], "eth_src": self.eth["src"],
            "dscp": self.outer["dscp"], "ecn": self.outer["ecn"],
            "flow_label": self.outer["flow_label"], "hop_limit": self.outer["hop_limit"],
            "outer_src": self.outer["src"], "outer_dst": self.outer["dst"],
            "inner_src": self.inner["src"], "inner_dst": self.inner["dst"],
            "udp_sport": self.udp["sport"], "opcode": self.bth["opcode"],
            "dest_qpn": self.bth["dest_qpn"], "ackreq": self.bth["ackreq"], "rtx": self.bth["rtx"],
            "psn": self.bth["psn"], "ext": ext_to_int(self.ext), "length": len(self.payload),
        }


def parse_frame(frame, inner_dst=None):
    """Read ``frame`` (Ethernet, no FCS) into a :class:`ParsedFrame`.

    Raises :class:`FrameError` at the first failed shape check, in the order of docs/protocol.md section 5:
    short, EtherType, outer Next Header 41, the three length fields, the inner destination (only
    when ``inner_dst``, text or int, is given), UDP port 4791, TVer 0, P_Key 0xFFFF, known opcode;
    then the opcode's own length (and, for trimmed data frames, the 134 B minimum). The ICRC is
    reported in ``icrc_ok``, not raised: the receiver checks it later (after the QP and buffer
    checks). The inner Next Header, IP versions and reserved bits are not checked (docs/protocol.md 5 does
    not), but they are returned.
    """
    frame = bytes(frame)
    n = len(frame)
    if n < EXT_OFFSET + ICRC_BYTES:
        raise FrameError("short", f"{n} B frame, the headers through the BTH and ICRC need "
                                  f"{EXT_OFFSET + ICRC_BYTES} B")
    eth = ETH.unpack(frame)
    outer = IPV6.unpack(frame[OUTER_OFFSET:])
    inner = IPV6.unpack(frame[INNER_OFFSET:])
    udp = UDP.unpack(frame[UDP_OFFSET:])
    bth = BTH.unpack(frame[BTH_OFFSET:])
    if eth["ethertype"] != ETHERTYPE_IPV6:
        raise FrameError("ethertype", f"EtherType {eth['ethertype']:#06x}")
    if outer["next_header"] != NEXT_HEADER_IPV6:
        raise FrameError("next_header", f"outer Next Header {outer['next_header']}")
    for what, value, expected in (
            ("outer Payload Length", outer["payload_length"], n - INNER_OFFSET),
            ("inner Payload Length", inner["payload_length"], n - UDP_OFFSET),
            ("UDP length", udp["length"], n - UDP_OFFSET)):
        if value != expected:
            raise FrameError("length", f"{what} {value}, the {n} B frame needs {expected}")
    if inner_dst is not None and inner["dst"] != ip6(inner_dst):
        raise FrameError("inner_dst", f"inner destination {inner['dst']:#x} is not ours")
    if udp["dport"] != ROCE_UDP_PORT:
        raise FrameError("udp_port", f"UDP destination port {udp['dport']}")
    if bth["tver"] != 0:
        raise FrameError("tver", f"BTH.TVer {bth['tver']}")
    if bth["pkey"] != PKEY_DEFAULT:
        raise FrameError("pkey", f"P_Key {bth['pkey']:#06x}")
    opcode = bth["opcode"]
    if opcode not in KNOWN_OPCODES:
        raise FrameError("opcode", f"opcode {opcode:#04x}")
    trimmed = outer["dscp"] in (Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP) and opcode in DATA_OPCODES
    if trimmed:
        return _parse_trimmed(frame, eth, outer, inner, udp, bth)
    body = frame[EXT_OFFSET:n - ICRC_BYTES]
    n_ext = ext_length(opcode)
    n_payload = len(body) - n_ext - bth["padcnt"]
    if n_payload < 0 or (opcode not in DATA_OPCODES and len(body) != n_ext):
        raise FrameError("length", f"{n} B frame for opcode {opcode:#04x} and PadCnt "
                                   f"{bth['padcnt']}")
    end = n_ext + n_payload
    tail = frame[n - ICRC_BYTES:]
    return ParsedFrame(eth=eth, outer=outer, inner=inner, udp=udp, bth=bth,
                       **_unpack_ext(opcode, body), ext=body[:n_ext], payload=body[n_ext:end],
                       pad=body[end:], icrc=tail, icrc_ok=icrc(frame[:n - ICRC_BYTES]) == tail,
                       trimmed=outer["dscp"] in (Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP))


def _unpack_ext(opcode, data):
    """The extension headers of ``opcode`` that ``data`` holds whole, by header name."""
    out = {}
    offset = 0
    for header in ext_headers(opcode):
        if len(data) < offset + header.size:
            break
        out[header.name] = header.unpack(data[offset:],
                                         signed=SETH_SIGNED if header is SETH else ())
        offset += header.size
    return out


def _parse_trimmed(frame, eth, outer, inner, udp, bth):
    if len(frame) < TRIM_MIN_BYTES:
        raise FrameError("trimmed_short", f"trimmed frame of {len(frame)} B, the headers through "
                                          f"RETH need {TRIM_MIN_BYTES} B")
    ext = _unpack_ext(bth["opcode"], frame[EXT_OFFSET:])
    n_ext = sum(header.size for header in ext_headers(bth["opcode"]) if header.name in ext)
    return ParsedFrame(eth=eth, outer=outer, inner=inner, udp=udp, bth=bth, **ext,
                       ext=frame[EXT_OFFSET:EXT_OFFSET + n_ext],
                       payload=frame[EXT_OFFSET + n_ext:], trimmed=True)

# SPDX-License-Identifier: BSD-2-Clause
"""Seeded receive traffic for the NIC receive benches (``tb/test_rx_front.py``, and the receive
engine's): a receiver configuration (own inner address, enabled QPs, memory regions), good frames
of every kind of docs/protocol.md sections 1-2 (the six Writes, trimmed Writes from the switch model's
trim, SACKs, NACKs, probes; CE marks, retransmissions) and malformed frames of every kind that
docs/protocol.md section 5 names, each labelled with the counter of ``models.rx_front`` it must reach.

Pure Python (``models`` only), so model tests and cocotb benches share it.
"""

from dataclasses import dataclass

from models.layouts import (BTH, BTH_OFFSET, DATA_OPCODES, ETH, EXT_OFFSET, IMM_OPCODES,
                            INNER_OFFSET, IPV6, KNOWN_OPCODES, OUTER_OFFSET, TRIM_MIN_BYTES, UDP,
                            UDP_OFFSET, Dscp, Ecn, NackReason, Opcode, SackVerdict,
                            header_length, ip6)
from models.packets import (Addresses, build_frame, data_packet, nack_packet, probe_packet,
                            sack_packet)
from models.rx_front import Region, access_ok
from models.switch_queue import rewrite, trim

__all__ = ["RxTraffic", "Labelled", "MALFORMED_KINDS", "HEADER_BOUNDARIES"]

# Frame offsets where a header ends (or the ICRC would start): truncation points.
HEADER_BOUNDARIES = (1, ETH.size, INNER_OFFSET, UDP_OFFSET, BTH_OFFSET, EXT_OFFSET,
                     EXT_OFFSET + 4, EXT_OFFSET + 16, EXT_OFFSET + 20, TRIM_MIN_BYTES,
                     TRIM_MIN_BYTES + 4, EXT_OFFSET + 36)

# Malformed kinds -> the parser counter they reach when the buffer has room (``tuser`` is a plane
# drop; ``rkey`` and ``va`` pass the front with access_ok = 0).
MALFORMED_KINDS = {
    "cut": None,                    # short or length, by where the cut falls
    "outer_len": "length", "inner_len": "length", "udp_len": "length",
    "ethertype": "ethertype", "next_header": "next_header", "inner_dst": "inner_dst",
    "udp_port": "udp_port", "tver": "tver", "pkey": "pkey", "opcode": "opcode",
    "padcnt": "length", "ctrl_extra": "length", "trimmed_short": "trimmed_short",
    "qp_disabled": "qp_unknown", "qp_range": "qp_unknown",
    "icrc": "icrc", "payload": "icrc", "header_bit": "icrc",
    "tuser": "plane_bad", "rkey": "access_denied", "va": "access_denied",
}

UNKNOWN_OPCODES = tuple(op for op in range(256) if op not in KNOWN_OPCODES)


@dataclass(frozen=True)
class Labelled:
    """One frame to send: its bytes, ``tuser`` (1: flagged bad on its last beat), its kind and
    the counter it must reach (as in :data:`MALFORMED_KINDS`; good frames: ``data``,
    ``trimmed``, ``probe``, ``sack``, ``nack``)."""
    frame: bytes
    tuser: int
    kind: str
    reason: str


def _set_bytes(frame, offset, value, size):
    out = bytearray(frame)
    out[offset:offset + size] = value.to_bytes(size, "big")
    return bytes(out)


class RxTraffic:
    """Frames for a receiver with ``n_qps`` QPs, of which ``enabled`` are enabled, and
    ``n_regions`` memory regions (region r: R_Key ``0x5A00 + r``, base ``(r + 1) << 32``,
    length ``region_bytes``). Payloads are 0..``pmtu`` bytes."""

    def __init__(self, rng, n_qps=4, enabled=None, n_regions=4, pmtu=1024, region_bytes=1 << 16):
        self.rng = rng
        self.n_qps = n_qps
        self.enabled = tuple(range(max(1, n_qps - 1))) if enabled is None else tuple(enabled)
        self.pmtu = pmtu
        self.inner_dst = ip6("fd00:ffff::7")
        self.regions = [(0x5A00 + r, (r + 1) << 32, region_bytes) for r in range(n_regions)]

    @property
    def qp_mask(self):
        return sum(1 << q for q in self.enabled)

    def region_holds(self, rkey, va, length):
        """Whether a region of this configuration holds [va, va + length) for ``rkey``."""
        return access_ok([Region(*r) for r in self.regions], rkey, va, length)

    def configure(self, model):
        """Apply this configuration to a :class:`models.rx_front.RxFrontModel`."""
        model.set_qp_enable(self.qp_mask)
        model.set_inner_dst(self.inner_dst)
        for index, (rkey, base, length) in enumerate(self.regions):
            model.set_region(index, rkey, base, length)

    # --- building blocks ------------------------------------------------------------------------

    def addresses(self):
        rng = self.rng
        return Addresses(eth_dst=rng.getrandbits(48), eth_src=rng.getrandbits(48),
                         outer_src=0xFD000000 << 96 | rng.getrandbits(4) << 80 |
                         rng.getrandbits(32),
                         outer_dst=0xFD000200 << 96 | rng.getrandbits(32) << 64,
                         inner_src=0xFD00FFFF << 96 | rng.getrandbits(32),
                         inner_dst=self.inner_dst, hop_limit=rng.randrange(1, 256))

    def payload_length(self):
        """Mostly short payloads (they stress the per-frame logic), up to the PMTU."""
        r = self.rng.random()
        if r < 0.08:
            return 0
        if r < 0.4:
            return self.rng.randrange(1, 65)
        if r < 0.75:
            return self.rng.randrange(1, min(self.pmtu, 512) + 1)
        return self.rng.randrange(1, self.pmtu + 1)

    def _class_fields(self, hdr):
        """Random ECN (CE marks included) and, now and then, a DSCP other than the Write's."""
        rng = self.rng
        hdr["ecn"] = rng.choice((Ecn.ECT0, Ecn.ECT0, Ecn.ECT0, Ecn.CE, Ecn.NOT_ECT))
        if rng.random() < 0.1:
            hdr["dscp"] = rng.choice((Dscp.NO_TRIM, Dscp.CONTROL))
        return hdr

    def data(self, *, qpn=None, payload=None, opcode=None, access=True, psn=None):
        """A good data frame (a Write of any opcode) whose [VA, VA + length) lies in a region
        (``access`` False: outside every region, or with an R_Key of none)."""
        rng = self.rng
        opcode = rng.choice(DATA_OPCODES) if opcode is None else opcode
        length = self.payload_length() if payload is None else payload
        rkey, base, size = rng.choice(self.regions)
        va = base + rng.randrange(0, size - length + 1)
        while not access and self.region_holds(rkey, va, length):
            if rng.random() < 0.5:
                rkey = rng.getrandbits(32)
            else:
                va = rng.choice((base - rng.randrange(1, 4096), base + size - length +
                                 rng.randrange(1, 4096), rng.getrandbits(64))) % (1 << 64)
        rtx = int(rng.random() < 0.2)
        hdr, body = data_packet(
            self.addresses(), opcode=opcode, ev=rng.getrandbits(32),
            dest_qpn=rng.choice(self.enabled) if qpn is None else qpn,
            psn=rng.getrandbits(24) if psn is None else psn, rqmsn=rng.getrandbits(16),
            msn=rng.getrandbits(16), va=va, rkey=rkey, dma_length=rng.getrandbits(32),
            payload=bytes(rng.getrandbits(8) for _ in range(length)),
            imm=rng.getrandbits(32) if opcode in IMM_OPCODES else None, rtx=rtx)
        return build_frame(self._class_fields(hdr), body)

    def trimmed(self):
        """A data frame trimmed by the switch model's trim (to 134..300 bytes, TRIMMED or
        TRIMMED_LASTHOP)."""
        rng = self.rng
        frame = self.data(payload=rng.randrange(0, self.pmtu + 1))
        return trim(frame, rng.randrange(TRIM_MIN_BYTES, 301),
                    rng.choice((Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP)))

    def control(self, opcode=None, qpn=None):
        """A good SACK, NACK or probe with random fields."""
        rng = self.rng
        opcode = rng.choice((Opcode.SACK, Opcode.NACK, Opcode.PROBE)) if opcode is None \
            else opcode
        addr, ev = self.addresses(), rng.getrandbits(32)
        qpn = rng.choice(self.enabled) if qpn is None else qpn
        if opcode == Opcode.SACK:
            pr = int(rng.random() < 0.3)
            hdr, _ = sack_packet(addr, ev=ev, dest_qpn=qpn, cack_psn=rng.getrandbits(24),
                                 mpr=rng.getrandbits(8),
                                 m=rng.choice((SackVerdict.NONE, SackVerdict.SKIP_ONCE)),
                                 ack_psn_offset=0 if pr else rng.randrange(-(1 << 15), 1 << 15),
                                 sack_offset=rng.randrange(-(1 << 15), 1 << 15),
                                 sack_bitmap=rng.getrandbits(64), pr=pr,
                                 probe_id=rng.getrandbits(16) if pr else 0,
                                 ooo_count=rng.getrandbits(15), placed_256=rng.getrandbits(24))
        elif opcode == Opcode.NACK:
            hdr, _ = nack_packet(addr, ev=ev, dest_qpn=qpn, nack_psn=rng.getrandbits(24),
                                 reason=rng.choice((NackReason.TRIMMED, NackReason.TRIMMED_LASTHOP,
                                                    NackReason.NO_PKT_BUFFER,
                                                    NackReason.PSN_OOR_WINDOW,
                                                    NackReason.UNEXP_EVENT)))
        else:
            hdr, _ = probe_packet(addr, ev=ev, dest_qpn=qpn, probe_id=rng.getrandbits(16))
            hdr["ecn"] = rng.choice((Ecn.ECT0, Ecn.CE))
            if rng.random() < 0.2:          # a probe the switch kept whole, marked trimmed
                hdr["dscp"] = rng.choice((Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP))
        return build_frame(hdr)

    # --- traffic --------------------------------------------------------------------------------

    def good(self):
        """A good frame of a random kind: data 70 %, trimmed data 8 %, control frames."""
        r = self.rng.random()
        if r < 0.70:
            return Labelled(self.data(), 0, "data", "data")
        if r < 0.78:
            return Labelled(self.trimmed(), 0, "trimmed", "trimmed")
        opcode = self.rng.choice((Opcode.SACK, Opcode.NACK, Opcode.PROBE))
        name = {Opcode.SACK: "sack", Opcode.NACK: "nack", Opcode.PROBE: "probe"}[opcode]
        return Labelled(self.control(opcode), 0, name, name)

    def any_good_frame(self):
        r = self.rng.random()
        if r < 0.6:
            return self.data(payload=self.rng.randrange(0, 200))
        if r < 0.7:
            return self.trimmed()
        return self.control()

    def malformed(self, kind=None):
        """A malformed frame of ``kind`` (random when None) as :class:`Labelled`."""
        rng = self.rng
        kind = rng.choice(tuple(MALFORMED_KINDS)) if kind is None else kind
        reason = MALFORMED_KINDS[kind]
        frame = self.any_good_frame()
        tuser = 0
        n = len(frame)
        if kind == "cut":
            at = rng.choice(HEADER_BOUNDARIES) + rng.choice((-1, 0, 0, 1))
            frame = frame[:max(1, min(at, n - 1))]
            reason = "short" if len(frame) < EXT_OFFSET + 4 else "length"
        elif kind in ("outer_len", "inner_len", "udp_len"):
            offset = {"outer_len": OUTER_OFFSET + 4, "inner_len": INNER_OFFSET + 4,
                      "udp_len": UDP_OFFSET + 4}[kind]
            old = int.from_bytes(frame[offset:offset + 2], "big")
            frame = _set_bytes(frame, offset, (old + rng.choice((-4, -1, 1, 3, 1000))) & 0xFFFF,
                               2)
        elif kind == "ethertype":
            frame = _set_bytes(frame, 12, rng.choice((0x0800, 0x86DC, 0x8100)), 2)
        elif kind == "next_header":
            frame = _set_bytes(frame, OUTER_OFFSET + 6, rng.choice((17, 43, 59, 0)), 1)
        elif kind == "inner_dst":
            frame = _set_bytes(frame, INNER_OFFSET + 24 + 15,
                               frame[INNER_OFFSET + 39] ^ (1 << rng.randrange(8)), 1)
        elif kind == "udp_port":
            frame = _set_bytes(frame, UDP_OFFSET + 2, rng.choice((4790, 4792, 53, 0)), 2)
        elif kind == "tver":
            frame = _set_bytes(frame, BTH_OFFSET + 1,
                               frame[BTH_OFFSET + 1] & 0xF0 | rng.randrange(1, 16), 1)
        elif kind == "pkey":
            frame = _set_bytes(frame, BTH_OFFSET + 2, rng.choice((0x7FFF, 0xFFFE, 0)), 2)
        elif kind == "opcode":
            frame = _set_bytes(frame, BTH_OFFSET, rng.choice(UNKNOWN_OPCODES), 1)
        elif kind == "padcnt":
            frame = self._bad_padcnt()
        elif kind == "ctrl_extra":
            frame = self._grow(self.control(), rng.choice((1, 4, 8)))
        elif kind == "trimmed_short":
            frame = self._trimmed_short()
        elif kind == "qp_disabled":
            disabled = [q for q in range(self.n_qps) if q not in self.enabled]
            frame = self._with_qpn(frame, rng.choice(disabled) if disabled else self.n_qps)
            reason = "qp_unknown"
        elif kind == "qp_range":
            frame = self._with_qpn(frame, rng.randrange(self.n_qps, 1 << 24))
        elif kind == "icrc":
            frame = self._flip(self.data() if rng.random() < 0.7 else self.control(),
                               last=4)
        elif kind == "payload":
            length = rng.randrange(1, self.pmtu + 1)
            frame = self.data(payload=length)
            start = header_length(frame[BTH_OFFSET])
            frame = self._flip_range(frame, start, start + length)
        elif kind == "header_bit":
            frame = self.data() if rng.random() < 0.7 else self.control()
            # inner source address, BTH AckReq/RTX byte, METH or the SETH/NETH/PETH start
            start = rng.choice((INNER_OFFSET + 8, BTH_OFFSET + 8, EXT_OFFSET))
            frame = self._flip_range(frame, start, start + 4)
        elif kind == "tuser":
            tuser = 1
        elif kind == "rkey" or kind == "va":
            frame = self.data(access=False)
        else:
            raise ValueError(f"unknown malformed kind {kind!r}")
        return Labelled(frame, tuser, kind, reason)

    # --- malformed helpers ----------------------------------------------------------------------

    def _flip(self, frame, last):
        out = bytearray(frame)
        out[len(out) - 1 - self.rng.randrange(last)] ^= 1 << self.rng.randrange(8)
        return bytes(out)

    def _flip_range(self, frame, start, end):
        out = bytearray(frame)
        out[self.rng.randrange(start, end)] ^= 1 << self.rng.randrange(8)
        return bytes(out)

    def _with_qpn(self, frame, qpn):
        return _set_bytes(frame, BTH_OFFSET + 5, qpn, 3)

    def _fix_lengths(self, frame):
        """``frame`` with its three length fields set to its length."""
        n = len(frame)
        frame = rewrite(frame, OUTER_OFFSET, IPV6, payload_length=n - INNER_OFFSET)
        frame = rewrite(frame, INNER_OFFSET, IPV6, payload_length=n - UDP_OFFSET)
        return rewrite(frame, UDP_OFFSET, UDP, length=n - UDP_OFFSET)

    def _grow(self, frame, extra):
        """``frame`` with ``extra`` bytes more before its last 4, lengths consistent."""
        return self._fix_lengths(frame[:-4] + bytes(self.rng.getrandbits(8)
                                                    for _ in range(extra)) + frame[-4:])

    def _bad_padcnt(self):
        """A frame whose PadCnt exceeds what it holds: a zero-byte Write with PadCnt > 0, or a
        control frame with PadCnt > 0."""
        frame = self.data(payload=0) if self.rng.random() < 0.5 else self.control()
        return rewrite(frame, BTH_OFFSET, BTH, padcnt=self.rng.randrange(1, 4))

    def _trimmed_short(self):
        """A trimmed data frame of 118..133 bytes, lengths consistent."""
        frame = self.data()[:self.rng.randrange(EXT_OFFSET + 4, TRIM_MIN_BYTES)]
        frame = rewrite(frame, OUTER_OFFSET, IPV6,
                        dscp=self.rng.choice((Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP)))
        return self._fix_lengths(frame)

# SPDX-License-Identifier: BSD-2-Clause
"""Hostile input for the receive engine (issue [verify], item 3): mutated MRC frames among good
ones, drawn apart from the benches' own traffic (``models/rx_traffic.py``), each with the
outcome this module's own reading of docs/protocol.md says it must meet.

**Independent of the models.** Good frames are built by scapy (``Ether / IPv6 / IPv6 / UDP /
BTH`` and a raw METH, RETH, ImmDt, payload and pad; scapy computes the lengths and the RoCEv2
ICRC). Every frame offset, mask and rule below is written out here from docs/protocol.md
sections 1, 2 and 5; nothing of :mod:`models.packets`, :mod:`models.layouts` or
:mod:`models.rx_traffic` is used. Only the receiver's configuration (its address, QPs, regions,
PMTU and MPR) is shared with the bench, as a :class:`Receiver`.

**The oracle.** Section 5's receiver checks, in their order: (1) frame shape, (2) QP known,
(3) room, (4) ICRC unless trimmed, (5) PSN in the window, (6) duplicate, (7) trimmed, (8) R_Key
and bounds, (9) place. A mutation breaks exactly one thing, so the first check it fails is
known: each :class:`Hostile` frame names the receive counters it may reach (``front``: the front
counter names of the register map, ``short`` ... ``access_denied``, or ``plane_bad`` for a frame
flagged bad on its plane port) and, for a frame that reaches the tracker, the verdicts it may
get (``verdicts``). Where a reading admits two answers the set holds both (a cut frame is
``short`` or ``length`` by where the cut falls; a copy that arrives after its PSN was placed
is a duplicate). Fields the receiver must ignore are mutated too: the MACs, the outer Flow
Label, Hop Limit, addresses and ECN, and the fields the ICRC masks (inner Traffic Class, Flow
Label and Hop Limit, the UDP checksum, BTH byte 4) leave a good frame good.

**The campaign.** :meth:`Campaign.storm` draws N frames: per QP, PSNs in order, each PSN's
mutated copies first and its good copy last, all on one plane (planes keep order, so which copy
the tracker sees first is known); beside them frames that consume no PSN (runts, garbage,
unknown QPs, PSNs beyond and below the window, control frames good and bad). Every PSN of the
storm is placed exactly once, by whichever of its acceptable copies comes first.

Profile 1 (the RTL until [rx-speed]) has no IP-version, inner Next Header or PMTU check; the
mutations that only profile 2 rejects (:data:`V2_ONLY`) are drawn only with ``profile=2``.
"""

import zlib
from dataclasses import dataclass, field

from scapy.contrib.roce import BTH
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

__all__ = ["Receiver", "Hostile", "Campaign", "MUTATIONS", "STANDALONE", "V2_ONLY",
           "SHAPE_REASONS", "FRONT_DROPS"]

# docs/protocol.md 1: frame offsets.
ETH_TYPE = 12                  # 2 B
OUTER = 14                     # outer IPv6: +0 version/TC, +1 TC/FL, +4 plen, +6 NH, +7 hop
INNER = 54
UDP_AT = 94
BTH_AT = 102                   # +0 opcode, +1 SE/M/PadCnt/TVer, +2 P_Key, +4 reserved,
                               # +5 QPN, +8 AckReq/RTX, +9 PSN
EXT = 114                      # METH (4), RETH (16), ImmDt (4)
HEADERS = 134                  # through RETH
ROCE_PORT = 4791
# Opcodes (1.4) and DSCPs (6).
WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_LAST_IMM, WRITE_ONLY, WRITE_ONLY_IMM = range(0xC6,
                                                                                          0xCC)
SACK, NACK, PROBE = 0xDC, 0xDD, 0xDE
DATA = (WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_LAST_IMM, WRITE_ONLY, WRITE_ONLY_IMM)
IMM = (WRITE_LAST_IMM, WRITE_ONLY_IMM)
KNOWN = DATA + (SACK, NACK, PROBE)
CONTROL_EXT = {SACK: 36, NACK: 20, PROBE: 16}       # SETH + CC_STATE, NETH, PETH
TRIMMABLE, TRIMMABLE_RETX, TRIMMED, TRIMMED_LASTHOP, CONTROL = 4, 8, 12, 16, 46
ECT0, CE = 2, 3
PSN_MOD = 1 << 24

# The receive outcomes a frame may reach (front counter names; docs/registers.md).
SHAPE_REASONS = frozenset({"short", "ethertype", "next_header", "length", "inner_dst",
                           "udp_port", "tver", "pkey", "opcode", "trimmed_short"})
FRONT_DROPS = SHAPE_REASONS | {"qp_unknown", "icrc", "no_buffer_data", "no_buffer_control",
                               "plane_bad", "no_room"}
CUT = frozenset({"short", "length"})
ACCEPTED = frozenset({"placed", "duplicate"})


@dataclass(frozen=True)
class Receiver:
    """What the campaign knows of the receiver: its inner address (an int), ``n_qps`` QPs of
    which ``enabled`` are set up, its ``regions`` ``(rkey, base, length)``, its PMTU and MPR."""
    inner_dst: int
    n_qps: int
    enabled: tuple
    regions: tuple
    pmtu: int
    mpr: int
    profile: int = 1


@dataclass(frozen=True)
class Hostile:
    """One frame of the campaign: its bytes, ``tuser`` (1: flagged bad on its last beat), the
    mutation's name (``kind``), the front outcomes it may reach, the verdicts it may get (empty:
    it must not reach the tracker, or it is a SACK/NACK, which goes to feedback), and the plane
    it must go on (None: any)."""
    frame: bytes
    tuser: int
    kind: str
    front: frozenset
    verdicts: frozenset = frozenset()
    plane: int | None = None
    psn: tuple | None = field(default=None, compare=False)      # (qpn, psn) of a storm PSN


def _ip6(value):
    return ":".join(f"{value >> (112 - 16 * i) & 0xFFFF:x}" for i in range(8))


def _put(frame, offset, value, size):
    out = bytearray(frame)
    out[offset:offset + size] = (value % (1 << 8 * size)).to_bytes(size, "big")
    return bytes(out)


def _get(frame, offset, size):
    return int.from_bytes(frame[offset:offset + size], "big")


def _icrc(frame):
    """The frame with its ICRC recomputed (1.6): zlib's CRC-32 over 8 bytes of 0xFF and the
    frame from the inner IPv6 header up to the ICRC, with the inner Traffic Class, Flow Label
    and Hop Limit, the UDP checksum and BTH byte 4 set to ones; stored least significant byte
    first. (scapy's own ICRC of the good frames must agree: tested.)"""
    body = bytearray(frame[INNER:-4])
    body[0] |= 0x0F
    body[1:4] = b"\xff\xff\xff"
    body[7] = 0xFF
    body[UDP_AT + 6 - INNER:UDP_AT + 8 - INNER] = b"\xff\xff"
    body[BTH_AT + 4 - INNER] = 0xFF
    return frame[:-4] + zlib.crc32(b"\xff" * 8 + bytes(body)).to_bytes(4, "little")


def _lengths(frame):
    """The three length fields set to the frame's length (1.1-1.3)."""
    n = len(frame)
    frame = _put(frame, OUTER + 4, n - INNER, 2)
    frame = _put(frame, INNER + 4, n - UDP_AT, 2)
    return _put(frame, UDP_AT + 4, n - UDP_AT, 2)


class Campaign:
    """Hostile frames for one :class:`Receiver`. ``next_psn`` maps each enabled QP to the next
    PSN it may use (shared with the bench's own traffic, which continues from it); ``rng`` is
    a ``random.Random``."""

    # PSNs of a QP that may be outstanding at once (sent, not yet all placed) in a storm: the
    # beyond- and below-window PSNs keep this far from the window's edges.
    OUTSTANDING = 1024

    def __init__(self, rng, receiver, n_planes, next_psn):
        if receiver.mpr + 2 * self.OUTSTANDING >= 1 << 23:
            raise ValueError("Campaign: MPR too large for the window margins")
        if receiver.profile not in (1, 2):
            raise ValueError(f"Campaign: profile 1 or 2, not {receiver.profile!r}")
        if set(next_psn) != set(receiver.enabled):
            raise ValueError("Campaign: next_psn must name every enabled QP")
        self.rng, self.rx, self.n_planes = rng, receiver, n_planes
        self.next = next_psn
        self.counts = {}
        self.mutations = MUTATIONS + (V2_ONLY if receiver.profile == 2 else ())

    # --- good frames (scapy) ---------------------------------------------------------------------

    def _addresses(self):
        rng = self.rng
        return dict(mac_dst=rng.getrandbits(48), mac_src=rng.getrandbits(48),
                    outer_src=0xFD00 << 112 | rng.getrandbits(4) << 80 | rng.getrandbits(32),
                    outer_dst=0xFD000200 << 96 | rng.getrandbits(48) << 48,
                    inner_src=0xFD00FFFF << 96 | rng.getrandbits(32))

    def _frame(self, opcode, qpn, psn, ext, payload=b"", *, dscp=TRIMMABLE, ecn=ECT0,
               ackreq=0, rtx=0):
        """A frame of ``opcode`` built by scapy: the addresses at random, the EV at random in the
        UDP source port and both Flow Labels (1.1-1.3), ``ext`` the bytes after the BTH."""
        rng, a = self.rng, self._addresses()
        ev = rng.getrandbits(32)
        pad = -len(payload) % 4
        tc = dscp << 2 | ecn
        pkt = (Ether(dst=":".join(f"{a['mac_dst'] >> 8 * (5 - i) & 0xFF:02x}" for i in range(6)),
                     src=":".join(f"{a['mac_src'] >> 8 * (5 - i) & 0xFF:02x}" for i in range(6)),
                     type=0x86DD)
               / IPv6(tc=tc, fl=ev & 0xFFFF, nh=41, hlim=rng.randrange(2, 256),
                      src=_ip6(a["outer_src"]), dst=_ip6(a["outer_dst"]))
               / IPv6(tc=tc, fl=ev & 0xFFFF, nh=17, hlim=64, src=_ip6(a["inner_src"]),
                      dst=_ip6(self.rx.inner_dst))
               / UDP(sport=ev >> 16, dport=ROCE_PORT, chksum=0)
               / BTH(opcode=opcode, solicited=0, migreq=0, padcount=pad, version=0,
                     pkey=0xFFFF, fecn=0, becn=0, resv6=0, dqpn=qpn, ackreq=ackreq,
                     resv7=rtx << 5, psn=psn)
               / Raw(bytes(ext) + bytes(payload) + bytes(pad)))
        return bytes(pkt)

    def _payload_length(self):
        rng, pmtu = self.rng, self.rx.pmtu
        r = rng.random()
        if r < 0.1:
            return 0
        if r < 0.5:
            return rng.randrange(1, 65)
        if r < 0.8:
            return rng.randrange(1, min(pmtu, 512) + 1)
        return rng.randrange(1, pmtu + 1)

    def data_frame(self, qpn, psn, *, length=None, access=True, opcode=None, dscp=TRIMMABLE,
                   ecn=None):
        """A good data frame of QP ``qpn``, PSN ``psn`` whose [VA, VA + length) lies in a region
        (``access`` False: it does not, or its R_Key is no region's)."""
        rng = self.rng
        length = self._payload_length() if length is None else length
        opcode = rng.choice(DATA[:3] * 3 + (WRITE_ONLY,) * 4 + IMM) if opcode is None else opcode
        rkey, base, size = rng.choice(self.rx.regions)
        va = base + rng.randrange(0, size - length + 1)
        if not access:
            va, rkey = self._outside(rkey, base, size, max(length, 1))
            length = max(length, 1)
        ext = (rng.getrandbits(16).to_bytes(2, "big") + rng.getrandbits(16).to_bytes(2, "big")
               + va.to_bytes(8, "big") + rkey.to_bytes(4, "big")
               + rng.getrandbits(32).to_bytes(4, "big"))
        if opcode in IMM:
            ext += rng.getrandbits(32).to_bytes(4, "big")
        payload = bytes(rng.getrandbits(8) for _ in range(length))
        ecn = rng.choice((ECT0, ECT0, ECT0, CE)) if ecn is None else ecn
        return self._frame(opcode, qpn, psn, ext, payload, dscp=dscp, ecn=ecn,
                           ackreq=int(opcode in (WRITE_LAST, WRITE_LAST_IMM, WRITE_ONLY,
                                                 WRITE_ONLY_IMM)),
                           rtx=int(rng.random() < 0.2))

    def _outside(self, rkey, base, size, length):
        """A (VA, R_Key) pair for which no region holds [VA, VA + length)."""
        rng = self.rng
        keys = {r[0] for r in self.rx.regions}
        choice = rng.randrange(4)
        if choice == 0:
            bad = rng.getrandbits(32)
            while bad in keys:
                bad = rng.getrandbits(32)
            return base, bad
        if choice == 1:                                 # starts below the region
            return base - rng.randrange(1, 4096), rkey
        if choice == 2:                                 # ends beyond it
            return base + size - length + rng.randrange(1, 4096), rkey
        return (1 << 64) - rng.randrange(1, length + 1), rkey   # ends at or past 2^64

    def control_frame(self, opcode, qpn):
        """A good SACK, NACK or probe of QP ``qpn`` with random extension-header bytes (the
        receiver passes them on; section 2)."""
        rng = self.rng
        ext = bytearray(rng.getrandbits(8) for _ in range(CONTROL_EXT[opcode]))
        if opcode == NACK:
            ext[2] = rng.choice((0x01, 0x02, 0x07, 0x0B, 0x19))
        if opcode == PROBE:
            return self._frame(PROBE, qpn, 0, ext, dscp=TRIMMABLE, ecn=rng.choice((ECT0, CE)))
        return self._frame(opcode, qpn, 0, ext, dscp=CONTROL, ecn=0)

    # --- mutations of one PSN's good frame -------------------------------------------------------

    @staticmethod
    def _covered_spans(frame):
        """Byte spans the ICRC covers and no earlier check reads (1.6, 5): the inner source,
        the UDP source port, BTH byte 8 and the PSN, the extension headers, the payload, the
        pad and the ICRC itself (BTH byte 1's SE and M bits: mutation ``header_bits``)."""
        return [(INNER + 8, INNER + 24), (UDP_AT, UDP_AT + 2), (BTH_AT + 8, BTH_AT + 12),
                (EXT, len(frame))]

    def mutate(self, good, qpn, name):
        """``(frame, tuser, front outcomes, verdicts if it reaches the tracker)`` for mutation
        ``name`` of the good data frame ``good`` of QP ``qpn``."""
        rng, n = self.rng, len(good)
        if name == "cut":
            edges = (1, 13, 14, 15, 53, 54, 55, 93, 94, 95, 101, 102, 103, 113, 114, 115, 117,
                     118, 119, 133, 134, 135, 137, 138, n - 5, n - 4, n - 3, n - 1)
            at = rng.choice([e for e in edges if 0 < e < n] + [rng.randrange(1, n)])
            return good[:at], 0, CUT if at >= ETH_TYPE + 2 else {"short"}, ()
        if name == "ethertype":
            value = rng.choice((0x0800, 0x86DE, 0x8100, 0x88CC, rng.getrandbits(16)))
            value = 0x0800 if value == 0x86DD else value
            return _put(good, ETH_TYPE, value, 2), 0, {"ethertype"}, ()
        if name == "outer_next_header":
            value = rng.choice((0, 6, 17, 43, 59, rng.getrandbits(8)))
            value = 59 if value == 41 else value
            return _put(good, OUTER + 6, value, 1), 0, {"next_header"}, ()
        if name in ("outer_length", "inner_length", "udp_length"):
            offset = {"outer_length": OUTER + 4, "inner_length": INNER + 4,
                      "udp_length": UDP_AT + 4}[name]
            delta = rng.choice((-1, 1, -4, 4, rng.randrange(-n, n) or 7))
            return _put(good, offset, _get(good, offset, 2) + delta, 2), 0, {"length"}, ()
        if name == "inner_dst":
            other = rng.getrandbits(128)
            other = other if other != self.rx.inner_dst else other ^ 1
            frame = _icrc(good[:INNER + 24] + other.to_bytes(16, "big") + good[INNER + 40:])
            return frame, 0, {"inner_dst"}, ()
        if name == "udp_port":
            value = rng.choice((4790, 4792, 0, rng.getrandbits(16)))
            value = 4790 if value == ROCE_PORT else value
            return _icrc(_put(good, UDP_AT + 2, value, 2)), 0, {"udp_port"}, ()
        if name == "tver":
            byte = good[BTH_AT + 1] & 0xF0 | rng.randrange(1, 16)
            return _icrc(_put(good, BTH_AT + 1, byte, 1)), 0, {"tver"}, ()
        if name == "pkey":
            value = rng.choice((0, 0x7FFF, 0xFFFE, rng.getrandbits(16)))
            value = 0 if value == 0xFFFF else value
            return _icrc(_put(good, BTH_AT + 2, value, 2)), 0, {"pkey"}, ()
        if name == "opcode":
            value = rng.choice([v for v in range(256) if v not in KNOWN])
            return _icrc(_put(good, BTH_AT, value, 1)), 0, {"opcode"}, ()
        if name == "qp_unknown":
            others = [q for q in range(self.rx.n_qps) if q not in self.rx.enabled]
            q = rng.choice(others + [self.rx.n_qps + rng.randrange(0, 64), rng.getrandbits(24)])
            q = q if q not in self.rx.enabled else self.rx.n_qps
            return _icrc(_put(good, BTH_AT + 5, q, 3)), 0, {"qp_unknown"}, ()
        if name == "icrc":
            lo, hi = rng.choice(self._covered_spans(good))
            at = rng.randrange(lo, hi)
            out = bytearray(good)
            out[at] ^= 1 << rng.randrange(8)
            return bytes(out), 0, {"icrc"}, ()
        if name == "header_bits":                       # SE or M: covered, checked by none
            return _put(good, BTH_AT + 1, good[BTH_AT + 1] ^ rng.choice((0x80, 0x40)), 1), 0, \
                {"icrc"}, ()
        if name == "tuser":
            return good, 1, {"plane_bad"}, ()
        if name == "trimmed":                           # as a switch trims (7)
            keep = rng.randrange(HEADERS, n)
            frame = _set_dscp(_lengths(good[:keep]), rng.choice((TRIMMED, TRIMMED_LASTHOP)))
            return frame, 0, {"trimmed"}, {"trimmed", "duplicate"}
        if name == "trimmed_short":
            keep = rng.randrange(BTH_AT + 12 + 4, HEADERS)
            frame = _set_dscp(_lengths(good[:keep]), rng.choice((TRIMMED, TRIMMED_LASTHOP)))
            return frame, 0, {"trimmed_short"}, ()
        # Profile 2 only (V2_ONLY; the counter names are those [rx-speed] gives them).
        if name == "ip_version":
            at = rng.choice((OUTER, INNER))
            frame = _put(good, at, good[at] & 0x0F | rng.choice((4, 0, 5, 15)) << 4, 1)
            return (_icrc(frame) if at == INNER else frame), 0, {"version"}, ()
        if name == "inner_next_header":
            value = rng.choice((6, 41, 58, rng.getrandbits(8)))
            return _icrc(_put(good, INNER + 6, 6 if value == 17 else value, 1)), 0, \
                {"next_header"}, ()
        if name == "free_field":                        # ignored by the receiver: still good
            frame = self._free(good)
            return frame, 0, {"data"}, ACCEPTED
        raise ValueError(f"unknown mutation {name!r}")

    def _free(self, good):
        rng = self.rng
        r = rng.randrange(7)
        if r == 0:                                      # a MAC
            return _put(good, rng.choice((0, 6)), rng.getrandbits(48), 6)
        if r == 1:                                      # outer Flow Label (low 16 bits: EV)
            return _put(good, OUTER + 2, rng.getrandbits(16), 2)
        if r == 2:                                      # outer Hop Limit, addresses
            return _put(good, rng.choice((OUTER + 7, OUTER + 8, OUTER + 24)),
                        rng.getrandbits(64), 1 if rng.random() < 0.3 else 8)
        if r == 3:                                      # outer ECN
            return _put(good, OUTER + 1, good[OUTER + 1] & 0xCF | rng.randrange(4) << 4, 1)
        if r == 4:                                      # inner TC and Flow Label (masked)
            return _put(good, INNER, 0x60 << 24 | rng.getrandbits(28), 4)
        if r == 5:                                      # inner Hop Limit, UDP checksum (masked)
            frame = _put(good, INNER + 7, rng.getrandbits(8), 1)
            return _put(frame, UDP_AT + 6, rng.getrandbits(16), 2)
        return _put(good, BTH_AT + 4, rng.getrandbits(8), 1)     # BTH byte 4 (masked)

    # --- the storm --------------------------------------------------------------------------------

    def _count(self, kind):
        self.counts[kind] = self.counts.get(kind, 0) + 1

    def psn_group(self, qpn):
        """One new PSN of ``qpn``: 0 to 3 mutated copies, then the good frame, all on one plane;
        the first copy the receiver accepts is placed, later ones are duplicates."""
        rng = self.rng
        psn = self.next[qpn]
        self.next[qpn] = (psn + 1) % PSN_MOD
        plane = rng.randrange(self.n_planes)
        good = self.data_frame(qpn, psn)
        names = [rng.choice(self.mutations) for _ in range(rng.choice((0, 1, 1, 2, 3)))]
        if len(good) <= HEADERS + 4:
            names = [n for n in names if n != "trimmed"]
        out, placed = [], False
        for name in names:
            frame, tuser, front, verdicts = self.mutate(good, qpn, name)
            if verdicts == ACCEPTED:
                verdicts = {"duplicate"} if placed else {"placed"}
                placed = True
            elif verdicts:
                verdicts = {"duplicate"} if placed else set(verdicts) - {"duplicate"}
            out.append(Hostile(frame, tuser, name, frozenset(front), frozenset(verdicts), plane,
                               (qpn, psn)))
            self._count(name)
        if rng.random() < 0.15:                         # no R_Key or outside the region
            bad = self.data_frame(qpn, psn, access=False)
            out.insert(rng.randrange(len(out) + 1),
                       Hostile(bad, 0, "access", frozenset({"access_denied"}),
                               frozenset({"access_error"}), plane, (qpn, psn)))
            self._count("access")
            # A copy accepted before it makes it a duplicate (the distance rule comes first).
            out = self._after_placed(out)
        out.append(Hostile(good, 0, "good", frozenset({"data"}),
                           frozenset({"duplicate"} if any(
                               "placed" in h.verdicts for h in out) else {"placed"}),
                           plane, (qpn, psn)))
        self._count("good")
        return out

    @staticmethod
    def _after_placed(group):
        """Re-derive the verdicts of one PSN's copies in order: after the first placed copy
        every copy that reaches the tracker is a duplicate."""
        out, placed = [], False
        for h in group:
            if h.verdicts and placed:
                h = Hostile(h.frame, h.tuser, h.kind, h.front, frozenset({"duplicate"}),
                            h.plane, h.psn)
            placed = placed or "placed" in h.verdicts
            out.append(h)
        return out

    def standalone(self, name):
        """A frame that consumes no PSN (:data:`STANDALONE`)."""
        rng, rx = self.rng, self.rx
        q = rng.choice(rx.enabled)
        if name == "runt":
            return Hostile(bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 14))), 0,
                           name, frozenset({"short"}))
        if name == "garbage":
            frame = bytes(rng.getrandbits(8) for _ in range(rng.randrange(14, 400)))
            return Hostile(frame, 0, name, SHAPE_REASONS)
        if name == "beyond_window":
            psn = (self.next[q] + rx.mpr + self.OUTSTANDING +
                   rng.randrange(0, (1 << 23) - rx.mpr - 2 * self.OUTSTANDING)) % PSN_MOD
            return Hostile(self.data_frame(q, psn), 0, name, frozenset({"data"}),
                           frozenset({"out_of_window"}))
        if name == "below_window":
            psn = (self.next[q] - 1 - self.OUTSTANDING -
                   rng.randrange(0, (1 << 23) - 2 * self.OUTSTANDING)) % PSN_MOD
            return Hostile(self.data_frame(q, psn), 0, name, frozenset({"data"}),
                           frozenset({"duplicate"}))
        if name in ("sack", "nack", "probe"):
            opcode = {"sack": SACK, "nack": NACK, "probe": PROBE}[name]
            return Hostile(self.control_frame(opcode, q), 0, name, frozenset({name}),
                           frozenset({"probe"}) if opcode == PROBE else frozenset())
        if name == "control_extra":                     # bytes after the extension header
            opcode = rng.choice((SACK, NACK, PROBE))
            frame = self.control_frame(opcode, q)
            frame = _icrc(_lengths(frame[:-4] + bytes(rng.randrange(1, 40)) + frame[-4:]))
            return Hostile(frame, 0, name, frozenset({"length"}))
        if name == "control_cut":
            frame = self.control_frame(rng.choice((SACK, NACK, PROBE)), q)
            at = rng.randrange(BTH_AT + 16, len(frame))
            return Hostile(_icrc(_lengths(frame[:at - 4] + frame[-4:])) if at > BTH_AT + 16
                           else frame[:at], 0, name, CUT)
        if name == "control_qp":
            opcode = rng.choice((SACK, NACK, PROBE))
            frame, _, front, _ = self.mutate(self.control_frame(opcode, q), q, "qp_unknown")
            return Hostile(frame, 0, name, frozenset(front))
        if name == "oversize":                          # profile 2: payload above PMTU
            frame = self.data_frame(q, self.next[q], length=rx.pmtu + rng.randrange(1, 256),
                                    opcode=WRITE_MIDDLE)
            return Hostile(frame, 0, name, frozenset({"length"}))
        if name == "zero_pad":                          # PadCnt beyond a zero-byte payload
            frame = self.data_frame(q, self.next[q], length=0, opcode=WRITE_ONLY)
            frame = _icrc(_put(frame, BTH_AT + 1, rng.randrange(1, 4) << 4, 1))
            return Hostile(frame, 0, name, frozenset({"length"}))
        raise ValueError(f"unknown standalone kind {name!r}")

    def storm(self, n):
        """``n`` frames or a few more (a PSN's copies stay together), in sending order."""
        rng, out = self.rng, []
        while len(out) < n:
            if rng.random() < 0.6:
                out += self.psn_group(rng.choice(self.rx.enabled))
            else:
                kind = rng.choice(STANDALONE + (("oversize",) if self.rx.profile == 2 else ()))
                out.append(self.standalone(kind))
                self._count(kind)
        return out


def _set_dscp(frame, dscp):
    """The outer DSCP set to ``dscp``, the outer ECN kept (1.1: TC spans bytes 14-15)."""
    tc = (frame[OUTER] & 0x0F) << 4 | frame[OUTER + 1] >> 4
    tc = dscp << 2 | tc & 3
    frame = _put(frame, OUTER, 0x60 | tc >> 4, 1)
    return _put(frame, OUTER + 1, (tc & 0xF) << 4 | frame[OUTER + 1] & 0x0F, 1)


# Mutations of a PSN's good copy (Campaign.mutate) and frames of their own (Campaign.standalone).
MUTATIONS = ("cut", "ethertype", "outer_next_header", "outer_length", "inner_length",
             "udp_length", "inner_dst", "udp_port", "tver", "pkey", "opcode", "qp_unknown",
             "icrc", "header_bits", "tuser", "trimmed", "trimmed_short", "free_field",
             "free_field")
STANDALONE = ("runt", "garbage", "beyond_window", "below_window", "sack", "nack", "probe",
              "control_extra", "control_cut", "control_qp", "zero_pad")
# Rejected only by profile 2 (docs/protocol.md 5): IP version, inner Next Header, PMTU.
V2_ONLY = ("ip_version", "inner_next_header")      # and the standalone "oversize"

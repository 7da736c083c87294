# SPDX-License-Identifier: BSD-2-Clause
"""Wire layouts of every MRC header, declared once, as data (docs/protocol.md sections 1, 2 and 6).

This file is the single source of truth for header offsets and widths. The Python models pack and
parse frames with it, and the RTL takes the same tables (``rtl/common/headers.py``) to place and
extract fields, so a layout change here changes models, RTL and benches together.

Conventions (profile, "Conventions"): multi-byte fields are big-endian; bit offsets count from the
first bit on the wire, i.e. offset 0 is bit 7 of byte 0. Reserved fields are named ``rsvd*`` and are
always zero when packed.

Nothing here imports cocotb, Amaranth or scapy.
"""

from dataclasses import dataclass
from ipaddress import IPv6Address

__all__ = [
    "Field", "Header", "ETH", "IPV6", "UDP", "BTH", "METH", "RETH", "IMMDT", "SETH", "CC_STATE",
    "NETH", "PETH", "Opcode", "Dscp", "Ecn", "NackReason", "SackVerdict", "DATA_OPCODES",
    "CONTROL_OPCODES", "KNOWN_OPCODES", "ext_headers", "ext_length", "header_length", "ETHERTYPE_IPV6",
    "NEXT_HEADER_IPV6", "NEXT_HEADER_UDP", "ROCE_UDP_PORT", "PKEY_DEFAULT", "HOP_LIMIT_DEFAULT",
    "OUTER_OFFSET", "INNER_OFFSET", "UDP_OFFSET", "BTH_OFFSET", "EXT_OFFSET", "ICRC_BYTES",
    "ICRC_START", "ICRC_MASKED_BITS", "MAX_EXT_BYTES", "TRIM_MIN_BYTES", "pad_count",
    "ip6", "ip6_str", "mac", "mac_str",
]


@dataclass(frozen=True)
class Field:
    """One field: ``offset`` bits from the header's first wire bit, ``width`` bits, big-endian."""
    name: str
    offset: int
    width: int


class Header:
    """A fixed-size header: an ordered table of fields that tiles ``size`` bytes exactly."""

    def __init__(self, name, fields):
        self.name = name
        self.fields = []
        offset = 0
        for fname, width in fields:
            self.fields.append(Field(fname, offset, width))
            offset += width
        if offset % 8:
            raise ValueError(f"header {name}: fields cover {offset} bits, not whole bytes")
        self.size = offset // 8
        self._by_name = {f.name: f for f in self.fields}
        if len(self._by_name) != len(self.fields):
            raise ValueError(f"header {name}: duplicate field names")

    def __repr__(self):
        return f"Header({self.name}, {self.size} B)"

    def __getitem__(self, name):
        return self._by_name[name]

    def __contains__(self, name):
        return name in self._by_name

    @property
    def names(self):
        """Names of the non-reserved fields, in wire order."""
        return [f.name for f in self.fields if not f.name.startswith("rsvd")]

    def pack(self, **values):
        """Bytes of the header from field values; missing fields are 0. Unknown names raise."""
        for name in values:
            if name not in self._by_name:
                raise KeyError(f"{self.name} has no field {name!r}")
        word = 0
        for f in self.fields:
            v = values.get(f.name, 0)
            if f.name.startswith("rsvd") and v:
                raise ValueError(f"{self.name}.{f.name} is reserved and must be 0")
            if v < 0:
                v &= (1 << f.width) - 1  # signed fields (two's complement)
            if v >> f.width:
                raise ValueError(f"{self.name}.{f.name} = {v:#x} does not fit in {f.width} bits")
            word = (word << f.width) | v
        return word.to_bytes(self.size, "big")

    def unpack(self, data, signed=()):
        """Field values (reserved ones included) from the first ``size`` bytes of ``data``."""
        if len(data) < self.size:
            raise ValueError(f"{self.name} needs {self.size} bytes, got {len(data)}")
        word = int.from_bytes(bytes(data[:self.size]), "big")
        out = {}
        total = self.size * 8
        for f in self.fields:
            v = (word >> (total - f.offset - f.width)) & ((1 << f.width) - 1)
            if f.name in signed and v >> (f.width - 1):
                v -= 1 << f.width
            out[f.name] = v
        return out


# --- The headers -------------------------------------------------------------------------------

ETH = Header("eth", [("dst", 48), ("src", 48), ("ethertype", 16)])

IPV6 = Header("ipv6", [
    ("version", 4), ("dscp", 6), ("ecn", 2), ("flow_label", 20),
    ("payload_length", 16), ("next_header", 8), ("hop_limit", 8),
    ("src", 128), ("dst", 128),
])

UDP = Header("udp", [("sport", 16), ("dport", 16), ("length", 16), ("checksum", 16)])

BTH = Header("bth", [
    ("opcode", 8),
    ("se", 1), ("m", 1), ("padcnt", 2), ("tver", 4),
    ("pkey", 16),
    ("rsvd0", 8),
    ("dest_qpn", 24),
    ("ackreq", 1), ("rsvd1", 1), ("rtx", 1), ("ts", 1), ("rsvd2", 4),
    ("psn", 24),
])

METH = Header("meth", [("rqmsn", 16), ("msn", 16)])
RETH = Header("reth", [("va", 64), ("rkey", 32), ("dma_length", 32)])
IMMDT = Header("immdt", [("imm", 32)])

# SACK extension header (docs/protocol.md 2.1, bytes 0-27). ack_psn_offset and sack_offset are signed.
SETH = Header("seth", [
    ("rsvd0", 8),
    ("rsvd1", 1), ("m", 2), ("rsvd2", 3), ("pr", 1), ("tm", 1),   # tm: (v2) timer SACK
    ("ack_psn_offset", 16),
    ("entropy", 32),
    ("probe_id", 16),
    ("rsvd4", 24),
    ("cack_psn", 24),
    ("rsvd5", 8),
    ("mpr", 8),
    ("sack_offset", 16),
    ("sack_bitmap", 64),
])
SETH_SIGNED = ("ack_psn_offset", "sack_offset")

# Congestion-control state after the SETH (docs/protocol.md 2.1, bytes 28-35).
CC_STATE = Header("cc_state", [
    ("ts_echo", 16),
    ("rsvd0", 1), ("ooo_count", 15),
    ("r_c", 1), ("rcv_cwnd_pen", 7), ("placed_256", 24),
])

# NACK extension header (docs/protocol.md 2.2).
NETH = Header("neth", [
    ("rsvd0", 16), ("nack_reason", 8), ("rsvd1", 8),
    ("entropy", 32),
    ("rsvd2", 40),
    ("nack_psn", 24),
    ("rsvd3", 32),
])

# Reliability probe extension header (docs/protocol.md 2.3).
PETH = Header("peth", [("rsvd0", 32), ("probe_id", 16), ("rsvd1", 80)])


# --- Codepoints ----------------------------------------------------------------------------------

class Opcode:
    WRITE_FIRST = 0xC6
    WRITE_MIDDLE = 0xC7
    WRITE_LAST = 0xC8
    WRITE_LAST_IMM = 0xC9
    WRITE_ONLY = 0xCA
    WRITE_ONLY_IMM = 0xCB
    SACK = 0xDC
    NACK = 0xDD
    PROBE = 0xDE


DATA_OPCODES = (Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE, Opcode.WRITE_LAST,
                Opcode.WRITE_LAST_IMM, Opcode.WRITE_ONLY, Opcode.WRITE_ONLY_IMM)
IMM_OPCODES = (Opcode.WRITE_LAST_IMM, Opcode.WRITE_ONLY_IMM)
CONTROL_OPCODES = (Opcode.SACK, Opcode.NACK, Opcode.PROBE)
KNOWN_OPCODES = DATA_OPCODES + CONTROL_OPCODES


class Dscp:
    """docs/protocol.md section 6."""
    NO_TRIM = 0
    TRIMMABLE = 4
    TRIMMABLE_RETX = 8
    TRIMMED = 12
    TRIMMED_LASTHOP = 16
    CONTROL = 46


class Ecn:
    NOT_ECT = 0b00
    ECT0 = 0b10
    CE = 0b11


class NackReason:
    """docs/protocol.md section 2.2."""
    TRIMMED = 0x01
    TRIMMED_LASTHOP = 0x02
    NO_PKT_BUFFER = 0x07
    PSN_OOR_WINDOW = 0x0B
    UNEXP_EVENT = 0x19


class SackVerdict:
    """The ``m`` field of a SACK (docs/protocol.md 2.1)."""
    NONE = 0
    SKIP_ONCE = 1
    ALWAYS_SKIP = 2  # never sent (docs/protocol.md 2.1)


ETHERTYPE_IPV6 = 0x86DD
NEXT_HEADER_IPV6 = 41
NEXT_HEADER_UDP = 17
ROCE_UDP_PORT = 4791
PKEY_DEFAULT = 0xFFFF
HOP_LIMIT_DEFAULT = 64

# --- The frame stack ---------------------------------------------------------------------------

OUTER_OFFSET = ETH.size                      # 14
INNER_OFFSET = OUTER_OFFSET + IPV6.size      # 54
UDP_OFFSET = INNER_OFFSET + IPV6.size        # 94
BTH_OFFSET = UDP_OFFSET + UDP.size           # 102
EXT_OFFSET = BTH_OFFSET + BTH.size           # 114: first byte after the BTH
ICRC_BYTES = 4


def ext_headers(opcode):
    """The headers after the BTH for ``opcode``, in wire order; None for an unknown opcode."""
    if opcode in IMM_OPCODES:
        return (METH, RETH, IMMDT)
    if opcode in DATA_OPCODES:
        return (METH, RETH)
    if opcode == Opcode.SACK:
        return (SETH, CC_STATE)
    if opcode == Opcode.NACK:
        return (NETH,)
    if opcode == Opcode.PROBE:
        return (PETH,)
    return None


def ext_length(opcode):
    """Bytes of extension headers after the BTH (24/28 data, 36 SACK, 20 NACK, 16 probe)."""
    hs = ext_headers(opcode)
    if hs is None:
        raise ValueError(f"unknown opcode {opcode:#04x}")
    return sum(h.size for h in hs)


def header_length(opcode):
    """Bytes from the frame's first byte to the first payload byte (134/138/150/134/130)."""
    return EXT_OFFSET + ext_length(opcode)


MAX_EXT_BYTES = max(ext_length(op) for op in KNOWN_OPCODES)   # 36 (SACK)
TRIM_MIN_BYTES = header_length(Opcode.WRITE_FIRST)            # 134: headers through RETH


def pad_count(payload_length):
    """Zero pad bytes after a payload so that it ends on a multiple of 4 (BTH.PadCnt)."""
    return -payload_length & 3


# --- ICRC coverage (docs/protocol.md 1.6) ----------------------------------------------------------------
# The ICRC covers the frame from the inner IPv6 header on (preceded by 8 bytes of 0xFF), with some
# fields taken as all ones. ICRC_MASKED_BITS lists them as (frame bit offset, width), frame bit
# offset 0 being bit 7 of the frame's byte 0.
ICRC_START = INNER_OFFSET
ICRC_MASKED_BITS = (
    (INNER_OFFSET * 8 + IPV6["dscp"].offset, 6),
    (INNER_OFFSET * 8 + IPV6["ecn"].offset, 2),
    (INNER_OFFSET * 8 + IPV6["flow_label"].offset, 20),
    (INNER_OFFSET * 8 + IPV6["hop_limit"].offset, 8),
    (UDP_OFFSET * 8 + UDP["checksum"].offset, 16),
    (BTH_OFFSET * 8 + BTH["rsvd0"].offset, 8),
)


# --- Address helpers ---------------------------------------------------------------------------

def ip6(addr):
    """An IPv6 address (text or int) as a 128-bit int."""
    return int(IPv6Address(addr)) if isinstance(addr, str) else int(addr)


def ip6_str(value):
    return str(IPv6Address(value))


def mac(addr):
    """A MAC address (text ``aa:bb:..`` or int) as a 48-bit int."""
    return int(addr.replace(":", ""), 16) if isinstance(addr, str) else int(addr)


def mac_str(value):
    return ":".join(f"{b:02x}" for b in value.to_bytes(6, "big"))

# SPDX-License-Identifier: BSD-2-Clause
"""Golden model of the FPGA loopback self-test (``rtl/selftest.py``): the frames it sends, the
frames it expects back, the switch set-up it writes and the UART report line.

Frame ``i`` (0, 1, 2, ...) is made from ``R_i = xs^(i+1)(seed)``, ``xs`` being the xorshift64
step of :func:`xorshift64`, and from its sequence number ``i``: :func:`record` gives its
``tx_header`` record (:data:`models.records.TX_HEADER`), :func:`payload` its payload bytes. The
header inserter turns them into the frame sent (:func:`sent_frame`). With a switch, every frame
crosses it ``passes`` times: its outer destination carries the self-test's uSID ``OWN_USID``
``passes`` times then ``EXIT_USID``; the route table sends ``OWN_USID`` to port 1, which is
looped back to ingress 1, and ``EXIT_USID`` to port 0, where the checker listens. Each crossing
shifts the destination by one uSID and decrements the Hop Limit (the ICRC does not cover the
outer header), so the frame expected back is the header inserter's frame of the record with
that destination and Hop Limit (:func:`expected_record`, :func:`expected_frame`).

The first two bytes of every frame (the top of the Ethernet destination) are the low 16 bits
of its sequence number, so the checker knows which frame came back from its first beat.

Payload bytes come from W/64 xorshift64 lanes: lane ``j`` starts at ``R ^ LANE_SALT[j]``, gives
its state as 8 little-endian bytes at bytes ``8j .. 8j + 7`` of each beat, then steps.

Nothing here imports cocotb, Amaranth or scapy.
"""

from dataclasses import dataclass

from .layouts import DATA_OPCODES, Dscp, Opcode
from .packets import build_frame, frame_length
from .usid import DEFAULT_BLOCK

__all__ = ["SelfTestConfig", "xorshift64", "frame_state", "payload_length", "record", "payload",
           "sent_frame", "expected_record", "expected_frame", "corrupt", "switch_writes",
           "status_word", "report_line", "parse_report", "OWN_USID", "EXIT_USID", "LOOP_PORT",
           "EXIT_PORT", "OPCODE_TABLE", "LANE_SALT", "STATUS_WORDS", "M64"]

M64 = (1 << 64) - 1
OWN_USID = 0xE5E1             # the switch's own uSID: each crossing shifts one off
EXIT_USID = 0xE0E0            # routed to the checker's port
LOOP_PORT = 1                 # egress looped back to its own ingress
EXIT_PORT = 0                 # egress read by the checker (ingress 0 takes the frames sent)
MAX_PASSES = 5                # uSIDs after the block: ``passes`` own ones and the exit one
# Record bits 30..28 pick the opcode: every data opcode, the two carrying ImmDt twice.
OPCODE_TABLE = (Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE, Opcode.WRITE_LAST, Opcode.WRITE_LAST_IMM,
                Opcode.WRITE_ONLY, Opcode.WRITE_ONLY_IMM, Opcode.WRITE_ONLY_IMM,
                Opcode.WRITE_LAST_IMM)
LANE_SALT = tuple((0x9E3779B97F4A7C15 * (j + 1)) & M64 for j in range(8))
STATUS_WORDS = ("WAIT", "PASS", "FAIL")    # no frame checked yet / all good / an error seen


@dataclass(frozen=True)
class SelfTestConfig:
    """The parameters of the self-test core that the frames depend on.

    ``data_width`` W (64..512), ``ports`` (0: no switch, frames looped back through a FIFO;
    2..4: through the switch), ``passes`` (crossings of the switch, 1..5; 0 without one),
    ``max_payload`` (a power of two, 8..4096: payload lengths are 0..max_payload), ``seed``
    (non-zero, 64 bits)."""
    data_width: int = 64
    ports: int = 2
    passes: int = 2
    max_payload: int = 1024
    seed: int = 0x5EED_0F_4D52_4321

    def __post_init__(self):
        if self.data_width not in (64, 128, 256, 512):
            raise ValueError(f"data_width must be 64, 128, 256 or 512, not {self.data_width!r}")
        if self.ports != 0 and not 2 <= self.ports <= 4:
            raise ValueError(f"ports must be 0 (no switch) or 2..4, not {self.ports!r}")
        if self.ports and self.ports * self.data_width > 512:
            raise ValueError(f"ports x data_width must be at most 512 (the switch core), not "
                             f"{self.ports} x {self.data_width}")
        limit = (1, MAX_PASSES) if self.ports else (0, 0)
        if not limit[0] <= self.passes <= limit[1]:
            raise ValueError(f"passes must be {limit[0]}..{limit[1]} with ports={self.ports}, "
                             f"not {self.passes!r}")
        p = self.max_payload
        if not isinstance(p, int) or p < 8 or p > 4096 or p & (p - 1):
            raise ValueError(f"max_payload must be a power of two in 8..4096, not {p!r}")
        if not 0 < self.seed <= M64:
            raise ValueError(f"seed must be a non-zero 64-bit value, not {self.seed!r}")

    @property
    def lanes(self):
        return self.data_width // 64

    @property
    def max_frame(self):
        """The longest frame sent, bytes (ImmDt opcode, max_payload)."""
        return max(frame_length(op, self.max_payload) for op in DATA_OPCODES)


def xorshift64(x):
    """One step of Marsaglia's xorshift64 (13, 7, 17): a bijection of the non-zero 64-bit values."""
    x ^= (x << 13) & M64
    x ^= x >> 7
    x ^= (x << 17) & M64
    return x


def frame_state(cfg, i):
    """``R_i``, the 64-bit state frame ``i`` is made from."""
    x = cfg.seed
    for _ in range(i + 1):
        x = xorshift64(x)
    return x


def _rot32(x):
    return ((x << 32) | (x >> 32)) & M64


def payload_length(cfg, r):
    """Bits 26..24 of R choose: 0 -> no payload, 1 -> max_payload, else ``R mod 2P`` folded into
    ``0..P`` (``R & (2P - 1)``, minus P when above P)."""
    mode = (r >> 24) & 7
    p = cfg.max_payload
    if mode == 0:
        return 0
    if mode == 1:
        return p
    n = r & (2 * p - 1)
    return n - p if n > p else n


def outer_dst(cfg, r):
    """DA: the locator block, ``passes`` x OWN_USID, EXIT_USID, then bits of R (no switch: R)."""
    if not cfg.ports:
        return (DEFAULT_BLOCK << 96) | (r << 32) | (r >> 32)
    usids = [OWN_USID] * cfg.passes + [EXIT_USID]
    da = DEFAULT_BLOCK
    for u in usids:
        da = da << 16 | u
    tail_bits = 96 - 16 * len(usids)
    return da << tail_bits | (_rot32(r) & ((1 << tail_bits) - 1))


def record(cfg, i, r=None):
    """The ``tx_header`` record (dict) of frame ``i`` (``r``: its state, computed if None)."""
    r = frame_state(cfg, i) if r is None else r
    nr = ~r & M64
    seq = i & 0xFFFFFFFF
    return {
        "eth_dst": (seq & 0xFFFF) << 32 | (r & 0xFFFFFFFF),
        "eth_src": r >> 16,
        "dscp": Dscp.TRIMMABLE,
        "ecn": (r >> 40) & 3,
        "flow_label": (r >> 20) & 0xFFFFF,
        "hop_limit": 64 | (r >> 50) & 63,
        "outer_src": r << 64 | nr,
        "outer_dst": outer_dst(cfg, r),
        "inner_src": nr << 64 | r,
        "inner_dst": ((~seq & 0xFFFFFFFF) << 96) | (r << 32) | seq,
        "udp_sport": r >> 48,
        "opcode": OPCODE_TABLE[(r >> 28) & 7],
        "dest_qpn": r & 0xFFFFFF,
        "ackreq": r >> 63,
        "rtx": (r >> 62) & 1,
        "psn": seq & 0xFFFFFF,
        "ext": seq << 256 | r << 192 | _rot32(r) << 128 | nr << 64 | r,
        "length": payload_length(cfg, r),
    }


def payload(cfg, i, r=None):
    """The payload bytes of frame ``i``."""
    r = frame_state(cfg, i) if r is None else r
    length = payload_length(cfg, r)
    lanes = [r ^ LANE_SALT[j] for j in range(cfg.lanes)]
    out = bytearray()
    while len(out) < length:
        for j in range(cfg.lanes):
            out += lanes[j].to_bytes(8, "little")
            lanes[j] = xorshift64(lanes[j])
    return bytes(out[:length])


def sent_frame(cfg, i):
    """The frame the header inserter makes for frame ``i`` (before any injected error)."""
    r = frame_state(cfg, i)
    return build_frame(record(cfg, i, r), payload(cfg, i, r))


def expected_record(cfg, rec):
    """The record whose frame is ``rec``'s after ``cfg.passes`` crossings of the switch."""
    n = cfg.passes
    tail = rec["outer_dst"] & ((1 << 96) - 1)
    da = (rec["outer_dst"] >> 96) << 96 | ((tail << 16 * n) & ((1 << 96) - 1))
    return dict(rec, outer_dst=da, hop_limit=rec["hop_limit"] - n)


def expected_frame(cfg, i):
    """The frame the checker expects back for frame ``i``."""
    r = frame_state(cfg, i)
    return build_frame(expected_record(cfg, record(cfg, i, r)), payload(cfg, i, r))


def corrupt(cfg, frame, inject_byte=None):
    """``frame`` with the error the core injects: bit 0 of byte ``inject_byte`` flipped, or, if
    None, of lane 0 of the frame's last beat."""
    lanes = cfg.data_width // 8
    index = (len(frame) - 1) // lanes * lanes if inject_byte is None else inject_byte
    out = bytearray(frame)
    out[index] ^= 1
    return bytes(out)


def switch_writes(cfg, table_base=0x100, table_stride=4, own_usid_addr=0x001):
    """The configuration writes ``(address, data)`` the core makes to the switch out of reset:
    its own uSID, then table entry 0 (OWN_USID -> LOOP_PORT) and entry 1 (EXIT_USID ->
    EXIT_PORT), each as key low, key high, port, valid."""
    if not cfg.ports:
        return []
    writes = [(own_usid_addr, OWN_USID)]
    for index, (usid, port) in enumerate(((OWN_USID, LOOP_PORT), (EXIT_USID, EXIT_PORT))):
        key = DEFAULT_BLOCK << 16 | usid
        base = table_base + table_stride * index
        writes += [(base, key & 0xFFFFFFFF), (base + 1, key >> 32), (base + 2, port),
                   (base + 3, 1)]
    return writes


def status_word(ok, bad, lost):
    """WAIT before any frame is checked, FAIL once one is bad or lost, else PASS."""
    if bad or lost:
        return STATUS_WORDS[2]
    return STATUS_WORDS[1] if ok else STATUS_WORDS[0]


def report_line(cfg, window, sent, ok, bad, lost, status=None):
    """The UART line of one report: the configuration, the counters in eight hexadecimal digits
    (or, given as text, as they are) and the status word (:func:`status_word` if None)."""
    def hexa(v):
        return v if isinstance(v, str) else f"{v:08x}"

    status = status_word(ok, bad, lost) if status is None else status
    return (f"MRC selftest W={cfg.data_width} K={cfg.ports} passes={cfg.passes} "
            f"P={cfg.max_payload} window={window} sent={hexa(sent)} ok={hexa(ok)} "
            f"bad={hexa(bad)} lost={hexa(lost)} {status}\r\n")


def parse_report(line):
    """``{"sent", "ok", "bad", "lost": int, "status": str}`` of a report line."""
    words = line.split()
    out = {}
    for word in words:
        name, _, value = word.partition("=")
        if name in ("sent", "ok", "bad", "lost"):
            out[name] = int(value, 16)
    out["status"] = words[-1]
    return out

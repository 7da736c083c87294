# SPDX-License-Identifier: BSD-2-Clause
"""Golden model of the NIC self-test's host side (``rtl/pattern_memory.py``,
``rtl/wr_generator.py``, ``rtl/selftest_nic.py``): host memory made of a pattern, and the Write
work requests an LFSR makes.

Pattern memory. The host memory holds no data: the byte at address ``X`` is byte ``X mod 8`` of
``pattern_word(X >> 3)`` (little-endian), ``pattern_word(w) = xs(xs(w ^ PATTERN_SALT))`` with
``xs`` the xorshift64 (13, 7, 17) step (:func:`models.selftest.xorshift64`, a bijection: no two
8-byte words hold the same bytes). Reads return the pattern. Writes are checked: the *check
window* ``[check_base, check_base + span)`` is where the receiver places, and the byte written at
``X`` there must equal the pattern byte of its *source* ``source_base | (X mod span)`` (the sender
read it at that address: a Write of ``local_addr`` -> ``remote_va`` keeps the offset in the
window, :class:`WrGenConfig`). ``span`` is a power of two and both bases are multiples of it, so
the mapping is wiring, not arithmetic. Strobed bytes in the window count good or bad; write beats
with a strobed byte outside the window count ``outside`` (their bytes are not compared).

Work requests. Request ``i`` (0, 1, ...) is made from ``R_i = xs^(i+1)(seed)``
(:func:`wr_state`): QP ``R[56:56+log2 n_qps]``; length from ``R[24:27]`` (0: none, 1: the
largest, else ``R[0:b]`` folded into 0..max_length, b the bit length of ``max_length``); the
offset ``R[32:32+log2 window]`` in the window (local address ``local_base | offset``, remote VA
``remote_base | offset``; ``max_length <= window`` and ``span = 2 window``, so a request never
leaves its window); an immediate when ``R[62:64]`` is 3 (one in four), value ``R[8:40]``;
R_Key :func:`rkey` of the QP; ``req_id`` its index among the requests of its QP, mod 2^16
(so each QP's sender completions, in order, carry 0, 1, 2, ...).

Nothing here imports cocotb, Amaranth or scapy.
"""

from dataclasses import dataclass

from .selftest import M64, xorshift64

__all__ = ["PATTERN_SALT", "RKEY_BASE", "pattern_word", "pattern_bytes", "PatternWindow",
           "PatternMemoryModel", "WrGenConfig", "wr_state", "wr_fields", "work_requests",
           "rkey", "fold_length"]

PATTERN_SALT = 0x6A09E667F3BCC909          # the fractional part of sqrt(2)
RKEY_BASE = 0x5E1F_0000                    # R_Key of QP q: RKEY_BASE | q


def pattern_word(word):
    """The 8 bytes (an int, byte 0 in bits 7..0) of the 8-byte word at byte address 8 ``word``."""
    return xorshift64(xorshift64((word ^ PATTERN_SALT) & M64))


def pattern_bytes(addr, length):
    """``length`` pattern bytes from byte address ``addr``."""
    out = bytearray()
    word = addr >> 3
    skip = addr & 7
    while len(out) < length + skip:
        out += pattern_word(word).to_bytes(8, "little")
        word += 1
    return bytes(out[skip:skip + length])


def _power_of_two(value):
    return isinstance(value, int) and not isinstance(value, bool) and value > 0 and \
        not value & (value - 1)


@dataclass(frozen=True)
class PatternWindow:
    """Where writes are checked (see the module docstring): ``check_base``, ``span`` (a power of
    two, at least 64) and ``source_base`` (both bases multiples of ``span``, 64-bit)."""
    source_base: int = 0x1_0000_0000
    check_base: int = 0x2_0000_0000
    span: int = 1 << 16

    def __post_init__(self):
        if not _power_of_two(self.span) or self.span < 64:
            raise ValueError(f"span must be a power of two >= 64, not {self.span!r}")
        for name in ("source_base", "check_base"):
            value = getattr(self, name)
            if not isinstance(value, int) or not 0 <= value <= M64 or value % self.span:
                raise ValueError(f"{name} must be a 64-bit multiple of span ({self.span:#x}), "
                                 f"not {value!r}")

    def inside(self, addr):
        return addr // self.span == self.check_base // self.span

    def source(self, addr):
        """The sender's address of the byte the receiver places at ``addr``."""
        return self.source_base | addr & (self.span - 1)

    def expected(self, addr):
        """The byte expected at ``addr`` of the window."""
        src = self.source(addr)
        return pattern_word(src >> 3) >> 8 * (src & 7) & 0xFF


class PatternMemoryModel:
    """The AXI4 slave of ``rtl/pattern_memory.py`` at ``data_width`` bits: bursts in, beats out,
    counters kept as the RTL keeps them (32-bit, wrapping)."""

    COUNTERS = ("good_bytes", "bad_bytes", "write_beats", "outside_beats", "read_beats",
                "write_bursts", "read_bursts", "last_errors")

    def __init__(self, window, data_width=64):
        if data_width not in (64, 128, 256, 512):
            raise ValueError(f"data_width must be 64, 128, 256 or 512, not {data_width!r}")
        self.window = window
        self.lanes = data_width // 8
        self.counts = dict.fromkeys(self.COUNTERS, 0)

    def count(self, name, amount=1):
        """Add ``amount`` to counter ``name`` (32 bits, wrapping)."""
        self.counts[name] = (self.counts[name] + amount) & 0xFFFF_FFFF

    def beat_addresses(self, addr, beats, size):
        """The byte address of every beat of an INCR burst (AXI4: the first beat at ``addr``,
        the next ones at ``addr`` aligned to 2^size plus n 2^size)."""
        step = 1 << size
        aligned = addr & ~(step - 1)
        return [addr] + [aligned + n * step for n in range(1, beats)]

    def word(self, addr):
        """The data of the bus word holding ``addr`` (every lane the pattern)."""
        base = addr & ~(self.lanes - 1)
        return int.from_bytes(pattern_bytes(base, self.lanes), "little")

    def read(self, addr, beats, size):
        """The R beats of a read burst (``beats`` = ARLEN + 1, ``size`` = ARSIZE)."""
        self.count("read_bursts")
        self.count("read_beats", beats)
        return [self.word(a) for a in self.beat_addresses(addr, beats, size)]

    def write(self, addr, size, data, strobes, lasts=None):
        """A write burst: ``data`` and ``strobes`` per beat (``lasts``: the WLAST of each beat,
        default the right ones; a wrong one counts ``last_errors``)."""
        beats = len(data)
        lasts = [n == beats - 1 for n in range(beats)] if lasts is None else lasts
        self.count("write_bursts")
        for a, d, s in zip(self.beat_addresses(addr, beats, size), data, strobes):
            self.write_beat(a, d, s)
        self.count("last_errors", sum(bool(l) != (n == beats - 1) for n, l in enumerate(lasts)))

    def write_beat(self, addr, data, strobe):
        """One W beat at byte address ``addr`` (its bus word is checked, lane by lane)."""
        self.count("write_beats")
        base = addr & ~(self.lanes - 1)
        if not self.window.inside(base):
            if strobe:
                self.count("outside_beats")
            return
        for lane in range(self.lanes):
            if strobe >> lane & 1:
                good = data >> 8 * lane & 0xFF == self.window.expected(base + lane)
                self.count("good_bytes" if good else "bad_bytes")


def rkey(qpn):
    """The R_Key of QP ``qpn``'s memory region."""
    return RKEY_BASE | qpn


def fold_length(raw, max_length):
    """``raw`` (0 .. 2^b - 1, b the bit length of ``max_length``) folded into 0..max_length."""
    return raw - max_length if raw > max_length else raw


@dataclass(frozen=True)
class WrGenConfig:
    """The work-request generator's parameters (see the module docstring): ``n_qps`` (a power of
    two, 1..32), ``max_length`` (1 .. window), ``window`` (a power of two, 64 .. 2^24: offsets
    0..window - 1), ``local_base`` and ``remote_base`` (multiples of 2 window, distinct),
    ``seed`` (non-zero, 64 bits)."""
    n_qps: int = 1
    max_length: int = 2048
    window: int = 1 << 15
    local_base: int = 0x1_0000_0000
    remote_base: int = 0x2_0000_0000
    seed: int = 0x4D52_4353_454C_4654

    def __post_init__(self):
        if not _power_of_two(self.n_qps) or self.n_qps > 32:
            raise ValueError(f"n_qps must be a power of two 1..32, not {self.n_qps!r}")
        if not _power_of_two(self.window) or not 64 <= self.window <= 1 << 24:
            raise ValueError(f"window must be a power of two 64..2^24, not {self.window!r}")
        if not isinstance(self.max_length, int) or not 1 <= self.max_length <= self.window:
            raise ValueError(f"max_length must be 1..window ({self.window}), not "
                             f"{self.max_length!r}")
        PatternWindow(self.local_base, self.remote_base, self.span)   # checks the bases
        if self.local_base == self.remote_base:
            raise ValueError("local_base and remote_base must differ")
        if not 0 < self.seed <= M64:
            raise ValueError(f"seed must be a non-zero 64-bit value, not {self.seed!r}")

    @property
    def span(self):
        """The window a request's bytes stay in (offset + length <= 2 window)."""
        return 2 * self.window

    @property
    def pattern_window(self):
        """The :class:`PatternWindow` that checks the receiver's writes."""
        return PatternWindow(self.local_base, self.remote_base, self.span)


def wr_state(cfg, i):
    """``R_i``: the generator's state for request ``i``."""
    r = cfg.seed
    for _ in range(i + 1):
        r = xorshift64(r)
    return r


def wr_fields(cfg, r):
    """The fields of :data:`models.records.WORK_REQUEST` made from state ``r``, but ``req_id``."""
    qpn = r >> 56 & (cfg.n_qps - 1)
    mode = r >> 24 & 7
    bits = cfg.max_length.bit_length()
    length = 0 if mode == 0 else cfg.max_length if mode == 1 else \
        fold_length(r & ((1 << bits) - 1), cfg.max_length)
    offset = r >> 32 & (cfg.window - 1)
    return dict(qpn=qpn, local_addr=cfg.local_base | offset, remote_va=cfg.remote_base | offset,
                rkey=rkey(qpn), length=length, has_imm=int(r >> 62 == 3),
                imm=r >> 8 & 0xFFFF_FFFF)


def work_requests(cfg, count):
    """Requests 0 .. count - 1 (:data:`models.records.WORK_REQUEST` fields); ``req_id`` is a
    request's index among its QP's requests, mod 2^16."""
    out = []
    r = cfg.seed
    per_qp = [0] * cfg.n_qps
    for _ in range(count):
        r = xorshift64(r)
        wr = wr_fields(cfg, r)
        wr["req_id"] = per_qp[wr["qpn"]]
        per_qp[wr["qpn"]] = (per_qp[wr["qpn"]] + 1) & 0xFFFF
        out.append(wr)
    return out

# SPDX-License-Identifier: BSD-2-Clause
"""Golden model of the receive tracker: per-QP receive state, SACK policy (docs/protocol.md 2.1, 2.2, 5).

The tracker sees, per QP, every data packet that passed the receiver's shape, QP, buffer and ICRC
checks (trimmed packets skip the ICRC check), every reliability probe and every 1.024 us tick. It
decides whether the packet is placed, and which SACK, NACK and Write-with-Immediate completions go
out. The RTL receive tracker is compared with it event by event, so every decision is a pure
function of (configuration, state, input): :func:`on_arrival`, :func:`on_probe` and :func:`on_tick`
take an immutable :class:`RxState` and return the next one with a :class:`Result`.
:class:`RxTracker` wraps them for one QP and counts the verdicts.

**Two profiles.** :attr:`RxConfig.profile` selects the rules: 2 (the default, docs/protocol.md as
it stands) or 1 (the version-1 SACK policy that ``rtl/rx_tracker.py`` still implements, kept so
that its cocotb bench can compare the RTL with this model until the RTL moves to version 2;
``tb/test_rx_tracker.py`` builds :class:`RxTrackerV1`). The window, duplicate, trim, access and
Write-with-Immediate rules are the same in both; they differ in when a SACK goes out and what it
reports:

- profile 2 (docs/protocol.md 2.1, 5): a SACK at once on a duplicate, on an accepted packet with
  BTH.RTX or BTH.AckReq, and when cack_psn reaches or passes the highest accepted AckReq PSN
  still above it; otherwise when the coalescing count (every accepted packet adds max(payload,
  1024)) reaches ``sack_bytes``, or on the 2nd tick after the first accepted packet since the last
  SACK with ``pr`` = 0 (``tm`` = 1, trigger = the last accepted packet). Every SACK with
  ``pr`` = 0 resets the count, disarms the timer and carries (then clears) a pending CE mark as
  its verdict (the latest accepted CE-marked packet's EV, ``m`` = SKIP_ONCE; else the trigger's
  EV, ``m`` = NONE); it reports the aligned block of 64 PSNs chosen by the rotation over the
  blocks holding received PSNs (``rep``). A probe answer reports the block holding
  cack_psn + 1 and touches none of that state. ack_psn_offset is 0 for a probe answer and for a
  duplicate at or below cack_psn.
- profile 1: a SACK at once on every out-of-order arrival, CE-marked arrival, RTX, AckReq,
  duplicate, or when cack_psn jumps by more than one; otherwise every 4th accepted packet
  (:data:`SACK_EVERY`) or the 2-tick timer; every SACK (probe answers included) restarts both;
  a SACK echoes its trigger's EV, SKIP_ONCE when the trigger was CE-marked; the bitmap covers the
  aligned block holding the trigger, based at cack_psn + 1 when that block starts at or below
  cack_psn (:func:`models.packets.sack_base`); a duplicate behind cack_psn reports its negative
  offset (clamped at -32768).

State of one QP (:class:`RxState`):

- ``cack_psn`` (24 bits, serial arithmetic): every PSN up to it has been received. A QP starting at
  PSN ``s`` starts with ``cack_psn = s - 1``.
- a bitmap of MPR bits, a ring indexed by ``psn % MPR``, holding the PSNs of
  ``(cack_psn, cack_psn + MPR]`` received so far; bits leave it as ``cack_psn`` passes them.
- ``ooo_count`` (mod 2^15): placed packets whose PSN was beyond ``cack_psn + 1`` on arrival.
- ``placed_bytes`` (mod 2^32): payload bytes placed (pad excluded); SACKs carry bits 31..8.
- ``since_sack``: profile 1, accepted packets since the QP's last SACK (the every-4th rule);
  profile 2, the coalescing byte count.
- the coalescing timer: ``uncovered`` (an accepted packet not yet covered by a SACK) and ``ticks``
  (ticks seen since the first such packet), plus the last accepted packet (PSN, EV, CE), the
  trigger of a timer SACK.
- profile 2: ``ce_pending`` and ``ce_ev`` (the pending CE verdict), ``rep`` (the base of the block
  the last SACK with ``pr`` = 0 reported) and ``ackreq_psn`` (the highest accepted AckReq PSN
  still above cack_psn, or None).
- the Write-with-Immediate completions waiting for earlier PSNs (at most ``wimm_max``).
- ``error``: the QP is in the error state.

Decisions for a data packet, in the order of docs/protocol.md section 5 (the checks before the PSN
window belong to the parser and the buffer), with d = (PSN - cack_psn) mod 2^24 (the distance rule):

1. QP in error: dropped, nothing sent.
2. MPR < d < 2^23 (beyond the window): NACK PSN_OOR_WINDOW, not placed.
3. duplicate (d = 0 or d >= 2^23, or its bit already set): nothing placed, a SACK at once.
4. trimmed (outer DSCP TRIMMED or TRIMMED_LASTHOP): NACK TRIMMED or TRIMMED_LASTHOP, nothing
   placed, no SACK, not counted (a trimmed duplicate is a duplicate: docs/protocol.md 10, point 3).
5. R_Key or bounds wrong (``access_ok`` false, decided by the memory-region check): NACK
   UNEXP_EVENT, nothing placed.
6. a Write-with-Immediate last packet that would make ``wimm_max + 1`` completions wait: the QP
   goes to the error state; the packet is not placed; every waiting completion and this one are
   flushed in MSN order, this one with status WIMM_OVERFLOW, the others with QP_ERROR.
7. placed: the bit is set, ``cack_psn`` advances over every received PSN, covered
   Write-with-Immediate completions are released in MSN order (OK), then the SACK policy of the
   profile.

:func:`reset` (profile 2, docs/protocol.md 5, QP reset) clears the state for a new start PSN and
flushes waiting completions (status FLUSHED).

Nothing here imports cocotb, Amaranth or scapy.
"""

from collections import Counter
from dataclasses import dataclass, replace

from .layouts import (CC_STATE, NETH, SETH, Dscp, Ecn, IMM_OPCODES, NackReason, Opcode, PETH,
                      SackVerdict)
from .packets import sack_base
from .records import CompletionStatus, ext_to_int, int_to_ext

__all__ = [
    "PSN_BITS", "PSN_MODULUS", "MPR_UNIT", "MPR_DEFAULT", "MPR_MAX", "WIMM_MAX_DEFAULT",
    "SACK_EVERY", "COALESCE_TICKS", "BITMAP_BITS", "OOO_MODULUS", "PLACED_BYTES_MODULUS",
    "SACK_BYTES_DEFAULT", "SACK_BYTES_MIN", "SACK_BYTES_MAX", "COALESCE_UNIT", "PROFILES",
    "psn_add", "psn_diff", "block_of", "Verdict", "Arrival", "Probe", "Sack", "Nack",
    "Completion", "Result", "RxConfig", "RxState", "initial_state", "received", "on_arrival",
    "on_probe", "on_tick", "reset", "RxTracker", "RxTrackerV1",
]

PSN_BITS = 24
PSN_MODULUS = 1 << PSN_BITS
_PSN_HALF = PSN_MODULUS >> 1
MPR_UNIT = 128                 # the SACK's mpr field counts units of 128 PSNs
MPR_DEFAULT = 1024
MPR_MAX = 128 * MPR_UNIT       # the largest power of two whose mpr field (8 bits) fits
WIMM_MAX_DEFAULT = 16
SACK_EVERY = 4                 # profile 1: a SACK for every 4th accepted packet
COALESCE_TICKS = 2             # ... and 2 ticks after an accepted packet not yet covered
SACK_BYTES_DEFAULT = 32768     # profile 2: the coalescing byte budget (docs/protocol.md 5)
SACK_BYTES_MIN = 1024
SACK_BYTES_MAX = 65536
COALESCE_UNIT = 1024           # profile 2: every accepted packet counts at least this many bytes
BITMAP_BITS = 64
OOO_MODULUS = 1 << 15
PLACED_BYTES_MODULUS = 1 << 32
PLACED_UNIT_SHIFT = 8          # placed_256 = placed bytes / 256, modulo 2^24
PROFILES = (1, 2)
_OFFSET_MIN = -(1 << 15)
_BLOCK_MASK = (PSN_MODULUS - 1) & ~(BITMAP_BITS - 1)


def psn_add(psn, n):
    """``psn + n`` modulo 2^24."""
    return (psn + n) % PSN_MODULUS


def psn_diff(a, b):
    """``a - b`` in 24-bit serial arithmetic: a signed value in [-2^23, 2^23)."""
    return (a - b + _PSN_HALF) % PSN_MODULUS - _PSN_HALF


def block_of(psn):
    """The base of the aligned block of 64 PSNs holding ``psn`` (docs/protocol.md 2.1)."""
    return psn & _BLOCK_MASK


class Verdict:
    """What the tracker did with one input (:attr:`Result.verdict`)."""
    PLACED = "placed"
    DUPLICATE = "duplicate"
    OUT_OF_WINDOW = "out_of_window"
    TRIMMED = "trimmed"
    ACCESS_ERROR = "access_error"
    WIMM_OVERFLOW = "wimm_overflow"
    QP_ERROR = "qp_error"            # dropped: the QP is in the error state
    PROBE = "probe"
    TICK = "tick"


@dataclass(frozen=True)
class Arrival:
    """One data packet of the QP, as the receive parser reports it (names as in ``RX_META``).

    ``ackreq`` is BTH.AckReq; ``opcode``, ``msn`` and ``imm`` matter only for
    Write-with-Immediate completions; ``access_ok`` is the R_Key and bounds check's answer.
    """
    psn: int
    ev: int
    ecn: int = Ecn.ECT0
    dscp: int = Dscp.TRIMMABLE
    ackreq: int = 0
    rtx: int = 0
    opcode: int = Opcode.WRITE_MIDDLE
    msn: int = 0
    imm: int = 0
    payload_length: int = 0
    access_ok: bool = True

    @property
    def ce(self):
        return self.ecn == Ecn.CE

    @property
    def trimmed(self):
        return self.dscp in (Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP)

    @property
    def last(self):
        return bool(self.ackreq)

    @classmethod
    def from_rx_meta(cls, meta, access_ok=True):
        """The arrival of an ``RX_META`` record (a dict of its fields)."""
        return cls(psn=meta["psn"], ev=meta["ev"], ecn=meta["ecn"], dscp=meta["dscp"],
                   ackreq=meta["ackreq"], rtx=meta["rtx"], opcode=meta["opcode"], msn=meta["msn"],
                   imm=meta["imm"], payload_length=meta["payload_length"], access_ok=access_ok)


@dataclass(frozen=True)
class Probe:
    """One reliability probe of the QP (docs/protocol.md 2.3)."""
    ev: int
    probe_id: int
    ecn: int = Ecn.ECT0
    dscp: int = Dscp.TRIMMABLE

    @property
    def ce(self):
        return self.ecn == Ecn.CE

    @property
    def trimmed(self):
        return self.dscp in (Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP)

    @classmethod
    def from_rx_meta(cls, meta):
        """The probe of an ``RX_META`` record whose ``ext`` holds the PETH."""
        peth = PETH.unpack(int_to_ext(meta["ext"], PETH.size))
        return cls(ev=meta["ev"], probe_id=peth["probe_id"], ecn=meta["ecn"], dscp=meta["dscp"])


@dataclass(frozen=True)
class Sack:
    """The fields of one SACK (SETH and CC_STATE, docs/protocol.md 2.1); ``tm`` (v2) flags a
    SACK sent by the coalescing timer."""
    cack_psn: int
    ack_psn_offset: int
    sack_offset: int
    sack_bitmap: int
    mpr: int
    m: int
    pr: int
    entropy: int
    probe_id: int
    ooo_count: int
    placed_256: int
    tm: int = 0

    @property
    def trigger_psn(self):
        return psn_add(self.cack_psn, self.ack_psn_offset)

    @property
    def base_psn(self):
        return psn_add(self.cack_psn, self.sack_offset)

    def bitmap_psns(self):
        """The PSNs whose bitmap bit is set."""
        return {psn_add(self.base_psn, i) for i in range(BITMAP_BITS)
                if self.sack_bitmap >> (BITMAP_BITS - 1 - i) & 1}

    def ext_bytes(self):
        """SETH then CC_STATE, 36 bytes in wire order."""
        seth = SETH.pack(m=self.m, pr=self.pr, tm=self.tm, ack_psn_offset=self.ack_psn_offset,
                         entropy=self.entropy, probe_id=self.probe_id, cack_psn=self.cack_psn,
                         mpr=self.mpr, sack_offset=self.sack_offset, sack_bitmap=self.sack_bitmap)
        return seth + CC_STATE.pack(ooo_count=self.ooo_count, placed_256=self.placed_256)

    def control_record(self, qpn, path_ev=None):
        """The ``CONTROL_RECORD`` fields that send this SACK for local QP ``qpn`` on the path of
        ``path_ev`` (its trigger's EV, :attr:`Result.path_ev`; by default the EV it echoes,
        which is the trigger's in profile 1)."""
        return {"qpn": qpn, "opcode": Opcode.SACK,
                "ev": self.entropy if path_ev is None else path_ev,
                "ext": ext_to_int(self.ext_bytes())}

    @classmethod
    def from_ext(cls, data):
        """The SACK of 36 extension bytes (wire order); raises ValueError if shorter."""
        seth = SETH.unpack(data, signed=("ack_psn_offset", "sack_offset"))
        cc = CC_STATE.unpack(bytes(data)[SETH.size:])
        return cls(cack_psn=seth["cack_psn"], ack_psn_offset=seth["ack_psn_offset"],
                   sack_offset=seth["sack_offset"], sack_bitmap=seth["sack_bitmap"],
                   mpr=seth["mpr"], m=seth["m"], pr=seth["pr"], entropy=seth["entropy"],
                   probe_id=seth["probe_id"], ooo_count=cc["ooo_count"],
                   placed_256=cc["placed_256"], tm=seth["tm"])


@dataclass(frozen=True)
class Nack:
    """One NACK (NETH, docs/protocol.md 2.2): the reason, the NACKed PSN and its EV."""
    reason: int
    psn: int
    ev: int

    def ext_bytes(self):
        """The NETH, 20 bytes in wire order."""
        return NETH.pack(nack_reason=self.reason, entropy=self.ev, nack_psn=self.psn)

    def control_record(self, qpn):
        """The ``CONTROL_RECORD`` fields that send this NACK for local QP ``qpn``."""
        return {"qpn": qpn, "opcode": Opcode.NACK, "ev": self.ev,
                "ext": ext_to_int(self.ext_bytes())}


@dataclass(frozen=True)
class Completion:
    """A Write-with-Immediate completion at the receiver (its last PSN, MSN, immediate, status)."""
    psn: int
    msn: int
    imm: int
    status: int = CompletionStatus.OK

    def record(self, qpn):
        """The ``COMPLETION`` record fields for local QP ``qpn``."""
        return {"qpn": qpn, "req_id": 0, "msn": self.msn, "status": self.status, "is_recv": 1,
                "has_imm": 1, "imm": self.imm}


@dataclass(frozen=True)
class Result:
    """Everything the tracker produces for one input. ``path_ev`` (profile 2) is the EV of the
    path a SACK travels on: its trigger's (docs/protocol.md 4.5), which its entropy field need
    not name; None when no SACK goes out."""
    verdict: str
    placed: bool = False
    sack: Sack | None = None
    nack: Nack | None = None
    completions: tuple = ()
    path_ev: int | None = None


@dataclass(frozen=True)
class RxConfig:
    """Per-QP parameters: the receive window ``mpr`` (PSNs), ``wimm_max``, the ``profile``
    (1 or 2, module docstring) and, for profile 2, ``sack_bytes`` (a power of two from 1024 to
    65536)."""
    mpr: int = MPR_DEFAULT
    wimm_max: int = WIMM_MAX_DEFAULT
    profile: int = 2
    sack_bytes: int = SACK_BYTES_DEFAULT

    def __post_init__(self):
        if isinstance(self.mpr, bool) or not isinstance(self.mpr, int) or \
                not MPR_UNIT <= self.mpr <= MPR_MAX or self.mpr & (self.mpr - 1):
            raise ValueError(f"mpr must be a power of two from {MPR_UNIT} to {MPR_MAX}, "
                             f"not {self.mpr!r}")
        if isinstance(self.wimm_max, bool) or not isinstance(self.wimm_max, int) or \
                self.wimm_max < 1:
            raise ValueError(f"wimm_max must be a positive integer, not {self.wimm_max!r}")
        if self.profile not in PROFILES:
            raise ValueError(f"profile must be one of {PROFILES}, not {self.profile!r}")
        if isinstance(self.sack_bytes, bool) or not isinstance(self.sack_bytes, int) or \
                not SACK_BYTES_MIN <= self.sack_bytes <= SACK_BYTES_MAX or \
                self.sack_bytes & (self.sack_bytes - 1):
            raise ValueError(f"sack_bytes must be a power of two from {SACK_BYTES_MIN} to "
                             f"{SACK_BYTES_MAX}, not {self.sack_bytes!r}")


@dataclass(frozen=True)
class RxState:
    """The receive state of one QP (see the module docstring). ``wimm_waiting`` holds
    ``(psn, msn, imm)`` of waiting completions in PSN order."""
    cack_psn: int
    bitmap: int = 0
    ooo_count: int = 0
    placed_bytes: int = 0
    since_sack: int = 0
    uncovered: bool = False
    ticks: int = 0
    last_psn: int = 0
    last_ev: int = 0
    last_ce: bool = False
    wimm_waiting: tuple = ()
    error: bool = False
    ce_pending: bool = False
    ce_ev: int = 0
    rep: int = 0
    ackreq_psn: int | None = None


def initial_state(cack_psn):
    """The state of a QP set up with ``cack_psn`` (its start PSN - 1); ``rep`` is the block
    holding cack_psn + 1."""
    if not 0 <= cack_psn < PSN_MODULUS:
        raise ValueError(f"cack_psn must be a 24-bit PSN, not {cack_psn!r}")
    return RxState(cack_psn=cack_psn, rep=block_of(psn_add(cack_psn, 1)))


def received(cfg, state, psn):
    """Whether ``psn`` counts as received: at or below ``cack_psn``, or its window bit set."""
    d = psn_diff(psn, state.cack_psn)
    if d <= 0:
        return True
    return d <= cfg.mpr and bool(state.bitmap >> (psn % cfg.mpr) & 1)


def _advance(cfg, cack, bitmap):
    """Move ``cack`` over every received PSN after it, clearing their bits."""
    while True:
        nxt = (cack + 1) % cfg.mpr
        if not bitmap >> nxt & 1:
            return cack, bitmap
        bitmap &= ~(1 << nxt)
        cack = psn_add(cack, 1)


def _bitmap_at(cfg, state, base):
    """The 64 bitmap bits from ``base`` (bit 63 = base): 1 when received."""
    bitmap = 0
    for i in range(BITMAP_BITS):
        if received(cfg, state, psn_add(base, i)):
            bitmap |= 1 << (BITMAP_BITS - 1 - i)
    return bitmap


def _placed_256(state):
    return (state.placed_bytes >> PLACED_UNIT_SHIFT) % (1 << 24)


def _make_sack(cfg, state, trigger_psn, ev, skip, pr=0, probe_id=0):
    """Profile 1: the SACK of ``state`` for a trigger at ``trigger_psn`` with EV ``ev``."""
    cack = state.cack_psn
    offset = max(psn_diff(trigger_psn, cack), _OFFSET_MIN)
    base = sack_base(cack, trigger_psn)
    return Sack(cack_psn=cack, ack_psn_offset=offset, sack_offset=psn_diff(base, cack),
                sack_bitmap=_bitmap_at(cfg, state, base), mpr=cfg.mpr // MPR_UNIT,
                m=SackVerdict.SKIP_ONCE if skip else SackVerdict.NONE, pr=pr, entropy=ev,
                probe_id=probe_id, ooo_count=state.ooo_count, placed_256=_placed_256(state))


def _sacked(state):
    """Profile 1: ``state`` after any SACK: the count of 4 restarts and the timer stops."""
    return replace(state, since_sack=0, uncovered=False, ticks=0)


def live_blocks(cfg, state):
    """Profile 2: the bases of the blocks holding a received PSN above cack_psn, in serial order
    from the block holding cack_psn + 1 (docs/protocol.md 2.1, "live" blocks)."""
    cack, mpr = state.cack_psn, cfg.mpr
    first = block_of(psn_add(cack, 1))
    ks = set()
    bitmap = state.bitmap
    while bitmap:
        low = bitmap & -bitmap
        bitmap ^= low
        i = low.bit_length() - 1                     # ring index = psn % mpr
        psn = psn_add(cack, 1 + (i - cack - 1) % mpr)
        ks.add(psn_diff(block_of(psn), first) // BITMAP_BITS)
    return [psn_add(first, k * BITMAP_BITS) for k in sorted(ks)]


def report_block(cfg, state, trigger_psn=None):
    """Profile 2: the base of the block a SACK with ``pr`` = 0 reports (docs/protocol.md 2.1):
    the first live block after ``rep``, else the first live block, else the trigger's block
    when the trigger is above cack_psn, else the block holding cack_psn + 1."""
    cack = state.cack_psn
    first = block_of(psn_add(cack, 1))
    live = live_blocks(cfg, state)
    rep_k = psn_diff(state.rep, first) // BITMAP_BITS
    for base in live:
        if psn_diff(base, first) // BITMAP_BITS > rep_k:
            return base
    if live:
        return live[0]
    if trigger_psn is not None and psn_diff(trigger_psn, cack) > 0:
        return block_of(trigger_psn)
    return first


def _sack_v2(cfg, state, trigger_psn, trigger_ev, dup_behind=False, tm=0):
    """Profile 2: ``(SACK with pr = 0, state after it)`` for a trigger (PSN, EV): the
    rotation's block, the pending CE verdict, the coalescing state reset."""
    cack = state.cack_psn
    base = report_block(cfg, state, trigger_psn)
    offset = 0 if dup_behind else psn_diff(trigger_psn, cack)
    if state.ce_pending:
        m, entropy = SackVerdict.SKIP_ONCE, state.ce_ev
    else:
        m, entropy = SackVerdict.NONE, trigger_ev
    sack = Sack(cack_psn=cack, ack_psn_offset=offset, sack_offset=psn_diff(base, cack),
                sack_bitmap=_bitmap_at(cfg, state, base), mpr=cfg.mpr // MPR_UNIT, m=m, pr=0,
                entropy=entropy, probe_id=0, ooo_count=state.ooo_count,
                placed_256=_placed_256(state), tm=tm)
    return sack, replace(state, since_sack=0, uncovered=False, ticks=0, ce_pending=False,
                         ce_ev=0, rep=base)


def _overflow(state, arrival):
    """QP error on one Write-with-Immediate too many: flush every waiting completion."""
    flushed = [Completion(psn, msn, imm, CompletionStatus.QP_ERROR)
               for psn, msn, imm in state.wimm_waiting]
    flushed.append(Completion(arrival.psn, arrival.msn, arrival.imm,
                              CompletionStatus.WIMM_OVERFLOW))
    flushed.sort(key=lambda c: psn_diff(c.psn, state.cack_psn))
    return replace(state, wimm_waiting=(), error=True), \
        Result(Verdict.WIMM_OVERFLOW, completions=tuple(flushed))


def on_arrival(cfg, state, arrival):
    """``(next state, Result)`` for one data packet of the QP."""
    if state.error:
        return state, Result(Verdict.QP_ERROR)
    psn = arrival.psn
    ahead = psn_diff(psn, state.cack_psn)
    if ahead > cfg.mpr:                          # MPR < d < 2^23: beyond the window
        return state, Result(Verdict.OUT_OF_WINDOW,
                             nack=Nack(NackReason.PSN_OOR_WINDOW, psn, arrival.ev))
    if received(cfg, state, psn):                # d = 0, d >= 2^23, or its bit set
        if cfg.profile == 1:
            sack = _make_sack(cfg, state, psn, arrival.ev, arrival.ce)
            return _sacked(state), Result(Verdict.DUPLICATE, sack=sack, path_ev=arrival.ev)
        sack, state = _sack_v2(cfg, state, psn, arrival.ev, dup_behind=ahead <= 0)
        return state, Result(Verdict.DUPLICATE, sack=sack, path_ev=arrival.ev)
    if arrival.trimmed:
        reason = NackReason.TRIMMED if arrival.dscp == Dscp.TRIMMED else \
            NackReason.TRIMMED_LASTHOP
        return state, Result(Verdict.TRIMMED, nack=Nack(reason, psn, arrival.ev))
    if not arrival.access_ok:
        return state, Result(Verdict.ACCESS_ERROR,
                             nack=Nack(NackReason.UNEXP_EVENT, psn, arrival.ev))
    is_wimm = arrival.opcode in IMM_OPCODES
    # A completion waits when its PSN stays above cack_psn, i.e. unless it is cack_psn + 1.
    if is_wimm and ahead > 1 and len(state.wimm_waiting) >= cfg.wimm_max:
        return _overflow(state, arrival)

    out_of_order = ahead > 1
    cack, bitmap = _advance(cfg, state.cack_psn, state.bitmap | 1 << (psn % cfg.mpr))
    jump = psn_diff(cack, state.cack_psn)
    waiting = list(state.wimm_waiting)
    if is_wimm:
        waiting.append((psn, arrival.msn, arrival.imm))
        waiting.sort(key=lambda w: psn_diff(w[0], state.cack_psn))
    done = tuple(Completion(p, msn, imm) for p, msn, imm in waiting if psn_diff(p, cack) <= 0)
    waiting = tuple(w for w in waiting if psn_diff(w[0], cack) > 0)
    state = replace(
        state, cack_psn=cack, bitmap=bitmap, wimm_waiting=waiting,
        ooo_count=(state.ooo_count + out_of_order) % OOO_MODULUS,
        placed_bytes=(state.placed_bytes + arrival.payload_length) % PLACED_BYTES_MODULUS,
        last_psn=psn, last_ev=arrival.ev, last_ce=arrival.ce)

    if cfg.profile == 1:
        count = state.since_sack + 1
        at_once = out_of_order or arrival.ce or arrival.rtx or arrival.last or jump > 1
        if at_once or count >= SACK_EVERY:
            sack = _make_sack(cfg, state, psn, arrival.ev, arrival.ce)
            return _sacked(state), Result(Verdict.PLACED, placed=True, sack=sack,
                                          completions=done, path_ev=arrival.ev)
        if not state.uncovered:
            state = replace(state, uncovered=True, ticks=0)
        return replace(state, since_sack=count), Result(Verdict.PLACED, placed=True,
                                                        completions=done)

    # Profile 2 (docs/protocol.md 5, SACK policy).
    count = state.since_sack + max(arrival.payload_length, COALESCE_UNIT)
    ackreq_psn = state.ackreq_psn
    if arrival.ackreq and (ackreq_psn is None or psn_diff(psn, ackreq_psn) > 0):
        ackreq_psn = psn
    passed = ackreq_psn is not None and psn_diff(cack, ackreq_psn) >= 0
    state = replace(state, since_sack=count, ackreq_psn=None if passed else ackreq_psn,
                    ce_pending=state.ce_pending or arrival.ce,
                    ce_ev=arrival.ev if arrival.ce else state.ce_ev)
    if arrival.rtx or arrival.ackreq or passed or count >= cfg.sack_bytes:
        sack, state = _sack_v2(cfg, state, psn, arrival.ev)
        return state, Result(Verdict.PLACED, placed=True, sack=sack, completions=done,
                             path_ev=arrival.ev)
    if not state.uncovered:
        state = replace(state, uncovered=True, ticks=0)
    return state, Result(Verdict.PLACED, placed=True, completions=done)


def on_probe(cfg, state, probe):
    """``(next state, Result)`` for one reliability probe: a SACK with ``pr`` = 1 at once."""
    if state.error:
        return state, Result(Verdict.QP_ERROR)
    skip = probe.ce or probe.trimmed
    if cfg.profile == 1:
        sack = _make_sack(cfg, state, state.cack_psn, probe.ev, skip, pr=1,
                          probe_id=probe.probe_id)
        return _sacked(state), Result(Verdict.PROBE, sack=sack, path_ev=probe.ev)
    # Profile 2: the block holding cack_psn + 1; rep, the count, the timer and a pending CE
    # mark stay as they are (docs/protocol.md 2.1, 5).
    cack = state.cack_psn
    base = block_of(psn_add(cack, 1))
    sack = Sack(cack_psn=cack, ack_psn_offset=0, sack_offset=psn_diff(base, cack),
                sack_bitmap=_bitmap_at(cfg, state, base), mpr=cfg.mpr // MPR_UNIT,
                m=SackVerdict.SKIP_ONCE if skip else SackVerdict.NONE, pr=1, entropy=probe.ev,
                probe_id=probe.probe_id, ooo_count=state.ooo_count,
                placed_256=_placed_256(state))
    return state, Result(Verdict.PROBE, sack=sack, path_ev=probe.ev)


def on_tick(cfg, state):
    """``(next state, Result)`` for one 1.024 us tick: the coalescing timer."""
    if state.error or not state.uncovered:
        return state, Result(Verdict.TICK)
    ticks = state.ticks + 1
    if ticks < COALESCE_TICKS:
        return replace(state, ticks=ticks), Result(Verdict.TICK)
    if cfg.profile == 1:
        sack = _make_sack(cfg, state, state.last_psn, state.last_ev, state.last_ce)
        return _sacked(state), Result(Verdict.TICK, sack=sack, path_ev=state.last_ev)
    sack, state = _sack_v2(cfg, state, state.last_psn, state.last_ev, tm=1)
    return state, Result(Verdict.TICK, sack=sack, path_ev=state.last_ev)


def reset(state, cack_psn):
    """QP reset (v2, docs/protocol.md 5): ``(state of a QP starting at cack_psn + 1, the waiting
    Write-with-Immediate completions, each with status FLUSHED)``."""
    flushed = tuple(Completion(psn, msn, imm, CompletionStatus.FLUSHED)
                    for psn, msn, imm in state.wimm_waiting)
    return initial_state(cack_psn), flushed


class RxTracker:
    """The receive tracker of one QP: :func:`on_arrival`, :func:`on_probe` and :func:`on_tick`
    applied in turn to its state, with a count of every verdict in :attr:`counters`.
    ``profile`` 2 (default) or 1 and ``sack_bytes`` as in :class:`RxConfig`."""

    def __init__(self, cack_psn, mpr=MPR_DEFAULT, wimm_max=WIMM_MAX_DEFAULT, profile=2,
                 sack_bytes=SACK_BYTES_DEFAULT):
        self.config = RxConfig(mpr=mpr, wimm_max=wimm_max, profile=profile,
                               sack_bytes=sack_bytes)
        self.state = initial_state(cack_psn)
        self.counters = Counter()

    @property
    def cack_psn(self):
        return self.state.cack_psn

    def received(self, psn):
        return received(self.config, self.state, psn)

    def step(self, transition, *args):
        """Apply one pure transition (:func:`on_arrival`, :func:`on_probe`, :func:`on_tick`) to
        the state and count its verdict (the entry point a faster subclass falls back on)."""
        self.state, result = transition(self.config, self.state, *args)
        self.counters[result.verdict] += 1
        return result

    _step = step

    def arrive(self, arrival):
        """Process one data packet (an :class:`Arrival`)."""
        return self.step(on_arrival, arrival)

    def probe(self, probe):
        """Process one reliability probe (a :class:`Probe`)."""
        return self.step(on_probe, probe)

    def tick(self):
        """Process one 1.024 us tick."""
        return self.step(on_tick)

    def reset(self, cack_psn):
        """QP reset (v2): a new start at ``cack_psn + 1``; returns the flushed completions."""
        self.state, flushed = reset(self.state, cack_psn)
        return flushed


class RxTrackerV1(RxTracker):
    """:class:`RxTracker` with the version-1 SACK policy (``profile`` = 1), the one
    ``rtl/rx_tracker.py`` implements today; its cocotb bench builds this one."""

    def __init__(self, cack_psn, mpr=MPR_DEFAULT, wimm_max=WIMM_MAX_DEFAULT):
        super().__init__(cack_psn, mpr=mpr, wimm_max=wimm_max, profile=1)

# SPDX-License-Identifier: BSD-2-Clause
"""Golden model of the receive tracker: per-QP receive state, SACK policy (docs/protocol.md 2.1, 2.2, 5).

The tracker sees, per QP, every data packet that passed the receiver's shape, QP, buffer and ICRC
checks (trimmed packets skip the ICRC check), every reliability probe and every 1.024 us tick. It
decides whether the packet is placed, and which SACK, NACK and Write-with-Immediate completions go
out. The RTL receive tracker is compared with it event by event, so every decision is a pure
function of (configuration, state, input): :func:`on_arrival`, :func:`on_probe` and :func:`on_tick`
take an immutable :class:`RxState` and return the next one with a :class:`Result`.
:class:`RxTracker` wraps them for one QP and counts the verdicts.

State of one QP (:class:`RxState`):

- ``cack_psn`` (24 bits, serial arithmetic): every PSN up to it has been received. A QP starting at
  PSN ``s`` starts with ``cack_psn = s - 1``.
- a bitmap of MPR bits, a ring indexed by ``psn % MPR``, holding the PSNs of
  ``(cack_psn, cack_psn + MPR]`` received so far; bits leave it as ``cack_psn`` passes them.
- ``ooo_count`` (mod 2^15): placed packets whose PSN was beyond ``cack_psn + 1`` on arrival.
- ``placed_bytes`` (mod 2^32): payload bytes placed (pad excluded); SACKs carry bits 31..8.
- ``since_sack``: accepted packets since the QP's last SACK (the every-4th rule).
- the coalescing timer: ``uncovered`` (an accepted packet not yet covered by a SACK) and ``ticks``
  (ticks seen since the first such packet), plus the last accepted packet (PSN, EV, CE), the
  trigger of a timer SACK.
- the Write-with-Immediate completions waiting for earlier PSNs (at most ``wimm_max``).
- ``error``: the QP is in the error state.

Decisions for a data packet, in the order of docs/protocol.md section 5 (the checks before the PSN window
belong to the parser and the buffer):

1. QP in error: dropped, nothing sent.
2. PSN beyond ``cack_psn + MPR``: NACK PSN_OOR_WINDOW, not placed.
3. duplicate (at or below ``cack_psn``, or its bit already set): nothing placed, a SACK at once.
4. trimmed (outer DSCP TRIMMED or TRIMMED_LASTHOP): NACK TRIMMED or TRIMMED_LASTHOP, nothing
   placed, no SACK, not counted toward 4.
5. R_Key or bounds wrong (``access_ok`` false, decided by the memory-region check): NACK
   UNEXP_EVENT, nothing placed.
6. a Write-with-Immediate last packet that would make ``wimm_max + 1`` completions wait: the QP
   goes to the error state; the packet is not placed; every waiting completion and this one are
   flushed in MSN order, this one with status WIMM_OVERFLOW, the others with QP_ERROR.
7. placed: the bit is set, ``cack_psn`` advances over every received PSN, covered
   Write-with-Immediate completions are released in MSN order (OK). A SACK goes out at once when
   the PSN was beyond ``cack_psn + 1`` on arrival, the packet is CE-marked, has BTH.RTX or
   BTH.AckReq (the last packet of a message), or ``cack_psn`` jumped by more than one; otherwise
   when this is the 4th accepted packet since the last SACK; otherwise the coalescing timer starts
   (if it is not already running).

A probe is answered at once by a SACK with ``pr`` = 1 (trigger PSN taken as ``cack_psn``). On a
tick, a running timer counts; on its 2nd tick it fires a SACK whose trigger is the last accepted
packet. So a packet waits between one and two tick periods. Any SACK (duplicate, probe answer and
timer ones included) resets the count of 4 and stops the timer; NACKs do not.

SACK fields (docs/protocol.md 2.1) are taken after the input's effect: ``cack_psn``; ``ack_psn_offset`` =
trigger PSN - cack_psn (signed 16; a duplicate more than 32768 PSNs behind reports -32768, still a
PSN the sender already holds as received); entropy = the trigger's EV; ``m`` = SKIP_ONCE when the
trigger was CE-marked (a probe: CE-marked or trimmed); ``mpr`` = MPR / 128; the bitmap covers the
aligned block of 64 PSNs holding the trigger PSN, its base moved to ``cack_psn + 1`` when at or
below ``cack_psn``; ``ooo_count`` and ``placed_256``.

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
    "psn_add", "psn_diff", "Verdict", "Arrival", "Probe", "Sack", "Nack", "Completion", "Result",
    "RxConfig", "RxState", "initial_state", "received", "on_arrival", "on_probe", "on_tick",
    "RxTracker",
]

PSN_BITS = 24
PSN_MODULUS = 1 << PSN_BITS
_PSN_HALF = PSN_MODULUS >> 1
MPR_UNIT = 128                 # the SACK's mpr field counts units of 128 PSNs
MPR_DEFAULT = 1024
MPR_MAX = 128 * MPR_UNIT       # the largest power of two whose mpr field (8 bits) fits
WIMM_MAX_DEFAULT = 16
SACK_EVERY = 4                 # a SACK for every 4th accepted packet
COALESCE_TICKS = 2             # ... and 2 ticks after an accepted packet not yet covered
BITMAP_BITS = 64
OOO_MODULUS = 1 << 15
PLACED_BYTES_MODULUS = 1 << 32
PLACED_UNIT_SHIFT = 8          # placed_256 = placed bytes / 256, modulo 2^24
_OFFSET_MIN = -(1 << 15)


def psn_add(psn, n):
    """``psn + n`` modulo 2^24."""
    return (psn + n) % PSN_MODULUS


def psn_diff(a, b):
    """``a - b`` in 24-bit serial arithmetic: a signed value in [-2^23, 2^23)."""
    return (a - b + _PSN_HALF) % PSN_MODULUS - _PSN_HALF


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

    ``ackreq`` marks the last packet of a message; ``opcode``, ``msn`` and ``imm`` matter only for
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
    """The fields of one SACK (SETH and CC_STATE, docs/protocol.md 2.1)."""
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
        seth = SETH.pack(m=self.m, pr=self.pr, ack_psn_offset=self.ack_psn_offset,
                         entropy=self.entropy, probe_id=self.probe_id, cack_psn=self.cack_psn,
                         mpr=self.mpr, sack_offset=self.sack_offset, sack_bitmap=self.sack_bitmap)
        return seth + CC_STATE.pack(ooo_count=self.ooo_count, placed_256=self.placed_256)

    def control_record(self, qpn):
        """The ``CONTROL_RECORD`` fields that send this SACK for local QP ``qpn``."""
        return {"qpn": qpn, "opcode": Opcode.SACK, "ev": self.entropy,
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
                   placed_256=cc["placed_256"])


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
    """Everything the tracker produces for one input."""
    verdict: str
    placed: bool = False
    sack: Sack | None = None
    nack: Nack | None = None
    completions: tuple = ()


@dataclass(frozen=True)
class RxConfig:
    """Per-QP parameters: the receive window ``mpr`` (PSNs) and ``wimm_max``."""
    mpr: int = MPR_DEFAULT
    wimm_max: int = WIMM_MAX_DEFAULT

    def __post_init__(self):
        if isinstance(self.mpr, bool) or not isinstance(self.mpr, int) or \
                not MPR_UNIT <= self.mpr <= MPR_MAX or self.mpr & (self.mpr - 1):
            raise ValueError(f"mpr must be a power of two from {MPR_UNIT} to {MPR_MAX}, "
                             f"not {self.mpr!r}")
        if isinstance(self.wimm_max, bool) or not isinstance(self.wimm_max, int) or \
                self.wimm_max < 1:
            raise ValueError(f"wimm_max must be a positive integer, not {self.wimm_max!r}")


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


def initial_state(cack_psn):
    """The state of a QP set up with ``cack_psn`` (its start PSN - 1)."""
    if not 0 <= cack_psn < PSN_MODULUS:
        raise ValueError(f"cack_psn must be a 24-bit PSN, not {cack_psn!r}")
    return RxState(cack_psn=cack_psn)


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


def _make_sack(cfg, state, trigger_psn, ev, skip, pr=0, probe_id=0):
    """The SACK of ``state`` for a trigger at ``trigger_psn`` with EV ``ev``."""
    cack = state.cack_psn
    offset = max(psn_diff(trigger_psn, cack), _OFFSET_MIN)
    base = sack_base(cack, trigger_psn)
    bitmap = 0
    for i in range(BITMAP_BITS):
        if received(cfg, state, psn_add(base, i)):
            bitmap |= 1 << (BITMAP_BITS - 1 - i)
    return Sack(cack_psn=cack, ack_psn_offset=offset, sack_offset=psn_diff(base, cack),
                sack_bitmap=bitmap, mpr=cfg.mpr // MPR_UNIT,
                m=SackVerdict.SKIP_ONCE if skip else SackVerdict.NONE, pr=pr, entropy=ev,
                probe_id=probe_id, ooo_count=state.ooo_count,
                placed_256=(state.placed_bytes >> PLACED_UNIT_SHIFT) % (1 << 24))


def _sacked(state):
    """``state`` after any SACK: the count of 4 restarts and the timer stops."""
    return replace(state, since_sack=0, uncovered=False, ticks=0)


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
    if ahead > cfg.mpr:
        return state, Result(Verdict.OUT_OF_WINDOW,
                             nack=Nack(NackReason.PSN_OOR_WINDOW, psn, arrival.ev))
    if received(cfg, state, psn):
        sack = _make_sack(cfg, state, psn, arrival.ev, arrival.ce)
        return _sacked(state), Result(Verdict.DUPLICATE, sack=sack)
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

    count = state.since_sack + 1
    at_once = out_of_order or arrival.ce or arrival.rtx or arrival.last or jump > 1
    if at_once or count >= SACK_EVERY:
        sack = _make_sack(cfg, state, psn, arrival.ev, arrival.ce)
        return _sacked(state), Result(Verdict.PLACED, placed=True, sack=sack, completions=done)
    if not state.uncovered:
        state = replace(state, uncovered=True, ticks=0)
    return replace(state, since_sack=count), Result(Verdict.PLACED, placed=True, completions=done)


def on_probe(cfg, state, probe):
    """``(next state, Result)`` for one reliability probe: a SACK with ``pr`` = 1 at once."""
    if state.error:
        return state, Result(Verdict.QP_ERROR)
    sack = _make_sack(cfg, state, state.cack_psn, probe.ev, probe.ce or probe.trimmed, pr=1,
                      probe_id=probe.probe_id)
    return _sacked(state), Result(Verdict.PROBE, sack=sack)


def on_tick(cfg, state):
    """``(next state, Result)`` for one 1.024 us tick: the coalescing timer."""
    if state.error or not state.uncovered:
        return state, Result(Verdict.TICK)
    ticks = state.ticks + 1
    if ticks < COALESCE_TICKS:
        return replace(state, ticks=ticks), Result(Verdict.TICK)
    sack = _make_sack(cfg, state, state.last_psn, state.last_ev, state.last_ce)
    return _sacked(state), Result(Verdict.TICK, sack=sack)


class RxTracker:
    """The receive tracker of one QP: :func:`on_arrival`, :func:`on_probe` and :func:`on_tick`
    applied in turn to its state, with a count of every verdict in :attr:`counters`."""

    def __init__(self, cack_psn, mpr=MPR_DEFAULT, wimm_max=WIMM_MAX_DEFAULT):
        self.config = RxConfig(mpr=mpr, wimm_max=wimm_max)
        self.state = initial_state(cack_psn)
        self.counters = Counter()

    @property
    def cack_psn(self):
        return self.state.cack_psn

    def received(self, psn):
        return received(self.config, self.state, psn)

    def _step(self, transition, *args):
        self.state, result = transition(self.config, self.state, *args)
        self.counters[result.verdict] += 1
        return result

    def arrive(self, arrival):
        """Process one data packet (an :class:`Arrival`)."""
        return self._step(on_arrival, arrival)

    def probe(self, probe):
        """Process one reliability probe (a :class:`Probe`)."""
        return self._step(on_probe, probe)

    def tick(self):
        """Process one 1.024 us tick."""
        return self._step(on_tick)

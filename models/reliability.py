# SPDX-License-Identifier: BSD-2-Clause
"""Golden model of the sender reliability block (docs/protocol.md 2.1, 2.2, 4.4, 4.6 and 5).

The block keeps, per QP, the PSNs in flight (metadata only: the payload is fetched again for a
retransmission), turns received SACKs and NACKs into acknowledgements, retransmission requests and
EV events, runs a timer per outstanding PSN on the shared 1.024 us tick, owns the probe list, and
completes work requests. The RTL (``rtl/reliability.py``) processes one input at a time and reports
each input it took, and each tick it applied, on a trace stream (:data:`TRACE`: source and tick);
this model, fed the same inputs in that order through :meth:`Reliability.apply`, produces the same
output records, stream by stream, in the same order.

Inputs (records of :mod:`models.records`): ``send_record`` (one per data packet sent or flushed),
``feedback_record`` (a received SACK or NACK), ``ev_marked`` (the EV table's answer to a BAD event),
``work_request`` (a tap: only ``qpn`` and ``req_id`` are used) and the tick. Outputs, each an
ordered stream: ``retx_request``, ``psn_limit``, ``retire``, ``completion`` (sender side),
``ev_event`` (SKIP, BAD, RECOVERED) and ``control_record`` (probes).

State of a QP (set up by configuration: start PSN ``s``, enable, and the parameters of
:class:`QpConfig`):

- ``cack_psn`` (starts at ``s - 1``): every PSN up to it is acknowledged. ``next_psn`` (starts at
  ``s``): the next new PSN. The outstanding PSNs are ``(cack_psn, next_psn)``, at most ``window``
  of them, with ``window = min(w_max, mpr, ring)`` latched at set-up: ``ring`` is the block's
  number of metadata entries per QP (PSN ``p`` lives in entry ``p mod ring``).
- per outstanding PSN: the EV of its latest copy, its work request (``req_id``, ``last``), its
  count of timeout retransmissions, ``acked`` (a SACK said received), a state (:class:`PsnState`)
  and the deadline of its timer, in ticks.
- the pending work requests: the FIFO of taps (at most ``wr_depth``), popped as they complete.
- ``error``: the QP is in the error state.

Shared: the probe list (``probe_entries`` entries of QP, EV, count of clean answers in a row, a
probe outstanding with its probe_id and timeout, the tick of the next probe), the next probe_id
(16 bits, one per probe sent, over all QPs), ``now`` (the tick count) and the counters.

Rules (every choice the profile leaves open is fixed here):

- PSN limit: new PSNs of a QP stop at ``psn_limit = cack_psn + 1 + window`` (exclusive). A
  ``psn_limit`` record goes out at set-up (enabled QPs) and whenever ``cack_psn`` moves, so the
  limit never moves backwards while the QP runs. A QP error closes it: one ``psn_limit`` record
  with ``psn_limit = next_psn`` (the transmit engine then starts no new PSN of the QP; profile
  5: a QP in error sends nothing more).
- Send record, new (``rtx`` = ``flushed`` = 0): accepted when ``psn = next_psn`` and the window
  has room (``psn < psn_limit``); the PSN is IN_FLIGHT with deadline ``now + 2^k``. Otherwise the
  record is dropped and counted (``send_bad``).
- Send record of a retransmission (``rtx`` = 1, ``flushed`` = 0): accepted for an outstanding PSN,
  not acknowledged, whose retransmission was requested (RETX_PENDING): its EV becomes the record's
  and it is IN_FLIGHT with a new deadline. Otherwise ignored (``send_stale``).
- Flushed record (``flushed`` = 1, docs/protocol.md 4.6): for an outstanding PSN, not acknowledged, whose
  latest copy used the record's EV and whose retransmission is not already requested: a
  retransmission is requested at once (cause FLUSHED, ``avoid_ev`` = that EV), no EV event, no
  retry charge. Otherwise ignored (``send_stale``).
- SACK (docs/protocol.md 2.1, 5): dropped whole (``fb_bad``) when its ``cack_psn`` is at or beyond
  ``next_psn`` (a PSN never sent). Otherwise: ``m`` = SKIP_ONCE gives SKIP(QP, entropy); every
  outstanding PSN up to its ``cack_psn``, with its bitmap bit set, or equal to its trigger PSN
  (``pr`` = 0 only) is acknowledged (a ``cack_psn`` behind ours acknowledges nothing by itself);
  then ``cack_psn`` moves over every acknowledged PSN after it. When it moves: the new
  ``psn_limit``; for each PSN passed with ``last`` = 1, in PSN order, a completion (status OK) and
  a retire of its ``req_id``, each popping the work-request FIFO (an empty FIFO is counted
  ``wr_missing``); then, in PSN order, a retransmission (cause CACK_MOVED) of each outstanding PSN
  still waiting in WAIT_CACK. A SACK with ``pr`` = 1 answers the probe of the list entry with the
  same QP, EV (``entropy``) and outstanding ``probe_id``: ``m`` = NONE counts a clean answer (the
  third in a row gives RECOVERED(QP, EV) and frees the entry), anything else restarts the count;
  an answer matching no entry is counted ``probe_stale``.
- NACK (docs/protocol.md 2.2): dropped whole (``fb_bad``) for an unknown reason or a PSN at or beyond
  ``next_psn``. TRIMMED gives SKIP(QP, EV) in every other case. It acts only on an outstanding
  PSN not acknowledged: UNEXP_EVENT puts the QP in the error state; the other reasons act when
  the NACK's EV is the latest copy's and the PSN is IN_FLIGHT: TRIMMED and TRIMMED_LASTHOP request
  a retransmission at once (cause NACK_TRIMMED), NO_PKT_BUFFER waits one probe period (WAIT_TIMER,
  deadline ``now + period``, then cause NACK_OTHER), PSN_OOR_WINDOW waits until ``cack_psn`` moves
  (WAIT_CACK: cause CACK_MOVED) or its own timer ends (cause NACK_OTHER). Any other NACK is
  counted ``fb_stale`` and changes nothing.
- Tick (``now`` + 1), in this order: (1) each probe outstanding whose timeout is ``now`` is
  forgotten and its entry's count restarts; (2) the timers of the QPs in QP order, each QP's PSNs
  in PSN order: a PSN whose deadline is ``now`` fires. IN_FLIGHT: if it already had
  ``retry_limit`` timeout retransmissions the QP goes to the error state (RETRY_EXCEEDED; its
  other timers are dropped); else its count grows by one, a retransmission is requested (cause
  TIMEOUT, avoiding its EV) and BAD(QP, EV) goes to the EV table. WAIT_TIMER, WAIT_CACK: a
  retransmission (cause NACK_OTHER). (3) each list entry whose next probe is due (entry order)
  moves its next probe one period on and, unless a probe of it is outstanding, sends one: a
  control record (opcode RELIABILITY_PROBE, the EV, PETH with the next probe_id), timeout
  ``now + 2^k`` of its QP.
- A requested retransmission leaves the PSN in RETX_PENDING (no timer) until its send record.
  Every retransmission request avoids the EV of the PSN's latest copy.
- EV_MARKED (valid = 1): the EV joins the probe list (lowest free entry; next probe one period
  later) unless the QP already has it there; with the list full it is counted ``probe_full``.
  Records with valid = 0 change nothing.
- Work request tap: pushed on the QP's FIFO (``wr_dropped`` when full or the QP is not enabled).
- QP error (retry limit, UNEXP_EVENT): every pending work request completes, in FIFO order, with
  the cause's status (RETRY_EXCEEDED or QP_ERROR) and is retired; the QP's timers stop, its
  probe-list entries are freed and its PSN limit is closed at ``next_psn``. Afterwards its send records, feedback and EV_MARKED records are
  dropped (``*_dropped``) and each new work request completes at once with QP_ERROR and is
  retired. Other QPs are unaffected. A new set-up clears the error.
- Records for a QP that is not below ``n_qps`` or not enabled are dropped and counted.

Timers: ``k`` is the QP's timeout exponent, used as ``min(k, timer_bits - 1)``; the probe period
is taken modulo ``2^timer_bits`` with 0 meaning ``2^timer_bits`` (the RTL keeps deadlines modulo
``2^timer_bits``, so every deadline is less than that many ticks ahead).

**Two profiles.** ``profile`` (2 by default) selects the rules above and below. Profile 1 is
what ``rtl/reliability.py`` implements today (its benches build :class:`ReliabilityV1`): the
rules above as written. Profile 2 (docs/protocol.md 4.4, 5) changes these:

- Window: limit (a), new PSNs stay below ``psn_limit = cack_psn + 1 + min(mpr, ring)``; limit
  (b), fewer than ``w_max`` PSNs in flight, counted per PSN by its latest copy: a PSN takes a
  place at each send of a copy (new or retransmission) and gives it back when a SACK takes it
  as received or when its retransmission is requested (a NACK TRIMMED/TRIMMED_LASTHOP, its own
  timeout, the loss of its path, a plane flush; a PSN NACKed NO_PKT_BUFFER or PSN_OOR_WINDOW
  keeps its place while it waits, and gives it back when its retransmission is requested:
  docs/protocol.md 10, point 14). The ``limit`` stream carries WINDOW_ROOM records
  (``psn_limit`` and ``credit``: the places granted since set-up, modulo 2^16, starting at
  ``w_max``); one goes out at set-up and after any input or tick that changed either field.
  The transmit side counts every data packet it sends against ``credit``; a send record the
  block does not put in flight (stale, bad) gives its credit back at once. A QP error closes the
  room at ``psn_limit = next_psn``.
- AckReq (:meth:`Reliability.ackreq_due`): a data packet carries AckReq by the half-window rule
  when, after its send, ceil(W_max / 2) or more PSNs are in flight and no packet that carried
  AckReq by this rule is still in flight; the block marks the entry when it takes the send
  record (``PsnEntry.ackreq``), and the transmit side asks the same question before it sends.
- Timeout (4.4): the PSN's own timeout (charged to its retry count, BAD event as before) also
  declares lost every other PSN of the QP in flight whose latest copy went on the same path
  (plane, j): all of them are requested again in PSN order (the others with cause PATH_LOST,
  not charged), their timers cancelled, in the same tick step.
- QP reset (:meth:`Reliability.reset`): pending work requests complete with FLUSHED, then a
  fresh set-up.
- Congestion control (docs/protocol.md 5.1; ``QpConfig.cc``, an :class:`models.nscc.NsccConfig`,
  None = off): the QP keeps an :class:`models.nscc.Nscc`. Each PSN counts ``max(length, 1024)``
  bytes (the send record's ``length``) while it holds its place; limit (b) in bytes is the
  WINDOW_ROOM ``byte_credit``, ``charged + cwnd - bytes in flight`` modulo 2^32 (``charged``:
  the cost of every send record not flushed, taken or not, so a refused send's bytes come back
  at once). The block stamps each copy with its clock (:attr:`Reliability.clock`) when it takes
  the send record; a SACK with ``pr`` = 0 feeds NSCC the bytes it newly took as received, its
  ECN signal and the RTT of its trigger's copy (none for ``tm`` = 1, a retransmitted copy or a
  trigger already taken as received); a TRIMMED or TRIMMED_LASTHOP NACK the block takes (not
  ``fb_bad``) is a trim; each timeout event one loss reaction (:meth:`Reliability.sack_input`,
  :meth:`Reliability.nack_input`, :meth:`Reliability.timer_step`). AckReq's half-window rule
  also fires when the bytes in flight after the send reach cwnd / 2.

Nothing here imports cocotb, Amaranth or scapy.
"""

from collections import Counter, deque
from dataclasses import dataclass

from .layouts import NETH, PETH, NackReason, Opcode, SackVerdict
from .nscc import MIN_COST, TICK_STAMPS, Nscc, NsccConfig, packet_cost
from .records import (CompletionStatus, EvEvent, Record, RetxCause, ext_to_int, int_to_ext)
from .rx_tracker import PSN_MODULUS, Sack, psn_add, psn_diff
from .spray import ev_path

__all__ = [
    "Source", "TRACE", "PsnState", "QpConfig", "Reliability", "ReliabilityV1", "PsnEntry",
    "COUNTERS", "STREAMS", "CLEAN_ANSWERS", "PROBE_ID_BITS", "K_BITS", "RETRY_BITS", "W_BITS",
    "CREDIT_MODULUS", "BYTE_CREDIT_MODULUS", "DEFAULT_RING", "DEFAULT_PROBE_ENTRIES",
    "DEFAULT_WR_DEPTH",
    "DEFAULT_TIMER_BITS", "window_of", "psn_range_of", "ackreq_threshold", "timeout_ticks",
    "period_ticks",
]

CLEAN_ANSWERS = 3            # probe answers with m = NONE in a row that recover an EV
PROBE_ID_BITS = 16
K_BITS = 4                   # the timeout exponent register
RETRY_BITS = 4               # the retry_limit register
W_BITS = 16                  # the w_max and mpr registers
CREDIT_MODULUS = 1 << 16     # WINDOW_ROOM.credit and the transmit side's count of sends
BYTE_CREDIT_MODULUS = 1 << 32   # WINDOW_ROOM.byte_credit and the transmit side's count of bytes
DEFAULT_RING = 64
DEFAULT_PROBE_ENTRIES = 8
DEFAULT_WR_DEPTH = 16
DEFAULT_TIMER_BITS = 10
_TICK_MODULUS = 1 << 32      # the tick count of the trace (the model's count does not wrap)

# Output streams, in the order of the RTL's ports. "limit" carries PSN_LIMIT records in profile 1
# and WINDOW_ROOM records in profile 2 (models/records.py).
STREAMS = ("retx", "limit", "retire", "cpl", "ev", "ctrl")

COUNTERS = (
    "send", "send_retx", "send_flushed", "send_bad", "send_stale", "send_dropped",
    "sack", "nack", "fb_bad", "fb_stale", "fb_dropped", "probe_answer", "probe_stale",
    "marked", "marked_dropped", "probe_full", "wr", "wr_dropped", "wr_missing",
    "timeout", "retx", "probe", "recovered", "completion", "qp_error",
)


class Source:
    """``TRACE.source``: what the block took (an input stream) or applied (a tick)."""
    SEND = 0
    FEEDBACK = 1
    MARKED = 2
    WORK_REQUEST = 3
    TICK = 4


TRACE = Record("reliability_trace", [("source", 3), ("tick", 32)], doc="""One per input the
reliability block took, in its processing order (``source`` a :class:`Source` code, ``tick`` the
tick count it was processed at), and one per tick it applied (``source`` TICK, ``tick`` the new
count).""")


class PsnState:
    """State of an outstanding PSN that no SACK has acknowledged."""
    IN_FLIGHT = 0         # sent, its timer running
    RETX_PENDING = 1      # a retransmission requested, not yet sent (no timer)
    WAIT_TIMER = 2        # NACK NO_PKT_BUFFER: retransmit when its timer (one probe period) ends
    WAIT_CACK = 3         # NACK PSN_OOR_WINDOW: retransmit when cack_psn moves or its timer ends


@dataclass(frozen=True)
class QpConfig:
    """Per-QP parameters, as written to the configuration registers (see the module docstring for
    how ``timeout_exp`` and ``probe_period`` are taken)."""
    w_max: int = 64
    mpr: int = 1024
    timeout_exp: int = 6
    retry_limit: int = 7
    probe_period: int = 64
    cc: NsccConfig = None        # profile 2: NSCC's parameters (docs/protocol.md 5.1), None = off

    def __post_init__(self):
        for name, bits in (("w_max", W_BITS), ("mpr", W_BITS), ("timeout_exp", K_BITS),
                           ("retry_limit", RETRY_BITS), ("probe_period", 32)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << bits:
                raise ValueError(f"{name} must be an integer in 0..{(1 << bits) - 1}, "
                                 f"not {value!r}")
        if self.cc is not None and not isinstance(self.cc, NsccConfig):
            raise ValueError(f"cc must be an NsccConfig or None, not {self.cc!r}")


def window_of(cfg, ring):
    """Profile 1: the outstanding PSNs a QP may have: ``min(w_max, mpr, ring)``."""
    return min(cfg.w_max, cfg.mpr, ring)


def psn_range_of(cfg, ring):
    """Profile 2, limit (a): new PSNs stay within ``min(mpr, ring)`` of cack_psn (MPR, and the
    block's metadata entries per QP: docs/protocol.md 10, point 13)."""
    return min(cfg.mpr, ring)


def ackreq_threshold(cfg):
    """Profile 2: the in-flight count at which a packet carries AckReq: ceil(W_max / 2)."""
    return -(-cfg.w_max // 2)


def timeout_ticks(cfg, timer_bits):
    """``2^k`` ticks, ``k`` limited to ``timer_bits - 1``."""
    return 1 << min(cfg.timeout_exp, timer_bits - 1)


def period_ticks(cfg, timer_bits):
    """The probe period in ticks: the register value modulo ``2^timer_bits``, 0 meaning
    ``2^timer_bits``."""
    return cfg.probe_period % (1 << timer_bits) or 1 << timer_bits


@dataclass
class PsnEntry:
    """Metadata of one outstanding PSN (build it with keywords: the field order may change).

    ``counted`` (profile 2): the PSN holds a place in the window (limit (b)); ``ackreq``: its
    latest copy carried AckReq by the half-window rule; ``cost`` the bytes it counts in flight
    (max(payload length, 1024)), ``sent_at`` the block's clock (:data:`models.nscc.STAMP_NS`
    units) when it took the latest copy's send record, ``rtx`` that copy was a retransmission."""
    ev: int
    req_id: int
    last: bool
    retries: int = 0
    state: int = PsnState.IN_FLIGHT
    acked: bool = False
    deadline: int = 0
    counted: bool = False
    ackreq: bool = False
    cost: int = 0
    sent_at: int = 0
    rtx: bool = False


_Entry = PsnEntry             # the name of older code


@dataclass
class _ProbeEntry:
    qpn: int
    ev: int
    count: int = 0
    outstanding: bool = False
    probe_id: int = 0
    next_due: int = 0
    timeout_at: int = 0


class _Qp:
    def __init__(self, start, cfg, window, psn_range, profile):
        self.cfg = cfg
        self.window = window          # profile 1: PSNs from cack_psn; profile 2: W_max in flight
        self.psn_range = psn_range    # profile 2: limit (a)
        self.cack = psn_add(start, -1)
        self.next_psn = start
        self.entries = {}          # psn -> PsnEntry, for every outstanding PSN
        self.wrs = deque()
        self.error = False
        self.in_flight = 0            # profile 2: places held (entries counted)
        self.credit = cfg.w_max % CREDIT_MODULUS   # profile 2: places granted, modulo 2^16
        self.ackreq_psn = None        # profile 2: the PSN in flight that carried AckReq by rule
        self.announced = None         # profile 2: the last WINDOW_ROOM (psn_limit, credit, bytes)
        self.profile = profile
        # Profile 2 with congestion control (docs/protocol.md 5.1): NSCC's state, the bytes in
        # flight (PSNs counted, each its cost) and the bytes of every data packet the transmit
        # side counted (each send record not flushed), modulo 2^32.
        self.cc = Nscc(cfg.cc) if cfg.cc is not None and profile == 2 else None
        self.bytes_in_flight = 0
        self.charged = 0
        self.acked_bytes = 0          # the cost of every PSN a SACK took as received (5.1)

    def outstanding(self, psn):
        return psn_diff(psn, self.cack) > 0 and psn_diff(psn, self.next_psn) < 0

    def psns(self):
        """The outstanding PSNs in order."""
        return [psn_add(self.cack, i) for i in range(1, psn_diff(self.next_psn, self.cack))]

    def psn_limit(self):
        """Profile 2: the WINDOW_ROOM ``psn_limit`` (limit (a); the next PSN once in error)."""
        return self.next_psn if self.error else psn_add(self.cack, 1 + self.psn_range)

    def byte_credit(self):
        """Profile 2: the WINDOW_ROOM ``byte_credit``: the bytes the transmit side may have
        counted when its next packet's cost fits, ``charged + cwnd - bytes_in_flight`` modulo
        2^32 (0 without congestion control; at a QP error, ``charged``: no room)."""
        if self.cc is None:
            return 0
        room = 0 if self.error else self.cc.cwnd - self.bytes_in_flight
        return (self.charged + room) % BYTE_CREDIT_MODULUS


class Reliability:
    """The reliability block of ``n_qps`` QPs (QP q is local ``qpn`` q); see the module docstring.
    ``profile`` 2 (default) or 1 selects the rules (module docstring).

    Inputs go through :meth:`send`, :meth:`feedback`, :meth:`marked`, :meth:`work_request` and
    :meth:`tick` (or :meth:`apply` with a trace record); configuration through :meth:`setup`
    (and :meth:`reset`, profile 2). Output records (dicts of the records' fields) accumulate in
    :attr:`out`, one list per stream of :data:`STREAMS`; the caller takes them away.
    :attr:`counters` counts :data:`COUNTERS`.

    **Subclass API.** A faster subclass (``models/fabric_nic.py``) may override the steps
    :meth:`sack_step`, :meth:`nack_step`, :meth:`send_step` and :meth:`timer_step` (the first
    two return whether the block took the input, not ``fb_bad``), and use :meth:`sack_input`
    and :meth:`nack_input` (the steps with congestion control around them),
    :meth:`active`, :meth:`emit`, :meth:`emit_limit`, :meth:`request_retx`, :meth:`ev_event`,
    :meth:`complete_passed`, :meth:`answer_probe`, :meth:`probe_timeouts`, :meth:`probes_due`,
    :meth:`acknowledge`, :meth:`after_input`, :meth:`announce` and :meth:`ackreq_due`; it builds
    :class:`PsnEntry` with keywords. Nothing else of the block is its business.
    """

    def __init__(self, n_qps=4, ring=DEFAULT_RING, probe_entries=DEFAULT_PROBE_ENTRIES,
                 wr_depth=DEFAULT_WR_DEPTH, timer_bits=DEFAULT_TIMER_BITS, now=0, profile=2,
                 clock=None):
        for name, value, low in (("n_qps", n_qps, 1), ("ring", ring, 1),
                                 ("probe_entries", probe_entries, 1), ("wr_depth", wr_depth, 1),
                                 ("timer_bits", timer_bits, 2)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an integer of at least {low}, not {value!r}")
        if profile not in (1, 2):
            raise ValueError(f"profile must be 1 or 2, not {profile!r}")
        self.profile = profile
        self.n_qps = n_qps
        self.ring = ring
        self.wr_depth = wr_depth
        self.timer_bits = timer_bits
        self.now = now
        self.qps = [None] * n_qps
        self.probes = [None] * probe_entries
        self.probe_id = 0
        self.out = {s: [] for s in STREAMS}
        self.counters = Counter({name: 0 for name in COUNTERS})
        self._clock = clock

    @property
    def clock(self):
        """The block's time for congestion control, in :data:`models.nscc.STAMP_NS` units: the
        ``clock`` callable given at construction (the fabric model's time), else the tick count
        times :data:`models.nscc.TICK_STAMPS`."""
        return self._clock() if self._clock is not None else self.now * TICK_STAMPS

    # --- configuration ----------------------------------------------------------------------------

    def setup(self, qpn, start, enable=True, cfg=QpConfig()):
        """Set QP ``qpn`` up from PSN ``start`` (or disable it): every state of the QP is cleared,
        its probe-list entries freed; an enabled QP announces its first PSN limit (profile 1) or
        window room (profile 2). Pending work requests are discarded (see :meth:`reset`)."""
        if not 0 <= qpn < self.n_qps:
            raise ValueError(f"QP {qpn} is not below {self.n_qps}")
        if not 0 <= start < PSN_MODULUS:
            raise ValueError(f"start PSN must be a 24-bit PSN, not {start!r}")
        self._free_probes(qpn)
        if not enable:
            self.qps[qpn] = None
            return
        qp = _Qp(start, cfg, window_of(cfg, self.ring) if self.profile == 1 else cfg.w_max,
                 psn_range_of(cfg, self.ring), self.profile)
        self.qps[qpn] = qp
        self.emit_limit(qpn, qp)

    def reset(self, qpn, start, cfg=None):
        """QP reset (profile 2, docs/protocol.md 5): every pending work request completes with
        status FLUSHED (and is retired), then the QP is set up afresh from ``start`` (its
        ``cfg`` kept unless given), its error state cleared."""
        if self.profile != 2:
            raise ValueError("QP reset is a profile-2 operation")
        qp = self.qps[qpn] if 0 <= qpn < self.n_qps else None
        if qp is None:
            raise ValueError(f"QP {qpn} is not set up")
        while qp.wrs:
            self.complete(qpn, qp.wrs.popleft(), CompletionStatus.FLUSHED)
        self.setup(qpn, start, True, qp.cfg if cfg is None else cfg)

    def qp(self, qpn):
        """The state of QP ``qpn`` (None when disabled)."""
        return self.qps[qpn]

    # --- the subclass API (helpers) ----------------------------------------------------------------

    def emit(self, stream, **fields):
        """Queue one output record on ``stream``."""
        self.out[stream].append(fields)

    _emit = emit

    def active(self, qpn):
        """The QP's state when it is configured, enabled and not in error; else None."""
        qp = self.qps[qpn] if qpn < self.n_qps else None
        return qp if qp is not None and not qp.error else None

    _active = active

    def emit_limit(self, qpn, qp):
        if self.profile == 1:
            self.emit("limit", qpn=qpn, psn_limit=psn_add(qp.cack, 1 + qp.window))
        else:
            self.announce(qpn, qp)

    def announce(self, qpn, qp, force=False):
        """Profile 2: a WINDOW_ROOM record when its fields changed since the last one (always
        with ``force``: the record that closes the room at a QP error)."""
        room = (qp.psn_limit(), qp.credit, qp.byte_credit())
        if force or room != qp.announced:
            qp.announced = room
            self.emit("limit", qpn=qpn, psn_limit=room[0], credit=room[1], byte_credit=room[2])

    def ackreq_due(self, qpn, cost=0):
        """Profile 2 (docs/protocol.md 5, AckReq): whether the QP's next data packet (counting
        ``cost`` bytes) carries BTH.AckReq by the half-window rule: after its send, the in-flight
        count reaches ceil(W_max / 2) (or, with congestion control, the bytes in flight reach
        cwnd / 2), and no packet that carried AckReq by this rule is still in flight. The
        transmit side asks before it sends; the block marks the entry alike when it takes the
        send record."""
        qp = self.active(qpn) if self.profile == 2 else None
        return qp is not None and qp.ackreq_psn is None and self._half_window(qp, cost)

    @staticmethod
    def _half_window(qp, cost):
        return qp.in_flight + 1 >= ackreq_threshold(qp.cfg) or \
            (qp.cc is not None and 2 * (qp.bytes_in_flight + cost) >= qp.cc.cwnd)

    def _take_place(self, qp, psn, entry):
        """Profile 2: the PSN's new copy takes a place in the window (and its cost in bytes)."""
        entry.ackreq = qp.ackreq_psn is None and self._half_window(qp, entry.cost)
        if entry.ackreq:
            qp.ackreq_psn = psn
        entry.counted = True
        qp.in_flight += 1
        qp.bytes_in_flight += entry.cost

    def release(self, qp, psn, entry):
        """Profile 2: the PSN's copy leaves flight (taken as received, or its retransmission
        requested): its place returns to the transmit side as one credit."""
        if entry.counted:
            entry.counted = False
            qp.in_flight -= 1
            qp.bytes_in_flight -= entry.cost
            qp.credit = (qp.credit + 1) % CREDIT_MODULUS
            if qp.ackreq_psn == psn:
                qp.ackreq_psn = None

    def _refund(self, qp):
        """Profile 2: a data packet the transmit side sent (and counted) that the block does not
        put in flight (a stale retransmission): its credit comes back at once."""
        if self.profile == 2:
            qp.credit = (qp.credit + 1) % CREDIT_MODULUS

    def request_retx(self, qpn, qp, psn, entry, cause):
        """A retransmission request for ``psn``, avoiding its latest copy's EV; the PSN leaves
        flight (profile 2) and waits in RETX_PENDING, its timer cancelled."""
        self.emit("retx", qpn=qpn, psn=psn, avoid_ev=entry.ev, cause=cause)
        entry.state = PsnState.RETX_PENDING
        self.counters["retx"] += 1
        if self.profile == 2:
            self.release(qp, psn, entry)

    def _retx(self, qpn, psn, entry, cause):
        self.request_retx(qpn, self.qps[qpn], psn, entry, cause)

    def ev_event(self, qpn, ev, kind):
        self.emit("ev", qpn=qpn, ev=ev, kind=kind)

    _ev_event = ev_event

    def complete(self, qpn, req_id, status):
        self.emit("cpl", qpn=qpn, req_id=req_id, msn=0, status=status, is_recv=0, has_imm=0,
                  imm=0)
        self.emit("retire", qpn=qpn, req_id=req_id)
        self.counters["completion"] += 1

    _complete = complete

    def _free_probes(self, qpn):
        self.probes = [p if p is None or p.qpn != qpn else None for p in self.probes]

    def _error(self, qpn, qp, status):
        qp.error = True
        self.counters["qp_error"] += 1
        while qp.wrs:
            self.complete(qpn, qp.wrs.popleft(), status)
        self._free_probes(qpn)
        if self.profile == 1:
            self.emit("limit", qpn=qpn, psn_limit=qp.next_psn)
        else:
            self.announce(qpn, qp, force=True)

    def acknowledge(self, qp, psn, entry):
        """A SACK takes ``psn`` as received (profile 2: its place is released)."""
        entry.acked = True
        qp.acked_bytes += entry.cost
        if self.profile == 2:
            self.release(qp, psn, entry)

    # --- inputs -----------------------------------------------------------------------------------

    def send(self, rec):
        """One SEND_RECORD (a dict of its fields)."""
        qpn, psn = rec["qpn"], rec["psn"]
        qp = self.active(qpn)
        if qp is None:
            self.counters["send_dropped"] += 1
            return
        if rec["flushed"]:
            entry = qp.entries.get(psn)
            if entry is None or entry.acked or entry.ev != rec["ev"] or \
                    entry.state == PsnState.RETX_PENDING:
                self.counters["send_stale"] += 1
                return
            self.counters["send_flushed"] += 1
            self.request_retx(qpn, qp, psn, entry, RetxCause.FLUSHED)
            self.after_input(qpn, qp)
            return
        self.send_step(qpn, qp, psn, rec["ev"], rec["req_id"], rec["last"], rec["rtx"],
                       rec.get("length", 0))

    def send_step(self, qpn, qp, psn, ev, req_id, last, rtx, length=0):
        """A data packet sent (not flushed): a retransmission's new copy, or a new PSN, of
        ``length`` payload bytes. The transmit side counted its cost against the byte credit."""
        cost = packet_cost(length)
        qp.charged = (qp.charged + cost) % BYTE_CREDIT_MODULUS
        if rtx:
            entry = qp.entries.get(psn)
            if entry is None or entry.acked or entry.state != PsnState.RETX_PENDING:
                self.counters["send_stale"] += 1
                self._refund(qp)
                self.after_input(qpn, qp)
                return None
            self.counters["send_retx"] += 1
            entry.ev = ev
            entry.state = PsnState.IN_FLIGHT
            entry.deadline = self.now + timeout_ticks(qp.cfg, self.timer_bits)
            entry.rtx = True
        else:
            ahead = psn_diff(psn, qp.cack)
            if psn != qp.next_psn or (self.profile == 1 and ahead > qp.window) or \
                    (self.profile == 2 and (ahead > qp.psn_range or qp.in_flight >= qp.window)):
                self.counters["send_bad"] += 1
                self._refund(qp)
                self.after_input(qpn, qp)
                return None
            self.counters["send"] += 1
            entry = qp.entries[psn] = PsnEntry(
                ev=ev, req_id=req_id, last=bool(last),
                deadline=self.now + timeout_ticks(qp.cfg, self.timer_bits))
            qp.next_psn = psn_add(psn, 1)
        entry.cost = cost
        entry.sent_at = self.clock
        if self.profile == 2:
            self._take_place(qp, psn, entry)
        return entry

    def after_input(self, qpn, qp):
        """Profile 2: announce the window room after an input that may have changed it (a
        subclass's own entry points call it as :meth:`feedback` does)."""
        if self.profile == 2:
            self.announce(qpn, qp)

    def feedback(self, rec):
        """One FEEDBACK_RECORD: a SACK (SETH | CC_STATE in ``ext``) or a NACK (NETH)."""
        qpn, opcode = rec["qpn"], rec["opcode"]
        if opcode not in (Opcode.SACK, Opcode.NACK):
            self.counters["fb_bad"] += 1
            return
        qp = self.active(qpn)
        if qp is None:
            self.counters["fb_dropped"] += 1
            return
        if opcode == Opcode.SACK:
            self.sack_input(qpn, qp, Sack.from_ext(int_to_ext(rec["ext"], 36)))
        else:
            neth = NETH.unpack(int_to_ext(rec["ext"], NETH.size))
            self.nack_input(qpn, qp, neth["nack_reason"], neth["nack_psn"], neth["entropy"])
        if not qp.error:
            self.after_input(qpn, qp)

    def sack_input(self, qpn, qp, sack):
        """A SACK for an active QP: :meth:`sack_step`, with congestion control around it (5.1):
        the delay sample of its trigger's copy (none from a probe answer, a SACK with ``tm`` = 1,
        a retransmitted copy, or a trigger already taken as received), then NSCC's update with
        the bytes the SACK newly took as received and its ECN signal (``m`` = SKIP_ONCE)."""
        cc = qp.cc
        if cc is None:
            self.sack_step(qpn, qp, sack)
            return
        rtt = None
        if not sack.pr and not sack.tm:
            trigger = psn_add(sack.cack_psn, sack.ack_psn_offset)
            entry = qp.entries.get(trigger) if qp.outstanding(trigger) else None
            if entry is not None and not entry.acked and not entry.rtx:
                rtt = self.clock - entry.sent_at
        before = qp.acked_bytes
        taken = self.sack_step(qpn, qp, sack)
        if taken and not sack.pr and not qp.error:
            cc.on_sack(self.clock, qp.acked_bytes - before, sack.m == SackVerdict.SKIP_ONCE,
                       rtt, qp.bytes_in_flight)

    def nack_input(self, qpn, qp, reason, psn, ev):
        """A NACK for an active QP: :meth:`nack_step`; one TRIMMED or TRIMMED_LASTHOP that the
        block takes (not ``fb_bad``) is an ECN signal for congestion control (5.1)."""
        entry = qp.entries.get(psn)
        cost = entry.cost if entry is not None else MIN_COST
        taken = self.nack_step(qpn, qp, reason, psn, ev)
        if taken and qp.cc is not None and not qp.error and \
                reason in (NackReason.TRIMMED, NackReason.TRIMMED_LASTHOP):
            qp.cc.on_trim(self.clock, cost, qp.bytes_in_flight,
                          reason == NackReason.TRIMMED_LASTHOP)

    def sack_step(self, qpn, qp, sack):
        """One SACK (docs/protocol.md 2.1, 5) for an active QP."""
        if psn_diff(sack.cack_psn, qp.next_psn) >= 0:
            self.counters["fb_bad"] += 1
            return False
        self.counters["sack"] += 1
        if sack.m == SackVerdict.SKIP_ONCE:
            self.ev_event(qpn, sack.entropy, EvEvent.SKIP)
        bitmap = sack.bitmap_psns()
        for psn in qp.psns():
            entry = qp.entries[psn]
            if not entry.acked and (psn_diff(psn, sack.cack_psn) <= 0 or psn in bitmap or
                                    (not sack.pr and psn == sack.trigger_psn)):
                self.acknowledge(qp, psn, entry)
        passed = []
        while psn_diff(qp.next_psn, qp.cack) > 1 and qp.entries[psn_add(qp.cack, 1)].acked:
            qp.cack = psn_add(qp.cack, 1)
            passed.append(qp.entries.pop(qp.cack))
        if passed:
            if self.profile == 1:
                self.emit_limit(qpn, qp)
            self.complete_passed(qpn, qp, passed)
            for psn in qp.psns():
                entry = qp.entries[psn]
                if not entry.acked and entry.state == PsnState.WAIT_CACK:
                    self.request_retx(qpn, qp, psn, entry, RetxCause.CACK_MOVED)
        if sack.pr:
            self.answer_probe(qpn, sack)
        return True

    _sack = sack_step

    def answer_probe(self, qpn, sack):
        """A probe answer (a SACK with ``pr`` = 1) for the probe list."""
        for i, p in enumerate(self.probes):
            if p is not None and p.qpn == qpn and p.ev == sack.entropy and p.outstanding and \
                    p.probe_id == sack.probe_id:
                self.counters["probe_answer"] += 1
                p.outstanding = False
                if sack.m != SackVerdict.NONE:
                    p.count = 0
                    return
                p.count += 1
                if p.count == CLEAN_ANSWERS:
                    self.ev_event(qpn, p.ev, EvEvent.RECOVERED)
                    self.counters["recovered"] += 1
                    self.probes[i] = None
                return
        self.counters["probe_stale"] += 1

    _probe_answer = answer_probe

    def nack_step(self, qpn, qp, reason, psn, ev):
        """One NACK (docs/protocol.md 2.2) for an active QP."""
        known = (NackReason.TRIMMED, NackReason.TRIMMED_LASTHOP, NackReason.NO_PKT_BUFFER,
                 NackReason.PSN_OOR_WINDOW, NackReason.UNEXP_EVENT)
        if reason not in known or psn_diff(psn, qp.next_psn) >= 0:
            self.counters["fb_bad"] += 1
            return False
        self.counters["nack"] += 1
        if reason == NackReason.TRIMMED:
            self.ev_event(qpn, ev, EvEvent.SKIP)
        entry = qp.entries.get(psn)
        if entry is None or entry.acked:
            self.counters["fb_stale"] += 1
            return True
        if reason == NackReason.UNEXP_EVENT:
            self._error(qpn, qp, CompletionStatus.QP_ERROR)
            return True
        if entry.ev != ev or entry.state != PsnState.IN_FLIGHT:
            self.counters["fb_stale"] += 1
            return True
        if reason in (NackReason.TRIMMED, NackReason.TRIMMED_LASTHOP):
            self.request_retx(qpn, qp, psn, entry, RetxCause.NACK_TRIMMED)
        elif reason == NackReason.NO_PKT_BUFFER:
            entry.state = PsnState.WAIT_TIMER      # keeps its place (profile 2) until retx
            entry.deadline = self.now + period_ticks(qp.cfg, self.timer_bits)
        else:
            entry.state = PsnState.WAIT_CACK
        return True

    _nack = nack_step

    def marked(self, rec):
        """One EV_MARKED record: a marked EV joins the probe list."""
        qpn = rec["qpn"]
        qp = self.active(qpn)
        if qp is None:
            self.counters["marked_dropped"] += 1
            return
        if not rec["valid"]:
            return
        self.counters["marked"] += 1
        if any(p is not None and p.qpn == qpn and p.ev == rec["ev"] for p in self.probes):
            return
        if None not in self.probes:
            self.counters["probe_full"] += 1
            return
        self.probes[self.probes.index(None)] = _ProbeEntry(
            qpn, rec["ev"], next_due=self.now + period_ticks(qp.cfg, self.timer_bits))

    def work_request(self, rec):
        """One WORK_REQUEST tap (``qpn`` and ``req_id``)."""
        qpn, req_id = rec["qpn"], rec["req_id"]
        qp = self.qps[qpn] if qpn < self.n_qps else None
        if qp is None or (not qp.error and len(qp.wrs) >= self.wr_depth):
            self.counters["wr_dropped"] += 1
            return
        self.counters["wr"] += 1
        if qp.error:
            self.complete(qpn, req_id, CompletionStatus.QP_ERROR)
        else:
            qp.wrs.append(req_id)

    def tick(self):
        """One 1.024 us tick: probe timeouts, PSN timers, probes due (module docstring)."""
        self.now += 1
        now = self.now
        self.probe_timeouts(now)
        for qpn, qp in enumerate(self.qps):
            if qp is None or qp.error:
                continue
            for psn in qp.psns():
                if self.timer_step(qpn, qp, psn, qp.entries[psn], now):
                    break
            if not qp.error:
                self.after_input(qpn, qp)
        self.probes_due(now)

    def complete_passed(self, qpn, qp, passed):
        """``cack_psn`` moved over the entries ``passed`` (in PSN order): each last packet of a
        work request completes it (OK) and pops it from the FIFO."""
        for entry in passed:
            if entry.last:
                if qp.wrs:
                    qp.wrs.popleft()
                else:
                    self.counters["wr_missing"] += 1
                self.complete(qpn, entry.req_id, CompletionStatus.OK)

    _complete_passed = complete_passed

    def probe_timeouts(self, now):
        """Tick ``now``: a probe whose answer did not come in time restarts its count."""
        for p in self.probes:
            if p is not None and p.outstanding and p.timeout_at == now:
                p.outstanding = False
                p.count = 0

    _probe_timeouts = probe_timeouts

    def timer_step(self, qpn, qp, psn, entry, now):
        """The timer of outstanding PSN ``psn`` at tick ``now`` (if it is due); returns True when
        the QP went into the error state (its other PSNs are then not visited). Profile 2: a
        timeout also declares lost every other PSN in flight on the same path (4.4)."""
        if entry.acked or entry.state == PsnState.RETX_PENDING or entry.deadline != now:
            return False
        if entry.state != PsnState.IN_FLIGHT:
            self.request_retx(qpn, qp, psn, entry, RetxCause.NACK_OTHER)
            return False
        self.counters["timeout"] += 1
        if entry.retries >= qp.cfg.retry_limit:
            self._error(qpn, qp, CompletionStatus.RETRY_EXCEEDED)
            return True
        entry.retries += 1
        ev = entry.ev
        if qp.cc is not None:
            qp.cc.on_timeout(self.clock, entry.cost)   # one reaction per timeout event (5.1)
        if self.profile == 2:
            self.path_lost(qpn, qp, psn, ev)
        else:
            self.request_retx(qpn, qp, psn, entry, RetxCause.TIMEOUT)
        self.ev_event(qpn, ev, EvEvent.BAD)
        return False

    _timer = timer_step

    def path_lost(self, qpn, qp, psn, ev):
        """Profile 2 (4.4): the timeout of ``psn`` (sent on ``ev``) condemns its path: it and
        every other PSN of the QP in flight whose latest copy went on that path are requested
        again in PSN order from cack_psn + 1 (its own request cause TIMEOUT, the others
        PATH_LOST, no retry charge), all in this one step."""
        path = ev_path(ev)
        for other in qp.psns():
            entry = qp.entries[other]
            if other == psn:
                self.request_retx(qpn, qp, psn, entry, RetxCause.TIMEOUT)
            elif not entry.acked and entry.state == PsnState.IN_FLIGHT and \
                    ev_path(entry.ev) == path:
                self.request_retx(qpn, qp, other, entry, RetxCause.PATH_LOST)

    def probes_due(self, now):
        """Tick ``now``: every probe-list entry due sends its probe (unless one is outstanding)."""
        for p in self.probes:
            if p is None or p.next_due != now:
                continue
            cfg = self.qps[p.qpn].cfg
            p.next_due = now + period_ticks(cfg, self.timer_bits)
            if p.outstanding:
                continue
            p.outstanding = True
            p.probe_id = self.probe_id
            p.timeout_at = now + timeout_ticks(cfg, self.timer_bits)
            self.probe_id = (self.probe_id + 1) % (1 << PROBE_ID_BITS)
            self.counters["probe"] += 1
            self.emit("ctrl", qpn=p.qpn, opcode=Opcode.PROBE, ev=p.ev,
                      ext=ext_to_int(PETH.pack(probe_id=p.probe_id)))

    _probes_due = probes_due

    # --- the trace --------------------------------------------------------------------------------

    def apply(self, trace, record=None):
        """Apply one TRACE record (a dict): a tick, or the input ``record`` of its source, taken
        at the tick the trace names (which must be the model's)."""
        source, tick = trace["source"], trace["tick"]
        if source == Source.TICK:
            if tick != (self.now + 1) % _TICK_MODULUS:
                raise ValueError(f"trace ticks to {tick}, the model is at {self.now}")
            self.tick()
            return
        if tick != self.now % _TICK_MODULUS:
            raise ValueError(f"trace takes an input at tick {tick}, the model is at {self.now}")
        handler = {Source.SEND: self.send, Source.FEEDBACK: self.feedback,
                   Source.MARKED: self.marked, Source.WORK_REQUEST: self.work_request}.get(source)
        if handler is None:
            raise ValueError(f"unknown trace source {source}")
        handler(record)

    def take(self):
        """The output records so far, per stream (the lists are emptied)."""
        out = {s: list(v) for s, v in self.out.items()}
        for v in self.out.values():
            v.clear()
        return out

    def probe_list(self):
        """The probe list: per entry a tuple ``(qpn, ev, count, outstanding, probe_id)`` or None."""
        return [None if p is None else (p.qpn, p.ev, p.count, p.outstanding, p.probe_id)
                for p in self.probes]


class ReliabilityV1(Reliability):
    """:class:`Reliability` with the version-1 rules (``profile`` = 1), the ones
    ``rtl/reliability.py`` implements today; its cocotb benches build this one."""

    def __init__(self, n_qps=4, ring=DEFAULT_RING, probe_entries=DEFAULT_PROBE_ENTRIES,
                 wr_depth=DEFAULT_WR_DEPTH, timer_bits=DEFAULT_TIMER_BITS, now=0):
        super().__init__(n_qps, ring, probe_entries, wr_depth, timer_bits, now, profile=1)

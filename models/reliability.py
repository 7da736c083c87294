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

Nothing here imports cocotb, Amaranth or scapy.
"""

from collections import Counter, deque
from dataclasses import dataclass

from .layouts import NETH, PETH, NackReason, Opcode, SackVerdict
from .records import (CompletionStatus, EvEvent, Record, RetxCause, ext_to_int, int_to_ext)
from .rx_tracker import PSN_MODULUS, Sack, psn_add, psn_diff

__all__ = [
    "Source", "TRACE", "PsnState", "QpConfig", "Reliability", "COUNTERS", "STREAMS",
    "CLEAN_ANSWERS", "PROBE_ID_BITS", "K_BITS", "RETRY_BITS", "W_BITS", "DEFAULT_RING",
    "DEFAULT_PROBE_ENTRIES", "DEFAULT_WR_DEPTH", "DEFAULT_TIMER_BITS", "window_of",
    "timeout_ticks", "period_ticks",
]

CLEAN_ANSWERS = 3            # probe answers with m = NONE in a row that recover an EV
PROBE_ID_BITS = 16
K_BITS = 4                   # the timeout exponent register
RETRY_BITS = 4               # the retry_limit register
W_BITS = 16                  # the w_max and mpr registers
DEFAULT_RING = 64
DEFAULT_PROBE_ENTRIES = 8
DEFAULT_WR_DEPTH = 16
DEFAULT_TIMER_BITS = 10
_TICK_MODULUS = 1 << 32      # the tick count of the trace (the model's count does not wrap)

# Output streams, in the order of the RTL's ports.
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

    def __post_init__(self):
        for name, bits in (("w_max", W_BITS), ("mpr", W_BITS), ("timeout_exp", K_BITS),
                           ("retry_limit", RETRY_BITS), ("probe_period", 32)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << bits:
                raise ValueError(f"{name} must be an integer in 0..{(1 << bits) - 1}, "
                                 f"not {value!r}")


def window_of(cfg, ring):
    """The outstanding PSNs a QP may have: ``min(w_max, mpr, ring)``."""
    return min(cfg.w_max, cfg.mpr, ring)


def timeout_ticks(cfg, timer_bits):
    """``2^k`` ticks, ``k`` limited to ``timer_bits - 1``."""
    return 1 << min(cfg.timeout_exp, timer_bits - 1)


def period_ticks(cfg, timer_bits):
    """The probe period in ticks: the register value modulo ``2^timer_bits``, 0 meaning
    ``2^timer_bits``."""
    return cfg.probe_period % (1 << timer_bits) or 1 << timer_bits


@dataclass
class _Entry:
    """Metadata of one outstanding PSN."""
    ev: int
    req_id: int
    last: bool
    retries: int = 0
    state: int = PsnState.IN_FLIGHT
    acked: bool = False
    deadline: int = 0


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
    def __init__(self, start, cfg, window):
        self.cfg = cfg
        self.window = window
        self.cack = psn_add(start, -1)
        self.next_psn = start
        self.entries = {}          # psn -> _Entry, for every outstanding PSN
        self.wrs = deque()
        self.error = False

    def outstanding(self, psn):
        return psn_diff(psn, self.cack) > 0 and psn_diff(psn, self.next_psn) < 0

    def psns(self):
        """The outstanding PSNs in order."""
        return [psn_add(self.cack, i) for i in range(1, psn_diff(self.next_psn, self.cack))]


class Reliability:
    """The reliability block of ``n_qps`` QPs (QP q is local ``qpn`` q); see the module docstring.

    Inputs go through :meth:`send`, :meth:`feedback`, :meth:`marked`, :meth:`work_request` and
    :meth:`tick` (or :meth:`apply` with a trace record); configuration through :meth:`setup`.
    Output records (dicts of the records' fields) accumulate in :attr:`out`, one list per stream
    of :data:`STREAMS`; the caller takes them away. :attr:`counters` counts :data:`COUNTERS`.
    """

    def __init__(self, n_qps=4, ring=DEFAULT_RING, probe_entries=DEFAULT_PROBE_ENTRIES,
                 wr_depth=DEFAULT_WR_DEPTH, timer_bits=DEFAULT_TIMER_BITS, now=0):
        for name, value, low in (("n_qps", n_qps, 1), ("ring", ring, 1),
                                 ("probe_entries", probe_entries, 1), ("wr_depth", wr_depth, 1),
                                 ("timer_bits", timer_bits, 2)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an integer of at least {low}, not {value!r}")
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

    # --- configuration ----------------------------------------------------------------------------

    def setup(self, qpn, start, enable=True, cfg=QpConfig()):
        """Set QP ``qpn`` up from PSN ``start`` (or disable it): every state of the QP is cleared,
        its probe-list entries freed; an enabled QP announces its first PSN limit."""
        if not 0 <= qpn < self.n_qps:
            raise ValueError(f"QP {qpn} is not below {self.n_qps}")
        if not 0 <= start < PSN_MODULUS:
            raise ValueError(f"start PSN must be a 24-bit PSN, not {start!r}")
        self._free_probes(qpn)
        if not enable:
            self.qps[qpn] = None
            return
        qp = _Qp(start, cfg, window_of(cfg, self.ring))
        self.qps[qpn] = qp
        self._limit(qpn, qp)

    def qp(self, qpn):
        """The state of QP ``qpn`` (None when disabled)."""
        return self.qps[qpn]

    # --- helpers ----------------------------------------------------------------------------------

    def _emit(self, stream, **fields):
        self.out[stream].append(fields)

    def _active(self, qpn):
        """The QP's state when it is configured, enabled and not in error; else None."""
        qp = self.qps[qpn] if qpn < self.n_qps else None
        return qp if qp is not None and not qp.error else None

    def _limit(self, qpn, qp):
        self._emit("limit", qpn=qpn, psn_limit=psn_add(qp.cack, 1 + qp.window))

    def _retx(self, qpn, psn, entry, cause):
        self._emit("retx", qpn=qpn, psn=psn, avoid_ev=entry.ev, cause=cause)
        entry.state = PsnState.RETX_PENDING
        self.counters["retx"] += 1

    def _ev_event(self, qpn, ev, kind):
        self._emit("ev", qpn=qpn, ev=ev, kind=kind)

    def _complete(self, qpn, req_id, status):
        self._emit("cpl", qpn=qpn, req_id=req_id, msn=0, status=status, is_recv=0, has_imm=0,
                   imm=0)
        self._emit("retire", qpn=qpn, req_id=req_id)
        self.counters["completion"] += 1

    def _free_probes(self, qpn):
        self.probes = [p if p is None or p.qpn != qpn else None for p in self.probes]

    def _error(self, qpn, qp, status):
        qp.error = True
        self.counters["qp_error"] += 1
        while qp.wrs:
            self._complete(qpn, qp.wrs.popleft(), status)
        self._free_probes(qpn)
        self._emit("limit", qpn=qpn, psn_limit=qp.next_psn)

    # --- inputs -----------------------------------------------------------------------------------

    def send(self, rec):
        """One SEND_RECORD (a dict of its fields)."""
        qpn, psn = rec["qpn"], rec["psn"]
        qp = self._active(qpn)
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
            self._retx(qpn, psn, entry, RetxCause.FLUSHED)
        elif rec["rtx"]:
            entry = qp.entries.get(psn)
            if entry is None or entry.acked or entry.state != PsnState.RETX_PENDING:
                self.counters["send_stale"] += 1
                return
            self.counters["send_retx"] += 1
            entry.ev = rec["ev"]
            entry.state = PsnState.IN_FLIGHT
            entry.deadline = self.now + timeout_ticks(qp.cfg, self.timer_bits)
        else:
            if psn != qp.next_psn or psn_diff(psn, qp.cack) > qp.window:
                self.counters["send_bad"] += 1
                return
            self.counters["send"] += 1
            qp.entries[psn] = _Entry(ev=rec["ev"], req_id=rec["req_id"], last=bool(rec["last"]),
                                     deadline=self.now + timeout_ticks(qp.cfg, self.timer_bits))
            qp.next_psn = psn_add(psn, 1)

    def feedback(self, rec):
        """One FEEDBACK_RECORD: a SACK (SETH | CC_STATE in ``ext``) or a NACK (NETH)."""
        qpn, opcode = rec["qpn"], rec["opcode"]
        if opcode not in (Opcode.SACK, Opcode.NACK):
            self.counters["fb_bad"] += 1
            return
        qp = self._active(qpn)
        if qp is None:
            self.counters["fb_dropped"] += 1
            return
        if opcode == Opcode.SACK:
            self._sack(qpn, qp, Sack.from_ext(int_to_ext(rec["ext"], 36)))
        else:
            neth = NETH.unpack(int_to_ext(rec["ext"], NETH.size))
            self._nack(qpn, qp, neth["nack_reason"], neth["nack_psn"], neth["entropy"])

    def _sack(self, qpn, qp, sack):
        if psn_diff(sack.cack_psn, qp.next_psn) >= 0:
            self.counters["fb_bad"] += 1
            return
        self.counters["sack"] += 1
        if sack.m == SackVerdict.SKIP_ONCE:
            self._ev_event(qpn, sack.entropy, EvEvent.SKIP)
        bitmap = sack.bitmap_psns()
        for psn in qp.psns():
            if psn_diff(psn, sack.cack_psn) <= 0 or psn in bitmap or \
                    (not sack.pr and psn == sack.trigger_psn):
                qp.entries[psn].acked = True
        passed = []
        while psn_diff(qp.next_psn, qp.cack) > 1 and qp.entries[psn_add(qp.cack, 1)].acked:
            qp.cack = psn_add(qp.cack, 1)
            passed.append(qp.entries.pop(qp.cack))
        if passed:
            self._limit(qpn, qp)
            self._complete_passed(qpn, qp, passed)
            for psn in qp.psns():
                entry = qp.entries[psn]
                if not entry.acked and entry.state == PsnState.WAIT_CACK:
                    self._retx(qpn, psn, entry, RetxCause.CACK_MOVED)
        if sack.pr:
            self._probe_answer(qpn, sack)

    def _probe_answer(self, qpn, sack):
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
                    self._ev_event(qpn, p.ev, EvEvent.RECOVERED)
                    self.counters["recovered"] += 1
                    self.probes[i] = None
                return
        self.counters["probe_stale"] += 1

    def _nack(self, qpn, qp, reason, psn, ev):
        known = (NackReason.TRIMMED, NackReason.TRIMMED_LASTHOP, NackReason.NO_PKT_BUFFER,
                 NackReason.PSN_OOR_WINDOW, NackReason.UNEXP_EVENT)
        if reason not in known or psn_diff(psn, qp.next_psn) >= 0:
            self.counters["fb_bad"] += 1
            return
        self.counters["nack"] += 1
        if reason == NackReason.TRIMMED:
            self._ev_event(qpn, ev, EvEvent.SKIP)
        entry = qp.entries.get(psn)
        if entry is None or entry.acked:
            self.counters["fb_stale"] += 1
            return
        if reason == NackReason.UNEXP_EVENT:
            self._error(qpn, qp, CompletionStatus.QP_ERROR)
            return
        if entry.ev != ev or entry.state != PsnState.IN_FLIGHT:
            self.counters["fb_stale"] += 1
            return
        if reason in (NackReason.TRIMMED, NackReason.TRIMMED_LASTHOP):
            self._retx(qpn, psn, entry, RetxCause.NACK_TRIMMED)
        elif reason == NackReason.NO_PKT_BUFFER:
            entry.state = PsnState.WAIT_TIMER
            entry.deadline = self.now + period_ticks(qp.cfg, self.timer_bits)
        else:
            entry.state = PsnState.WAIT_CACK

    def marked(self, rec):
        """One EV_MARKED record: a marked EV joins the probe list."""
        qpn = rec["qpn"]
        qp = self._active(qpn)
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
            self._complete(qpn, req_id, CompletionStatus.QP_ERROR)
        else:
            qp.wrs.append(req_id)

    def tick(self):
        """One 1.024 us tick: probe timeouts, PSN timers, probes due (module docstring)."""
        self.now += 1
        now = self.now
        self._probe_timeouts(now)
        for qpn, qp in enumerate(self.qps):
            if qp is None or qp.error:
                continue
            for psn in qp.psns():
                if self._timer(qpn, qp, psn, qp.entries[psn], now):
                    break
        self._probes_due(now)

    def _complete_passed(self, qpn, qp, passed):
        """``cack_psn`` moved over the entries ``passed`` (in PSN order): each last packet of a
        work request completes it (OK) and pops it from the FIFO."""
        for entry in passed:
            if entry.last:
                if qp.wrs:
                    qp.wrs.popleft()
                else:
                    self.counters["wr_missing"] += 1
                self._complete(qpn, entry.req_id, CompletionStatus.OK)

    def _probe_timeouts(self, now):
        """Tick ``now``: a probe whose answer did not come in time restarts its count."""
        for p in self.probes:
            if p is not None and p.outstanding and p.timeout_at == now:
                p.outstanding = False
                p.count = 0

    def _timer(self, qpn, qp, psn, entry, now):
        """The timer of outstanding PSN ``psn`` at tick ``now`` (if it is due); returns True when
        the QP went into the error state (its other PSNs are then not visited)."""
        if entry.acked or entry.state == PsnState.RETX_PENDING or entry.deadline != now:
            return False
        if entry.state != PsnState.IN_FLIGHT:
            self._retx(qpn, psn, entry, RetxCause.NACK_OTHER)
            return False
        self.counters["timeout"] += 1
        if entry.retries >= qp.cfg.retry_limit:
            self._error(qpn, qp, CompletionStatus.RETRY_EXCEEDED)
            return True
        entry.retries += 1
        self._retx(qpn, psn, entry, RetxCause.TIMEOUT)
        self._ev_event(qpn, entry.ev, EvEvent.BAD)
        return False

    def _probes_due(self, now):
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
            self._emit("ctrl", qpn=p.qpn, opcode=Opcode.PROBE, ev=p.ev,
                       ext=ext_to_int(PETH.pack(probe_id=p.probe_id)))

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

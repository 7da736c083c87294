# SPDX-License-Identifier: BSD-2-Clause
"""Golden model of the NIC receive engine: the receive front, the receive tracker and direct
placement composed as in ``rtl/rx_engine.py`` (docs/protocol.md sections 1, 2, 5 and 8).

Data flow, one frame at a time:

1. :class:`models.rx_front.RxFrontModel` takes the frames ending on the plane ports and the merge
   order (both reported by the RTL's ``decision_trace``, docs/protocol.md 8), judges each frame in the
   order of docs/protocol.md section 5 and gives its ``RX_META`` record (data frames, trimmed ones too,
   and probes), its payload, a ``FEEDBACK_RECORD`` (received SACK or NACK) or a NACK
   NO_PKT_BUFFER control record (a data frame without buffer room).
2. Each ``RX_META`` becomes one event of the receive tracker (:func:`rx_event`), in the same
   order. :class:`Trackers` holds one :class:`models.rx_tracker.RxTracker` per QP set up, applies
   the 1.024 us ticks the RTL reports on each verdict (``RX_VERDICT.ticks``, docs/protocol.md 8) before the
   event, and gives the verdict, the SACK, NACK or probe answer and the Write-with-Immediate
   completions.
3. Each verdict becomes one :data:`models.records.PLACE_COMMAND` (:func:`place_command`): the
   frame's VA and payload length, ``place`` = the verdict's ``placed``;
   :class:`models.placement.PlacementModel` writes the payload or discards it.

The engine's control-record output merges the tracker's records and the front's NACK
NO_PKT_BUFFER records; the order between the two depends on timing, so the model keeps them
apart (:attr:`RxEngineModel.tracker_controls`, :attr:`RxEngineModel.front_controls`) and a bench
splits the output by source (a NACK NO_PKT_BUFFER comes only from the front).

Nothing here imports cocotb, Amaranth or scapy.
"""

from collections import deque

from .layouts import DATA_OPCODES, NETH, NackReason, Opcode
from .placement import PlacementModel
from .records import RxVerdict, int_to_ext
from .rx_front import RxFrontConfig, RxFrontModel
from .rx_tracker import (MPR_DEFAULT, WIMM_MAX_DEFAULT, Arrival, Probe, RxTracker, Verdict,
                         psn_add)

__all__ = ["RxEngineModel", "Trackers", "rx_event", "place_command", "is_front_control",
           "TRACKER_COUNTERS", "VERDICT_CODES"]

# Verdict names of models.rx_tracker -> RX_VERDICT codes.
VERDICT_CODES = {Verdict.PLACED: RxVerdict.PLACED, Verdict.DUPLICATE: RxVerdict.DUPLICATE,
                 Verdict.OUT_OF_WINDOW: RxVerdict.OUT_OF_WINDOW,
                 Verdict.TRIMMED: RxVerdict.TRIMMED, Verdict.ACCESS_ERROR: RxVerdict.ACCESS_ERROR,
                 Verdict.WIMM_OVERFLOW: RxVerdict.WIMM_OVERFLOW,
                 Verdict.QP_ERROR: RxVerdict.QP_ERROR, Verdict.PROBE: RxVerdict.PROBE}
# The tracker's counters (rtl/rx_tracker.py COUNTERS, without ``tick``).
TRACKER_COUNTERS = ("placed", "duplicate", "out_of_window", "trimmed", "access_error",
                    "wimm_overflow", "qp_error", "probe", "dropped", "sack", "nack", "completion")
_CODE_NAMES = {code: name.lower() for name, code in vars(RxVerdict).items() if name.isupper()}


def rx_event(meta):
    """The ``RX_EVENT`` fields of an ``RX_META`` record (fields of the same names)."""
    names = ("qpn", "opcode", "psn", "ev", "dscp", "ecn", "ackreq", "rtx", "msn", "imm",
             "payload_length", "access_ok", "probe_id")
    return {name: meta[name] for name in names}


def place_command(meta, placed):
    """The ``PLACE_COMMAND`` of a frame's ``RX_META`` record and its verdict's ``placed``."""
    return {"va": meta["va"], "length": meta["payload_length"], "place": int(placed)}


def is_front_control(record):
    """Whether a control record of the engine's output is the front's (NACK NO_PKT_BUFFER)."""
    if record["opcode"] != Opcode.NACK:
        return False
    neth = NETH.unpack(int_to_ext(record["ext"], NETH.size))
    return neth["nack_reason"] == NackReason.NO_PKT_BUFFER


class Trackers:
    """The receive tracker of ``n_qps`` QPs (``rtl/rx_tracker.py``): one model tracker per QP set
    up and enabled. Outputs accumulate in :attr:`controls` and :attr:`completions` (record
    dicts, in the order the RTL emits them); :attr:`counters` mirrors the RTL's. ``profile``
    selects the trackers' rules (:class:`models.rx_tracker.RxConfig`): 2 by default, 1 for the
    RTL of today (its bench passes 1)."""

    def __init__(self, n_qps, mpr=MPR_DEFAULT, wimm_max=WIMM_MAX_DEFAULT, profile=2):
        self.n_qps, self.mpr, self.wimm_max = n_qps, mpr, wimm_max
        self.profile = profile
        self.qps = [None] * n_qps
        self.controls, self.completions = [], []
        self.counters = dict.fromkeys(TRACKER_COUNTERS, 0)

    def setup(self, q, start_psn, enabled=True):
        """Set QP ``q`` up from PSN ``start_psn`` (every state cleared), enabled or not."""
        self.qps[q] = RxTracker(psn_add(start_psn, -1), self.mpr, self.wimm_max,
                                profile=self.profile) if enabled else None

    def tick(self):
        """One 1.024 us tick: every QP's coalescing timer, lowest QP first."""
        for q, tracker in enumerate(self.qps):
            if tracker is not None:
                result = tracker.tick()
                if result.sack is not None:
                    self._control(result.sack.control_record(q, result.path_ev))

    def _control(self, record):
        self.controls.append(record)
        self.counters["sack" if record["opcode"] == Opcode.SACK else "nack"] += 1

    def event(self, event):
        """Apply one ``RX_EVENT`` (a dict); returns its verdict code."""
        q, opcode = event["qpn"], event["opcode"]
        tracker = self.qps[q] if q < self.n_qps else None
        if tracker is None or opcode not in DATA_OPCODES + (Opcode.PROBE,):
            code = RxVerdict.DROPPED
            result = None
        elif opcode == Opcode.PROBE:
            result = tracker.probe(Probe(ev=event["ev"], probe_id=event["probe_id"],
                                         ecn=event["ecn"], dscp=event["dscp"]))
        else:
            result = tracker.arrive(Arrival(
                psn=event["psn"], ev=event["ev"], ecn=event["ecn"], dscp=event["dscp"],
                ackreq=event["ackreq"], rtx=event["rtx"], opcode=opcode, msn=event["msn"],
                imm=event["imm"], payload_length=event["payload_length"],
                access_ok=bool(event["access_ok"])))
        if result is not None:
            code = VERDICT_CODES[result.verdict]
            if result.sack is not None:
                self._control(result.sack.control_record(q, result.path_ev))
            if result.nack is not None:
                self._control(result.nack.control_record(q))
            for completion in result.completions:
                self.completions.append(completion.record(q))
                self.counters["completion"] += 1
        self.counters[_CODE_NAMES[code]] += 1
        return code


class RxEngineModel:
    """The receive engine (see the module docstring). ``front`` takes a
    :class:`models.rx_front.RxFrontConfig` (or its parameters as keywords: ``n_planes``,
    ``data_width``, ``n_qps``, ``n_regions``); ``mpr`` and ``wimm_max`` are the tracker's;
    ``addr_width`` the AXI address width. Outputs: :attr:`verdicts` (``RX_VERDICT`` dicts),
    :attr:`tracker_controls`, :attr:`front_controls`, :attr:`completions`, :attr:`feedbacks`,
    the AXI bursts and beats (:attr:`bursts`, :attr:`beats`) and the memory written
    (:attr:`memory`, address -> byte)."""

    def __init__(self, front=None, *, mpr=MPR_DEFAULT, wimm_max=WIMM_MAX_DEFAULT, addr_width=64,
                 profile=2, **front_params):
        config = front if front is not None else RxFrontConfig(**front_params)
        self.front = RxFrontModel(config)
        self.trackers = Trackers(config.n_qps, mpr, wimm_max, profile)
        self.placement = PlacementModel(config.core_width, addr_width)
        self.pending = deque()          # (meta, payload) of frames waiting for their verdict
        self.verdicts = []
        self.commands = []              # (PLACE_COMMAND dict, payload)
        self.bursts, self.beats = [], []    # the AXI writes (models.placement Burst, Beat)

    # --- configuration -------------------------------------------------------------------------

    def setup_qp(self, q, start_psn, enabled=True):
        """The receive tracker's set-up of QP ``q`` (the front's QP enable mask is set apart,
        with ``front.set_qp_enable``)."""
        self.trackers.setup(q, start_psn, enabled)

    # --- inputs, in the order the RTL reports them -----------------------------------------------

    def arrive(self, plane, frame, bad=False, outcome=0, free=None):
        """A frame ended on ``plane`` (:meth:`models.rx_front.RxFrontModel.arrive`)."""
        return self.front.arrive(plane, frame, bad=bad, outcome=outcome, free=free)

    def merge(self, plane):
        """The merge took the oldest frame of ``plane``: the front judges it; a frame with an
        ``RX_META`` record waits for its verdict. Returns the front's Judgement."""
        judgement = self.front.merge(plane)
        if judgement.meta is not None:
            self.pending.append((judgement.meta, judgement.payload))
        return judgement

    def decide(self, ticks=0):
        """The tracker's verdict on the oldest waiting frame, after ``ticks`` ticks (as its
        ``RX_VERDICT`` reports them); the frame is then placed or discarded. Returns the
        ``RX_VERDICT`` fields."""
        if not self.pending:
            raise ValueError("a verdict came with no frame waiting for one")
        for _ in range(ticks):
            self.trackers.tick()
        meta, payload = self.pending.popleft()
        code = self.trackers.event(rx_event(meta))
        placed = code == RxVerdict.PLACED
        verdict = {"qpn": meta["qpn"], "psn": meta["psn"], "verdict": code,
                   "placed": int(placed), "ticks": ticks}
        self.verdicts.append(verdict)
        command = place_command(meta, placed)
        self.commands.append((command, payload))
        writes = self.placement.push(command, payload)
        self.bursts += writes.bursts
        self.beats += writes.beats
        return verdict

    def tick(self):
        """A tick after the last verdict (timer SACKs at the end of a run)."""
        self.trackers.tick()

    # --- outputs -------------------------------------------------------------------------------

    @property
    def tracker_controls(self):
        return self.trackers.controls

    @property
    def front_controls(self):
        return self.front.controls

    @property
    def completions(self):
        return self.trackers.completions

    @property
    def feedbacks(self):
        return self.front.feedbacks

    @property
    def memory(self):
        return self.placement.memory

    def idle(self):
        """Every frame judged and decided."""
        return self.front.empty() and not self.pending

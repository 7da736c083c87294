# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""cocotb bench of rtl.rx_tracker.RxTracker against models.rx_tracker (one model tracker per QP).

``rx_vectors`` (builds with MPR 1024) replays every case of ``vectors/sack.json`` on QP 0: for
each arrival the verdict (placed or not), whether a SACK went out at once, every field of that
SACK, the NACK PSN_OOR_WINDOW of an arrival beyond the window, and cack_psn read back afterwards.

``rx_random`` sets every QP up through the configuration port (start PSNs anywhere and just below
the 24-bit wrap), then runs phases of seeded random events on all QPs at once, with random ticks
and, in two phases of three, random idle on the event source and random backpressure on the three
sinks (the third runs back to back, sinks ready): messages of 1 to 4 packets (Write and Write with
Immediate, payloads 0..PMTU) sent mostly in order, with holes left and filled later, held-back
first PSNs (so that Write-with-Immediate completions wait, beyond ``wimm_max``), duplicates (just
behind cack_psn, in the bitmap, more than 32768 PSNs behind), PSNs beyond the window (at its edge
and far), CE marks, trimmed kinds, RTX, access errors, probes (CE-marked and trimmed too), and bad
events (QP unknown or disabled, opcodes that are neither data nor PROBE); one phase in three is
calm (few CE marks, RTX, AckReq and reorders: SACKs of the every-4th rule and of the timer). The
first phase starts with QP 0's whole window filled out of order (cack_psn jumps by MPR) and, for
MPR up to 256, two laps of the bitmap ring in order. The model is fed the same events with the
ticks each verdict reports, and those ticks are judged from the cycles of the tick pulses and
the handshakes (:func:`tick_bounds`: never more than came since the previous event, never
fewer than were pending before this one). Every verdict is compared, and at each phase end (events drained,
three ticks, tracker idle) every SACK, NACK and completion record in order and every QP's state
read back; then some QPs are set up again (those in the error state among them) or disabled. At
the end every counter is read back and compared, and the run must have met every verdict, timer
SACKs, every-4th SACKs, cack_psn jumps (one of MPR), completion bursts and, for MPR up to 256, two
laps of one QP. Every sink must be empty at the end.

``rx_ticks`` checks the timer against the profile itself rather than against the ticks the
verdicts report: a SACK at the second tick after an uncovered packet, two ticks in consecutive
cycles, and ticks that come while a stalled sink holds the tracker (none may be lost).

``perf`` measures cycles per event back to back (no idle, sinks ready) and the latency from an
arrival's handshake to its SACK, for in-order arrivals, arrivals that each ask for a SACK and
Write-with-Immediate messages of one packet; it writes them with ``write_perf``.
"""

import pytest

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge

from models.layouts import DATA_OPCODES, Dscp, Ecn, IMM_OPCODES, NackReason, Opcode
from models.records import (COMPLETION, CONTROL_RECORD, RX_EVENT, RX_VERDICT, RxVerdict,
                            int_to_ext)
from models.rx_tracker import (PSN_MODULUS, Arrival, Probe, RxTrackerV1 as ModelTracker, Sack,
                               Verdict, psn_add, psn_diff)
from models import conformance as vectors
from rtl.rx_tracker import (ADDR_COUNTERS, ADDR_INFO, ADDR_STATUS, COUNTERS, CYCLES_PER_EVENT,
                            LATENCY, OFF_CACK, OFF_LAST_EV, OFF_LAST_PSN, OFF_OOO, OFF_PLACED,
                            OFF_STATE, SETUP_ENABLE, RxTracker, qp_addr)
from verif.runner import SIMULATORS, run_bench

# Builds of the default run: (n_qps, mpr, wimm_max). MPR 1024 builds also replay the vectors.
CONFIGS = {"q4m128w4": (4, 128, 4), "q2m1024w16": (2, 1024, 16)}
FULL_CONFIGS = {"q4m1024w16": (4, 1024, 16), "q8m256w1": (8, 256, 1),
                "q1m4096w64": (1, 4096, 64)}
PHASES = 11
EVENTS_PER_PHASE = 200        # 2200 events a run
FULL_PHASES = 40
PMTU = 4096
TICK_PROBABILITY = 1 / 12     # per cycle, so that timers fire between events
PERF_EVENTS = 200
PERF_CONFIG = (2, 128, 4)
DRAIN_CYCLES = 20_000

VERDICT_CODES = {Verdict.PLACED: RxVerdict.PLACED, Verdict.DUPLICATE: RxVerdict.DUPLICATE,
                 Verdict.OUT_OF_WINDOW: RxVerdict.OUT_OF_WINDOW,
                 Verdict.TRIMMED: RxVerdict.TRIMMED, Verdict.ACCESS_ERROR: RxVerdict.ACCESS_ERROR,
                 Verdict.WIMM_OVERFLOW: RxVerdict.WIMM_OVERFLOW,
                 Verdict.QP_ERROR: RxVerdict.QP_ERROR, Verdict.PROBE: RxVerdict.PROBE}
VERDICT_NAMES = {code: name for name, code in vars(RxVerdict).items() if name.isupper()}
BAD_OPCODES = (Opcode.SACK, Opcode.NACK, 0x00, 0x04, 0xC5, 0xCC, 0xFF)


# --- The model side -------------------------------------------------------------------------------

def model_step(tracker, event):
    """``(verdict code, control records, completion records)`` of one RX_EVENT dict applied to
    ``tracker`` (a model tracker, or None for a QP that is unknown or disabled)."""
    q, opcode = event["qpn"], event["opcode"]
    if tracker is None or opcode not in DATA_OPCODES + (Opcode.PROBE,):
        return RxVerdict.DROPPED, [], []
    if opcode == Opcode.PROBE:
        res = tracker.probe(Probe(ev=event["ev"], probe_id=event["probe_id"], ecn=event["ecn"],
                                  dscp=event["dscp"]))
    else:
        res = tracker.arrive(Arrival(
            psn=event["psn"], ev=event["ev"], ecn=event["ecn"], dscp=event["dscp"],
            ackreq=event["ackreq"], rtx=event["rtx"], opcode=opcode, msn=event["msn"],
            imm=event["imm"], payload_length=event["payload_length"],
            access_ok=bool(event["access_ok"])))
    ctrl = [x.control_record(q) for x in (res.sack, res.nack) if x is not None]
    return VERDICT_CODES[res.verdict], ctrl, [c.record(q) for c in res.completions]


def tick_bounds(handshakes, takes, pulses):
    """The ticks each verdict may report, from the cycles alone (test-audit #11: the ``ticks``
    field was compared with itself). ``handshakes[i]`` and ``takes[i]`` are the cycles event i
    was taken on ``s_ev`` and its verdict on ``m_verdict``, ``pulses`` the cycles ``tick`` was
    high, all sampled at the same clock edges. From the block's documented tick rule (RxTracker:
    a tick is held pending, at most 2, and applied in stage 2 ahead of the next event; the
    verdict reports the ticks applied since the previous verdict, saturated at 3):

    - at most the pulses after the previous event's handshake and before this verdict was taken
      (a tick is never applied before it came, nor counted twice);
    - at least the pulses after the previous verdict was taken and up to this event's handshake
      (they were pending before the event reached stage 2, which waits for none pending), at
      most 2 of them (the pending count saturates).

    Returns ``[(low, high), ...]`` per verdict."""
    from bisect import bisect_left, bisect_right

    def between(first, last):            # pulses in cycles first..last
        return max(0, bisect_right(pulses, last) - bisect_left(pulses, first))

    bounds = []
    for i, (h, v) in enumerate(zip(handshakes, takes)):
        h_prev = handshakes[i - 1] if i else -1
        v_prev = takes[i - 1] if i else -1
        high = min(3, between(h_prev + 1, v - 1))
        low = min(2, between(v_prev, h))
        bounds.append((low, high))
    return bounds


def test_tick_bounds_catch_a_late_or_invented_tick():
    # Event 0 taken at 10, its verdict at 14; event 1 at 20, verdict at 24; event 2 at 21,
    # verdict at 30. Pulses at 5 (before event 0), 16 and 18 (between verdict 0 and event 1).
    bounds = tick_bounds([10, 20, 21], [14, 24, 30], [5, 16, 18])
    assert bounds == [(1, 1), (2, 2), (0, 0)]
    reported = [1, 2, 0]
    assert all(lo <= r <= hi for r, (lo, hi) in zip(reported, bounds))
    late = [0, 1, 2]                     # each tick reported one verdict late
    assert not all(lo <= r <= hi for r, (lo, hi) in zip(late, bounds))
    invented = [1, 3, 0]
    assert not all(lo <= r <= hi for r, (lo, hi) in zip(invented, bounds))


class Checker:
    """The model of the whole tracker: one model tracker per enabled QP, fed the events in order
    and, before each, the ticks its verdict reports; it keeps the control records, completions
    and counts the tracker must produce."""

    def __init__(self, n_qps, mpr, wimm_max):
        self.n_qps, self.mpr, self.wimm_max = n_qps, mpr, wimm_max
        self.trackers = [None] * n_qps
        self.ctrl = []
        self.cpl = []
        self.counts = dict.fromkeys(COUNTERS, 0)
        self.timer_sacks = 0
        self.jumps = 0
        self.longest_jump = 0
        self.fourths = 0                 # SACKs of the every-4th rule
        self.progress = [0] * n_qps      # PSNs cack_psn moved since the QP's set-up
        self.most_progress = 0
        self.bursts = 0
        self.tick_floors = 0             # verdicts whose ticks had a lower bound above 0

    def setup(self, q, start, enabled):
        self.progress[q] = 0
        self.trackers[q] = ModelTracker(psn_add(start, -1), self.mpr, self.wimm_max) \
            if enabled else None

    def tick(self):
        for q, tracker in enumerate(self.trackers):
            if tracker is not None:
                res = tracker.tick()
                if res.sack is not None:
                    self.ctrl.append(res.sack.control_record(q))
                    self.counts["sack"] += 1
                    self.timer_sacks += 1

    def event(self, event, verdict_word, tick_range=None):
        """Apply one event; compare the tracker's verdict record with the model's, and its
        ``ticks`` with ``tick_range`` (low, high) from :func:`tick_bounds`."""
        got = RX_VERDICT.unpack(verdict_word)
        if tick_range is not None:
            low, high = tick_range
            assert low <= got["ticks"] <= high, \
                f"verdict {got} for {event}: {got['ticks']} ticks reported, the tick pulses " \
                f"and handshakes allow {low}..{high}"
        for _ in range(got["ticks"]):
            self.tick()
        q = event["qpn"]
        tracker = self.trackers[q] if q < self.n_qps else None
        cack_before = tracker.cack_psn if tracker is not None else None
        code, ctrl, cpl = model_step(tracker, event)
        want = {"qpn": q, "psn": event["psn"], "verdict": code,
                "placed": int(code == RxVerdict.PLACED), "ticks": got["ticks"]}
        assert got == want, f"verdict {got} for {event}: model {want} " \
            f"({VERDICT_NAMES[code]}, got {VERDICT_NAMES.get(got['verdict'], '?')})"
        if code == RxVerdict.PLACED:
            moved = psn_diff(tracker.cack_psn, cack_before)
            self.progress[q] += moved
            self.most_progress = max(self.most_progress, self.progress[q])
            if moved > 1:
                self.jumps += 1
                self.longest_jump = max(self.longest_jump, moved)
            elif ctrl and moved == 1 and event["ecn"] != Ecn.CE and not event["rtx"] and \
                    not event["ackreq"]:
                self.fourths += 1
        if len(cpl) > 1:
            self.bursts += 1
        self.ctrl += ctrl
        self.cpl += cpl
        self.counts[VERDICT_NAMES[code].lower()] += 1
        for record in ctrl:
            self.counts["sack" if record["opcode"] == Opcode.SACK else "nack"] += 1
        self.counts["completion"] += len(cpl)

    def state_words(self, q):
        """The words of QP ``q``'s configuration page the model predicts."""
        tracker = self.trackers[q]
        if tracker is None:
            return None
        s = tracker.state
        state = (s.since_sack | s.uncovered << 2 | s.ticks << 3 | s.error << 4 | 1 << 5 |
                 s.last_ce << 6 | len(s.wimm_waiting) << 8)
        return {OFF_CACK: s.cack_psn | SETUP_ENABLE, OFF_STATE: state, OFF_OOO: s.ooo_count,
                OFF_PLACED: s.placed_bytes, OFF_LAST_PSN: s.last_psn, OFF_LAST_EV: s.last_ev}


def describe(record):
    """A control record with its SACK or NACK fields decoded (for failure messages)."""
    if record.get("opcode") == Opcode.SACK:
        return dict(record, ext=Sack.from_ext(int_to_ext(record["ext"], 36)))
    if record.get("opcode") == Opcode.NACK:
        return dict(record, ext=int_to_ext(record["ext"], 20).hex())
    return record


def compare_records(kind, record, got_words, want):
    """The packed words ``got_words`` are the records ``want``, in order."""
    got = [record.unpack(w) for w in got_words]
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"{kind} record {i}: got {describe(g)}, model {describe(w)}"
    assert len(got) == len(want), f"{kind}: {len(got)} records, model {len(want)}"


# --- Traffic --------------------------------------------------------------------------------------

class Sender:
    """The packets of one QP from its start PSN (messages of 1 to 4 packets, Write and Write with
    Immediate) and the choice of which to send next; a model tracker of its own (no ticks: they
    change neither cack_psn nor the bitmap) tells what the receiver holds."""

    def __init__(self, rng, start, mpr, wimm_max):
        self.rng = rng
        self.mpr = mpr
        self.wimm_max = wimm_max
        self.view = ModelTracker(psn_add(start, -1), mpr, wimm_max)
        self.packets = {}
        self.unassigned = start          # the first PSN without a message yet
        self.frontier = start            # the next PSN to send in sequence
        self.msn = rng.randrange(1 << 16)
        self.hold = 0                    # events left with cack_psn + 1 held back

    def _new_message(self):
        rng = self.rng
        self.msn = (self.msn + 1) & 0xFFFF
        imm = rng.randrange(1 << 32)
        if rng.random() < 0.45:
            kinds = [rng.choice((Opcode.WRITE_ONLY_IMM, Opcode.WRITE_ONLY_IMM, Opcode.WRITE_ONLY))]
        else:
            n = rng.randint(2, 4)
            last = Opcode.WRITE_LAST_IMM if rng.random() < 0.4 else Opcode.WRITE_LAST
            kinds = [Opcode.WRITE_FIRST] + [Opcode.WRITE_MIDDLE] * (n - 2) + [last]
        for i, opcode in enumerate(kinds):
            length = rng.choice((0, 1, 2, 3, PMTU, PMTU - 1, rng.randint(0, PMTU)))
            self.packets[self.unassigned] = dict(
                opcode=opcode, msn=self.msn, imm=imm if opcode in IMM_OPCODES else 0,
                payload_length=length, ackreq=int(i == len(kinds) - 1))
            self.unassigned = psn_add(self.unassigned, 1)

    def packet(self, psn):
        """The fields of ``psn``'s packet (messages are made up to it as needed)."""
        while psn_diff(psn, self.unassigned) >= 0:
            self._new_message()
        return dict(self.packets[psn])

    def random_packet(self):
        """Fields for a PSN outside the message table (beyond the window or long gone)."""
        rng = self.rng
        return dict(opcode=rng.choice(DATA_OPCODES), msn=rng.randrange(1 << 16),
                    imm=rng.randrange(1 << 32), payload_length=rng.randint(0, PMTU),
                    ackreq=rng.randrange(2))

    def choose(self, calm):
        """``(psn, fields)`` of the next data packet; mostly in order when ``calm``."""
        rng, view, mpr = self.rng, self.view, self.mpr
        cack = view.cack_psn
        if psn_diff(self.frontier, cack) <= 0:
            self.frontier = psn_add(cack, 1)
        if self.hold:
            self.hold -= 1
        elif rng.random() < (0.002 if calm else 0.015):
            self.hold = rng.randint(2, 4 * self.wimm_max + 4)
        roll = rng.random() * (4 if calm else 1)
        if roll < 0.06:                                     # beyond the window
            far = rng.random() < 0.2
            psn = psn_add(cack, rng.randint(mpr + 1, (1 << 23) - 1) if far
                          else mpr + rng.choice((1, 1, 2, rng.randint(1, 300))))
            return psn, self.random_packet()
        if roll < 0.14:                                     # a duplicate
            held = [p for p in (psn_add(cack, i) for i in range(1, mpr + 1))
                    if view.received(p)] if rng.random() < 0.5 else []
            if held:
                psn = rng.choice(held)
                return psn, self.packet(psn)
            if rng.random() < 0.1:
                back = rng.choice((32767, 32768, 32769, rng.randint(32770, (1 << 23) - 1)))
                return psn_add(cack, -back), self.random_packet()
            return psn_add(cack, -rng.randint(0, 20)), self.random_packet()
        if roll < 0.16 and not view.received(psn_add(cack, mpr)):   # the window's edge
            psn = psn_add(cack, mpr)
            return psn, self.packet(psn)
        ahead = psn_diff(self.frontier, cack)
        holes = [p for p in (psn_add(cack, i) for i in range(1 + bool(self.hold), ahead))
                 if not view.received(p)]
        if roll < 0.36 and holes or ahead > mpr:
            psn = holes[0] if holes and rng.random() < 0.5 else \
                rng.choice(holes) if holes else psn_add(cack, 1)
            return psn, self.packet(psn)
        if rng.random() < (0.01 if calm else 0.1):        # leave a hole
            self.frontier = psn_add(self.frontier, rng.randint(1, 4))
            if psn_diff(self.frontier, cack) > mpr:
                self.frontier = psn_add(cack, mpr)
        psn = self.frontier
        self.frontier = psn_add(psn, 1)
        return psn, self.packet(psn)


class Traffic:
    """Seeded random events for all QPs of one build."""

    def __init__(self, rng, n_qps, mpr, wimm_max):
        self.rng = rng
        self.n_qps, self.mpr, self.wimm_max = n_qps, mpr, wimm_max
        self.senders = [None] * n_qps
        self.calm = False        # few CE marks, RTX, AckReq and reorders

    def start_psn(self):
        rng = self.rng
        return rng.choice((rng.randrange(PSN_MODULUS), PSN_MODULUS - rng.randint(1, 300),
                           rng.randint(0, 3)))

    def setup(self, q, start, enabled):
        self.senders[q] = Sender(self.rng, start, self.mpr, self.wimm_max) if enabled else None

    def _clean(self, q, psn, **fields):
        """A clean data packet of QP ``q`` (no trim, CE, RTX or access error; its message's
        fields, immediate removed so that nothing completes), applied to the sender's view."""
        sender = self.senders[q]
        plain = {Opcode.WRITE_LAST_IMM: Opcode.WRITE_LAST, Opcode.WRITE_ONLY_IMM: Opcode.WRITE_ONLY}
        event = dict(qpn=q, psn=psn, ev=self.rng.randrange(1 << 32), ecn=Ecn.ECT0,
                     dscp=Dscp.TRIMMABLE, rtx=0, access_ok=1, probe_id=0,
                     **dict(sender.packet(psn), **fields))
        event["opcode"] = plain.get(event["opcode"], event["opcode"])
        model_step(sender.view, event)
        return event

    def window_fill(self, q):
        """Events that fill QP ``q``'s whole window out of order, cack_psn + 1 last: cack_psn
        then jumps by MPR."""
        cack = self.senders[q].view.cack_psn
        psns = [psn_add(cack, i) for i in range(2, self.mpr + 1)]
        self.rng.shuffle(psns)
        batch = [self._clean(q, psn) for psn in psns + [psn_add(cack, 1)]]
        assert self.senders[q].view.cack_psn == psn_add(cack, self.mpr)
        return batch

    def lap(self, q, count):
        """``count`` clean in-order packets of QP ``q``, the last of a message one in 16: SACKs
        by the every-4th rule and the timer, and cack_psn around the bitmap ring."""
        cack = self.senders[q].view.cack_psn
        return [self._clean(q, psn_add(cack, i), opcode=Opcode.WRITE_MIDDLE,
                            ackreq=int(i % 16 == 0))
                for i in range(1, count + 1)]

    def _flags(self):
        rng = self.rng
        rare = 0.15 if self.calm else 1
        ecn = Ecn.CE if rng.random() < 0.15 * rare else \
            rng.choice((Ecn.ECT0, Ecn.ECT0, Ecn.NOT_ECT))
        dscp = rng.choice((Dscp.TRIMMABLE, Dscp.TRIMMABLE_RETX, Dscp.NO_TRIM))
        if rng.random() < 0.06 * rare:
            dscp = rng.choice((Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP))
        return dict(ecn=ecn, dscp=dscp)

    def event(self):
        """One RX_EVENT dict (fields a stage ignores hold garbage)."""
        rng = self.rng
        garbage = {name: rng.randrange(1 << width) for name, width in RX_EVENT.fields}
        live = [q for q, s in enumerate(self.senders) if s is not None]
        # QPs in the error state drop everything: they get a few events only.
        weights = [0.05 if self.senders[q].view.state.error else 1 for q in live]
        roll = rng.random()
        if roll < 0.03 or not live:
            bad = rng.random()
            if bad < 0.4:
                garbage["qpn"] = rng.randrange(self.n_qps, 1 << 24)
            elif bad < 0.7 and len(live) < self.n_qps:
                garbage["qpn"] = rng.choice([q for q in range(self.n_qps) if q not in live])
            else:
                garbage["qpn"] = rng.randrange(self.n_qps)
                garbage["opcode"] = rng.choice(BAD_OPCODES)
            if garbage["opcode"] not in BAD_OPCODES and rng.random() < 0.5:
                garbage["opcode"] = rng.choice(DATA_OPCODES + (Opcode.PROBE,))
            return garbage
        q = rng.choices(live, weights)[0]
        sender = self.senders[q]
        if roll < 0.08:
            event = dict(garbage, qpn=q, opcode=Opcode.PROBE, **self._flags())
        else:
            psn, fields = sender.choose(self.calm)
            if self.calm:                                   # long runs without AckReq
                fields["ackreq"] = int(rng.random() < 1 / 16)
            rare = 0.15 if self.calm else 1
            event = dict(garbage, qpn=q, psn=psn, ev=rng.randrange(1 << 32), **fields,
                         **self._flags(), rtx=int(rng.random() < 0.1 * rare),
                         access_ok=int(rng.random() > 0.03 * rare))
        model_step(sender.view, event)
        return event


# --- cocotb helpers -------------------------------------------------------------------------------

async def build(cfg):
    """``(n_qps, mpr, wimm_max)`` of the build, from its info word (which must agree with the
    parameters the pytest side passes, when it passes them)."""
    from verif.bench import params

    info = await cfg.read(ADDR_INFO)
    got = (info & 0xFF, (info >> 8 & 0xFF) * 128, info >> 16 & 0xFF)
    p = params()
    if "n_qps" in p:
        assert got == (p["n_qps"], p["mpr"], p["wimm_max"]), (info, p)
    return got


async def wait_idle(cfg, limit=DRAIN_CYCLES):
    """Until the tracker reports idle (nothing inside, no output waiting) twice in a row."""
    for _ in range(limit):
        if not await cfg.read(ADDR_STATUS) and not await cfg.read(ADDR_STATUS):
            return
    raise AssertionError("the tracker did not go idle")


async def wait_count(dut, sink, count, limit=DRAIN_CYCLES * 10):
    for _ in range(limit):
        if len(sink.queue) >= count:
            return
        await RisingEdge(dut.clk)
    raise AssertionError(f"{len(sink.queue)} records of {count} after {limit} cycles")


async def setup_qp(cfg, q, start, enabled=True):
    await cfg.write(qp_addr(q, OFF_CACK), start | (SETUP_ENABLE if enabled else 0))


# --- Vectors --------------------------------------------------------------------------------------

@cocotb.test()
async def rx_vectors(dut):
    from verif.bench import ConfigDriver, RecordSink, RecordSource, start

    cases = vectors.load("sack.json")
    cfg = ConfigDriver(dut)
    dut.tick.value = 0
    events = RecordSource(dut, "s_ev")
    verdicts, ctrl, cpl = (RecordSink(dut, p) for p in ("m_verdict", "m_ctrl", "m_cpl"))
    await start(dut)
    _, mpr, _ = await build(cfg)
    checked = 0
    for n, case in enumerate(cases):
        assert case["mpr"] == mpr
        await setup_qp(cfg, 0, psn_add(case["cack_start"], 1))
        for i, a in enumerate(case["arrivals"]):
            where = f"case {n} arrival {i} ({a['psn']})"
            events.send(RX_EVENT.pack(qpn=0, opcode=Opcode.WRITE_MIDDLE, psn=a["psn"],
                                      ev=a["ev"], dscp=Dscp.TRIMMABLE,
                                      ecn=Ecn.CE if a["ce"] else Ecn.ECT0, ackreq=int(a["last"]),
                                      access_ok=1))
            await wait_count(dut, verdicts, 1)
            await wait_idle(cfg)
            verdict = RX_VERDICT.unpack(verdicts.queue.popleft())
            assert verdict["placed"] == int(a["placed"]), where
            records = [CONTROL_RECORD.unpack(w) for w in ctrl.queue]
            ctrl.queue.clear()
            assert len(records) == int(a["sack_now"] or not a["placed"]), where
            if a["sack_now"]:
                record = records[0]
                assert (record["qpn"], record["opcode"], record["ev"]) == (0, Opcode.SACK, a["ev"])
                s = Sack.from_ext(int_to_ext(record["ext"], 36))
                got = {"cack_psn": s.cack_psn, "ack_psn_offset": s.ack_psn_offset,
                       "sack_offset": s.sack_offset, "sack_bitmap": f"{s.sack_bitmap:016x}",
                       "mpr": s.mpr, "m": s.m, "entropy": s.entropy}
                assert got == a["sack"], f"{where}: {got}"
                assert (s.pr, s.probe_id, s.trigger_psn) == (0, 0, a["psn"]), where
            elif not a["placed"]:
                record = records[0]
                assert record["opcode"] == Opcode.NACK, where
                assert int_to_ext(record["ext"], 3)[2] == NackReason.PSN_OOR_WINDOW, where
            assert await cfg.read(qp_addr(0, OFF_CACK)) & 0xFFFFFF == a["cack_after"], where
            checked += 1
    assert events.empty() and verdicts.empty() and ctrl.empty() and cpl.empty()
    dut._log.info("vectors: %d arrivals of %d cases checked", checked, len(cases))


# --- The coalescing timer -------------------------------------------------------------------------

@cocotb.test()
async def rx_ticks(dut):
    """The timer against the profile itself (not against the ticks the verdicts report): a packet
    that no SACK covers is SACKed at the second tick after it, two ticks in consecutive cycles
    both count, and ticks that come while a sink stalls the tracker are not lost."""
    from verif.bench import ConfigDriver, RecordSink, RecordSource, start

    cfg = ConfigDriver(dut)
    dut.tick.value = 0
    stall = [False]

    def stalled():
        while True:
            yield stall[0]

    events = RecordSource(dut, "s_ev")
    verdicts, cpl = RecordSink(dut, "m_verdict"), RecordSink(dut, "m_cpl")
    ctrl = RecordSink(dut, "m_ctrl", pause=stalled())
    await start(dut)
    _, mpr, _ = await build(cfg)
    await setup_qp(cfg, 0, 100)
    await setup_qp(cfg, 1, 5000)

    async def pulses(count, gap):
        for _ in range(count):
            dut.tick.value = 1
            await RisingEdge(dut.clk)
            dut.tick.value = 0
            await ClockCycles(dut.clk, gap)

    def arrival(q, psn):
        return RX_EVENT.pack(qpn=q, opcode=Opcode.WRITE_MIDDLE, psn=psn, ev=psn, access_ok=1,
                             ecn=Ecn.ECT0, dscp=Dscp.TRIMMABLE)

    def sacks():
        out = [CONTROL_RECORD.unpack(w) for w in ctrl.queue]
        ctrl.queue.clear()
        return [(r["qpn"], r["opcode"], Sack.from_ext(int_to_ext(r["ext"], 36)).trigger_psn
                 if r["opcode"] == Opcode.SACK else None) for r in out]

    async def settle():
        await wait_idle(cfg)
        return sacks()

    events.send(arrival(0, 100))
    assert await settle() == []
    await pulses(1, 3)
    assert await settle() == [], "a SACK after one tick"
    await pulses(1, 3)
    assert await settle() == [(0, Opcode.SACK, 100)], "no SACK at the second tick"
    events.send(arrival(0, 101))
    assert await settle() == []
    await pulses(2, 0)                                      # consecutive cycles
    assert await settle() == [(0, Opcode.SACK, 101)], "two ticks in a row"
    # The control sink stalls: a NACK of QP 1 fills the control register, a second one holds
    # the output stage, so stage 2 cannot apply the three ticks that come meanwhile.
    stall[0] = True
    await ClockCycles(dut.clk, 2)
    events.send(arrival(0, 102))
    events.send(arrival(1, 5000 + mpr + 5))
    events.send(arrival(1, 5000 + mpr + 6))
    await wait_count(dut, verdicts, 4)
    await ClockCycles(dut.clk, 10)
    assert len(verdicts.queue) == 4 and not ctrl.queue
    await pulses(3, 5)
    await ClockCycles(dut.clk, 10)
    stall[0] = False
    assert await settle() == [(1, Opcode.NACK, None), (1, Opcode.NACK, None),
                              (0, Opcode.SACK, 102)], "ticks lost while the tracker was stalled"
    events.send(arrival(0, 103))
    await wait_count(dut, verdicts, 6)
    assert RX_VERDICT.unpack(verdicts.queue[-1])["ticks"] == 2
    await wait_idle(cfg)
    verdicts.queue.clear()
    assert events.empty() and verdicts.empty() and ctrl.empty() and cpl.empty()


# --- Random traffic -------------------------------------------------------------------------------

@cocotb.test()
async def rx_random(dut):
    from verif.bench import (ConfigDriver, RecordSink, RecordSource, make_rng, params, start,
                                 write_result)

    phases = params().get("phases", PHASES)
    rng = make_rng(dut)
    cfg = ConfigDriver(dut)
    dut.tick.value = 0
    # Idle and backpressure: random, except in every third phase (back to back, sinks ready).
    level = [0.0]

    def pauses(scale):
        while True:
            yield rng.random() < level[0] * scale

    events = RecordSource(dut, "s_ev", pause=pauses(1))
    verdicts = RecordSink(dut, "m_verdict", pause=pauses(0.7))
    ctrl = RecordSink(dut, "m_ctrl", pause=pauses(1))
    cpl = RecordSink(dut, "m_cpl", pause=pauses(1))
    await start(dut)
    n_qps, mpr, wimm_max = await build(cfg)

    checker = Checker(n_qps, mpr, wimm_max)
    traffic = Traffic(rng, n_qps, mpr, wimm_max)
    ticking = {"on": False, "forced": 0, "pulses": 0}

    async def drive_ticks():
        """Random tick pulses while "on"; "forced" pulses on request (one every few cycles)."""
        gap = 0
        while True:
            await RisingEdge(dut.clk)
            gap = max(0, gap - 1)
            pulse = ticking["on"] and rng.random() < TICK_PROBABILITY
            if ticking["forced"] and not gap:
                ticking["forced"] -= 1
                pulse, gap = True, rng.randint(2, 40)
            dut.tick.value = int(pulse)
            ticking["pulses"] += pulse

    cocotb.start_soon(drive_ticks())
    stamps = {"ev": [], "verdict": [], "pulse": []}

    async def watch():
        """The cycles of each event handshake, verdict taken and tick pulse (tick_bounds)."""
        cycle = 0
        handles = [("ev", dut.s_ev_tvalid, dut.s_ev_tready),
                   ("verdict", dut.m_verdict_tvalid, dut.m_verdict_tready)]
        while True:
            await RisingEdge(dut.clk)
            cycle += 1
            for name, valid, ready in handles:
                if valid.value and ready.value:
                    stamps[name].append(cycle)
            if dut.tick.value:
                stamps["pulse"].append(cycle)

    cocotb.start_soon(watch())

    async def setup(q, start_psn, enabled):
        await setup_qp(cfg, q, start_psn, enabled)
        checker.setup(q, start_psn, enabled)
        traffic.setup(q, start_psn, enabled)

    for q in range(n_qps):
        await setup(q, traffic.start_psn(), q < n_qps - 1 or n_qps == 1 or rng.random() < 0.5)
    sent = []
    checked = 0
    for phase in range(phases):
        ticking["on"] = True
        level[0] = 0.0 if phase % 3 == 1 else rng.choice((0.1, 0.3, 0.5))
        traffic.calm = phase % 3 == 2
        batch = []
        if phase == 0:
            batch += traffic.window_fill(0)
            if mpr <= 256:
                batch += traffic.lap(0, 2 * mpr + 8)
        batch += [traffic.event() for _ in range(EVENTS_PER_PHASE)]
        for event in batch:
            events.send(RX_EVENT.pack(event))
        sent += batch
        await wait_count(dut, verdicts, len(batch))
        # Phase end: no more ticks at random; three ticks stop every timer, then idle.
        ticking.update(on=False, forced=3)
        while ticking["forced"]:
            await RisingEdge(dut.clk)
        await wait_idle(cfg)
        bounds = tick_bounds(stamps["ev"], stamps["verdict"], stamps["pulse"])
        for i, event in enumerate(sent):
            tick_range = bounds[checked + i]
            checker.tick_floors += tick_range[0] > 0
            checker.event(event, verdicts.queue.popleft(), tick_range)
        checked += len(sent)
        sent.clear()
        for _ in range(3):
            checker.tick()
        compare_records("control", CONTROL_RECORD, ctrl.queue, checker.ctrl)
        compare_records("completion", COMPLETION, cpl.queue, checker.cpl)
        ctrl.queue.clear(), cpl.queue.clear(), checker.ctrl.clear(), checker.cpl.clear()
        for q in range(n_qps):
            want = checker.state_words(q)
            if want is None:
                assert not await cfg.read(qp_addr(q, OFF_CACK)) & SETUP_ENABLE
                continue
            got = {off: await cfg.read(qp_addr(q, off)) for off in want}
            assert got == want, f"phase {phase} QP {q}: state {got}, model {want}"
        # Set some QPs up again: every QP in the error state, and others at random.
        for q in range(n_qps):
            tracker = checker.trackers[q]
            if tracker is None or tracker.state.error or rng.random() < 0.1:
                await setup(q, traffic.start_psn(), n_qps == 1 or rng.random() < 0.85)
        dut._log.info("phase %d: %d events checked, counts %s", phase, checked, checker.counts)

    counts = {name: await cfg.read(ADDR_COUNTERS[name]) for name in COUNTERS}
    checker.counts["tick"] = ticking["pulses"]
    assert counts == checker.counts, f"counters {counts}, model {checker.counts}"
    # The run must have met every verdict and the interesting cases.
    missing = [name for name in VERDICT_NAMES.values() if not checker.counts[name.lower()]]
    assert not missing, f"no event with verdict {missing}"
    assert checker.timer_sacks and checker.jumps and checker.bursts and checker.tick_floors, \
        (checker.timer_sacks, checker.jumps, checker.bursts, checker.tick_floors)
    assert checker.longest_jump == mpr and checker.fourths, checker.fourths
    if mpr <= 256:
        assert checker.most_progress >= 2 * mpr, checker.most_progress
    assert events.empty() and verdicts.empty() and ctrl.empty() and cpl.empty()
    dut._log.info("%d events checked; %d timer SACKs, %d jumps, %d completion bursts; %d "
                  "verdicts owed at least one tick", checked, checker.timer_sacks,
                  checker.jumps, checker.bursts, checker.tick_floors)
    write_result(dut, "rx_tracker", checked)


# --- Performance ----------------------------------------------------------------------------------

@cocotb.test()
async def perf(dut):
    from verif.bench import ConfigDriver, RecordSink, RecordSource, start, write_perf

    cfg = ConfigDriver(dut)
    dut.tick.value = 0
    events = RecordSource(dut, "s_ev")
    sinks = {p: RecordSink(dut, p) for p in ("m_verdict", "m_ctrl", "m_cpl")}
    await start(dut)
    await build(cfg)
    log = {p: [] for p in ("s_ev", "m_verdict", "m_ctrl", "m_cpl")}

    async def monitor():
        cycle = 0
        while True:
            await RisingEdge(dut.clk)
            for p, cycles in log.items():
                if int(getattr(dut, f"{p}_tvalid").value) and \
                        int(getattr(dut, f"{p}_tready").value):
                    cycles.append(cycle)
            cycle += 1

    cocotb.start_soon(monitor())
    cases = {
        "in order, SACK every 4th": dict(opcode=Opcode.WRITE_MIDDLE, ackreq=0),
        "in order, every one SACKed (AckReq)": dict(opcode=Opcode.WRITE_LAST, ackreq=1),
        "Write with Immediate, one packet each": dict(opcode=Opcode.WRITE_ONLY_IMM, ackreq=1),
    }
    rows = []
    for name, fields in cases.items():
        await setup_qp(cfg, 0, 1000)
        for p in log.values():
            p.clear()
        for i in range(PERF_EVENTS):
            events.send(RX_EVENT.pack(qpn=0, psn=1000 + i, ev=i, dscp=Dscp.TRIMMABLE,
                                      ecn=Ecn.ECT0, access_ok=1, msn=i, **fields))
        await wait_count(dut, sinks["m_verdict"], PERF_EVENTS)
        await wait_idle(cfg)
        verdicts = [RX_VERDICT.unpack(w) for w in sinks["m_verdict"].queue]
        assert all(v["verdict"] == RxVerdict.PLACED for v in verdicts)
        ins, sacks = log["s_ev"], log["m_ctrl"]
        cycles = (ins[-1] - ins[0]) / (PERF_EVENTS - 1)
        # Each SACK answers the arrival whose PSN its trigger names.
        latencies = set()
        for word, at in zip(sinks["m_ctrl"].queue, sacks):
            s = Sack.from_ext(int_to_ext(CONTROL_RECORD.unpack(word)["ext"], 36))
            latencies.add(at - ins[psn_diff(s.trigger_psn, 1000)])
        if fields["opcode"] in IMM_OPCODES:
            assert len(sinks["m_cpl"].queue) == PERF_EVENTS
        for sink in sinks.values():
            sink.queue.clear()
        assert (cycles, latencies) == (CYCLES_PER_EVENT, {LATENCY}), (name, cycles, latencies)
        rows.append(dict(case=name, payload=0, frames=PERF_EVENTS, cycles_per_frame=cycles,
                         bytes_per_cycle=0, efficiency=0, latency=LATENCY))
    write_perf(dut, "rx_tracker", 0, rows)


# --- pytest ---------------------------------------------------------------------------------------
# The tests of one build and simulator share one build folder and one xdist group.

def cases(configs, sims):
    return [pytest.param(sim, name, id=f"{sim}-{name}",
                         marks=pytest.mark.xdist_group(f"rx_tracker-{name}-{sim}"))
            for sim in sims for name in configs]


def run(sim, name, config, *, testcase, extra=None):
    n_qps, mpr, wimm_max = config
    # -O0: the C++ of this design compiles several times faster, and the run is short.
    build_args = ["-CFLAGS", "-O0"] if sim == "verilator" else []
    run_bench(RxTracker(n_qps=n_qps, mpr=mpr, wimm_max=wimm_max), name=f"rx_tracker-{name}",
              toplevel="rx_tracker", test_module="tb.test_rx_tracker", sim=sim,
              params=dict(n_qps=n_qps, mpr=mpr, wimm_max=wimm_max, **(extra or {})),
              testcase=testcase, build_args=build_args)


@pytest.mark.sim
@pytest.mark.parametrize("sim, name", cases(CONFIGS, SIMULATORS))
def test_rx_tracker(sim, name):
    config = CONFIGS[name]
    tests = ["rx_random", "rx_ticks"] + (["rx_vectors"] if config[1] == 1024 else [])
    run(sim, name, config, testcase=tests)


@pytest.mark.sim
@pytest.mark.parametrize("sim, name", cases(["perf"], ["verilator"]))
def test_rx_tracker_perf(sim, name):
    """Quick: a small build (cycles and latency do not depend on the parameters; ``make bench``
    measures the default one)."""
    run(sim, name, PERF_CONFIG, testcase="perf")


@pytest.mark.sim
@pytest.mark.full
@pytest.mark.parametrize("sim, name", cases(FULL_CONFIGS, SIMULATORS))
def test_rx_tracker_full(sim, name):
    config = FULL_CONFIGS[name]
    tests = ["rx_random"] + (["rx_vectors"] if config[1] == 1024 else [])
    run(sim, f"full-{name}", config, testcase=tests, extra={"phases": FULL_PHASES})


@pytest.mark.parametrize("kwargs", [dict(n_qps=0), dict(n_qps=3), dict(n_qps=128),
                                    dict(n_qps=4.0), dict(mpr=64), dict(mpr=1000),
                                    dict(mpr=32768), dict(mpr=True), dict(wimm_max=0),
                                    dict(wimm_max=65), dict(wimm_max="16")])
def test_rx_tracker_rejects_parameters(kwargs):
    with pytest.raises(ValueError, match="RxTracker"):
        RxTracker(**kwargs)


def test_rx_tracker_parameters():
    tracker = RxTracker()
    assert (tracker.n_qps, tracker.mpr, tracker.wimm_max) == (4, 1024, 16)
    assert tracker.cycles_per_event <= 3 and tracker.latency == 3

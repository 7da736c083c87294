# SPDX-License-Identifier: BSD-2-Clause
"""A closed loop around one reliability block, for the model's tests and the RTL bench.

:class:`World` plays everything around the block, cycle by cycle, from a seeded random generator:

- a transmit engine: work requests per QP (1 to ``max_packets`` packets each), tapped to the block
  (at most ``wr_depth`` pending, and a work request is segmented only once the block took its
  tap), new PSNs below the block's PSN limit, retransmissions first, EVs chosen by the EV table of
  ``models/spray.py`` (the retransmission avoiding the EV the block names), per-plane queues that a
  plane going down flushes (``send_record`` with ``flushed`` = 1, docs/protocol.md 4.6);
- a fabric of paths (plane, T1): random loss, paths that drop everything in both directions for a
  while (or for good), trims (TRIMMED or TRIMMED_LASTHOP), CE marks, random delay (so reordering);
- a receiver per QP, ``models/rx_tracker.py``, that answers data packets with SACKs and NACKs and
  probes with probe answers (its coalescing timer ticks with the block's tick); at random it also
  answers NO_PKT_BUFFER or PSN_OOR_WINDOW instead of taking a packet, and the work request named
  ``bad_wr`` has a wrong R_Key (NACK UNEXP_EVENT);
- the EV table's side of the EV events: every ``ev_event`` goes to the EV table, and a BAD event's
  ``ev_marked`` answer goes back to the block.

The block itself is outside: :meth:`World.step` returns the tick and queues the block's inputs in
:attr:`World.inputs` (``(Source, record dict)``); the driver tells the world when the block took
each one (:meth:`World.consumed`) and hands it every output record (:meth:`World.output`).
:func:`run_model` drives the golden model this way; the cocotb bench drives the RTL.

While it runs, the world checks the block's outputs against the profile on its own: a
retransmission is only of a PSN sent and not acknowledged by any SACK the block took, PSN limits
never move backwards, completions and retires come in work-request order per QP, and
once a QP reports an error every later completion of it is an error.
"""

import heapq
from collections import Counter, deque
from dataclasses import dataclass

from models.layouts import PETH, Dscp, Ecn, NackReason, Opcode
from models.records import CompletionStatus, EvEvent, int_to_ext
from models.reliability import Source
from models.rx_tracker import Arrival, Nack, Probe, RxTracker, Sack, psn_add, psn_diff
from models.spray import EvTable, ev_marked_records, ev_path, make_ev

__all__ = ["Scenario", "World", "run_model"]


@dataclass
class Scenario:
    """The fabric, the traffic and the faults of one run (cycles are the block's clock)."""
    planes: int = 2
    num_t1: int = 3
    slots: int = 4
    backup: int = 2
    ev_min_active: int = 2
    tick_cycles: int = 32
    wrs_per_qp: int = 8
    max_packets: int = 4
    send_gap: tuple = (1, 3)
    delay: tuple = (15, 60)
    loss: float = 0.02
    trim: float = 0.02
    ce: float = 0.03
    nobuf: float = 0.01
    oor: float = 0.01
    dead_paths: tuple = ()          # ((plane, t1), first cycle, end cycle or None)
    planes_down: tuple = ()         # (plane, first cycle, end cycle)
    doomed_qp: int | None = None    # its EVs all use the last T1, whose paths are dead throughout
    bad_wr: tuple | None = None     # (qpn, work request index) with a wrong R_Key
    rx_mpr: int = 1024
    profile: int = 2                # the block's profile (models/reliability.py): the world's
    sack_bytes: int = 4096          # transmit engine, EV table and receivers follow it


class _Sender:
    """The transmit engine's view of one QP."""

    def __init__(self, rng, start, scenario, wr_depth):
        base = rng.randrange(1 << 16)
        self.wrs = [((base + i) % (1 << 16), rng.randint(1, scenario.max_packets))
                    for i in range(scenario.wrs_per_qp)]
        self.wr_depth = wr_depth
        self.tapped = 0              # taps queued for the block
        self.confirmed = 0           # taps the block took
        self.completed = []          # (req_id, status) in order
        self.retired = []
        self.error = False
        self.closed = False           # the latest PSN limit was the block's next PSN (closed)
        self.wr_index = 0            # the work request being segmented
        self.packet = 0              # its next packet
        self.next_psn = start
        self.limit = None
        self.credit = None           # profile 2: WINDOW_ROOM.credit
        self.sends = 0               # profile 2: data packets sent, modulo 2^16
        self.retx = deque()
        self.psns = {}               # psn -> (work request index, last)
        self.engine_next = start      # the next new PSN as the block knows it (send records taken)
        self.acked_upto = psn_add(start, -1)
        self.acked = set()

    def done(self):
        return len(self.completed) == len(self.wrs)

    def acknowledged(self, psn):
        return psn_diff(psn, self.acked_upto) <= 0 or psn in self.acked


class World:
    """See the module docstring. ``starts``: the start PSN of each QP (the block sets them up);
    ``wr_depth``: the block's work-request FIFO depth; ``tick0``: the tick count at the start
    (the block's ``now``)."""

    def __init__(self, rng, scenario, starts, *, wr_depth, tick0=0):
        self.rng = rng
        self.sc = scenario
        self.n_qps = len(starts)
        self.tick_count = tick0
        self.inputs = deque()
        self.stats = Counter()
        self.events = Counter()          # EV events by kind
        self.cycle = 0
        self.next_send = 0
        self.qp_pointer = 0
        self.network = []                # heap of (time, seq, kind, payload)
        self.seq = 0
        self.plane_queues = [deque() for _ in range(scenario.planes)]
        sc = scenario
        self.table = EvTable(sc.planes, sc.num_t1, slots=sc.slots, backup=sc.backup,
                             ev_min_active=sc.ev_min_active, profile=sc.profile)
        self.senders = []
        self.receivers = []
        for q in range(self.n_qps):
            self.senders.append(_Sender(rng, starts[q], sc, wr_depth))
            self.receivers.append(RxTracker(psn_add(starts[q], -1), mpr=sc.rx_mpr,
                                            profile=sc.profile, sack_bytes=sc.sack_bytes))
            self.table.configure_qp(q, *self._ev_sets(q))

    # --- set-up -----------------------------------------------------------------------------------

    def _ev_sets(self, q):
        """EVs of QP ``q``: slots on every plane spread over the T1s (the doomed QP: only the last
        T1, which no other QP uses), backups likewise, salts at random."""
        sc, rng = self.sc, self.rng
        last_t1 = sc.num_t1 - 1

        def t1_of(i):
            if q == sc.doomed_qp:
                return last_t1
            usable = sc.num_t1 - (sc.doomed_qp is not None)
            return i % usable

        evs, pools = [], []
        for p in range(sc.planes):
            evs.append([make_ev(p, t1_of(s), rng.randrange(1 << 20)) for s in range(sc.slots)])
            pools.append([make_ev(p, t1_of(rng.randrange(sc.num_t1)), rng.randrange(1 << 20))
                          for _ in range(sc.backup)])
        seeds = [rng.randrange(1, 1 << 16) for _ in range(sc.planes)]
        return evs, seeds, pools

    # --- the fabric -------------------------------------------------------------------------------

    def _path_dead(self, path):
        sc = self.sc
        if sc.doomed_qp is not None and path[1] == sc.num_t1 - 1:
            return True
        return any(p == path and first <= self.cycle and (end is None or self.cycle < end)
                   for p, first, end in sc.dead_paths)

    def _plane_down(self, plane):
        return any(p == plane and first <= self.cycle < end
                   for p, first, end in self.sc.planes_down)

    def _carry(self, kind, ev, payload, drop_random=True):
        """Put a packet on the path of ``ev``: lost on a dead path or at random, else delayed."""
        if self._path_dead(ev_path(ev)):
            self.stats["lost_dead_path"] += 1
            return
        if drop_random and self.rng.random() < self.sc.loss:
            self.stats["lost_random"] += 1
            return
        self.seq += 1
        heapq.heappush(self.network, (self.cycle + self.rng.randint(*self.sc.delay), self.seq,
                                      kind, payload))

    def _answer(self, q, record):
        """A SACK or NACK control record of receiver ``q`` goes back on its EV's path (a SACK's
        record names its trigger's EV: docs/protocol.md 4.5)."""
        if record is not None:
            self._carry("feedback", record["ev"], (q, record))

    def _sack(self, q, res):
        """Receiver ``q``'s SACK of a result, if any, on its trigger's path."""
        if res.sack is not None:
            self._answer(q, res.sack.control_record(q, res.path_ev))

    # --- one cycle --------------------------------------------------------------------------------

    def step(self):
        """Advance one cycle; returns True when a tick falls in it (the block's tick count steps).
        New inputs for the block are appended to :attr:`inputs`."""
        self.cycle += 1
        ticked = self.cycle % self.sc.tick_cycles == 0
        if ticked:
            self.tick_count = (self.tick_count + 1) % (1 << 32)
            for q, rx in enumerate(self.receivers):
                self._sack(q, rx.tick())
        for plane in range(self.sc.planes):
            down = self._plane_down(plane)
            if down == self.table.plane_up[plane]:
                self.table.set_plane_up(plane, not down)
                if down:
                    self._flush(plane)
        self._tap()
        if self.cycle >= self.next_send:
            self._send()
        for queue in self.plane_queues:
            while queue and queue[0][0] <= self.cycle:
                _, packet = queue.popleft()
                self._carry("data", packet["ev"], packet)
        while self.network and self.network[0][0] <= self.cycle:
            _, _, kind, payload = heapq.heappop(self.network)
            self._arrive(kind, payload)
        return ticked

    def _flush(self, plane):
        queue = self.plane_queues[plane]
        while queue:
            _, p = queue.popleft()
            self.stats["flushed"] += 1
            self.inputs.append((Source.SEND, self._send_record(p, flushed=1)))

    def _tap(self):
        for q, s in enumerate(self.senders):
            pending = s.tapped - len(s.completed)
            if s.tapped < len(s.wrs) and pending < s.wr_depth:
                self.inputs.append((Source.WORK_REQUEST, {"qpn": q, "req_id": s.wrs[s.tapped][0],
                                                          "local_addr": 0, "remote_va": 0,
                                                          "rkey": 0, "length": 0, "has_imm": 0,
                                                          "imm": 0}))
                s.tapped += 1

    def _send_record(self, p, flushed=0):
        return {"qpn": p["qpn"], "psn": p["psn"], "ev": p["ev"], "plane": p["plane"],
                "slot": p["slot"], "req_id": p["req_id"], "offset": 0, "length": 0,
                "tick": self.tick_count, "room_mask": (1 << self.sc.planes) - 1,
                "rtx": p["rtx"], "flushed": flushed, "last": p["last"]}

    def _send(self):
        """One packet of the next QP (round robin) that has one: its retransmission first."""
        n = self.n_qps
        room = (1 << self.sc.planes) - 1
        for k in range(n):
            q = (self.qp_pointer + k) % n
            s = self.senders[q]
            if s.error:
                continue
            if self.sc.profile == 2 and not self._room(s):
                continue
            packet = None
            if s.retx:
                psn, avoid = s.retx[0]
                choice = self.table.choose(q, room, avoid)
                if choice is None:
                    continue
                s.retx.popleft()
                wr, last = s.psns[psn]
                packet = dict(psn=psn, rtx=1, last=last, req_id=s.wrs[wr][0])
            elif self._new_ready(s):
                choice = self.table.choose(q, room)
                if choice is None:
                    continue
                wr = s.wr_index
                last = int(s.packet == s.wrs[wr][1] - 1)
                packet = dict(psn=s.next_psn, rtx=0, last=last, req_id=s.wrs[wr][0])
                s.psns[s.next_psn] = (wr, last)
                s.next_psn = psn_add(s.next_psn, 1)
                s.packet += 1
                if last:
                    s.wr_index += 1
                    s.packet = 0
            if packet is None:
                continue
            packet.update(qpn=q, ev=choice.ev, plane=choice.plane, slot=choice.slot)
            s.sends = (s.sends + 1) % (1 << 16)
            self.stats["sent_rtx" if packet["rtx"] else "sent"] += 1
            self.inputs.append((Source.SEND, self._send_record(packet)))
            self.plane_queues[choice.plane].append((self.cycle + self.rng.randint(4, 24), packet))
            self.qp_pointer = (q + 1) % n
            self.next_send = self.cycle + self.rng.randint(*self.sc.send_gap)
            return

    @staticmethod
    def _room(s):
        """Profile 2, limit (b): the data packets sent are fewer than the credit granted."""
        return s.credit is not None and 0 < (s.credit - s.sends) % (1 << 16) < 1 << 15

    def _new_ready(self, s):
        if s.limit is None or psn_diff(s.limit, s.next_psn) <= 0:
            return False
        # A work request is segmented once the block took its tap.
        return s.wr_index < s.confirmed and s.wr_index < len(s.wrs)

    def _arrive(self, kind, payload):
        rng, sc = self.rng, self.sc
        if kind == "feedback":
            q, record = payload
            self.stats["feedback"] += 1
            self.inputs.append((Source.FEEDBACK, {"qpn": q, "opcode": record["opcode"],
                                                  "ecn": Ecn.ECT0, "ext": record["ext"]}))
            return
        if kind == "probe":
            q, ev, probe_id = payload
            ce = rng.random() < sc.ce
            trimmed = not ce and rng.random() < sc.trim
            res = self.receivers[q].probe(Probe(ev=ev, probe_id=probe_id,
                                                ecn=Ecn.CE if ce else Ecn.ECT0,
                                                dscp=Dscp.TRIMMED if trimmed else Dscp.TRIMMABLE))
            self._sack(q, res)
            return
        p = payload
        q = p["qpn"]
        roll = rng.random()
        if roll < sc.nobuf:
            self.stats["nobuf"] += 1
            self._answer(q, Nack(NackReason.NO_PKT_BUFFER, p["psn"], p["ev"]).control_record(q))
            return
        if roll < sc.nobuf + sc.oor:
            self.stats["oor"] += 1
            self._answer(q, Nack(NackReason.PSN_OOR_WINDOW, p["psn"], p["ev"]).control_record(q))
            return
        dscp = Dscp.TRIMMABLE_RETX if p["rtx"] else Dscp.TRIMMABLE
        if rng.random() < sc.trim:
            dscp = rng.choice((Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP))
            self.stats["trimmed"] += 1
        ce = rng.random() < sc.ce
        wr, _ = self.senders[q].psns[p["psn"]]
        res = self.receivers[q].arrive(Arrival(
            psn=p["psn"], ev=p["ev"], ecn=Ecn.CE if ce else Ecn.ECT0, dscp=dscp,
            ackreq=p["last"], rtx=p["rtx"], access_ok=(q, wr) != sc.bad_wr))
        self._sack(q, res)
        if res.nack is not None:
            self._answer(q, res.nack.control_record(q))

    # --- the block's side -------------------------------------------------------------------------

    def consumed(self, source, record):
        """The block took ``record`` from input ``source``: the world follows what the block knows
        (taps taken, new PSNs registered, PSNs acknowledged by the SACKs it took, with the
        profile's rule, ignoring PSNs it had not registered yet)."""
        s = self.senders[record["qpn"]]
        if source == Source.WORK_REQUEST:
            s.confirmed += 1
        elif source == Source.SEND:
            if not record["rtx"] and not record["flushed"] and record["psn"] == s.engine_next:
                s.engine_next = psn_add(s.engine_next, 1)
        elif source == Source.FEEDBACK and record["opcode"] == Opcode.SACK:
            sack = Sack.from_ext(int_to_ext(record["ext"], 36))
            if psn_diff(sack.cack_psn, s.engine_next) >= 0:
                return
            if psn_diff(sack.cack_psn, s.acked_upto) > 0:
                s.acked_upto = sack.cack_psn
            s.acked |= {p for p in sack.bitmap_psns() if psn_diff(p, s.engine_next) < 0}
            if not sack.pr and psn_diff(sack.trigger_psn, s.engine_next) < 0:
                s.acked.add(sack.trigger_psn)
            s.acked = {p for p in s.acked if psn_diff(p, s.acked_upto) > 0}

    def output(self, stream, rec):
        """One output record of the block (``stream`` as in models.reliability.STREAMS)."""
        q = rec["qpn"]
        s = self.senders[q]
        if stream == "retx":
            assert rec["psn"] in s.psns, f"retransmission of PSN {rec['psn']} never sent: {rec}"
            assert not s.acknowledged(rec["psn"]), f"retransmission of an acknowledged PSN: {rec}"
            self.stats[f"retx_cause_{rec['cause']}"] += 1
            s.retx.append((rec["psn"], rec["avoid_ev"]))
        elif stream == "limit":
            # Only a QP error moves it back: closed at the next PSN the block expects.
            s.closed = rec["psn_limit"] == s.engine_next
            if s.limit is not None:
                assert psn_diff(rec["psn_limit"], s.limit) >= 0 or s.closed, \
                    f"PSN limit of QP {q} moved back from {s.limit}: {rec}"
            s.limit = rec["psn_limit"]
            if "credit" in rec:             # profile 2: WINDOW_ROOM, credits never go back
                if s.credit is not None:
                    assert 0 <= (rec["credit"] - s.credit) % (1 << 16) < 1 << 15, \
                        f"credit of QP {q} moved back from {s.credit}: {rec}"
                s.credit = rec["credit"]
        elif stream == "cpl":
            index = len(s.completed)
            assert index < s.tapped and rec["req_id"] == s.wrs[index][0], \
                f"completion out of order on QP {q}: {rec}, expected req_id {s.wrs[index][0]}"
            assert rec["is_recv"] == 0, rec
            if s.error:
                assert rec["status"] != CompletionStatus.OK, f"OK after an error: {rec}"
            if rec["status"] != CompletionStatus.OK:
                s.error = True
                s.retx.clear()
            s.completed.append((rec["req_id"], rec["status"]))
        elif stream == "retire":
            index = len(s.retired)
            assert index < s.tapped and rec["req_id"] == s.wrs[index][0], \
                f"retire out of order on QP {q}: {rec}, expected req_id {s.wrs[index][0]}"
            s.retired.append(rec["req_id"])
        elif stream == "ev":
            self.events[rec["kind"]] += 1
            marked = self.table.event(q, rec["ev"], rec["kind"])
            if rec["kind"] == EvEvent.BAD:
                for r in ev_marked_records(q, marked):
                    self.inputs.append((Source.MARKED, r))
        elif stream == "ctrl":
            assert rec["opcode"] == Opcode.PROBE, rec
            self.stats["probes"] += 1
            probe_id = PETH.unpack(int_to_ext(rec["ext"], PETH.size))["probe_id"]
            self._carry("probe", rec["ev"], (q, rec["ev"], probe_id))
        else:
            raise ValueError(f"unknown stream {stream}")

    # --- the end ----------------------------------------------------------------------------------

    def done(self):
        """Every work request completed (so every PSN of a QP that did not fail acknowledged)."""
        return all(s.done() for s in self.senders)

    def check_end(self):
        """The end state: every QP's work requests completed in order, retired, OK unless the QP
        failed; every PSN of a QP that did not fail acknowledged."""
        for q, s in enumerate(self.senders):
            assert s.done(), f"QP {q}: {len(s.completed)} of {len(s.wrs)} completed"
            assert s.retired == [r for r, _ in s.completed], f"QP {q}: retires {s.retired}"
            assert s.closed or not s.error, f"QP {q} failed but its PSN limit is open: {s.limit}"
            if not s.error:
                assert all(st == CompletionStatus.OK for _, st in s.completed)
                assert psn_diff(s.next_psn, s.acked_upto) == 1, \
                    f"QP {q}: PSNs up to {s.next_psn - 1} sent, acknowledged up to {s.acked_upto}"

    def status(self, q):
        """The statuses of QP ``q``'s completions."""
        return [st for _, st in self.senders[q].completed]


def run_model(world, model, max_cycles):
    """Drive ``model`` (a :class:`Reliability`) inside ``world`` until the world is done; returns
    the cycles run. Each input is taken as soon as it is queued."""
    def deliver():
        for stream, records in model.take().items():
            for rec in records:
                world.output(stream, rec)

    handlers = {Source.SEND: model.send, Source.FEEDBACK: model.feedback,
                Source.MARKED: model.marked, Source.WORK_REQUEST: model.work_request}
    for cycle in range(max_cycles):
        if world.step():
            model.tick()
            deliver()
        while world.inputs:
            source, record = world.inputs.popleft()
            handlers[source](record)
            world.consumed(source, record)
            deliver()
        if world.done():
            return cycle
    raise AssertionError(f"the world is not done after {max_cycles} cycles")

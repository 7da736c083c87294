# SPDX-License-Identifier: BSD-2-Clause
"""Golden model of the fault-injectable link (``rtl/link.py``): cut, loss, delay and rate.

A link carries AXI-Stream frames from one port to another (a switch port to a NIC plane port, or
back) and can be cut, made lossy, slow or long while traffic runs. Its bytes pass unchanged; what
the model predicts is which frames pass, and when each of their beats leaves.

Frame decisions, at a frame's first beat (its *start*), with the register values of that moment:

- the 16-bit Galois LFSR of docs/protocol.md 4.3 (:func:`models.switch_queue.lfsr_step`, taps 0xB400)
  steps once per frame start, whatever the decision, and ``r`` is its new value;
- ``up`` = 0 (cut): the frame is dropped whole (counted ``frames_cut``);
- else ``r < loss``: the frame is dropped whole (counted ``frames_lost``); ``loss`` 0 never drops,
  0xFFFF drops every frame but the one in 65535 that draws ``r`` = 0xFFFF;
- else the frame passes whole, with the ``delay`` and ``rate`` of its start for every beat.

A frame that started passes to its last beat whatever happens to the registers meanwhile, so no
frame is ever truncated or merged with another. Writing ``seed`` reloads the LFSR (a seed of 0,
which would lock it, loads :data:`SEED_ZERO_LOADS`). ``delay`` and ``rate`` above the link's
``delay_max`` and ``rate_max`` act as those.

Order within one cycle (the RTL's, :func:`replay`): counter clears first, then the frame starts
and beats leaving of that cycle (a frame starting in the cycle of a register write still sees the
old value, an event in the cycle of a counter write counts after the clear), then the register
writes, seen from the next frame start on.

Timing (cycles are clock edges; a beat *arrives* at the edge that accepts it on ``s_axis`` and
*leaves* at the edge that accepts it on ``m_axis``): beat ``i`` of the passed beats, in order, with
its frame's ``delay`` d and ``rate`` r, is loaded into the output register at edge

    ``t_i = max(a_i + max(1, d - 1), o_(i-1) + r)``      (the second term only after a first beat)

and leaves at the first edge after ``t_i`` where the sink is ready: ``o_i = min{o > t_i :
ready(o)}`` (:func:`departures`). So a beat leaves no earlier than ``max(d, MIN_LATENCY)`` cycles
after it arrived, at most one beat per ``r + 1`` cycles leaves, and with ``d`` <= 2, ``r`` = 0 and
the sink ready the link is a two-cycle pipeline at full line rate.

Nothing here imports cocotb, Amaranth or scapy.
"""

import heapq
from bisect import bisect_left
from typing import NamedTuple

from .switch_queue import LFSR_SEED_DEFAULT, lfsr_step

__all__ = ["REGISTERS", "COUNTERS", "REGISTER_RESET", "REGISTER_BITS", "MIN_LATENCY",
           "SEED_ZERO_LOADS", "LIMIT", "Verdict", "Decision", "LinkModel", "Run", "departures",
           "check_timing", "replay", "lfsr_sequence"]

REGISTERS = ("up", "loss", "seed", "delay", "rate")
COUNTERS = ("frames_passed", "frames_cut", "frames_lost", "beats_passed")
REGISTER_BITS = {"up": 1, "loss": 16, "seed": 16, "delay": 16, "rate": 16}
REGISTER_RESET = {"up": 1, "loss": 0, "seed": LFSR_SEED_DEFAULT, "delay": 0, "rate": 0}
SEED_ZERO_LOADS = LFSR_SEED_DEFAULT
MIN_LATENCY = 2             # cycles from a beat's arrival to its departure, at the least
LIMIT = 0xFFFF              # the largest delay_max and rate_max (16-bit registers)
COUNTER_MASK = 0xFFFFFFFF

_CLEAR, _EVENT, _WRITE = range(3)       # order of the kinds of events within one cycle


class Verdict:
    PASSED = "passed"
    CUT = "cut"
    LOST = "lost"


class Decision(NamedTuple):
    """One frame's decision: its verdict, the LFSR value ``r`` drawn at its start, and the
    ``delay`` and ``rate`` (effective values) its beats keep."""
    verdict: str
    r: int
    delay: int
    rate: int


def lfsr_sequence(seed, n):
    """The ``r`` values the next ``n`` frame starts draw after ``seed`` was loaded."""
    state = seed or SEED_ZERO_LOADS
    values = []
    for _ in range(n):
        state = lfsr_step(state)
        values.append(state)
    return values


class LinkModel:
    """Registers, LFSR, counters and the frame decisions of one link.

    ``delay_max`` (0..65535) and ``rate_max`` (1..65535) are the RTL's parameters: larger
    ``delay`` and ``rate`` values act as them. Everything starts as the RTL leaves reset:
    :data:`REGISTER_RESET`, the LFSR at the reset seed, counters 0, no frame in progress.
    """

    def __init__(self, delay_max=64, rate_max=255):
        if isinstance(delay_max, bool) or not isinstance(delay_max, int) or \
                not 0 <= delay_max <= LIMIT:
            raise ValueError(f"LinkModel: delay_max must be 0..{LIMIT}, not {delay_max!r}")
        if isinstance(rate_max, bool) or not isinstance(rate_max, int) or \
                not 1 <= rate_max <= LIMIT:
            raise ValueError(f"LinkModel: rate_max must be 1..{LIMIT}, not {rate_max!r}")
        self.delay_max = delay_max
        self.rate_max = rate_max
        self.registers = dict(REGISTER_RESET)
        self.lfsr = REGISTER_RESET["seed"]
        self.counters = dict.fromkeys(COUNTERS, 0)
        self.current = None             # the decision of the frame in progress (beat level)

    # --- configuration ------------------------------------------------------------------------

    def write(self, name, value):
        """A write to register or counter ``name`` (a counter write clears it, any data)."""
        if name in COUNTERS:
            self.counters[name] = 0
            return
        if name not in REGISTERS:
            raise ValueError(f"LinkModel: no register {name!r}")
        value &= (1 << REGISTER_BITS[name]) - 1
        self.registers[name] = value
        if name == "seed":
            self.lfsr = value or SEED_ZERO_LOADS

    def read(self, name):
        """The word the RTL reads at ``name``'s address (also ``lfsr``: its state)."""
        if name in COUNTERS:
            return self.counters[name]
        if name == "lfsr":
            return self.lfsr
        return self.registers[name]

    @property
    def delay(self):
        """The delay a frame starting now keeps."""
        return min(self.registers["delay"], self.delay_max)

    @property
    def rate(self):
        """The rate a frame starting now keeps."""
        return min(self.registers["rate"], self.rate_max)

    # --- frames ---------------------------------------------------------------------------------

    def start(self):
        """A frame starts: step the LFSR, decide, count a drop; returns its :class:`Decision`."""
        self.lfsr = r = lfsr_step(self.lfsr)
        if not self.registers["up"]:
            verdict = Verdict.CUT
            self._count("frames_cut")
        elif r < self.registers["loss"]:
            verdict = Verdict.LOST
            self._count("frames_lost")
        else:
            verdict = Verdict.PASSED
        return Decision(verdict, r, self.delay, self.rate)

    def accept(self, last):
        """One beat arrives (``last``: it ends its frame); True when it will leave the link."""
        if self.current is None:
            self.current = self.start()
        passed = self.current.verdict == Verdict.PASSED
        if last:
            self.current = None
        return passed

    def leave(self, last):
        """A passed beat leaves the link (``last``: the last of its frame)."""
        self._count("beats_passed")
        if last:
            self._count("frames_passed")

    def _count(self, name):
        self.counters[name] = (self.counters[name] + 1) & COUNTER_MASK


# --- timing --------------------------------------------------------------------------------------

def _always_ready(_cycle):
    return True


def _next_ready(ready, cycle):
    while not ready(cycle):
        cycle += 1
    return cycle


def departures(arrivals, delays, rates, ready=None, previous=None):
    """``(loads, leaves)``: the edges at which each passed beat enters the output register and
    leaves the link, given the edges it arrived at (``arrivals``, in order), the ``delays`` and
    ``rates`` of its frame (one value each per beat), and the sink (``ready(cycle)``: m_axis_tready
    at that edge; default always). ``previous`` is the departure edge of the beat before the first
    one, if any. See the module docstring for the rule."""
    ready = ready or _always_ready
    loads, leaves = [], []
    out = previous
    for a, d, r in zip(arrivals, delays, rates, strict=True):
        t = a + max(1, d - 1)
        if out is not None:
            t = max(t, out + r)
        out = _next_ready(ready, t + 1)
        loads.append(t)
        leaves.append(out)
    return loads, leaves


def check_timing(arrivals, leaves, delays, rates):
    """The rules the link promises, checked on observed edges: beats leave in order, none earlier
    than ``max(delay, MIN_LATENCY)`` after it arrived, and consecutive departures at least
    ``rate + 1`` apart (``rate`` of the later beat). Returns the violations found (text)."""
    problems = []
    for i, (a, o, d, r) in enumerate(zip(arrivals, leaves, delays, rates, strict=True)):
        if o - a < max(d, MIN_LATENCY):
            problems.append(f"beat {i}: arrived {a}, left {o}: {o - a} cycles, delay {d}")
        if i and o - leaves[i - 1] < r + 1:
            problems.append(f"beat {i}: left {o}, {o - leaves[i - 1]} cycles after the beat "
                            f"before, rate {r}")
    return problems


class Run(NamedTuple):
    """What :func:`replay` predicts: one :class:`Decision` per frame, and for each passed beat
    (in order) its frame index, beat index, arrival, load and departure edges."""
    decisions: list
    frame: list
    beat: list
    arrivals: list
    loads: list
    leaves: list

    def level(self, cycle):
        """Beats in the link's FIFO as edge ``cycle`` samples it (arrived before it, not yet
        loaded into the output register)."""
        return bisect_left(self.arrivals, cycle) - bisect_left(self.loads, cycle)


def replay(model, frames, writes=(), ready=None):
    """Run ``model`` over a link's life: ``frames`` lists, per frame in order, the edges at which
    its beats arrived; ``writes`` are ``(cycle, name, value)`` configuration writes (registers and
    counter clears); ``ready(cycle)`` is the sink. Events of one cycle are taken in the RTL's order
    (module docstring). Returns a :class:`Run`; ``model.counters`` end as the RTL's."""
    ready = ready or _always_ready
    events = []
    seq = 0

    def push(cycle, kind, action, *args):
        nonlocal seq
        heapq.heappush(events, (cycle, kind, seq, action, args))
        seq += 1

    for cycle, name, value in writes:
        push(cycle, _CLEAR if name in COUNTERS else _WRITE, "write", name, value)
    for index, arrivals in enumerate(frames):
        if not arrivals:
            raise ValueError(f"replay: frame {index} has no beats")
        push(arrivals[0], _EVENT, "start", index)

    decisions = [None] * len(frames)
    run = Run(decisions, [], [], [], [], [])
    previous = None
    while events:
        _, _, _, action, args = heapq.heappop(events)
        if action == "write":
            model.write(*args)
        elif action == "leave":
            model.leave(*args)
        else:
            index, = args
            decision = decisions[index] = model.start()
            if decision.verdict != Verdict.PASSED:
                continue
            arrivals = frames[index]
            n = len(arrivals)
            loads, leaves = departures(arrivals, [decision.delay] * n, [decision.rate] * n,
                                       ready, previous)
            previous = leaves[-1]
            for beat, (a, t, o) in enumerate(zip(arrivals, loads, leaves)):
                run.frame.append(index)
                run.beat.append(beat)
                run.arrivals.append(a)
                run.loads.append(t)
                run.leaves.append(o)
                push(o, _EVENT, "leave", beat == n - 1)
    return run

# SPDX-License-Identifier: BSD-2-Clause
"""models.link: per-frame decisions from the LFSR, whole frames under cut and heal, the order of
events within a cycle, counters, and the delay and rate rules as functions of arrival times."""

import random

import pytest
from hypothesis import given, settings, strategies as st

from models.link import (COUNTERS, MIN_LATENCY, REGISTER_RESET, SEED_ZERO_LOADS, LinkModel,
                         Verdict, check_timing, departures, lfsr_sequence, replay)
from models.switch_queue import LFSR_SEED_DEFAULT, lfsr_step

seeds = st.integers(0, 0xFFFF)
losses = st.integers(0, 0xFFFF)


def back_to_back(lengths, start=0, gap=0):
    """Arrival edges of frames of ``lengths`` beats, one beat per cycle, ``gap`` idle cycles
    between frames."""
    frames, cycle = [], start
    for n in lengths:
        frames.append(list(range(cycle, cycle + n)))
        cycle += n + gap
    return frames


# --- decisions ---------------------------------------------------------------------------------

def test_reset_state():
    model = LinkModel()
    assert model.registers == REGISTER_RESET
    assert model.read("lfsr") == LFSR_SEED_DEFAULT
    assert model.counters == dict.fromkeys(COUNTERS, 0)
    assert (model.delay, model.rate) == (0, 0)


@given(seed=seeds, loss=losses, n=st.integers(1, 300))
def test_each_frame_draws_the_next_lfsr_value(seed, loss, n):
    model = LinkModel()
    model.write("seed", seed)
    model.write("loss", loss)
    rs = lfsr_sequence(seed, n)
    decisions = [model.start() for _ in range(n)]
    assert [d.r for d in decisions] == rs
    assert [d.verdict for d in decisions] == \
        [Verdict.LOST if r < loss else Verdict.PASSED for r in rs]
    assert model.counters["frames_lost"] == sum(r < loss for r in rs)
    assert model.read("lfsr") == rs[-1]


@given(seed=seeds, n=st.integers(1, 200))
def test_the_lfsr_steps_for_cut_frames_too(seed, n):
    """Cutting the link does not shift the loss draws of the frames after the heal."""
    a, b = LinkModel(), LinkModel()
    for model in (a, b):
        model.write("seed", seed)
        model.write("loss", 0x8000)
    a.write("up", 0)
    cut = [a.start() for _ in range(n)]
    assert all(d.verdict == Verdict.CUT for d in cut)
    assert a.counters["frames_cut"] == n and a.counters["frames_lost"] == 0
    for _ in range(n):
        b.start()
    a.write("up", 1)
    assert [a.start() for _ in range(20)] == [b.start() for _ in range(20)]


def test_loss_extremes():
    model = LinkModel()
    model.write("loss", 0)
    assert all(model.start().verdict == Verdict.PASSED for _ in range(70000))
    model.write("loss", 0xFFFF)
    verdicts = [model.start() for _ in range(65535)]     # one LFSR period
    assert sum(d.verdict == Verdict.PASSED for d in verdicts) == 1
    assert [d.r for d in verdicts if d.verdict == Verdict.PASSED] == [0xFFFF]


@pytest.mark.parametrize("loss", [0x1000, 0x4000, 0x8000, 0xC000])
def test_loss_fraction_over_a_period(loss):
    """Over the LFSR's period every non-zero value is drawn once: loss/65536 of the frames."""
    model = LinkModel()
    model.write("loss", loss)
    lost = sum(model.start().verdict == Verdict.LOST for _ in range(65535))
    assert lost == loss - 1


@given(seed=seeds)
def test_seed_write_reloads_the_lfsr(seed):
    model = LinkModel()
    for _ in range(5):
        model.start()
    model.write("seed", seed)
    assert model.read("seed") == seed
    assert model.read("lfsr") == (seed or SEED_ZERO_LOADS)
    assert model.start().r == lfsr_step(seed or SEED_ZERO_LOADS)


def test_registers_are_masked_and_delay_rate_clamped():
    model = LinkModel(delay_max=10, rate_max=3)
    model.write("up", 0xFFFFFFFE)
    model.write("loss", 0x12345)
    model.write("delay", 0x10005)
    model.write("rate", 99)
    assert [model.read(n) for n in ("up", "loss", "delay", "rate")] == [0, 0x2345, 5, 99]
    assert (model.delay, model.rate) == (5, 3)
    model.write("delay", 11)
    assert model.delay == 10


@pytest.mark.parametrize("kwargs", [dict(delay_max=-1), dict(delay_max=0x10000),
                                    dict(rate_max=0), dict(rate_max=0x10000),
                                    dict(delay_max=2.0), dict(rate_max=True)])
def test_rejects_parameters(kwargs):
    with pytest.raises(ValueError, match="LinkModel"):
        LinkModel(**kwargs)


def test_counters_wrap_and_clear():
    model = LinkModel()
    model.counters["beats_passed"] = 0xFFFFFFFF
    model.leave(last=True)
    assert model.counters["beats_passed"] == 0 and model.counters["frames_passed"] == 1
    model.write("frames_passed", 1234)
    assert model.counters["frames_passed"] == 0


# --- whole frames under cut and heal ------------------------------------------------------------

@given(frames=st.lists(st.integers(1, 12), min_size=1, max_size=30),
       data=st.data())
@settings(max_examples=100)
def test_cut_and_heal_never_truncate(frames, data):
    """Writes to ``up`` and ``loss`` between any two beats: the beats kept are whole frames, each
    frame kept iff its start saw the link up and its draw not below ``loss``."""
    model = LinkModel()
    model.write("seed", data.draw(seeds))
    kept = []
    expected = []
    for n in frames:
        up_at_start = loss_at_start = None
        got = []
        for i in range(n):
            if data.draw(st.booleans()):
                model.write("up", data.draw(st.integers(0, 1)))
            if data.draw(st.integers(0, 4)) == 0:
                model.write("loss", data.draw(st.sampled_from([0, 0x4000, 0xC000, 0xFFFF])))
            if i == 0:
                up_at_start, loss_at_start = model.registers["up"], model.registers["loss"]
                r = lfsr_step(model.lfsr)
            got.append(model.accept(last=i == n - 1))
        assert len(set(got)) == 1, f"frame of {n} beats split: {got}"
        kept.append(got[0])
        expected.append(bool(up_at_start) and r >= loss_at_start)
    assert kept == expected
    assert model.counters["frames_cut"] + model.counters["frames_lost"] == kept.count(False)


# --- timing --------------------------------------------------------------------------------------

@pytest.mark.parametrize("delay", [0, 1, 2, 3, 17, 64])
def test_latency_of_a_lone_beat(delay):
    _, leaves = departures([100], [delay], [0])
    assert leaves == [100 + max(delay, MIN_LATENCY)]


@given(lengths=st.lists(st.integers(1, 40), min_size=1, max_size=20), delay=st.integers(0, 64))
def test_full_line_rate_back_to_back(lengths, delay):
    """Rate 0, sink ready: back-to-back frames leave back to back, the latency constant."""
    arrivals = [a for frame in back_to_back(lengths) for a in frame]
    n = len(arrivals)
    _, leaves = departures(arrivals, [delay] * n, [0] * n)
    assert leaves == [a + max(delay, MIN_LATENCY) for a in arrivals]
    assert leaves[-1] - leaves[0] + 1 == n


@given(n=st.integers(2, 60), rate=st.integers(1, 9), delay=st.integers(0, 30))
def test_rate_spaces_beats(n, rate, delay):
    arrivals = list(range(n))
    _, leaves = departures(arrivals, [delay] * n, [rate] * n)
    assert leaves[0] == max(delay, MIN_LATENCY)
    assert all(b - a == rate + 1 for a, b in zip(leaves, leaves[1:]))


@st.composite
def traffic(draw):
    n = draw(st.integers(1, 80))
    gaps = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
    arrivals, cycle = [], 0
    for g in gaps:
        cycle += 1 + g
        arrivals.append(cycle)
    delays = draw(st.lists(st.integers(0, 20), min_size=n, max_size=n))
    rates = draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
    stalls = draw(st.sets(st.integers(0, 600), max_size=300))
    return arrivals, delays, rates, stalls


@given(traffic())
@settings(max_examples=150)
def test_departures_keep_the_rules_and_are_earliest(case):
    """With any arrivals, delays, rates and sink stalls: the rules hold, and each beat leaves at
    the first ready edge after the earliest load the rules allow (no cycle lost)."""
    arrivals, delays, rates, stalls = case

    def ready(cycle):
        return cycle not in stalls

    loads, leaves = departures(arrivals, delays, rates, ready)
    assert check_timing(arrivals, leaves, delays, rates) == []
    for i, (a, t, o) in enumerate(zip(arrivals, loads, leaves)):
        earliest = a + max(1, delays[i] - 1)
        if i:
            earliest = max(earliest, leaves[i - 1] + rates[i])
        assert t == earliest
        assert o > t and ready(o) and all(not ready(c) for c in range(t + 1, o))


def test_check_timing_reports_violations():
    assert check_timing([0, 1], [2, 3], [0, 0], [0, 0]) == []
    assert len(check_timing([0, 1], [1, 3], [0, 0], [0, 0])) == 1       # latency below 2
    assert len(check_timing([0, 1], [5, 6], [6, 0], [0, 0])) == 1       # before its delay
    assert len(check_timing([0, 1], [2, 4], [0, 0], [0, 2])) == 1       # rate 2: 3 apart


# --- replay: writes against frame starts, counters against departures --------------------------

def test_write_in_the_cycle_of_a_start_takes_effect_from_the_next_frame():
    frames = back_to_back([3, 3, 3])              # starts at 0, 3, 6
    run = replay(LinkModel(), frames, [(3, "up", 0)])
    assert [d.verdict for d in run.decisions] == [Verdict.PASSED, Verdict.PASSED, Verdict.CUT]
    run = replay(LinkModel(), frames, [(2, "up", 0)])
    assert [d.verdict for d in run.decisions] == [Verdict.PASSED, Verdict.CUT, Verdict.CUT]
    # A cut mid-frame lets the frame finish.
    run = replay(LinkModel(), frames, [(1, "up", 0), (4, "up", 1)])
    assert [d.verdict for d in run.decisions] == [Verdict.PASSED, Verdict.CUT, Verdict.PASSED]
    assert run.frame == [0, 0, 0, 2, 2, 2]


def test_seed_write_in_the_cycle_of_a_start():
    frames = back_to_back([1, 1, 1])              # starts at 0, 1, 2
    run = replay(LinkModel(), frames, [(1, "seed", 0x1234)])
    assert [d.r for d in run.decisions] == lfsr_sequence(LFSR_SEED_DEFAULT, 2) + \
        lfsr_sequence(0x1234, 1)


def test_counter_clear_in_the_cycle_of_an_event_counts_the_event():
    frames = back_to_back([1, 1])                  # starts 0 and 1; frame 0 leaves at 2
    model = LinkModel()
    replay(model, frames, [(0, "up", 0), (1, "frames_cut", 0), (2, "frames_passed", 0)])
    assert model.counters == {"frames_passed": 1, "frames_cut": 1, "frames_lost": 0,
                              "beats_passed": 1}
    model = LinkModel()
    replay(model, frames, [(4, "beats_passed", 0)])
    assert model.counters["beats_passed"] == 0


def test_delay_and_rate_are_per_frame():
    frames = back_to_back([4, 4, 2], gap=10)      # starts at 0, 14 and 28
    run = replay(LinkModel(), frames, [(0, "delay", 30), (0, "rate", 2), (14, "delay", 0),
                                       (14, "rate", 0)])
    assert run.leaves[:4] == [2, 3, 4, 5]         # frame 0: the old delay 0 and rate 0
    assert run.leaves[4:8] == [44, 47, 50, 53]    # frame 1: delay 30, rate 2
    assert run.leaves[8:] == [54, 55]             # frame 2: delay 0 and rate 0, behind frame 1


@given(seed=st.integers(0, 2 ** 32 - 1))
@settings(max_examples=60)
def test_replay_matches_beat_level_model(seed):
    """replay's decisions are the beat-level model's when the writes come between frames, and its
    departures keep every rule; the FIFO level never goes negative."""
    rng = random.Random(seed)
    lengths = [rng.randrange(1, 20) for _ in range(rng.randrange(1, 40))]
    frames = back_to_back(lengths, gap=rng.randrange(3))
    names = ("up", "loss", "seed", "delay", "rate") + COUNTERS
    writes = [(cycle, rng.choice(names), rng.randrange(1 << 16))     # one write per cycle
              for cycle in rng.sample(range(frames[-1][-1] + 50), rng.randrange(12))]
    stalls = {rng.randrange(frames[-1][-1] + 400) for _ in range(rng.randrange(200))}
    model = LinkModel(delay_max=20, rate_max=3)
    run = replay(model, frames, writes, lambda c: c not in stalls)

    beat_model = LinkModel(delay_max=20, rate_max=3)
    pending = sorted(w for w in writes if w[1] not in COUNTERS)
    for index, arrivals in enumerate(frames):
        while pending and pending[0][0] < arrivals[0]:
            beat_model.write(*pending.pop(0)[1:])
        for i in range(len(arrivals)):
            beat_model.accept(last=i == len(arrivals) - 1)
        assert beat_model.lfsr == run.decisions[index].r
    passed = [i for i, d in enumerate(run.decisions) if d.verdict == Verdict.PASSED]
    assert sorted(set(run.frame)) == passed
    delays = [run.decisions[f].delay for f in run.frame]
    rates = [run.decisions[f].rate for f in run.frame]
    assert check_timing(run.arrivals, run.leaves, delays, rates) == []
    assert all(run.level(c) >= 0 for c in range(frames[-1][-1] + 400))

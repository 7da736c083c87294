# SPDX-License-Identifier: BSD-2-Clause
"""The EV table and spray model: conformance vectors, properties of the choice and of feedback."""

from collections import Counter

import pytest
from hypothesis import given, settings, strategies as st

from models.layouts import NackReason, Opcode, SackVerdict
from models.records import EV_MARKED, EvEvent
from models import conformance as vectors
from models.spray import (LFSR_TAPS, MAX_T1, Choice, EvTable, EvTableV1, PlaneSet, QpSet, Serve, SlotState,
                          choosable_anywhere, choose, ev_marked_records, ev_path, ev_plane, ev_t1,
                          feedback_skips, lfsr_step, make_ev, mark_bad, plane_ok_list, refill,
                          serve_qp, window_room)

CASES = vectors.load("spray.json")
G, S, A, D = SlotState.GOOD, SlotState.SKIP, SlotState.ASSUMED_BAD, SlotState.DENIED
KINDS = (EvEvent.SKIP, EvEvent.BAD, EvEvent.RECOVERED, EvEvent.DENY, EvEvent.ALLOW)


# --- Conformance vectors --------------------------------------------------------------------------

V2_CASES = vectors.load("spray-v2.json")
VECTOR_CASES = [("spray.json", 1, c) for c in range(len(CASES))] + \
    [("spray-v2.json", 2, c) for c in range(len(V2_CASES))]


@pytest.mark.parametrize("name, profile, case", VECTOR_CASES)
def test_vectors_spray(name, profile, case):
    """vectors/spray.json with profile 1, vectors/spray-v2.json with profile 2 (the default):
    every choice and every slot state after it."""
    vec = (CASES if profile == 1 else V2_CASES)[case]
    init, ops = vec["init"], vec["ops"]
    if profile == 1:
        table = EvTableV1(init["planes"], num_t1=MAX_T1, slots=init["A"], backup=0)
    else:
        table = EvTable(init["planes"], num_t1=init["t1s"], slots=init["A"], backup=0)
    table.configure_qp(7, init["slots"], init["lfsr_seeds"])
    for index, op in enumerate(ops):
        if op["op"] == "set_state":
            table.set_state(7, op["plane"], op["slot"], SlotState[op["state"]])
            continue
        assert op["op"] == "choose"
        before = table.qp(7)
        choice = table.choose(7, op["plane_ok"], op["avoid_ev"])
        got = None if choice is None else {"plane": choice.plane, "slot": choice.slot}
        assert got == op["chosen"], f"case {case} op {index}"
        assert table.letters(7) == op["states_after"], f"case {case} op {index}"
        if choice is None:
            assert table.qp(7) == before
        else:
            assert choice.ev == init["slots"][choice.plane][choice.slot]


# --- EVs, LFSR, validation ------------------------------------------------------------------------

def test_ev_layout():
    ev = make_ev(5, 0xA3, 0xFEDCB)
    assert ev == 0xFEDCBA35
    assert (ev_plane(ev), ev_t1(ev), ev_path(ev)) == (5, 0xA3, (5, 0xA3))
    assert ev_path(make_ev(5, 0xA3, 1)) == ev_path(ev)
    for bad in ((16, 0, 0), (0, 256, 0), (0, 0, 1 << 20), (-1, 0, 0)):
        with pytest.raises(ValueError):
            make_ev(*bad)


def test_lfsr_is_maximal_and_shifts_right():
    assert lfsr_step(1) == LFSR_TAPS
    assert lfsr_step(LFSR_TAPS) == LFSR_TAPS >> 1
    state, period = lfsr_step(1), 1
    while state != 1:
        state, period = lfsr_step(state), period + 1
    assert period == 0xFFFF


def test_plane_ok_forms():
    assert plane_ok_list(0b0101, 4) == (True, False, True, False)
    assert plane_ok_list([1, 0, 0, 1], 4) == (True, False, False, True)
    with pytest.raises(ValueError, match="plane_ok"):
        plane_ok_list([True], 2)


@pytest.mark.parametrize("kwargs", [
    {"planes": 0, "num_t1": 4}, {"planes": 17, "num_t1": 4}, {"planes": 2, "num_t1": 0},
    {"planes": 2, "num_t1": 257}, {"planes": 2, "num_t1": 4, "slots": 12},
    {"planes": 2, "num_t1": 4, "slots": 512}, {"planes": 2, "num_t1": 4, "slots": 0},
    {"planes": 2, "num_t1": 4, "backup": -1}, {"planes": 2, "num_t1": 4, "ev_min_active": -1},
])
def test_bad_parameters_raise(kwargs):
    with pytest.raises(ValueError):
        EvTable(**kwargs)


def small_table(**kw):
    """Two planes, four T1s, A = 4, B = 2; QP 1 with slot s of plane p on T1 s, salt 0."""
    table = EvTable(2, num_t1=4, slots=4, backup=2, **kw)
    table.configure_qp(1, [[make_ev(p, s) for s in range(4)] for p in range(2)], [1, 1])
    return table


def test_loads_refused_like_hardware():
    table = small_table()
    good = [[make_ev(p, s) for s in range(4)] for p in range(2)]
    wrong_plane = [list(good[0]), list(good[1])]
    wrong_plane[1][2] = make_ev(0, 2)
    wrong_t1 = [list(good[0]), list(good[1])]
    wrong_t1[0][3] = make_ev(0, 4)
    cases = [
        (wrong_plane, [1, 1], None, "plane 0, loaded into plane 1"),
        (wrong_t1, [1, 1], None, "T1 index 4"),
        (good, [0, 1], None, "seed"),
        (good, [1, 0x10000], None, "seed"),
        (good[:1], [1], None, "one entry per plane"),
        ([good[0][:3], good[1]], [1, 1], None, "3 EVs for 4 slots"),
        (good, [1, 1], [[make_ev(0, 1)] * 3, []], "3 backup EVs"),
        (good, [1, 1], [[], [make_ev(1, 9)]], "T1 index 9"),
        (good, [1, 1], [[], [make_ev(2, 0)]], "plane 2"),
    ]
    for evs, seeds, pools, message in cases:
        with pytest.raises(ValueError, match=message):
            table.configure_qp(2, evs, seeds, pools)
    assert 2 not in table.qps
    for call in (lambda: table.load_slot(1, 2, 0, make_ev(1, 0)),
                 lambda: table.load_slot(1, 0, 4, make_ev(0, 0)),
                 lambda: table.load_slot(1, 0, 0, make_ev(0, 4)),
                 lambda: table.load_slot(1, 0, 0, 1 << 32),
                 lambda: table.load_pool_entry(1, 0, 2, make_ev(0, 0)),
                 lambda: table.load_pool_entry(1, 1, 0, make_ev(0, 0)),
                 lambda: table.load_seed(1, 0, 0),
                 lambda: table.set_state(1, 0, 4, G),
                 lambda: table.set_plane_up(2, False),
                 lambda: table.choose(3, 0b11),
                 lambda: table.event(1, make_ev(0, 0), 7)):
        with pytest.raises(ValueError):
            call()


# --- The choice: examples and properties ----------------------------------------------------------

def test_nothing_choosable_waits_unchanged():
    table = small_table()
    for s in range(4):
        table.set_state(1, 0, s, A if s % 2 else D)
    before = table.qp(1)
    assert table.choose(1, 0b01) is None
    assert table.qp(1) == before
    choice = table.choose(1, 0b11)
    assert choice.plane == 1
    table.set_plane_up(1, False)
    assert table.plane_ok(0b11) == (True, False)
    assert not table.can_choose(1, 0b11)
    assert table.choose(1, 0b11) is None


def test_avoided_only_slot_waits_in_profile_1():
    table = EvTableV1(1, num_t1=4, slots=2, backup=0)
    table.configure_qp(1, [[make_ev(0, 0), make_ev(0, 1)]], [3])
    table.set_state(1, 0, 1, D)
    assert table.choose(1, [True], avoid_ev=make_ev(0, 0)) is None
    assert table.choose(1, [True]) == Choice(0, 0, make_ev(0, 0), 1)


def test_avoidance_falls_back_in_profile_2():
    """Profile 2 (docs/protocol.md 4.3): the avoided path first (another path of the plane, or
    another plane), then only the avoided EV (another slot on its path), then nothing (the
    avoided slot itself): a retransmission never waits while a slot is choosable."""
    ev = [make_ev(0, j, salt) for j, salt in ((0, 1), (1, 2), (0, 3), (1, 4))]
    table = EvTable(1, num_t1=2, slots=4, backup=0, ev_min_active=0)
    table.configure_qp(1, [ev], [3])
    for _ in range(6):
        assert ev_path(table.choose(1, [True], avoid_ev=ev[0]).ev) == (0, 1)
    table.set_state(1, 0, 1, D)
    table.set_state(1, 0, 3, D)
    assert table.choose(1, [True], avoid_ev=ev[0]).ev == ev[2]       # same path, other EV
    table.set_state(1, 0, 2, A)
    assert table.choose(1, [True], avoid_ev=ev[0]).ev == ev[0]       # nothing else at all
    assert table.choose(1, [False], avoid_ev=ev[0]) is None
    with pytest.raises(ValueError, match="ev_min_active"):
        EvTable(2, num_t1=2, slots=2, ev_min_active=5)
    EvTableV1(2, num_t1=2, slots=2, ev_min_active=5)



def test_pointer_back_to_itself_steps_the_lfsr():
    # Pointer 2, mask 1: positions 2, 3, 0, 1 visit slots 3, 2, 1, 0; only slot 0 is visible, at
    # the last position, so the pointer comes back to 2 (not greater): a rotation ended.
    evs = tuple(make_ev(0, j) for j in range(4))
    ps = PlaneSet(0, evs, (G, D, A, D), (), 2, 0x0005)
    choice, new = choose(QpSet((ps,)), 0b1)
    assert choice == Choice(0, 0, evs[0], 1)
    assert new.planes[0].pointer == 2
    assert new.planes[0].lfsr == lfsr_step(0x0005) and new.planes[0].mask == lfsr_step(5) & 3

@st.composite
def qp_tables(draw, max_planes=4):
    """An EvTable with one QP (number 3) whose EVs collide on paths often, and its pools filled."""
    planes = draw(st.integers(1, max_planes))
    slots = draw(st.sampled_from([1, 2, 4, 8]))
    backup = draw(st.integers(0, 3))
    num_t1 = draw(st.integers(1, 4))
    profile = draw(st.sampled_from([1, 2]))
    floor = draw(st.integers(0, 6))
    if profile == 2:
        floor = min(floor, planes * slots)
    table = EvTable(planes, num_t1=num_t1, slots=slots, backup=backup, ev_min_active=floor,
                    profile=profile)
    ev = st.builds(make_ev, st.just(0), st.integers(0, num_t1 - 1), st.integers(0, 3))
    evs = [[make_ev(p, ev_t1(e), e >> 12) for e in draw(st.lists(ev, min_size=slots,
                                                                  max_size=slots))]
           for p in range(planes)]
    pools = [[make_ev(p, ev_t1(e), 4 + (e >> 12)) for e in draw(st.lists(ev, max_size=backup))]
             for p in range(planes)]
    seeds = draw(st.lists(st.integers(1, 0xFFFF), min_size=planes, max_size=planes))
    table.configure_qp(3, evs, seeds, pools)
    return table


def held_evs(qp):
    return sorted({e for ps in qp.planes for e in ps.evs})


def eligible_entry(ps):
    bad = {ev_path(e) for e, s in zip(ps.evs, ps.states) if s == A}
    return any(e is not None and ev_path(e) not in bad for e in ps.pool)


def check_refill_invariants(before, after, arrived):
    """The refill is complete, and no slot took an EV whose path holds an ASSUMED_BAD slot.

    A slot's EV changes only to a backup: one of the pool before, or ``arrived`` (RECOVERED)."""
    for old, ps in zip(before.planes, after.planes):
        assert not (any(s.waiting for s in ps.states) and eligible_entry(ps))
        bad = {ev_path(e) for e, s in zip(ps.evs, ps.states) if s == A}
        for slot in range(ps.size):
            if ps.evs[slot] != old.evs[slot]:
                assert ps.states[slot] == G
                assert ps.evs[slot] in old.pool or ps.evs[slot] == arrived
                assert ev_path(ps.evs[slot]) not in bad


def check_choice(qp, new, choice, ok, avoid, profile=2):
    if choice is None:
        assert not choosable_anywhere(qp, ok, avoid, profile)
        assert new == qp
        return
    ps = qp.planes[choice.plane]
    assert ok[choice.plane], "chose a plane that is not ok"
    assert ps.states[choice.slot] in (G, S), "chose an ASSUMED_BAD or DENIED slot"
    assert choice.ev == ps.evs[choice.slot]
    if profile == 2 and avoid is not None:
        # The avoided path only when no other path was choosable, the avoided EV only when
        # nothing else was (docs/protocol.md 4.3).
        if ev_path(choice.ev) == ev_path(avoid):
            assert not any(ok[p] and qp.planes[p].choosable(avoid_path=ev_path(avoid))
                           for p in range(len(qp.planes)))
        if choice.ev == avoid:
            assert not any(ok[p] and qp.planes[p].choosable(avoid_ev=avoid)
                           for p in range(len(qp.planes)))
        avoid = None          # the slots' states below: the rule of the level used
    assert choice.ev != avoid, "chose the avoided EV"
    assert choice.slot == choice.position ^ ps.mask
    assert new.planes[choice.plane].states[choice.slot] == G
    assert new.plane_pointer == (choice.plane + 1) % len(qp.planes)
    for p, (a, b) in enumerate(zip(qp.planes, new.planes)):
        if p != choice.plane:
            assert a == b
        for slot, (sa, sb) in enumerate(zip(a.states, b.states)):
            assert sa == sb or (sa, sb) == (S, G)
            if a.evs[slot] == avoid:
                assert sa == sb, "the avoided slot changed state"


@settings(max_examples=150, deadline=None)
@given(table=qp_tables(), data=st.data())
def test_random_operations_keep_every_rule(table, data):
    n = table.planes
    for _ in range(data.draw(st.integers(1, 60))):
        qp = table.qp(3)
        held = held_evs(qp)
        op = data.draw(st.sampled_from(["choose", "choose", "event", "plane"]))
        if op == "plane":
            table.set_plane_up(data.draw(st.integers(0, n - 1)), data.draw(st.booleans()))
            assert table.qp(3) == qp
        elif op == "choose":
            room = data.draw(st.integers(0, (1 << n) - 1))
            avoid = data.draw(st.one_of(st.none(), st.sampled_from(held)))
            ok = table.plane_ok(room)
            choice = table.choose(3, room, avoid)
            check_choice(qp, table.qp(3), choice, ok, avoid, table.profile)
        else:
            kind = data.draw(st.sampled_from(KINDS))
            pooled = [e for ps in qp.planes for e in ps.pool if e is not None]
            ev = data.draw(st.sampled_from(held + pooled + [make_ev(0, 0, 99)]))
            marked = table.event(3, ev, kind)
            new = table.qp(3)
            check_refill_invariants(qp, new, ev if kind == EvEvent.RECOVERED else None)
            if not qp.holds(ev) and kind != EvEvent.RECOVERED:
                assert new == qp, "an event for an EV no slot holds changed the table"
            if kind == EvEvent.BAD:
                check_bad(qp, new, ev, marked, table.ev_min_active)
            else:
                assert marked == ()


def check_bad(qp, new, ev, marked, floor):
    if not marked:
        assert new == qp
        return
    before, after = qp.choosable_count(), new.choosable_count()
    assert after >= floor or after >= before, "the marking went below the floor"
    ps, new_ps = qp.planes[ev_plane(ev)], new.planes[ev_plane(ev)]
    marked_slots = [s for s in range(ps.size)
                    if ev_path(ps.evs[s]) == ev_path(ev) and ps.states[s] in (G, S)]
    assert list(marked) == [ps.evs[s] for s in marked_slots]
    for s in marked_slots:
        assert new_ps.states[s] == A or new_ps.evs[s] != ps.evs[s]


@settings(max_examples=60, deadline=None)
@given(planes=st.integers(1, 8), slots=st.sampled_from([1, 2, 4, 8, 16]),
       packets=st.integers(1, 300), seeds=st.lists(st.integers(1, 0xFFFF), min_size=8, max_size=8))
def test_all_good_spray_is_even(planes, slots, packets, seeds):
    table = EvTable(planes, num_t1=MAX_T1, slots=slots, backup=0, ev_min_active=0)
    table.configure_qp(0, [[make_ev(p, s) for s in range(slots)] for p in range(planes)],
                       seeds[:planes])
    uses = Counter()
    for k in range(packets):
        choice = table.choose(0, (1 << planes) - 1)
        assert choice.plane == k % planes
        uses[choice.plane, choice.slot] += 1
    for p in range(planes):
        share = [uses[p, s] for s in range(slots)]
        assert max(share) - min(share) <= 1
        assert sum(share) in (packets // planes, -(-packets // planes))


def test_choice_is_pure():
    table = small_table()
    qp = table.qp(1)
    snapshot = (qp.letters(), qp.plane_pointer, [(ps.pointer, ps.lfsr) for ps in qp.planes])
    choice, new = choose(qp, 0b11)
    assert choose(qp, 0b11) == (choice, new)
    assert (qp.letters(), qp.plane_pointer, [(ps.pointer, ps.lfsr) for ps in qp.planes]) == snapshot


# --- Feedback: examples ---------------------------------------------------------------------------

def one_plane(evs, pool, floor=0, backup=3):
    table = EvTable(1, num_t1=8, slots=len(evs), backup=backup, ev_min_active=floor)
    table.configure_qp(0, [evs], [1], [pool])
    return table


def test_feedback_codes():
    assert feedback_skips(Opcode.SACK, SackVerdict.SKIP_ONCE)
    assert feedback_skips(Opcode.NACK, NackReason.TRIMMED)
    for opcode, code in ((Opcode.SACK, SackVerdict.NONE), (Opcode.NACK, NackReason.TRIMMED_LASTHOP),
                         (Opcode.NACK, NackReason.NO_PKT_BUFFER),
                         (Opcode.NACK, NackReason.PSN_OOR_WINDOW), (Opcode.PROBE, 1)):
        assert not feedback_skips(opcode, code)


def test_skip_only_from_good_and_unknown_ignored():
    table = one_plane([make_ev(0, j) for j in range(4)], [])
    table.skip(0, make_ev(0, 1))
    table.set_state(0, 0, 2, D)
    table.skip(0, make_ev(0, 2))
    table.skip(0, make_ev(0, 3, salt=5))
    table.skip(9, make_ev(0, 0))
    assert table.letters(0) == ["GSDG"]


def test_bad_marks_the_whole_path_and_reports():
    evs = [make_ev(0, 1, 0), make_ev(0, 2, 0), make_ev(0, 1, 7), make_ev(0, 3, 0)]
    table = one_plane(evs, [], floor=2)
    table.skip(0, evs[2])
    assert table.bad(0, evs[0]) == (evs[0], evs[2])
    assert table.letters(0) == ["AGAG"]
    assert table.bad(0, evs[2]) == ()                      # nothing left to mark on that path
    assert table.bad(0, evs[1]) == ()                      # would leave 1 < 2: refused whole
    assert table.letters(0) == ["AGAG"]
    assert ev_marked_records(0, ()) == [{"qpn": 0, "ev": 0, "valid": 0, "last": 1}]
    records = ev_marked_records(0, (evs[0], evs[2]))
    assert [(r["ev"], r["valid"], r["last"]) for r in records] == [(evs[0], 1, 0), (evs[2], 1, 1)]
    for record in records:
        assert EV_MARKED.unpack(EV_MARKED.pack(record)) == record


def test_floor_counts_after_refill():
    evs = [make_ev(0, j) for j in range(4)]
    table = one_plane(evs, [make_ev(0, 0, 1), make_ev(0, 5)], floor=4)
    # The first pool entry shares the bad path, so the second one refills the slot: still 4 left.
    assert table.bad(0, evs[0]) == (evs[0],)
    assert table.letters(0) == ["GGGG"]
    assert table.qp(0).planes[0].evs[0] == make_ev(0, 5)
    assert table.qp(0).planes[0].pool == (make_ev(0, 0, 1), None, None)
    # Path 0 is clean again, so the entry left over refills the next marked slot.
    assert table.bad(0, evs[1]) == (evs[1],)
    assert table.qp(0).planes[0].evs[:2] == (make_ev(0, 5), make_ev(0, 0, 1))
    # The pool is empty now: marking would leave 3 < 4, so nothing is marked.
    before = table.qp(0)
    assert table.bad(0, evs[2]) == ()
    assert table.qp(0) == before


def test_floor_already_below_allows_a_made_up_marking():
    evs = [make_ev(0, j) for j in range(4)]
    table = one_plane(evs, [make_ev(0, 6)], floor=4)
    table.set_state(0, 0, 3, D)          # 3 choosable, below the floor (set_state: no refill)
    assert table.bad(0, evs[0]) == (evs[0],)
    qp = table.qp(0)
    assert qp.letters() == ["GGGD"] and qp.planes[0].evs[0] == make_ev(0, 6)


def test_refill_skips_entries_on_bad_paths_and_waits():
    evs = [make_ev(0, j) for j in range(4)]
    table = one_plane(evs, [make_ev(0, 0, 3)], floor=0)
    assert table.bad(0, evs[0]) == (evs[0],)
    assert table.letters(0) == ["AGGG"]                   # the only backup shares the bad path
    table.deny(0, evs[1])                                  # barred for a DENIED slot too
    assert table.letters(0) == ["ADGG"]
    table.recovered(0, evs[0])                             # the path is clean again: refill
    qp = table.qp(0)
    assert qp.letters() == ["GGGG"] and qp.planes[0].evs[:2] == (evs[0], make_ev(0, 0, 3))
    assert qp.planes[0].pool == (None, None, None)


def test_recovered_refills_at_once():
    evs = [make_ev(0, j) for j in range(4)]
    table = one_plane(evs, [], floor=0)
    table.bad(0, evs[0])
    table.bad(0, evs[1])
    table.deny(0, evs[2])
    assert table.letters(0) == ["AADG"]
    table.recovered(0, make_ev(0, 7))                      # back from probing: lowest slot first
    assert table.letters(0) == ["GADG"]
    assert table.qp(0).planes[0].evs[0] == make_ev(0, 7)
    table.recovered(0, evs[1])                             # still in its slot: GOOD in place
    assert table.letters(0) == ["GGDG"]
    table.recovered(0, evs[2])                             # denied: stays out
    assert table.letters(0) == ["GGDG"]
    table.allow(0, evs[2])
    assert table.letters(0) == ["GGGG"]
    table.allow(0, evs[2])
    assert table.letters(0) == ["GGGG"]


def test_recovered_fills_the_pool_and_ignores_extras():
    evs = [make_ev(0, 0), make_ev(0, 1)]
    table = one_plane(evs, [], backup=2)
    for ev in (make_ev(0, 2), make_ev(0, 2), make_ev(0, 3), make_ev(0, 4), make_ev(3, 0)):
        table.recovered(0, ev)
    assert table.qp(0).planes[0].pool == (make_ev(0, 2), make_ev(0, 3))
    table.recovered(0, make_ev(0, 9))                      # T1 9 is not below num_t1 = 8
    table.deny(0, evs[1])
    assert table.qp(0).planes[0].evs == (evs[0], make_ev(0, 2))
    assert table.qp(0).planes[0].pool == (None, make_ev(0, 3))
    table.recovered(0, make_ev(0, 5))
    assert table.qp(0).planes[0].pool == (make_ev(0, 5), make_ev(0, 3))


def test_configuration_writes_refill():
    evs = [make_ev(0, 0), make_ev(0, 1)]
    table = one_plane(evs, [], backup=1)
    table.deny(0, evs[0])
    assert table.letters(0) == ["DG"]
    table.load_pool_entry(0, 0, 0, make_ev(0, 2))
    assert table.qp(0).planes[0].evs == (make_ev(0, 2), evs[1])
    table.load_slot(0, 0, 1, make_ev(0, 3))
    table.load_seed(0, 0, 0x1234)
    assert table.qp(0).planes[0].mask == 0
    assert table.letters(0) == ["GG"]


def test_refill_pure_function():
    ps = PlaneSet(0, (make_ev(0, 1), make_ev(0, 2), make_ev(0, 3)), (A, D, A),
                  (make_ev(0, 1, 1), make_ev(0, 3, 1), make_ev(0, 2, 1)), 0, 1)
    new = refill(ps)
    # Slot 0 takes entry 2 (entries 0 and 1 share bad paths); path 1 then holds no ASSUMED_BAD
    # slot any more, so slot 1 (DENIED) takes entry 0; entry 1 stays barred by slot 2.
    assert new.evs == (make_ev(0, 2, 1), make_ev(0, 1, 1), make_ev(0, 3))
    assert new.states == (G, G, A)
    assert new.pool == (None, make_ev(0, 3, 1), None)
    qp = QpSet((ps,))
    assert mark_bad(qp, make_ev(0, 7), 0) == ((), qp)


# --- QP round-robin -------------------------------------------------------------------------------

def test_window_room():
    assert window_room(63) and not window_room(64)
    assert not window_room(128, w_max=256, mpr=128) and window_room(127, w_max=256, mpr=128)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), count=st.integers(1, 8))
def test_serve_qp_round_robin(data, count):
    flags = st.lists(st.booleans(), min_size=count, max_size=count)
    pointer = data.draw(st.integers(0, count - 1))
    retx, new, room = data.draw(flags), data.draw(flags), data.draw(flags)
    profile = data.draw(st.sampled_from([1, 2]))
    served, next_pointer = serve_qp(pointer, retx, new, room, profile)
    if profile == 1:
        eligible = [q for q in range(count) if retx[q] or (new[q] and room[q])]
    else:               # profile 2: retransmissions need window room too (limit (b))
        eligible = [q for q in range(count) if room[q] and (retx[q] or new[q])]
    if not eligible:
        assert (served, next_pointer) == (None, pointer)
        return
    first = min(eligible, key=lambda q: (q - pointer) % count)
    assert served == Serve(first, retx[first])
    assert next_pointer == (first + 1) % count


def test_serve_qp_takes_turns():
    pointer, order = 0, []
    for _ in range(6):
        served, pointer = serve_qp(pointer, [False, True, False], [True, False, True],
                                   [True, False, True], profile=1)
        order.append(served)
    assert order == [Serve(0, False), Serve(1, True), Serve(2, False)] * 2
    with pytest.raises(ValueError):
        serve_qp(0, [True], [True, False], [True])

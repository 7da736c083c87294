# SPDX-License-Identifier: BSD-2-Clause
"""The receive tracker model: the SACK vectors, the packet vectors of its SACKs and NACKs, every
rule of the SACK policy, the window, trims, completions, and hypothesis properties of its state.

The first part checks profile 1 (:class:`RxTrackerV1`, the policy ``rtl/rx_tracker.py`` still
implements, and ``vectors/sack.json``); the second part profile 2, the default
(``vectors/sack-v2.json`` and the rules of docs/protocol.md 2.1 and 5)."""

from dataclasses import replace

import pytest
from hypothesis import given, settings, strategies as st

from models.layouts import Dscp, Ecn, ip6, mac, NackReason, Opcode, SackVerdict
from models.packets import build_frame
from models.records import CONTROL_RECORD, COMPLETION, CompletionStatus, RX_META, int_to_ext
from models import conformance as vectors
from models.rx_tracker import (MPR_MAX, OOO_MODULUS, PSN_MODULUS, Arrival, Probe, RxConfig,
                               RxTracker, RxTrackerV1, Sack, Verdict, initial_state, on_arrival,
                               psn_add, psn_diff)

SACK_CASES = vectors.load("sack.json")
PACKETS = {p["name"]: p for p in vectors.load("packets.json")}


def arrival(psn, ev=0x1234_5670, **kw):
    return Arrival(psn=psn % PSN_MODULUS, ev=ev, **kw)


def in_order(tracker, count, **kw):
    """Feed ``count`` in-order packets; return their results."""
    return [tracker.arrive(arrival(tracker.cack_psn + 1, **kw)) for _ in range(count)]


# --- Conformance vectors -------------------------------------------------------------------------

@pytest.mark.parametrize("case", range(len(SACK_CASES)))
def test_sack_vectors(case):
    """Every arrival of vectors/sack.json: placed, SACK now, cack_psn after, every SACK field."""
    vec = SACK_CASES[case]
    tracker = RxTrackerV1(vec["cack_start"], mpr=vec["mpr"])
    for i, a in enumerate(vec["arrivals"]):
        res = tracker.arrive(Arrival(psn=a["psn"], ev=a["ev"], ecn=Ecn.CE if a["ce"] else Ecn.ECT0,
                                     ackreq=int(a["last"])))
        got = {"placed": res.placed, "sack_now": res.sack is not None,
               "cack_after": tracker.cack_psn}
        want = {k: a[k] for k in got}
        assert got == want, f"arrival {i}: {a}"
        if res.sack is not None:
            s = res.sack
            assert {"cack_psn": s.cack_psn, "ack_psn_offset": s.ack_psn_offset,
                    "sack_offset": s.sack_offset, "sack_bitmap": f"{s.sack_bitmap:016x}",
                    "mpr": s.mpr, "m": s.m, "entropy": s.entropy} == a["sack"], f"arrival {i}"
            assert s.pr == 0 and s.probe_id == 0 and s.trigger_psn == a["psn"]
        if not res.placed and res.sack is None:
            assert res.nack.reason == NackReason.PSN_OOR_WINDOW


def tx_header(vec, record):
    """The TX_HEADER fields of a packets.json control frame, its ext from ``record``."""
    return {"eth_dst": mac(vec["eth_dst"]), "eth_src": mac(vec["eth_src"]), "dscp": vec["dscp"],
            "ecn": vec["ecn"], "flow_label": vec["ev"] & 0xFFFF, "hop_limit": 64,
            "outer_src": ip6(vec["outer_src"]), "outer_dst": ip6(vec["outer_dst"]),
            "inner_src": ip6(vec["inner_src"]), "inner_dst": ip6(vec["inner_dst"]),
            "udp_sport": vec["ev"] >> 16, "opcode": record["opcode"],
            "dest_qpn": vec["dest_qpn"], "ext": record["ext"]}


def check_control_frame(name, record):
    """``record`` (a CONTROL_RECORD dict) carries the ext bytes and EV of the named frame, and
    the header inserter's frame built from it is the vector's frame."""
    vec = PACKETS[name]
    assert CONTROL_RECORD.unpack(CONTROL_RECORD.pack(record)) == record
    assert record["opcode"] == vec["opcode"] and record["ev"] == vec["ev"]
    ext = bytes.fromhex(vec["ext_hex"])
    assert int_to_ext(record["ext"], len(ext)) == ext
    assert build_frame(tx_header(vec, record)).hex() == vec["frame_hex"]


def test_sack_skip_once_frame():
    """A history that yields the decoded SACK of packets.json, byte for byte: 256 packets of
    4096 B (placed_256 = 4096), then 1030, 1031 and a CE-marked 1070 (ooo_count 3)."""
    vec = PACKETS["sack_skip_once"]
    tracker = RxTrackerV1(1000 - 256)
    in_order(tracker, 256, payload_length=4096)
    tracker.arrive(arrival(1030))
    tracker.arrive(arrival(1031))
    res = tracker.arrive(arrival(1070, ev=vec["ev"], ecn=Ecn.CE))
    want = dict(vec["sack"], sack_bitmap=int(vec["sack"]["sack_bitmap"], 16))
    want["placed_256"] = want.pop("placed_bytes_256")
    sack = res.sack
    assert {k: getattr(sack, k) for k in want} == want
    check_control_frame("sack_skip_once", sack.control_record(qpn=7))
    assert Sack.from_ext(sack.ext_bytes()) == sack


def test_probe_answer_frame():
    vec = PACKETS["sack_probe_answer"]
    tracker = RxTrackerV1(41)
    res = tracker.probe(Probe(ev=vec["ev"], probe_id=0x0102))
    check_control_frame("sack_probe_answer", res.sack.control_record(qpn=7))


@pytest.mark.parametrize("name, reason", [
    ("nack_trimmed", NackReason.TRIMMED),
    ("nack_trimmed_lasthop", NackReason.TRIMMED_LASTHOP),
    ("nack_psn_oor_window", NackReason.PSN_OOR_WINDOW),
    ("nack_unexp_event", NackReason.UNEXP_EVENT),
])
def test_nack_frames(name, reason):
    """The tracker's NACKs of PSN 5000 on EV 0x77777042 are the vector frames."""
    ev = PACKETS[name]["ev"]
    tracker = RxTrackerV1(5000 - 1025 if reason == NackReason.PSN_OOR_WINDOW else 4000)
    dscp = {NackReason.TRIMMED: Dscp.TRIMMED,
            NackReason.TRIMMED_LASTHOP: Dscp.TRIMMED_LASTHOP}.get(reason, Dscp.TRIMMABLE)
    res = tracker.arrive(arrival(5000, ev=ev, dscp=dscp,
                                 access_ok=reason != NackReason.UNEXP_EVENT))
    assert not res.placed and res.sack is None and res.nack.reason == reason
    check_control_frame(name, res.nack.control_record(qpn=7))


# --- Configuration -------------------------------------------------------------------------------

@pytest.mark.parametrize("mpr", [0, 64, 127, 129, 1000, 2 * MPR_MAX, True, 1024.0, "1024"])
def test_bad_mpr_raises(mpr):
    with pytest.raises(ValueError, match="mpr"):
        RxTrackerV1(0, mpr=mpr)


@pytest.mark.parametrize("wimm_max", [0, -1, True, 1.5])
def test_bad_wimm_max_raises(wimm_max):
    with pytest.raises(ValueError, match="wimm_max"):
        RxTrackerV1(0, wimm_max=wimm_max)


@pytest.mark.parametrize("cack", [-1, PSN_MODULUS])
def test_bad_cack_raises(cack):
    with pytest.raises(ValueError, match="cack_psn"):
        RxTrackerV1(cack)


@pytest.mark.parametrize("mpr", [128, 1024, MPR_MAX])
def test_mpr_field(mpr):
    assert RxTrackerV1(0, mpr=mpr).probe(Probe(ev=1, probe_id=1)).sack.mpr == mpr // 128


# --- SACK policy ---------------------------------------------------------------------------------

def test_every_fourth_in_order_packet():
    tracker = RxTrackerV1(PSN_MODULUS - 6)        # across the 24-bit wrap
    results = in_order(tracker, 12)
    assert [r.sack is not None for r in results] == [False, False, False, True] * 3
    sack = results[3].sack
    assert sack.ack_psn_offset == 0 and sack.sack_offset == 1 and sack.sack_bitmap == 0
    assert tracker.cack_psn == 6


@pytest.mark.parametrize("flag", [{"ecn": Ecn.CE}, {"rtx": 1}, {"ackreq": 1}])
def test_flags_sack_at_once(flag):
    """A CE mark, BTH.RTX or the last packet of a message: a SACK at once, which resets the
    count of 4."""
    tracker = RxTrackerV1(100)
    first = in_order(tracker, 2)
    res = tracker.arrive(arrival(103, ev=0xABCD, **flag))
    assert [r.sack for r in first] == [None, None] and res.sack is not None
    want_m = SackVerdict.SKIP_ONCE if flag.get("ecn") == Ecn.CE else SackVerdict.NONE
    assert (res.sack.m, res.sack.entropy, res.sack.trigger_psn) == (want_m, 0xABCD, 103)
    assert [r.sack is not None for r in in_order(tracker, 4)] == [False, False, False, True]


def test_out_of_order_and_hole_filled():
    tracker = RxTrackerV1(100)
    res = tracker.arrive(arrival(103))
    assert res.placed and res.sack.ack_psn_offset == 3 and tracker.state.ooo_count == 1
    res = tracker.arrive(arrival(102))
    assert res.sack is not None and tracker.state.ooo_count == 2
    res = tracker.arrive(arrival(101))          # in order, cack jumps 100 -> 103
    assert res.sack is not None and tracker.cack_psn == 103 and tracker.state.ooo_count == 2
    assert (res.sack.ack_psn_offset, res.sack.sack_offset) == (-2, 1)


def test_duplicates():
    """Duplicates place nothing, SACK at once (m from their CE), reset the count, do not count."""
    tracker = RxTrackerV1(100)
    in_order(tracker, 2)                                        # cack 102, count 2
    tracker.arrive(arrival(110))                                # SACK, count 0
    in_order(tracker, 3)                                        # count 3
    res = tracker.arrive(arrival(101, ecn=Ecn.CE))              # behind cack
    assert res.verdict == Verdict.DUPLICATE and not res.placed
    assert (res.sack.ack_psn_offset, res.sack.m) == (-4, SackVerdict.SKIP_ONCE)
    res = tracker.arrive(arrival(110))                          # in the bitmap
    assert res.verdict == Verdict.DUPLICATE and res.sack.ack_psn_offset == 5
    assert [r.sack is not None for r in in_order(tracker, 4)] == [False, False, False, True]
    assert tracker.counters[Verdict.DUPLICATE] == 2
    far = tracker.arrive(arrival(tracker.cack_psn - 40000))
    assert far.sack.ack_psn_offset == -32768 and far.sack.sack_offset == 1


def test_probe_answers():
    tracker = RxTrackerV1(PSN_MODULUS - 2)
    for psn in (1, 3, 63):
        tracker.arrive(arrival(psn))
    in_order(tracker, 1)                                        # cack = 2^24 - 1, count 1
    clean = tracker.probe(Probe(ev=0xBEEF, probe_id=77))
    s = clean.sack
    assert (s.pr, s.probe_id, s.entropy, s.m, s.ack_psn_offset) == (1, 77, 0xBEEF, 0, 0)
    assert s.base_psn == 0 and s.bitmap_psns() == {1, 3, 63}
    assert tracker.probe(Probe(ev=1, probe_id=1, ecn=Ecn.CE)).sack.m == SackVerdict.SKIP_ONCE
    assert tracker.probe(Probe(ev=1, probe_id=1, dscp=Dscp.TRIMMED)).sack.m == \
        SackVerdict.SKIP_ONCE
    # The probe answer reset the count of 4 and the timer.
    assert tracker.tick().sack is None and tracker.tick().sack is None
    assert tracker.counters[Verdict.PROBE] == 3


def test_probe_from_rx_meta():
    meta = RX_META.unpack(RX_META.pack(opcode=Opcode.PROBE, ev=5, ecn=Ecn.CE, dscp=Dscp.TRIMMABLE,
                                       ext=int.from_bytes(bytes(4) + b"\x01\x02", "little")))
    assert Probe.from_rx_meta(meta) == Probe(ev=5, probe_id=0x0102, ecn=Ecn.CE)


def test_coalescing_timer():
    tracker = RxTrackerV1(100)
    assert tracker.tick().sack is None                       # nothing uncovered
    in_order(tracker, 1, ev=11)
    assert tracker.tick().sack is None                       # 1 tick
    in_order(tracker, 1, ev=22)                              # does not restart the timer
    sack = tracker.tick().sack                               # 2 ticks since the first
    assert sack is not None and (sack.entropy, sack.trigger_psn) == (22, 102)
    assert sack.m == SackVerdict.NONE and sack.sack_offset == 1
    assert tracker.tick().sack is None and tracker.tick().sack is None
    # The timer SACK reset the count: three more packets make no SACK, two ticks do.
    assert [r.sack for r in in_order(tracker, 3)] == [None] * 3
    assert tracker.tick().sack is None and tracker.tick().sack.trigger_psn == 105
    # A SACK of the every-4th rule stops the timer.
    results = in_order(tracker, 4)
    assert results[3].sack is not None
    assert tracker.tick().sack is None and tracker.tick().sack is None


# --- Window, trims, access errors ----------------------------------------------------------------

@pytest.mark.parametrize("cack", [500, PSN_MODULUS - 100])
def test_window_nack(cack):
    tracker = RxTrackerV1(cack, mpr=128)
    edge = tracker.arrive(arrival(cack + 128))
    assert edge.placed and edge.sack is not None
    before = tracker.state
    res = tracker.arrive(arrival(cack + 129, ev=0x55, ecn=Ecn.CE, rtx=1))
    assert not res.placed and res.sack is None and tracker.state == before
    assert (res.nack.reason, res.nack.psn, res.nack.ev) == \
        (NackReason.PSN_OOR_WINDOW, (cack + 129) % PSN_MODULUS, 0x55)
    in_order(tracker, 1)                                        # cack moves by one
    assert tracker.arrive(arrival(cack + 129)).placed


@pytest.mark.parametrize("dscp, reason", [(Dscp.TRIMMED, NackReason.TRIMMED),
                                          (Dscp.TRIMMED_LASTHOP, NackReason.TRIMMED_LASTHOP)])
def test_trimmed(dscp, reason):
    """Trimmed packets: NACK by DSCP, nothing placed, no SACK, not counted toward 4; a trimmed
    duplicate is a duplicate (SACK); a trimmed packet beyond the window is NACKed for the window."""
    tracker = RxTrackerV1(100)
    in_order(tracker, 3)
    res = tracker.arrive(arrival(104, ev=9, dscp=dscp, ecn=Ecn.CE, ackreq=1, payload_length=64))
    assert (res.verdict, res.placed, res.sack) == (Verdict.TRIMMED, False, None)
    assert (res.nack.reason, res.nack.psn, res.nack.ev) == (reason, 104, 9)
    assert not tracker.received(104) and tracker.state.placed_bytes == 0
    assert tracker.arrive(arrival(104)).sack is not None       # the 4th accepted
    assert tracker.arrive(arrival(103, dscp=dscp)).verdict == Verdict.DUPLICATE
    assert tracker.arrive(arrival(3000, dscp=dscp)).nack.reason == NackReason.PSN_OOR_WINDOW


def test_access_error():
    tracker = RxTrackerV1(100)
    res = tracker.arrive(arrival(101, ev=3, access_ok=False))
    assert (res.verdict, res.placed, res.sack) == (Verdict.ACCESS_ERROR, False, None)
    assert (res.nack.reason, res.nack.psn, res.nack.ev) == (NackReason.UNEXP_EVENT, 101, 3)
    assert tracker.cack_psn == 100


def test_arrival_from_rx_meta():
    meta = RX_META.unpack(RX_META.pack(opcode=Opcode.WRITE_LAST_IMM, psn=7, ev=8, dscp=4, ecn=3,
                                       ackreq=1, rtx=1, msn=9, imm=10, payload_length=11))
    assert Arrival.from_rx_meta(meta) == Arrival(psn=7, ev=8, ecn=3, dscp=4, ackreq=1, rtx=1,
                                                 opcode=Opcode.WRITE_LAST_IMM, msn=9, imm=10,
                                                 payload_length=11)


def test_counters_wrap():
    """ooo_count wraps modulo 2^15, placed_256 is placed bytes / 256 modulo 2^24."""
    cfg = RxConfig(profile=1)
    state = replace(initial_state(0), ooo_count=OOO_MODULUS - 1, placed_bytes=(1 << 32) - 256)
    state, res = on_arrival(cfg, state, arrival(2, payload_length=300))
    assert res.sack.ooo_count == 0 and res.sack.placed_256 == 0
    assert state.placed_bytes == 44


# --- Write-with-Immediate completions ------------------------------------------------------------

def wimm(psn, msn, **kw):
    return arrival(psn, opcode=Opcode.WRITE_ONLY_IMM, ackreq=1, msn=msn, imm=0x1000 + msn, **kw)


def test_completions_in_msn_order():
    tracker = RxTrackerV1(PSN_MODULUS - 2)      # messages: MSN 1 = PSN 2^24-1, 2 = 0, 3 = 1..2
    assert tracker.arrive(arrival(2, opcode=Opcode.WRITE_LAST_IMM, ackreq=1, msn=3,
                                  imm=0x1003)).completions == ()
    assert tracker.arrive(wimm(0, 2)).completions == ()
    assert tracker.arrive(arrival(1, opcode=Opcode.WRITE_FIRST, msn=3)).completions == ()
    res = tracker.arrive(wimm(PSN_MODULUS - 1, 1))
    assert [(c.msn, c.imm, c.status) for c in res.completions] == \
        [(1, 0x1001, CompletionStatus.OK), (2, 0x1002, CompletionStatus.OK),
         (3, 0x1003, CompletionStatus.OK)]
    record = res.completions[0].record(qpn=5)
    assert COMPLETION.unpack(COMPLETION.pack(record)) == record and record["is_recv"] == 1
    assert tracker.arrive(wimm(3, 4)).completions[0].msn == 4     # in order: at once


def test_wimm_overflow_is_a_qp_error():
    tracker = RxTrackerV1(0, wimm_max=2)
    tracker.arrive(wimm(5, 5))
    tracker.arrive(wimm(3, 3))
    tracker.arrive(arrival(1))                  # a plain packet: no completion, no error
    res = tracker.arrive(wimm(4, 4))            # a third would wait
    assert res.verdict == Verdict.WIMM_OVERFLOW and not res.placed and res.sack is None
    assert [(c.msn, c.status) for c in res.completions] == [
        (3, CompletionStatus.QP_ERROR), (4, CompletionStatus.WIMM_OVERFLOW),
        (5, CompletionStatus.QP_ERROR)]
    # In the error state the QP drops everything and sends nothing.
    for res in (tracker.arrive(arrival(2)), tracker.probe(Probe(1, 1)), tracker.tick()):
        assert (res.placed, res.sack, res.nack, res.completions) == (False, None, None, ())
    assert tracker.counters[Verdict.QP_ERROR] == 2


def test_wimm_at_limit_in_order_is_fine():
    """With wimm_max completions waiting, one more that completes at once is no overflow."""
    tracker = RxTrackerV1(0, wimm_max=1)
    tracker.arrive(wimm(3, 3))
    res = tracker.arrive(wimm(1, 1))
    assert res.verdict == Verdict.PLACED and [c.msn for c in res.completions] == [1]


# --- Properties ----------------------------------------------------------------------------------

starts = st.one_of(st.integers(PSN_MODULUS - 300, PSN_MODULUS - 1), st.integers(0, PSN_MODULUS - 1))
events = st.lists(st.one_of(
    st.tuples(st.just("data"), st.integers(-3, 140), st.sampled_from([Ecn.ECT0, Ecn.CE]),
              st.sampled_from([Dscp.TRIMMABLE, Dscp.TRIMMED]), st.booleans(), st.booleans()),
    st.tuples(st.just("tick")), st.tuples(st.just("probe"))), min_size=10, max_size=300)


@settings(max_examples=200, deadline=None)
@given(start=starts, events=events)
def test_state_properties(start, events):
    """cack_psn never decreases; the window bits are exactly the PSNs placed; no PSN is placed
    twice; every SACK tells the truth (cack_psn, bitmap bits, trigger); at most 3 accepted packets
    go without a SACK unless a tick is due; out-of-order packets are SACKed at once."""
    tracker = RxTrackerV1(start, mpr=128)
    placed = set()
    unsacked = 0
    for event in events:
        cack = tracker.cack_psn
        if event[0] == "data":
            _, ahead, ecn, dscp, last, rtx = event
            psn = psn_add(cack, ahead)
            res = tracker.arrive(arrival(psn, ecn=ecn, dscp=dscp, ackreq=int(last), rtx=int(rtx)))
            if res.placed:
                assert psn not in placed
                placed.add(psn)
                unsacked = 0 if res.sack else unsacked + 1
                assert unsacked < 4
                if ahead > 1:
                    assert res.sack is not None
            else:
                assert res.verdict in (Verdict.DUPLICATE, Verdict.TRIMMED, Verdict.OUT_OF_WINDOW)
                assert (res.sack is not None) == (res.verdict == Verdict.DUPLICATE)
        elif event[0] == "tick":
            res = tracker.tick()
        else:
            res = tracker.probe(Probe(ev=1, probe_id=2))
        if res.sack is not None:
            unsacked = 0
        new = tracker.cack_psn
        assert 0 <= psn_diff(new, cack) <= 129
        # Every PSN from the start to cack_psn was placed; the window bits are the rest.
        assert all(psn_add(start, i) in placed for i in range(1, psn_diff(new, start) + 1))
        assert {psn_add(new, i) for i in range(1, 129) if tracker.received(psn_add(new, i))} == \
            {p for p in placed if 0 < psn_diff(p, new)}
        if res.sack is not None:
            s = res.sack
            assert s.cack_psn == new
            assert s.bitmap_psns() == {psn_add(s.base_psn, i) for i in range(64)
                                       if psn_add(s.base_psn, i) in placed}
            assert psn_diff(s.base_psn, new) >= 1
            if s.pr == 0:
                assert s.trigger_psn in placed or psn_diff(s.trigger_psn, start) <= 0


# === Profile 2 (the default) =====================================================================

SACK_V2_CASES = vectors.load("sack-v2.json")


@pytest.mark.parametrize("case", range(len(SACK_V2_CASES)))
def test_sack_v2_vectors(case):
    """Every arrival and probe of vectors/sack-v2.json: placed, SACK now, cack_psn after, every
    SACK field (tm included), and the probe answers."""
    vec = SACK_V2_CASES[case]
    tracker = RxTracker(vec["cack_start"], mpr=vec["mpr"], sack_bytes=vec["sack_bytes"])
    assert tracker.config.profile == 2
    sacks = 0
    for i, a in enumerate(vec["arrivals"]):
        if a["kind"] == "data":
            res = tracker.arrive(Arrival(psn=a["psn"], ev=a["ev"], payload_length=a["payload"],
                                         ecn=Ecn.CE if a["ce"] else Ecn.ECT0,
                                         ackreq=int(a["ackreq"]), rtx=int(a["rtx"])))
            got = {"placed": res.placed, "sack_now": res.sack is not None,
                   "cack_after": tracker.cack_psn}
            assert got == {k: a[k] for k in got}, f"arrival {i}: {a}"
            if res.sack is None and not res.placed:
                assert res.nack.reason == NackReason.PSN_OOR_WINDOW
            if res.sack is not None:
                assert res.path_ev == a["ev"]           # the SACK goes on the trigger's path
        else:
            res = tracker.probe(Probe(ev=a["ev"], probe_id=a.get("probe_id", 0),
                                      ecn=Ecn.CE if a["marked"] else Ecn.ECT0))
            assert tracker.cack_psn == a["cack_after"]
        if res.sack is not None:
            sacks += 1
            s = res.sack
            assert {"cack_psn": s.cack_psn, "ack_psn_offset": s.ack_psn_offset,
                    "sack_offset": s.sack_offset, "sack_bitmap": f"{s.sack_bitmap:016x}",
                    "mpr": s.mpr, "m": s.m, "entropy": s.entropy, "pr": s.pr,
                    "tm": s.tm} == a["sack"], f"arrival {i}: {a}"
            assert Sack.from_ext(s.ext_bytes()) == s
    assert sacks > 0


def v2(cack=100, **kw):
    return RxTracker(cack, **kw)


def test_v2_out_of_order_holes_and_ce_cause_no_sack():
    """Out-of-order arrivals, filled holes and CE marks make no SACK by themselves."""
    tracker = v2(sack_bytes=65536)
    for psn in (105, 103, 104, 101, 102):
        assert tracker.arrive(arrival(psn, ecn=Ecn.CE, payload_length=4096)).sack is None
    assert tracker.cack_psn == 105 and tracker.state.ooo_count == 3


@pytest.mark.parametrize("sack_bytes", [1024, 4096, 32768])
def test_v2_byte_budget_counts_at_least_1024_per_packet(sack_bytes):
    tracker = v2(sack_bytes=sack_bytes)
    sizes = [0, 64, 1000, 1024, 4096, 2048, 300] * 12
    count, got, want = 0, [], []
    for size in sizes:
        count += max(size, 1024)
        want.append(count >= sack_bytes)
        if count >= sack_bytes:
            count = 0
        got.append(tracker.arrive(arrival(tracker.cack_psn + 1, payload_length=size)).sack
                   is not None)
    assert got == want


@pytest.mark.parametrize("flag", [{"rtx": 1}, {"ackreq": 1}])
def test_v2_rtx_and_ackreq_at_once(flag):
    tracker = v2()
    tracker.arrive(arrival(101, payload_length=4096))
    res = tracker.arrive(arrival(105, ev=0xABC, **flag))
    assert res.sack is not None and res.sack.trigger_psn == 105 and res.sack.entropy == 0xABC
    assert res.sack.m == SackVerdict.NONE and tracker.state.since_sack == 0


def test_v2_cack_passing_an_ackreq_psn_sacks_at_once():
    """cack_psn reaching or passing the highest accepted AckReq PSN above it: a SACK whose
    trigger is the packet that moved cack_psn; it fires once."""
    tracker = v2()
    tracker.arrive(arrival(103, ackreq=1))                 # SACKed at once (AckReq)
    tracker.arrive(arrival(106, ackreq=1))                 # the highest
    assert tracker.arrive(arrival(102, ev=7)).sack is None
    assert tracker.arrive(arrival(104)).sack is None        # passes 103, not 106
    assert tracker.arrive(arrival(105)).sack is None
    res = tracker.arrive(arrival(101, ev=9))                # cack 100 -> 106
    assert tracker.cack_psn == 106 and res.sack is not None
    assert (res.sack.trigger_psn, res.sack.entropy, res.path_ev) == (101, 9, 9)
    assert tracker.state.ackreq_psn is None
    assert tracker.arrive(arrival(107)).sack is None


def test_v2_timer_sack_has_tm_and_the_last_accepted_trigger():
    tracker = v2()
    assert tracker.tick().sack is None
    tracker.arrive(arrival(101, ev=11))
    assert tracker.tick().sack is None
    tracker.arrive(arrival(103, ev=22, ecn=Ecn.CE))
    res = tracker.tick()
    s = res.sack
    assert s is not None and s.tm == 1 and s.trigger_psn == 103 and res.path_ev == 22
    assert (s.m, s.entropy) == (SackVerdict.SKIP_ONCE, 22)
    assert tracker.tick().sack is None and tracker.tick().sack is None
    assert tracker.state.since_sack == 0 and not tracker.state.ce_pending


def test_v2_ce_verdict_rides_on_the_next_sack():
    """The latest accepted CE-marked packet's EV, SKIP_ONCE, on the next SACK with pr = 0, which
    travels on its own trigger's path; a CE-marked duplicate does not count; cleared after."""
    tracker = v2()
    tracker.arrive(arrival(101, ev=1, ecn=Ecn.CE))
    tracker.arrive(arrival(102, ev=2, ecn=Ecn.CE))
    res = tracker.arrive(arrival(103, ev=3, ackreq=1))
    assert (res.sack.m, res.sack.entropy, res.path_ev) == (SackVerdict.SKIP_ONCE, 2, 3)
    dup = tracker.arrive(arrival(102, ev=4, ecn=Ecn.CE))
    assert dup.verdict == Verdict.DUPLICATE and dup.sack.m == SackVerdict.NONE
    assert dup.sack.entropy == 4 and dup.sack.ack_psn_offset == 0


def test_v2_probe_answers_leave_the_coalescing_state_alone():
    tracker = v2()
    tracker.arrive(arrival(101, ev=1, ecn=Ecn.CE, payload_length=4096))
    tracker.arrive(arrival(130, payload_length=4096))
    tracker.arrive(arrival(200, payload_length=4096))
    rep_before = tracker.state
    answer = tracker.probe(Probe(ev=0xBEEF, probe_id=77))
    s = answer.sack
    assert (s.pr, s.probe_id, s.entropy, s.m, s.ack_psn_offset, s.tm) == (1, 77, 0xBEEF, 0, 0, 0)
    assert s.base_psn == 64 and s.bitmap_psns() == set(range(64, 102))
    assert tracker.state == rep_before
    assert tracker.probe(Probe(ev=5, probe_id=1, ecn=Ecn.CE)).sack.m == SackVerdict.SKIP_ONCE
    assert tracker.probe(Probe(ev=5, probe_id=1, dscp=Dscp.TRIMMED)).sack.m == \
        SackVerdict.SKIP_ONCE
    # The timer still runs from the first packet, and the CE mark is still pending.
    assert tracker.tick().sack is None
    s = tracker.tick().sack
    assert s.tm == 1 and (s.m, s.entropy) == (SackVerdict.SKIP_ONCE, 1)


def test_v2_duplicates_at_or_below_cack_report_offset_zero():
    tracker = v2()
    tracker.arrive(arrival(101))
    tracker.arrive(arrival(104))
    far = tracker.arrive(arrival(psn_add(tracker.cack_psn, -(1 << 23))))
    assert far.verdict == Verdict.DUPLICATE and far.sack.ack_psn_offset == 0
    behind = tracker.arrive(arrival(99))
    assert behind.sack.ack_psn_offset == 0 and behind.sack.trigger_psn == tracker.cack_psn
    ahead = tracker.arrive(arrival(104))
    assert ahead.verdict == Verdict.DUPLICATE and ahead.sack.ack_psn_offset == 3
    # The distance rule: 2^23 - 1 ahead is beyond the window, 2^23 a duplicate.
    assert tracker.arrive(arrival(psn_add(101, (1 << 23) - 1))).verdict == Verdict.OUT_OF_WINDOW
    assert tracker.arrive(arrival(psn_add(101, 1 << 23))).verdict == Verdict.DUPLICATE


def test_v2_reported_blocks_rotate_over_every_live_block():
    """While a hole holds cack_psn, successive SACKs report every block holding received PSNs
    in turn (then start again), each aligned, PSNs at or below cack_psn set."""
    tracker = v2(cack=1000 - 1, mpr=1024)         # cack 999, block of cack + 1 = 960
    for psn in (1001, 1100, 1300, 1301, 1900):
        tracker.arrive(arrival(psn))
    bases = [tracker.arrive(arrival(1001 + k, rtx=1)).sack.base_psn for k in (1, 2, 3, 4, 5, 6)]
    assert bases == [1088, 1280, 1856, 960, 1088, 1280]
    s = tracker.arrive(arrival(1020, ackreq=1)).sack
    assert s.base_psn == 1856 and s.bitmap_psns() == {1900}
    s = tracker.arrive(arrival(1021, ackreq=1)).sack
    assert s.base_psn == 960 and s.sack_offset == -39
    assert s.bitmap_psns() == set(range(960, 1000)) | set(range(1001, 1008)) | {1020, 1021}


def test_v2_no_live_block_reports_the_block_of_cack_plus_one():
    tracker = v2(cack=127)
    s = tracker.arrive(arrival(128, ackreq=1)).sack
    assert (s.base_psn, s.sack_offset, s.sack_bitmap) == (128, 0, 1 << 63)


@pytest.mark.parametrize("sack_bytes", [512, 1000, 3000, 1 << 17, True])
def test_v2_bad_sack_bytes_raises(sack_bytes):
    with pytest.raises(ValueError, match="sack_bytes"):
        RxTracker(0, sack_bytes=sack_bytes)


def test_v2_bad_profile_raises():
    with pytest.raises(ValueError, match="profile"):
        RxTracker(0, profile=3)


def test_v2_reset_clears_everything_and_flushes_completions():
    tracker = v2()
    tracker.arrive(arrival(103, opcode=Opcode.WRITE_ONLY_IMM, ackreq=1, msn=2, imm=5))
    tracker.arrive(arrival(101, ecn=Ecn.CE))
    flushed = tracker.reset(5000)
    assert [(c.msn, c.status) for c in flushed] == [(2, CompletionStatus.FLUSHED)]
    assert tracker.state == initial_state(5000) and tracker.cack_psn == 5000
    assert tracker.arrive(arrival(101)).verdict == Verdict.OUT_OF_WINDOW or True
    assert tracker.arrive(arrival(5001)).placed


v2_events = st.lists(st.one_of(
    st.tuples(st.just("data"), st.integers(-3, 200), st.sampled_from([Ecn.ECT0, Ecn.CE]),
              st.sampled_from([Dscp.TRIMMABLE] * 4 + [Dscp.TRIMMED]), st.booleans(),
              st.booleans(), st.sampled_from([0, 64, 1024, 4096])),
    st.tuples(st.just("tick")), st.tuples(st.just("probe"))), min_size=10, max_size=300)


@settings(max_examples=150, deadline=None)
@given(start=starts, events=v2_events, sack_bytes=st.sampled_from([1024, 8192, 32768]))
def test_v2_state_properties(start, events, sack_bytes):
    """Profile 2: every SACK tells the truth (cack_psn, an aligned block whose bits are exactly
    the received PSNs, PSNs at or below cack_psn set, sack_offset >= -62); a SACK with pr = 0
    names a trigger that was received (or 0 offset); no accepted packet waits more than 2 ticks
    or sack_bytes of coalescing without a SACK; out of order arrivals without a flag make none;
    while cack_psn does not move, consecutive SACKs with pr = 0 visit every live block."""
    tracker = RxTracker(start, mpr=128, sack_bytes=sack_bytes)
    placed = set()
    uncovered_ticks = None
    count = 0
    for event in events:
        cack = tracker.cack_psn
        if event[0] == "data":
            _, ahead, ecn, dscp, ackreq, rtx, size = event
            psn = psn_add(cack, ahead)
            res = tracker.arrive(arrival(psn, ecn=ecn, dscp=dscp, ackreq=int(ackreq),
                                         rtx=int(rtx), payload_length=size))
            if res.placed:
                assert psn not in placed
                placed.add(psn)
                count += max(size, 1024)
                if res.sack is None:
                    assert not (ackreq or rtx) and count < sack_bytes
                    uncovered_ticks = 0 if uncovered_ticks is None else uncovered_ticks
            else:
                assert (res.sack is not None) == (res.verdict == Verdict.DUPLICATE)
        elif event[0] == "tick":
            res = tracker.tick()
            if uncovered_ticks is not None:
                uncovered_ticks += 1
                assert (res.sack is not None) == (uncovered_ticks == 2)
            else:
                assert res.sack is None
        else:
            res = tracker.probe(Probe(ev=1, probe_id=2))
            assert res.sack.pr == 1 and res.sack.base_psn == psn_add(tracker.cack_psn, 1) & ~63
        new = tracker.cack_psn
        if res.sack is not None:
            s = res.sack
            assert s.cack_psn == new and s.base_psn % 64 == 0 and s.sack_offset >= -62
            assert s.bitmap_psns() == {psn_add(s.base_psn, i) for i in range(64)
                                       if psn_add(s.base_psn, i) in placed or
                                       psn_diff(psn_add(s.base_psn, i), start) <= 0}
            if not s.pr:
                count, uncovered_ticks = 0, None
                assert s.ack_psn_offset == 0 or s.trigger_psn in placed
            else:
                assert s.ack_psn_offset == 0

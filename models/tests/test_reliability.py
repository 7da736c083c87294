# SPDX-License-Identifier: BSD-2-Clause
"""The reliability block's model: every rule of its docstring on hand-made inputs, then the closed
loop of ``reliability_world`` (transmit engine, lossy fabric, receive trackers, EV table) with
hypothesis: no retransmission of an acknowledged PSN, PSN limits never move backwards, completions
in order per QP, every work request completed and every PSN acknowledged unless the QP failed,
QP errors confined to their QP, a dead path dropped after one timeout and used again after it
heals."""

import random

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from models.layouts import PETH, NackReason, Opcode, SackVerdict
from models.records import (CompletionStatus, EvEvent, RetxCause, SEND_RECORD, ext_to_int,
                            int_to_ext)
from models.reliability import (COUNTERS, TRACE, QpConfig, Reliability, Source, period_ticks,
                                timeout_ticks, window_of)
from models.nscc import NsccConfig
from models.rx_tracker import Nack, Sack, psn_add, psn_diff
from models.spray import ev_path, make_ev
from models.reliability_world import Scenario, World, run_model
from models.tests.strategies import reliability_scenarios as scenarios

EV_A = make_ev(0, 1, 0x111)
EV_B = make_ev(1, 0, 0x222)
EV_C = make_ev(0, 2, 0x333)
CFG = QpConfig(w_max=8, timeout_exp=3, retry_limit=2, probe_period=4)


# --- record builders ------------------------------------------------------------------------------

def send(qpn, psn, ev=EV_A, req_id=0, last=0, rtx=0, flushed=0):
    return SEND_RECORD.unpack(SEND_RECORD.pack(qpn=qpn, psn=psn, ev=ev, req_id=req_id, last=last,
                                               rtx=rtx, flushed=flushed))


def sack(qpn, cack, *, offset=0, bitmap=(), base=None, m=SackVerdict.NONE, pr=0, ev=EV_A,
         probe_id=0):
    """A FEEDBACK_RECORD SACK: ``bitmap`` lists the PSNs set (base = cack + 1 by default)."""
    base = psn_add(cack, 1) if base is None else base
    bits = 0
    for psn in bitmap:
        bits |= 1 << (63 - (psn - base) % (1 << 24))
    s = Sack(cack_psn=cack, ack_psn_offset=offset, sack_offset=psn_diff(base, cack),
             sack_bitmap=bits, mpr=8, m=m, pr=pr, entropy=ev, probe_id=probe_id, ooo_count=0,
             placed_256=0)
    return {"qpn": qpn, "opcode": Opcode.SACK, "ecn": 0, "ext": ext_to_int(s.ext_bytes())}


def nack(qpn, reason, psn, ev=EV_A):
    return {"qpn": qpn, "opcode": Opcode.NACK, "ecn": 0,
            "ext": ext_to_int(Nack(reason, psn, ev).ext_bytes())}


def wr(qpn, req_id):
    return {"qpn": qpn, "req_id": req_id}


def marked(qpn, ev, valid=1):
    return {"qpn": qpn, "ev": ev, "valid": valid, "last": 1}


def block(n_qps=2, start=100, cfg=CFG, profile=1, **kw):
    """A model with every QP set up from ``start`` (QP q from start + 1000 q), outputs cleared
    (profile 1 unless asked: the hand-made tests of the rules both profiles share, and of the
    PSN limit of profile 1; the profile-2 rules have their own tests below)."""
    rel = Reliability(n_qps=n_qps, ring=16, probe_entries=4, wr_depth=4, timer_bits=8,
                      profile=profile, **kw)
    for q in range(n_qps):
        rel.setup(q, start + 1000 * q, True, cfg)
    rel.take()
    return rel


def ticks(rel, n):
    for _ in range(n):
        rel.tick()


def sent(rel, qpn, first, count, **kw):
    for i in range(count):
        rel.send(send(qpn, psn_add(first, i), **kw))


def retx(qpn, psn, ev, cause):
    return {"qpn": qpn, "psn": psn, "avoid_ev": ev, "cause": cause}


def cpl(qpn, req_id, status=CompletionStatus.OK):
    return {"qpn": qpn, "req_id": req_id, "msn": 0, "status": status, "is_recv": 0, "has_imm": 0,
            "imm": 0}


# --- parameters, set-up, the PSN limit ------------------------------------------------------------

@pytest.mark.parametrize("kwargs", [dict(n_qps=0), dict(ring=0), dict(probe_entries=0),
                                    dict(wr_depth=0), dict(timer_bits=1), dict(n_qps=True),
                                    dict(ring=4.0)])
def test_rejects_parameters(kwargs):
    with pytest.raises(ValueError):
        Reliability(**kwargs)


@pytest.mark.parametrize("kwargs", [dict(w_max=-1), dict(w_max=1 << 16), dict(timeout_exp=16),
                                    dict(retry_limit=16), dict(probe_period=-1),
                                    dict(mpr=True)])
def test_rejects_config(kwargs):
    with pytest.raises(ValueError):
        QpConfig(**kwargs)


def test_window_and_timer_rules():
    assert window_of(QpConfig(), 64) == 64 and window_of(QpConfig(w_max=200), 64) == 64
    assert window_of(QpConfig(w_max=200, mpr=128), 1024) == 128
    assert window_of(QpConfig(w_max=5), 64) == 5
    assert timeout_ticks(QpConfig(timeout_exp=6), 10) == 64
    assert timeout_ticks(QpConfig(timeout_exp=12), 10) == 512      # k limited to timer_bits - 1
    assert period_ticks(QpConfig(probe_period=64), 10) == 64
    assert period_ticks(QpConfig(probe_period=0), 8) == 256
    assert period_ticks(QpConfig(probe_period=300), 8) == 300 - 256


def test_setup_announces_the_limit_and_the_window_bounds_new_psns():
    rel = Reliability(n_qps=2, ring=16, profile=1)
    rel.setup(0, 0xFFFFFE, True, QpConfig(w_max=4))
    rel.setup(1, 7, False)
    assert rel.take()["limit"] == [{"qpn": 0, "psn_limit": 0xFFFFFE + 4 - (1 << 24)}]
    sent(rel, 0, 0xFFFFFE, 5)              # the fifth is beyond the window
    rel.send(send(0, 5))                   # not the next PSN
    rel.send(send(1, 7))                   # QP 1 disabled
    assert rel.counters["send"] == 4 and rel.counters["send_bad"] == 2
    assert rel.counters["send_dropped"] == 1
    assert rel.qp(0).next_psn == 2
    rel.feedback(sack(0, 0xFFFFFF))
    assert rel.take()["limit"] == [{"qpn": 0, "psn_limit": 4}]


# --- SACKs ----------------------------------------------------------------------------------------

def test_sack_completes_in_order_and_retires():
    rel = block()
    for r in (7, 8, 9):
        rel.work_request(wr(0, r))
    rel.send(send(0, 100, req_id=7, last=1))
    rel.send(send(0, 101, req_id=8))
    rel.send(send(0, 102, req_id=8, last=1))
    rel.send(send(0, 103, req_id=9, last=1))
    rel.feedback(sack(0, 99, bitmap=[101, 102]))         # holes: nothing completes
    assert rel.take()["cpl"] == [] and rel.qp(0).cack == 99
    rel.feedback(sack(0, 100))                             # fills the hole: cack jumps to 102
    out = rel.take()
    assert out["limit"] == [{"qpn": 0, "psn_limit": 103 + 8}]
    assert out["cpl"] == [cpl(0, 7), cpl(0, 8)]
    assert out["retire"] == [{"qpn": 0, "req_id": 7}, {"qpn": 0, "req_id": 8}]
    assert list(rel.qp(0).wrs) == [9]


def test_sack_trigger_bitmap_and_stale_cack():
    rel = block()
    sent(rel, 0, 100, 6)
    rel.feedback(sack(0, 99, offset=3))                    # trigger 102 (pr = 0)
    rel.feedback(sack(0, 99, offset=4, pr=1))              # pr = 1: no trigger
    assert [rel.qp(0).entries[p].acked for p in range(100, 106)] == [0, 0, 1, 0, 0, 0]
    rel.feedback(sack(0, 101, bitmap=[104], base=104))
    assert rel.qp(0).cack == 102 and rel.qp(0).entries[104].acked
    rel.feedback(sack(0, 99, bitmap=[103], base=100))     # behind: only its bitmap counts
    assert rel.qp(0).cack == 104
    assert rel.counters["sack"] == 4 and rel.take()["ev"] == []


def test_sack_beyond_next_psn_is_dropped_whole():
    rel = block()
    sent(rel, 0, 100, 2)
    rel.feedback(sack(0, 102, m=SackVerdict.SKIP_ONCE))
    assert rel.counters["fb_bad"] == 1 and rel.qp(0).cack == 99
    assert rel.take() == {s: [] for s in ("retx", "limit", "retire", "cpl", "ev", "ctrl")}


def test_sack_skip_once_and_unknown_feedback():
    rel = block()
    sent(rel, 0, 100, 1)
    rel.feedback(sack(0, 99, m=SackVerdict.SKIP_ONCE, ev=EV_B))
    rel.feedback(dict(sack(0, 99), opcode=Opcode.PROBE))
    rel.feedback(sack(5, 99))
    assert rel.take()["ev"] == [{"qpn": 0, "ev": EV_B, "kind": EvEvent.SKIP}]
    assert (rel.counters["fb_bad"], rel.counters["fb_dropped"]) == (1, 1)


def test_wr_missing_is_counted():
    rel = block()
    rel.send(send(0, 100, req_id=3, last=1))
    rel.feedback(sack(0, 100))
    assert rel.take()["cpl"] == [cpl(0, 3)] and rel.counters["wr_missing"] == 1


# --- NACKs ----------------------------------------------------------------------------------------

def test_nack_trimmed_and_lasthop_retransmit_at_once():
    rel = block()
    sent(rel, 0, 100, 3)
    rel.feedback(nack(0, NackReason.TRIMMED, 100))
    rel.feedback(nack(0, NackReason.TRIMMED_LASTHOP, 101))
    rel.feedback(nack(0, NackReason.TRIMMED, 100))         # already requested: stale
    out = rel.take()
    assert out["retx"] == [retx(0, 100, EV_A, RetxCause.NACK_TRIMMED),
                           retx(0, 101, EV_A, RetxCause.NACK_TRIMMED)]
    assert out["ev"] == [{"qpn": 0, "ev": EV_A, "kind": EvEvent.SKIP}] * 2
    assert rel.counters["fb_stale"] == 1
    rel.send(send(0, 100, ev=EV_B, rtx=1))
    rel.feedback(nack(0, NackReason.TRIMMED_LASTHOP, 100, ev=EV_A))   # the old copy: stale
    assert rel.take()["retx"] == [] and rel.counters["fb_stale"] == 2


def test_nack_no_pkt_buffer_waits_one_probe_period():
    rel = block()
    sent(rel, 0, 100, 1)
    rel.feedback(nack(0, NackReason.NO_PKT_BUFFER, 100))
    ticks(rel, 3)
    assert rel.take()["retx"] == []
    rel.tick()
    assert rel.take()["retx"] == [retx(0, 100, EV_A, RetxCause.NACK_OTHER)]


def test_nack_oor_waits_for_cack_or_its_timeout():
    rel = block()
    sent(rel, 0, 100, 3)
    rel.feedback(nack(0, NackReason.PSN_OOR_WINDOW, 101))
    rel.feedback(nack(0, NackReason.PSN_OOR_WINDOW, 102))
    rel.feedback(sack(0, 99, bitmap=[102]))                # no cack move: still waiting
    assert rel.take()["retx"] == []
    rel.feedback(sack(0, 100))
    assert rel.take()["retx"] == [retx(0, 101, EV_A, RetxCause.CACK_MOVED)]
    rel2 = block()
    sent(rel2, 0, 100, 1)
    rel2.feedback(nack(0, NackReason.PSN_OOR_WINDOW, 100))
    ticks(rel2, 8)
    out = rel2.take()
    assert out["retx"] == [retx(0, 100, EV_A, RetxCause.NACK_OTHER)] and out["ev"] == []
    assert rel2.counters["timeout"] == 0


def test_nack_bad_and_stale():
    rel = block()
    sent(rel, 0, 100, 2)
    rel.feedback(nack(0, NackReason.TRIMMED, 102))         # never sent
    rel.feedback(nack(0, 0x05, 100))                       # unknown reason
    rel.feedback(sack(0, 100))
    rel.feedback(nack(0, NackReason.TRIMMED, 100))         # acknowledged: stale, SKIP anyway
    assert rel.counters["fb_bad"] == 2 and rel.counters["fb_stale"] == 1
    out = rel.take()
    assert out["retx"] == [] and out["ev"] == [{"qpn": 0, "ev": EV_A, "kind": EvEvent.SKIP}]


def test_unexp_event_fails_only_its_qp():
    rel = block()
    for q in (0, 1):
        rel.work_request(wr(q, 1))
        rel.work_request(wr(q, 2))
    sent(rel, 0, 100, 2, req_id=1)
    sent(rel, 1, 1100, 2, req_id=1)
    rel.feedback(nack(0, NackReason.UNEXP_EVENT, 101, ev=EV_C))
    out = rel.take()
    assert out["cpl"] == [cpl(0, 1, CompletionStatus.QP_ERROR),
                          cpl(0, 2, CompletionStatus.QP_ERROR)]
    assert out["retire"] == [{"qpn": 0, "req_id": 1}, {"qpn": 0, "req_id": 2}]
    rel.work_request(wr(0, 3))
    rel.send(send(0, 102))
    rel.feedback(sack(0, 101))
    rel.marked(marked(0, EV_A))
    ticks(rel, 20)
    out = rel.take()
    assert out["cpl"] == [cpl(0, 3, CompletionStatus.QP_ERROR)]
    assert all(r["qpn"] == 1 for s in ("retx", "ev") for r in out[s])
    assert (rel.counters["send_dropped"], rel.counters["fb_dropped"],
            rel.counters["marked_dropped"], rel.counters["qp_error"]) == (1, 1, 1, 1)
    rel.feedback(sack(1, 1101))
    assert rel.take()["cpl"] == []                         # QP 1 never saw a last PSN
    assert not rel.qp(1).error


# --- timeouts -------------------------------------------------------------------------------------

def test_timeout_retransmits_avoiding_the_ev_and_reports_bad():
    rel = block()
    rel.send(send(0, 100))
    ticks(rel, 1)
    rel.send(send(0, 101, ev=EV_B))
    ticks(rel, 7)
    out = rel.take()
    assert out["retx"] == [retx(0, 100, EV_A, RetxCause.TIMEOUT)]
    assert out["ev"] == [{"qpn": 0, "ev": EV_A, "kind": EvEvent.BAD}]
    rel.tick()
    assert rel.take()["retx"] == [retx(0, 101, EV_B, RetxCause.TIMEOUT)]
    ticks(rel, 30)
    assert rel.take()["retx"] == []                        # pending: no timer until the resend
    rel.send(send(0, 100, ev=EV_C, rtx=1))
    ticks(rel, 8)
    assert rel.take()["retx"] == [retx(0, 100, EV_C, RetxCause.TIMEOUT)]
    assert rel.qp(0).entries[100].retries == 2


def test_retry_limit_puts_the_qp_in_error():
    rel = block()
    rel.work_request(wr(0, 5))
    rel.work_request(wr(0, 6))
    rel.send(send(0, 100, req_id=5, last=1))
    rel.send(send(0, 101, req_id=6))
    for i in range(CFG.retry_limit):
        ticks(rel, 8)
        out = rel.take()
        assert [r["psn"] for r in out["retx"]] == [100, 101], i
        rel.send(send(0, 100, ev=EV_B, rtx=1))
        rel.send(send(0, 101, ev=EV_B, rtx=1))
    ticks(rel, 8)
    out = rel.take()
    assert out["retx"] == [] and out["ev"] == []
    assert out["cpl"] == [cpl(0, 5, CompletionStatus.RETRY_EXCEEDED),
                          cpl(0, 6, CompletionStatus.RETRY_EXCEEDED)]
    assert rel.qp(0).error and rel.counters["timeout"] == 2 * CFG.retry_limit + 1


def test_nack_retransmissions_are_not_charged_and_flushed_ones_neither():
    rel = block()
    rel.send(send(0, 100))
    for _ in range(5):
        rel.feedback(nack(0, NackReason.TRIMMED, 100))
        rel.send(send(0, 100, rtx=1))
        rel.send(send(0, 100, flushed=1, rtx=1))
        rel.send(send(0, 100, rtx=1, ev=EV_B))
        rel.feedback(nack(0, NackReason.TRIMMED, 100, ev=EV_B))
        rel.send(send(0, 100, rtx=1))
    out = rel.take()
    assert [r["cause"] for r in out["retx"]] == [RetxCause.NACK_TRIMMED, RetxCause.FLUSHED,
                                                 RetxCause.NACK_TRIMMED] * 5
    assert rel.qp(0).entries[100].retries == 0 and out["ev"][0]["kind"] == EvEvent.SKIP
    rel.send(send(0, 100, flushed=1, ev=EV_B))             # not the latest copy's EV: stale
    rel.send(send(0, 101, rtx=1))                          # not outstanding: stale
    assert rel.counters["send_stale"] == 2


# --- the probe list -------------------------------------------------------------------------------

def probe_ids(out):
    return [PETH.unpack(int_to_ext(r["ext"], PETH.size))["probe_id"] for r in out["ctrl"]]


def test_probes_three_clean_answers_recover():
    rel = block()
    sent(rel, 0, 100, 1)
    rel.marked(marked(0, EV_A))
    rel.marked(marked(0, EV_A))                            # already on the list
    rel.marked(marked(0, EV_B, valid=0))
    ticks(rel, 3)
    assert rel.take()["ctrl"] == []
    answers = [SackVerdict.NONE, SackVerdict.NONE, SackVerdict.SKIP_ONCE, SackVerdict.NONE,
               SackVerdict.NONE, SackVerdict.NONE]
    seen = []
    for m in answers:
        rel.tick()
        ticks(rel, 3)
        out = rel.take()
        assert [(r["qpn"], r["opcode"], r["ev"]) for r in out["ctrl"]] == [(0, Opcode.PROBE, EV_A)]
        seen += probe_ids(out)
        rel.feedback(sack(0, 99, pr=1, ev=EV_A, probe_id=seen[-1], m=m))
    assert seen == list(range(6))
    out = rel.take()
    assert out["ev"][-1] == {"qpn": 0, "ev": EV_A, "kind": EvEvent.RECOVERED}
    assert rel.probe_list() == [None] * 4 and rel.counters["probe_answer"] == 6
    rel.feedback(sack(0, 99, pr=1, ev=EV_A, probe_id=seen[-1]))
    assert rel.counters["probe_stale"] == 1


def test_probe_unanswered_within_the_timeout_restarts_the_count():
    rel = block(cfg=QpConfig(w_max=8, timeout_exp=1, probe_period=4))
    rel.setup(0, 100, True, QpConfig(w_max=8, timeout_exp=1, probe_period=4))
    rel.marked(marked(0, EV_A))
    ticks(rel, 4)
    first = probe_ids(rel.take())
    rel.feedback(sack(0, 99, pr=1, ev=EV_A, probe_id=first[0]))
    assert rel.probe_list()[0][2] == 1
    ticks(rel, 4)
    ticks(rel, 2)                                           # the timeout: 2 ticks
    assert rel.probe_list()[0][2:4] == (0, False)
    late = probe_ids(rel.take())
    rel.feedback(sack(0, 99, pr=1, ev=EV_A, probe_id=late[0]))
    assert rel.counters["probe_stale"] == 1


def test_probe_list_full_and_outstanding_probe_skips_a_period():
    rel = block(cfg=QpConfig(w_max=8, timeout_exp=4, probe_period=4))
    for i in range(5):
        rel.marked(marked(0, make_ev(0, 1, i)))
    assert rel.counters["probe_full"] == 1 and rel.counters["marked"] == 5
    ticks(rel, 4)
    assert probe_ids(rel.take()) == [0, 1, 2, 3]
    ticks(rel, 4)                                           # still outstanding (timeout 16)
    assert rel.take()["ctrl"] == []
    rel.setup(0, 100, True, CFG)                            # a set-up frees the QP's entries
    assert rel.probe_list() == [None] * 4


def test_probe_id_wraps():
    rel = block()
    rel.probe_id = 0xFFFF
    rel.marked(marked(0, EV_A))
    rel.marked(marked(1, EV_B))
    ticks(rel, 4)
    assert probe_ids(rel.take()) == [0xFFFF, 0]


# --- the trace ------------------------------------------------------------------------------------

def test_apply_follows_the_trace_and_refuses_a_wrong_tick():
    rel = block(now=0xFFFFFFFF)
    rel.apply({"source": Source.WORK_REQUEST, "tick": 0xFFFFFFFF}, wr(0, 1))
    rel.apply({"source": Source.TICK, "tick": 0})
    rel.apply({"source": Source.SEND, "tick": 0}, send(0, 100, req_id=1, last=1))
    with pytest.raises(ValueError):
        rel.apply({"source": Source.TICK, "tick": 5})
    with pytest.raises(ValueError):
        rel.apply({"source": Source.FEEDBACK, "tick": 1}, sack(0, 100))
    with pytest.raises(ValueError):
        rel.apply({"source": 7, "tick": 0}, sack(0, 100))
    rel.apply({"source": Source.FEEDBACK, "tick": 0}, sack(0, 100))
    assert rel.take()["cpl"] == [cpl(0, 1)]
    assert TRACE.unpack(TRACE.pack(source=Source.TICK, tick=3)) == {"source": 4, "tick": 3}
    assert set(COUNTERS) == set(rel.counters)


# --- profile 2: the window in flight, AckReq, path loss, reset ---------------------------------

CFG2 = QpConfig(w_max=4, mpr=128, timeout_exp=3, retry_limit=2, probe_period=4)
RANGE = 16              # limit (a): min(MPR, ring) with the ring of 16 entries of block()


def rooms(out):
    return [(r["psn_limit"], r["credit"]) for r in out["limit"]]


def test_v2_window_counts_packets_in_flight_not_psns():
    """Limit (b) counts PSNs in flight by their latest copy: a SACK that takes PSNs behind a
    hole as received gives their places back (credit), the hole keeps one; limit (a) is
    cack_psn + 1 + MPR; a new PSN beyond W_max in flight is refused."""
    rel = block(n_qps=1, cfg=CFG2, profile=2)
    assert rel.qp(0).credit == 4 and rel.qp(0).in_flight == 0
    sent(rel, 0, 100, 4)
    rel.send(send(0, 104))                                  # a fifth in flight: refused
    assert rel.counters["send_bad"] == 1 and rel.qp(0).next_psn == 104
    out = rel.take()
    assert rooms(out) == [(100 + RANGE, 5)]                   # the refused send's credit back
    rel.feedback(sack(0, 99, bitmap=(101, 102, 103)))       # 100 still missing
    assert rooms(rel.take()) == [(100 + RANGE, 8)] and rel.qp(0).in_flight == 1
    sent(rel, 0, 104, 3)
    assert rel.qp(0).in_flight == 4 and rel.counters["send_bad"] == 1
    rel.feedback(sack(0, 106))
    assert rooms(rel.take()) == [(107 + RANGE, 12)] and rel.qp(0).in_flight == 0


def test_v2_nacks_release_or_keep_places():
    """NACK TRIMMED: the place is given back at once (retransmission requested); NO_PKT_BUFFER
    and PSN_OOR_WINDOW keep theirs until their retransmission is requested; a retransmission
    takes a place again; a stale retransmission's credit comes straight back."""
    rel = block(n_qps=1, cfg=CFG2, profile=2)
    sent(rel, 0, 100, 3)
    rel.take()
    rel.feedback(nack(0, NackReason.TRIMMED, 100))
    rel.feedback(nack(0, NackReason.NO_PKT_BUFFER, 101))
    rel.feedback(nack(0, NackReason.PSN_OOR_WINDOW, 102))
    out = rel.take()
    assert rooms(out) == [(100 + RANGE, 5)] and rel.qp(0).in_flight == 2
    assert [r["psn"] for r in out["retx"]] == [100]
    rel.send(send(0, 100, rtx=1, ev=EV_B))
    assert rel.qp(0).in_flight == 3
    ticks(rel, CFG2.probe_period)                           # NO_PKT_BUFFER's wait ends
    out = rel.take()
    assert [r["psn"] for r in out["retx"]] == [101] and rooms(out) == [(100 + RANGE, 6)]
    rel.feedback(sack(0, 100))                               # cack moves: the OOR PSN goes
    out = rel.take()
    assert [(r["psn"], r["cause"]) for r in out["retx"]] == [(102, RetxCause.CACK_MOVED)]
    assert rooms(out) == [(101 + RANGE, 8)] and rel.qp(0).in_flight == 0
    rel.send(send(0, 100, rtx=1))                            # acknowledged already: stale
    assert rooms(rel.take()) == [(101 + RANGE, 9)]


def test_v2_ackreq_at_half_window_once_in_flight():
    rel = block(n_qps=1, cfg=QpConfig(w_max=8, timeout_exp=3, probe_period=4), profile=2)
    due = []
    for k in range(8):
        due.append(rel.ackreq_due(0))
        rel.send(send(0, 100 + k))
    assert due == [False, False, False, True, False, False, False, False]
    assert rel.qp(0).ackreq_psn == 103 and rel.qp(0).entries[103].ackreq
    rel.feedback(sack(0, 102, bitmap=(104,)))               # 103 still in flight
    assert not rel.ackreq_due(0)
    rel.feedback(sack(0, 103))
    assert rel.qp(0).ackreq_psn is None and rel.ackreq_due(0)
    assert not block(profile=1).ackreq_due(0)


def test_v2_timeout_declares_the_path_lost_atomically():
    """The first timeout on a path (plane, j) requests every other PSN in flight on it at once
    (PATH_LOST, in PSN order, not charged), cancels their timers; PSNs on other paths, or
    waiting on a NACK, keep theirs."""
    rel = block(n_qps=1, cfg=QpConfig(w_max=16, timeout_exp=3, probe_period=32), profile=2)
    ev_a2 = make_ev(0, 1, 0x999)                             # EV_A's path, another salt
    rel.send(send(0, 100, ev=EV_A))
    rel.tick()
    for k, ev in enumerate((ev_a2, EV_B, EV_A, EV_C, ev_a2)):
        rel.send(send(0, 101 + k, ev=ev))
    rel.feedback(nack(0, NackReason.NO_PKT_BUFFER, 105, ev=ev_a2))   # PSN 105 waits
    rel.feedback(sack(0, 99, bitmap=(103,)))                          # 103 acknowledged
    rel.take()
    ticks(rel, 7)
    out = rel.take()
    assert [(r["psn"], r["cause"]) for r in out["retx"]] == [
        (100, RetxCause.TIMEOUT), (101, RetxCause.PATH_LOST)]
    assert out["ev"] == [{"qpn": 0, "ev": EV_A, "kind": EvEvent.BAD}]
    assert rel.qp(0).entries[101].retries == 0 and rel.qp(0).entries[100].retries == 1
    ticks(rel, 1)
    assert [(r["psn"], r["cause"]) for r in rel.take()["retx"]] == [(102, RetxCause.TIMEOUT),
                                                                    (104, RetxCause.TIMEOUT)]
    ticks(rel, 24)
    assert [(r["psn"], r["cause"]) for r in rel.take()["retx"]] == [(105, RetxCause.NACK_OTHER)]


def test_v2_reset_flushes_pending_work_requests():
    rel = block(n_qps=2, cfg=CFG2, profile=2)
    for r in (7, 8):
        rel.work_request(wr(0, r))
    sent(rel, 0, 100, 2, req_id=7)
    rel.reset(0, 5000)
    out = rel.take()
    assert out["cpl"] == [cpl(0, 7, CompletionStatus.FLUSHED), cpl(0, 8, CompletionStatus.FLUSHED)]
    assert out["retire"] == [{"qpn": 0, "req_id": 7}, {"qpn": 0, "req_id": 8}]
    assert rooms(out) == [(5000 + RANGE, 4)]
    qp = rel.qp(0)
    assert (qp.cack, qp.next_psn, qp.entries, qp.in_flight, qp.error) == (4999, 5000, {}, 0, False)
    with pytest.raises(ValueError):
        block(profile=1).reset(0, 5)


def test_v2_qp_error_closes_the_room():
    rel = block(n_qps=1, cfg=CFG2, profile=2)
    sent(rel, 0, 100, 2)
    rel.take()
    rel.feedback(nack(0, NackReason.UNEXP_EVENT, 101))
    assert rooms(rel.take()) == [(102, 4)]


# --- the closed loop ------------------------------------------------------------------------------

def loop(seed, scenario, cfgs, *, ring=16, probe_entries=8, wr_depth=8, timer_bits=8,
         max_cycles=400_000):
    """Run the model in the world; returns (world, model, cycles)."""
    rng = random.Random(seed)
    n = len(cfgs)
    starts = [rng.choice((rng.randrange(1 << 24), (1 << 24) - rng.randint(1, 40)))
              for _ in range(n)]
    tick0 = rng.choice((0, rng.randrange(1 << 32), (1 << 32) - 3))
    world = World(rng, scenario, starts, wr_depth=wr_depth, tick0=tick0)
    model = Reliability(n_qps=n, ring=ring, probe_entries=probe_entries, wr_depth=wr_depth,
                        timer_bits=timer_bits, now=tick0, profile=scenario.profile)
    for q in range(n):
        model.setup(q, starts[q], True, cfgs[q])
    for stream, records in model.take().items():
        for rec in records:
            world.output(stream, rec)
    cycles = run_model(world, model, max_cycles)
    world.check_end()
    return world, model, cycles


def cut_off_cycles(sc, gap=0):
    """The longest time (cycles) during which every path a QP other than the doomed one uses
    is dead or on a plane that is down (the doomed QP has the last T1 to itself; the others
    spread over the rest, as ``World._ev_sets`` lays them); spans separated by less than
    ``gap`` cycles count as one (copies a timeout apart may all miss a short gap)."""
    usable = sc.num_t1 - (sc.doomed_qp is not None)
    paths = [(p, j) for p in range(sc.planes) for j in range(usable)]

    def dead(path, cycle):
        return any(d == path and first <= cycle < (end if end is not None else 1 << 62)
                   for d, first, end in sc.dead_paths) or \
            any(p == path[0] and first <= cycle < end for p, first, end in sc.planes_down)

    edges = sorted({t for _, a, b in sc.dead_paths for t in (a, b) if t is not None} |
                   {t for _, a, b in sc.planes_down for t in (a, b)})
    spans = []
    for k, start in enumerate(edges):
        if not all(dead(path, start) for path in paths):
            continue
        end = start
        for nxt in edges[k + 1:]:
            if all(dead(path, nxt) for path in paths):
                continue
            end = nxt
            break
        if spans and start - spans[-1][1] < gap:
            spans[-1] = (spans[-1][0], max(end, spans[-1][1]))
        elif not spans or start >= spans[-1][1]:
            spans.append((start, end))
    return max((b - a for a, b in spans), default=0)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_closed_loop_properties(case):
    """Random fabrics and faults: the world checks every output as it comes (no retransmission
    of an acknowledged PSN, monotonic limits, completions in order) and the end state (all work
    requests completed and retired, all PSNs acknowledged unless the QP failed); a doomed QP
    fails with RETRY_EXCEEDED, a wrong R_Key with QP_ERROR; another QP fails with
    RETRY_EXCEEDED only when every path it uses was dead for at least ``retry_limit`` timeouts
    (test audit #15)."""
    sc, cfgs, seed = case
    world, model, _ = loop(seed, sc, cfgs)
    cut = cut_off_cycles(sc, gap=max(timeout_ticks(c, 8) for c in cfgs) * sc.tick_cycles)
    if sc.doomed_qp is not None:
        assert world.status(0)[0] == CompletionStatus.RETRY_EXCEEDED
    round_trip = 24 + 2 * sc.delay[1]            # the world's longest data-SACK round trip
    for q, cfg in enumerate(cfgs):
        timeout = timeout_ticks(cfg, 8) * sc.tick_cycles
        if q == sc.doomed_qp or timeout < 2 * round_trip:
            # Timeouts shorter than a round trip mark live paths bad; with the floor keeping a
            # dead path choosable, profile 2's fallback (4.3) resends there and a QP can fail
            # with a live path (docs/protocol.md 10, point 19).
            continue
        if CompletionStatus.RETRY_EXCEEDED in world.status(q):
            assert cut >= cfg.retry_limit * timeout, (q, cut)
    if sc.bad_wr is not None and sc.bad_wr[0] != sc.doomed_qp and sc.bad_wr[1] < sc.wrs_per_qp:
        statuses = world.status(sc.bad_wr[0])
        if CompletionStatus.RETRY_EXCEEDED not in statuses:
            assert CompletionStatus.QP_ERROR in statuses
        else:
            assert cut > 0
    assert model.counters["completion"] == sum(len(s.wrs) for s in world.senders)


@pytest.mark.parametrize("profile", [1, 2])
def test_closed_loop_qp_without_a_live_path_exceeds_its_retries(profile):
    """Every path of QP 1 dead (its one T1; the doomed QP 0 has the other) until cycle 400, longer
    than its 7 retries with 4-tick timeouts: its wrong-R_Key work request never reaches the
    receiver, so it completes with RETRY_EXCEEDED, not QP_ERROR (hypothesis found this case)."""
    sc = Scenario(planes=1, num_t1=2, slots=2, backup=0, ev_min_active=1, tick_cycles=16,
                  wrs_per_qp=1, max_packets=1, loss=0, trim=0, ce=0, nobuf=0, oor=0,
                  dead_paths=(((0, 0), 0, 400),), doomed_qp=0, bad_wr=(1, 0), profile=profile)
    cfgs = [QpConfig(w_max=1, timeout_exp=2, retry_limit=0, probe_period=1)] + \
        [QpConfig(w_max=1, timeout_exp=2, retry_limit=7, probe_period=1)] * 2
    world, _, _ = loop(0, sc, cfgs)
    assert [world.status(q) for q in range(3)] == [[CompletionStatus.RETRY_EXCEEDED]] * 2 + \
        [[CompletionStatus.OK]]
    assert world.stats["lost_dead_path"] > 7


@pytest.mark.parametrize("profile", [1, 2])
def test_closed_loop_error_isolation(profile):
    """QP 0 has every path dead (RETRY_EXCEEDED), QP 2 sends a wrong R_Key (QP_ERROR); QPs 1 and 3
    complete everything, OK, through loss, trims, CE marks and a plane going down."""
    sc = Scenario(planes=2, num_t1=3, doomed_qp=0, bad_wr=(2, 4), wrs_per_qp=20,
                  planes_down=((1, 300, 600), (0, 700, 900)), profile=profile)
    cfgs = [QpConfig(w_max=12, timeout_exp=3, retry_limit=2 if q == 0 else 7, probe_period=4)
            for q in range(4)]
    world, model, _ = loop(11, sc, cfgs)
    assert set(world.status(0)) <= {CompletionStatus.RETRY_EXCEEDED, CompletionStatus.QP_ERROR}
    assert world.status(0)[0] == CompletionStatus.RETRY_EXCEEDED
    assert CompletionStatus.QP_ERROR in world.status(2)
    assert CompletionStatus.RETRY_EXCEEDED not in world.status(2)
    for q in (1, 3):
        assert world.status(q) == [CompletionStatus.OK] * 20
    assert model.counters["qp_error"] == 2 and world.stats["flushed"] > 0
    assert model.counters["send_flushed"] > 0


class _PathWatch:
    """Wraps a world's EV table choice to log when each QP puts data on each path."""

    def __init__(self, world):
        self.log = []
        self.world = world
        choose = world.table.choose

        def logged(qpn, room, avoid_ev=None):
            choice = choose(qpn, room, avoid_ev)
            if choice is not None:
                self.log.append((world.cycle, qpn, ev_path(choice.ev)))
            return choice
        world.table.choose = logged


@pytest.mark.parametrize("profile", [1, 2])
def test_dead_path_is_dropped_within_a_timeout_and_used_again_after_it_heals(profile):
    """Path (1, 0) drops everything from cycle 1000 to 3000. Within one timeout plus a round trip
    of its first loss, no QP puts data on it; probes bring its EVs back and traffic uses it again
    after it heals."""
    die, heal = 1000, 3000
    sc = Scenario(planes=2, num_t1=2, slots=4, backup=1, ev_min_active=1, wrs_per_qp=150,
                  max_packets=3, send_gap=(3, 6), loss=0, trim=0, ce=0, nobuf=0, oor=0,
                  dead_paths=(((1, 0), die, heal),), tick_cycles=16, profile=profile)
    cfgs = [QpConfig(w_max=16, timeout_exp=4, retry_limit=7, probe_period=4)] * 3
    rng = random.Random(5)
    starts = [rng.randrange(1 << 24) for _ in cfgs]
    world = World(rng, sc, starts, wr_depth=8)
    watch = _PathWatch(world)
    model = Reliability(n_qps=3, ring=16, probe_entries=16, wr_depth=8, timer_bits=8,
                        profile=sc.profile)
    for q in range(3):
        model.setup(q, starts[q], True, cfgs[q])
    for stream, records in model.take().items():
        for rec in records:
            world.output(stream, rec)
    run_model(world, model, 100_000)
    world.check_end()
    timeout_cycles = timeout_ticks(cfgs[0], 8) * sc.tick_cycles
    slack = 2 * sc.delay[1] + 3 * sc.tick_cycles + 12
    on_path = [c for c, _, path in watch.log if path == (1, 0)]
    assert any(c < die for c in on_path)
    during = [c for c in on_path if die <= c < heal]
    assert during and max(during) <= die + timeout_cycles + slack, (max(during), die)
    assert any(c >= heal for c in on_path), "the healed path is never used again"
    assert world.events[EvEvent.RECOVERED] > 0
    assert all(s == CompletionStatus.OK for q in range(3) for s in world.status(q))


# --- profile 2 with congestion control (docs/protocol.md 5.1) -----------------------------------

NSCC = NsccConfig.scaled(100, 2000, 4096)       # cwnd from 75,000 B (3 BDPs), at least 4,096


def cc_block(now=None):
    """One QP with NSCC on (W_max 64); ``now`` a list holding the block's clock (stamps)."""
    clock = now if now is not None else [0]
    rel = Reliability(n_qps=1, ring=64, probe_entries=4, wr_depth=4, timer_bits=8, profile=2,
                      clock=lambda: clock[0])
    rel.setup(0, 100, True, QpConfig(w_max=64, timeout_exp=3, retry_limit=2, probe_period=4,
                                     cc=NSCC))
    return rel, clock


def cc_send(rel, psn, length=4096, rtx=0, ev=EV_A):
    rec = send(0, psn, ev=ev, rtx=rtx)
    rec["length"] = length
    rel.send(rec)


def test_cc_window_room_in_bytes():
    """byte_credit = the bytes the transmit side counted + cwnd - the bytes in flight (each
    packet max(length, 1024)): a send put in flight leaves it as it was, a refused send's bytes
    come back at once, a SACK's acknowledged bytes give room back; cc off: 0."""
    rel, _ = cc_block()
    first = rel.take()["limit"]
    assert first[-1]["byte_credit"] == NSCC.cwnd_init
    for i, length in enumerate((4096, 100, 4096)):
        cc_send(rel, 100 + i, length)
    qp = rel.qp(0)
    assert qp.bytes_in_flight == 4096 + 1024 + 4096 and qp.charged == 9216
    assert rel.take()["limit"] == []          # a send in flight changes no field of the room
    cc_send(rel, 200)                                       # not the next PSN: refused
    assert qp.charged == 9216 + 4096 and qp.bytes_in_flight == 9216
    assert rel.take()["limit"][-1]["byte_credit"] == (qp.charged + qp.cc.cwnd - 9216)
    rel.feedback(sack(0, 101))
    assert qp.bytes_in_flight == 4096 and qp.acked_bytes == 5120
    assert rel.take()["limit"][-1]["byte_credit"] == qp.charged + qp.cc.cwnd - 4096
    off = block(n_qps=1, cfg=CFG2, profile=2)
    off.send(send(0, 100))
    off.feedback(sack(0, 100))
    assert off.take()["limit"][-1]["byte_credit"] == 0


def test_cc_delay_sample_from_the_trigger_copy():
    """The RTT sample is the clock at the SACK minus the stamp of its trigger's copy; none
    from a retransmitted copy, a timer SACK, a probe answer or a trigger already acknowledged."""
    rel, clock = cc_block()
    seen = []
    cc = rel.qp(0).cc
    real = cc.on_sack
    cc.on_sack = lambda now, acked, ecn, rtt, infl: (seen.append((now, acked, ecn, rtt)),
                                                     real(now, acked, ecn, rtt, infl))[1]
    for i in range(4):
        clock[0] = 10 * i
        cc_send(rel, 100 + i)
    clock[0] = 500
    rel.feedback(sack(0, 100, offset=0))                    # trigger 100, sent at 0
    rel.feedback(sack(0, 100, offset=0))                    # 100 already acknowledged
    rel.feedback(sack(0, 100, offset=2, m=SackVerdict.SKIP_ONCE))   # trigger 102, sent at 20
    assert seen == [(500, 4096, False, 500), (500, 0, False, None), (500, 4096, True, 480)]
    rel.feedback(nack(0, NackReason.TRIMMED, 103))
    assert cc.ecn_pending and cc.counters["trims"] == 1
    clock[0] = 600
    cc_send(rel, 103, rtx=1, ev=EV_B)
    rel.feedback(sack(0, 101, offset=2))                    # trigger 103, a retransmission
    assert seen[-1] == (600, 4096 * 2, False, None)


def test_cc_timeout_is_one_loss_reaction():
    """A timeout that declares several PSNs of its path lost costs cwnd one packet, once."""
    rel, _ = cc_block()
    for i in range(3):
        cc_send(rel, 100 + i)
    cwnd = rel.qp(0).cc.cwnd
    ticks(rel, timeout_ticks(QpConfig(timeout_exp=3), 8))
    assert rel.counters["timeout"] == 1 and rel.qp(0).cc.counters["timeouts"] == 1
    assert rel.qp(0).cc.cwnd == cwnd - 4096 and rel.qp(0).bytes_in_flight == 0


def test_cc_ackreq_at_half_the_window_in_bytes():
    rel, _ = cc_block()
    half = -(-NSCC.cwnd_init // 2)
    psn = 100
    while not rel.ackreq_due(0, 4096):
        cc_send(rel, psn)
        psn += 1
    assert 2 * (rel.qp(0).bytes_in_flight + 4096) >= NSCC.cwnd_init
    assert rel.qp(0).bytes_in_flight < half


def test_cc_config_is_checked():
    with pytest.raises(ValueError, match="NsccConfig"):
        QpConfig(cc={"cwnd_init": 1})

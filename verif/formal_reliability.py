# SPDX-License-Identifier: BSD-2-Clause
"""Formal harness of the sender reliability block (``rtl/reliability.py``, issue [verify]).

The function returns ``(module, ports, depths)`` as in :mod:`verif.formal_blocks`. The block is
the v1 (profile 1) reliability block; [feedback-v2-rtl] rebuilds it and updates this harness
with it (the properties below are the ones profile 2 keeps: the window and PSN limit, the
retransmission of outstanding PSNs only, completions only of work requests taken). Every
property is proved by k-induction (depth 1, unbounded), with invariants on the block's
registers found by name (:func:`verif.formal.find_signal`).
"""

from amaranth.hdl import Assert, Assume, Cat, Cover, Fragment, Module, Mux, Signal

from rtl.reliability import OFF_SETUP, Reliability, qp_addr

from amaranth.utils import exact_log2

from .formal import StreamPort, find_signal, past

__all__ = ["reliability_harness"]

_OUTPUTS = ("retx", "limit", "retire", "cpl", "ev", "ctrl", "trace")
_INPUTS = ("send", "fb", "marked", "wr")
_BALANCE_MAX = 60


def _serial_le(a, b, width=24):
    """``a <= b`` for ``b`` a small distance (the difference taken modulo ``2**width``)."""
    return a[:width] <= b


def _fsm_states(state):
    """``{name: value}`` of an Amaranth FSM state signal (its decoder names each value
    ``"NAME/value"``)."""
    states = {}
    for value in range(1 << len(state)):
        try:
            states[state.decoder(value).split("/")[0]] = value
        except KeyError:
            pass
    return states


def reliability_harness(n_qps=1, ring=4, probe_entries=1, wr_depth=2, timer_bits=4, *,
                        block=None, narrower=0, bmc=None, prove=1, cover=12, invariants=True):
    """Reliability block (1 QP, ring 4, 1 probe entry, 2 work requests, 4-bit timers by
    default): under any send, feedback, EV_MARKED and work-request records, any tick count
    and configuration writes, with ``rst`` free; assumed: a QP set-up only while the block is
    idle (status bit 0 clear) and no input is offered (the block's documented rule). Asserted,
    for every QP set up since reset:

    - the window: the PSNs outstanding, ``next_psn - cack_psn - 1`` (24-bit serial), never
      exceed the QP's window, and the window latched at set-up is at most the QP's MPR and the
      ring (so a PSN sent is at most ``cack_psn + MPR``);
    - the PSN limit: a PSN_LIMIT record, while offered, is at most ``cack_psn + 1 + window``
      and never below ``next_psn`` (serial; in error the block sends ``next_psn``);
    - retransmission: a RETX_REQUEST, in the cycle it is issued, names an outstanding PSN
      (``cack_psn < psn < next_psn``);
    - ``cack_psn`` moves only forward, by at most the window, and ``next_psn`` by 0 or 1, outside
      a set-up;
    - completions: never more COMPLETION records than work requests taken, plus the ones the
      block counts as ``wr_missing`` (a last PSN acknowledged with no work request pending),
      counted without wrapping (a saturating balance; the bounded form's 8-bit counters
      wrapped after 256 records);
    - the stream rules on the seven outputs (assumed of the four inputs).

    Unbounded (the default, ``prove`` = 1): k-induction of the block as it is (no part swapped;
    its block RAMs hold EVs, ``req_id`` s and retry counts, which no property depends on). The
    invariants (``invariants``, each commented in :func:`_invariants`): a QP not yet set up is
    disabled with no live entry and no timer; the window at most MPR and the ring from the
    set-up cycle on; ``live`` is exactly the outstanding PSNs (rotated to PSN order: bit r set
    iff r < ``next_psn - cack_psn - 1``); ``acked`` and ``fire`` only of live entries; ``fire``
    empty outside a tick's timer loop, and the entry the loop emits in FIRE_EMIT is in it; the
    WAIT_CACK releases after a SACK (``wc_todo``) live, WC_PICK only with one left, WC_EMIT on
    the one picked; a PSN limit outside the error state is exactly ``cack_psn + 1 + window``;
    ``wr_count`` within ``wr_depth``, FLUSH_EMIT only with a work request pending; the FSM in
    one of its states, ``l_q`` a QP; the completion balance at least the work requests pending
    (every ``wr_count``, the record in WR, the ``m_cpl`` register). Measured on this machine (2
    cores, shared): the default configuration proves in about 7 s, covers (12) in about 18 s;
    2 QPs, ring 8, 2 probe entries, 4 work requests prove in about 27 s; 4 QPs, ring 16, 2 probe
    entries, 4 work requests, 6-bit timers in about 2 minutes.

    ``bmc`` (default none) adds a bounded check from reset; ``invariants`` False leaves the
    invariants out (the properties alone, for a BMC whose counterexample fails a property, not
    an invariant). ``narrower`` claims a window that many PSNs narrower (a false claim, for the
    test that the window property is tight). ``block`` (default :class:`rtl.reliability.
    Reliability`) lets a test prove a broken block fails.
    Covers: a PSN limit out, a retransmission out, a completion, ``cack_psn`` advanced, the
    window full, an EV event, a probe, a QP error.
    """
    block = block or Reliability
    m = Module()
    dut = block(n_qps=n_qps, ring=ring, probe_entries=probe_entries, wr_depth=wr_depth,
                timer_bits=timer_bits)
    frag = Fragment.get(dut, "formal")
    m.submodules.dut = frag
    ins = {n: StreamPort(getattr(dut, f"s_{n}"), "in", n).elaborate(m) for n in _INPUTS}
    outs = {n: StreamPort(getattr(dut, f"m_{n}"), "out", n).elaborate(m) for n in _OUTPUTS}

    busy = find_signal(frag, "busy_state")
    idle = Signal(name="block_idle")
    m.d.comb += idle.eq(~busy & ~Cat(*(getattr(dut, f"m_{n}").valid for n in _OUTPUTS)).any())
    offered = Cat(*(getattr(dut, f"s_{n}").valid for n in _INPUTS)).any()

    cack = [find_signal(frag, f"q{q}_cack") for q in range(n_qps)]
    nxt = [find_signal(frag, f"q{q}_next") for q in range(n_qps)]
    win = [find_signal(frag, f"q{q}_window") for q in range(n_qps)]
    error = [find_signal(frag, f"q{q}_error") for q in range(n_qps)]
    mpr = [find_signal(frag, f"cfg_q{q}_mpr") for q in range(n_qps)]

    covers = {}
    ups, outs_q = [], []
    retx, limit = dut.m_retx, dut.m_limit
    retx_new = Signal(name="retx_new")
    m.d.comb += retx_new.eq(retx.valid & ~past(m, retx.valid & ~retx.ready, "retx_was_held"))
    for q in range(n_qps):
        setup = Signal(name=f"setup_{q}")
        m.d.comb += setup.eq(dut.cfg_we & (dut.cfg_addr == qp_addr(q, OFF_SETUP)))
        m.d.comb += Assume(~setup | (idle & ~offered), f"QP {q} set up only while idle")
        was_setup = past(m, setup, f"was_setup_{q}")
        up = Signal(name=f"set_up_{q}")
        with m.If(setup):
            m.d.sync += up.eq(1)
        mpr_at = Signal(16, name=f"mpr_at_setup_{q}")
        with m.If(setup):
            m.d.sync += mpr_at.eq(mpr[q])
        out = Signal(24, name=f"outstanding_{q}")
        m.d.comb += out.eq(nxt[q] - cack[q] - 1)
        live = Signal(name=f"live_{q}")
        m.d.comb += live.eq(up & ~was_setup)
        ups.append(up)
        outs_q.append(out)
        m.d.comb += [
            Assert(~up | (out + narrower <= win[q]),
                   f"QP {q}: outstanding PSNs within the window"),
            Assert(~live | ((win[q] <= mpr_at) & (win[q] <= ring)),
                   f"QP {q}: window at most MPR and the ring"),
        ]
        if invariants:
            # The same from the cycle after the set-up on (win and mpr_at both latched from the
            # same mpr then).
            m.d.comb += Assert(~up | ((win[q] <= mpr_at) & (win[q] <= ring)),
                               f"inv QP {q}: window at most MPR and the ring")
        prev_cack = past(m, cack[q], f"prev_cack_{q}")
        prev_next = past(m, nxt[q], f"prev_next_{q}")
        prev_up = past(m, up & ~setup, f"prev_up_{q}")
        m.d.comb += [
            Assert(~prev_up | _serial_le(cack[q] - prev_cack, win[q]),
                   f"QP {q}: cack_psn forward by at most the window"),
            Assert(~prev_up | _serial_le(nxt[q] - prev_next, 1),
                   f"QP {q}: next_psn forward by 0 or 1"),
        ]
        mine_l = limit.valid & (limit.p.qpn == q) & up
        lim_ahead = Signal(24, name=f"limit_ahead_{q}")
        m.d.comb += lim_ahead.eq(limit.p.psn_limit - cack[q] - 1)
        m.d.comb += [
            Assert(~mine_l | (lim_ahead <= win[q]),
                   f"QP {q}: PSN limit at most cack_psn + 1 + window"),
            Assert(~mine_l | (lim_ahead >= out), f"QP {q}: PSN limit never below next_psn"),
        ]
        if invariants:
            # Outside the error state a PSN limit is always cack_psn + 1 + window (sent so,
            # and cack_psn does not move while it is held: a SACK that moves it waits for a
            # free m_limit); in error it may be next_psn.
            m.d.comb += Assert(~(mine_l & ~error[q]) | (lim_ahead == win[q]),
                               f"inv QP {q}: a PSN limit outside error is the window's end")
        mine_r = retx_new & (retx.p.qpn == q) & up
        r_rel = Signal(24, name=f"retx_rel_{q}")
        m.d.comb += r_rel.eq(retx.p.psn - cack[q] - 1)
        m.d.comb += Assert(~mine_r | (r_rel < out), f"QP {q}: a retransmission is outstanding")
        covers[f"cack_advanced_{q}"] = prev_up & (cack[q] != prev_cack)
        covers[f"window_full_{q}"] = up & (out == win[q]) & (win[q] != 0)
        covers[f"qp_error_{q}"] = up & error[q]

    # Completions never outnumber the work requests taken, except those the block counts as
    # wr_missing (a send record's last PSN acknowledged with no work request pending: completed
    # with the send record's req_id, as in the model). Counted without wrapping: ``balance`` is
    # the work requests taken plus the wr_missing events minus the completions taken (it
    # saturates at _BALANCE_MAX, which only makes it smaller than the true difference, so its
    # never going negative still proves the property for traces of any length; the counters of
    # the bounded form wrapped at 256).
    missing_pulse = find_signal(frag, "count_wr_missing")
    balance = Signal(range(-4, _BALANCE_MAX + 4), name="cpl_balance")
    gained = Signal(range(-2 * _BALANCE_MAX, 2 * _BALANCE_MAX), name="cpl_balance_next")
    m.d.comb += gained.eq(balance + ins["wr"].fire + missing_pulse - outs["cpl"].fire)
    m.d.sync += balance.eq(Mux(gained > _BALANCE_MAX, _BALANCE_MAX, gained))
    m.d.comb += Assert(balance >= 0, "no more completions than work requests (and wr_missing)")

    if invariants:
        _invariants(m, dut, frag, ups, outs_q, balance, ring, n_qps, wr_depth)
    covers.update({
        "limit_out": outs["limit"].fire,
        "retx_out": outs["retx"].fire,
        "completion_out": outs["cpl"].fire,
        "ev_event_out": outs["ev"].fire,
        "probe_out": outs["ctrl"].fire,
    })
    for name, cond in covers.items():
        m.d.comb += Cover(cond, name)
    ports = [x for p in ins.values() for x in p.free_ports()] + \
        [x for p in outs.values() for x in p.free_ports()] + \
        [dut.tick_count, dut.cfg_addr, dut.cfg_wdata, dut.cfg_we]
    return m, ports, {"bmc": bmc, "prove": prove, "cover": cover}


def _invariants(m, dut, frag, ups, outs_q, balance, ring, n_qps, wr_depth):
    """The facts of every reachable state that make the properties of
    :func:`reliability_harness` inductive (each asserted; a comment says why it holds)."""
    R = ring
    rb = exact_log2(R)
    state = find_signal(frag, "fsm_state")
    states = _fsm_states(state)

    def in_state(*names):
        return Cat(*(state == states[n] for n in names)).any()

    l_q, l_idx = find_signal(frag, "l_q"), find_signal(frag, "l_idx")
    wc_todo = find_signal(frag, "wc_todo")
    flush_to_fire = find_signal(frag, "flush_to_fire")
    # Every state value is a state (the FSM never leaves its encoding).
    m.d.comb += Assert(state <= max(states.values()), "inv: the FSM in a state")
    # The loops run over one QP: l_q is always a QP's index (loaded from one).
    m.d.comb += Assert(l_q < n_qps, "inv: l_q a QP")
    fire_loop = Signal(name="inv_fire_loop")
    m.d.comb += fire_loop.eq(in_state("FIRE_PICK", "FIRE_EMIT") |
                             (in_state("FLUSH_PICK", "FLUSH_EMIT") & flush_to_fire))
    for q in range(n_qps):
        up, out = ups[q], outs_q[q]
        cack, win = find_signal(frag, f"q{q}_cack"), find_signal(frag, f"q{q}_window")
        enable = find_signal(frag, f"q{q}_enable")
        live, acked = find_signal(frag, f"q{q}_live"), find_signal(frag, f"q{q}_acked")
        fire = find_signal(frag, f"q{q}_fire")
        start = Signal(rb, name=f"inv_start_{q}")
        m.d.comb += start.eq((cack + 1)[:rb])
        # live with the ring rotated to PSN order (bit r: PSN cack_psn + 1 + r)
        live_rel = Signal(R, name=f"inv_live_rel_{q}")
        m.d.comb += live_rel.eq((Cat(live, live) >> start)[:R])
        mine = Signal(name=f"inv_l_q_is_{q}")
        m.d.comb += mine.eq(l_q == q)
        m.d.comb += [
            # Before its first set-up a QP is disabled and holds nothing (reset state; only a
            # set-up enables it, and entries are made live only while enabled).
            Assert(up | (~enable & (live == 0) & (fire == 0)), f"inv QP {q}: idle before set-up"),
            # The window, latched at set-up as min(w_max, mpr, ring), from that cycle on.
            Assert(~up | (win <= R), f"inv QP {q}: window at most the ring"),
            # live is exactly the outstanding PSNs cack_psn + 1 .. next_psn - 1: a new PSN sets
            # its entry, a SACK that moves cack_psn by run clears the run entries it passes.
            Assert(~up | (live_rel == Cat(*(out > r for r in range(R)))),
                   f"inv QP {q}: live = the outstanding PSNs"),
            # Only outstanding PSNs are acknowledged out of order (a SACK sets acked only in
            # the outstanding range and clears the entries cack_psn passes; a new PSN clears
            # its own), so cack_psn never moves past next_psn - 1.
            Assert((acked & ~live) == 0, f"inv QP {q}: acked only of live entries"),
            # Timers fire only for live entries (fire_now is masked with live), and live does
            # not change during a tick's timer loop (no send record or SACK is processed).
            Assert((fire & ~live) == 0, f"inv QP {q}: timers fire only for live entries"),
            Assert(fire_loop | (fire == 0), f"inv QP {q}: no timer left outside the loop"),
            # The timer loop emits for an entry it found in fire (FIRE_PICK picks a set bit).
            Assert(~(in_state("FIRE_EMIT") & mine) | fire.bit_select(l_idx, 1),
                   f"inv QP {q}: the timer emitted fires"),
            # After a SACK, the WAIT_CACK releases are live entries (wc & live & ~passed with
            # the new cack_psn); the completions between do not change live.
            Assert(~(in_state("CPL_PICK", "CPL_EMIT", "WC_PICK", "WC_EMIT") & mine) |
                   ((wc_todo & ~live) == 0), f"inv QP {q}: WAIT_CACK releases live"),
        ]
    m.d.comb += [
        # WC_PICK runs only with a release left, WC_EMIT on the one it picked.
        Assert(~in_state("WC_PICK") | (wc_todo != 0), "inv: a release left to pick"),
        Assert(~in_state("WC_EMIT") | wc_todo.bit_select(l_idx, 1), "inv: the release picked"),
    ]
    # Completion balance: the work requests taken and not yet completed are pending in the
    # block (each QP's wr_count, the record in WR being processed) or in the m_cpl register;
    # so the balance never goes negative.
    pending = dut.m_cpl.valid + in_state("WR")
    for q in range(n_qps):
        wr_count = find_signal(frag, f"q{q}_wr_count")
        pending = pending + wr_count
        m.d.comb += [
            # A work request is queued only below wr_depth (WR drops it at the depth).
            Assert(wr_count <= wr_depth, f"inv QP {q}: wr_count within wr_depth"),
            # FLUSH_PICK goes on to FLUSH_EMIT only with a work request pending.
            Assert(~(in_state("FLUSH_EMIT") & (l_q == q)) | (wr_count != 0),
                   f"inv QP {q}: a flush emits a pending work request"),
        ]
    m.d.comb += [
        Assert(balance >= pending, "inv: completions pending are in the balance"),
        Assert(balance <= _BALANCE_MAX, "inv: the balance saturates"),
    ]

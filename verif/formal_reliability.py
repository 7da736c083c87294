# SPDX-License-Identifier: BSD-2-Clause
"""Formal harness of the sender reliability block (``rtl/reliability.py``, issue [verify]).

The function returns ``(module, ports, depths)`` as in :mod:`verif.formal_blocks`. The block is
the v1 (profile 1) reliability block; [feedback-v2-rtl] rebuilds it and updates this harness
with it (the properties below are the ones profile 2 keeps: the window and PSN limit, the
retransmission of outstanding PSNs only, completions only of work requests taken).
"""

from amaranth.hdl import Assert, Assume, Cat, Cover, Fragment, Module, Signal

from rtl.reliability import OFF_SETUP, Reliability, qp_addr

from .formal import StreamPort, find_signal, past

__all__ = ["reliability_harness"]

_OUTPUTS = ("retx", "limit", "retire", "cpl", "ev", "ctrl", "trace")
_INPUTS = ("send", "fb", "marked", "wr")


def _serial_le(a, b, width=24):
    """``a <= b`` for ``b`` a small distance (the difference taken modulo ``2**width``)."""
    return a[:width] <= b


def reliability_harness(n_qps=1, ring=4, probe_entries=1, wr_depth=2, timer_bits=4, *,
                        block=None, narrower=0, bmc=8, cover=12):
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
      block counts as ``wr_missing`` (a last PSN acknowledged with no work request pending);
    - the stream rules on the seven outputs (assumed of the four inputs).

    ``narrower`` claims a window that many PSNs narrower (a false claim, for the test that the
    window property is tight). Bounded (the block's bit vectors, block RAMs and FSM make an induction invariant long).
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
        m.d.comb += [
            Assert(~up | (out + narrower <= win[q]),
                   f"QP {q}: outstanding PSNs within the window"),
            Assert(~live | ((win[q] <= mpr_at) & (win[q] <= ring)),
                   f"QP {q}: window at most MPR and the ring"),
        ]
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
        mine_r = retx_new & (retx.p.qpn == q) & up
        r_rel = Signal(24, name=f"retx_rel_{q}")
        m.d.comb += r_rel.eq(retx.p.psn - cack[q] - 1)
        m.d.comb += Assert(~mine_r | (r_rel < out), f"QP {q}: a retransmission is outstanding")
        covers[f"cack_advanced_{q}"] = prev_up & (cack[q] != prev_cack)
        covers[f"window_full_{q}"] = up & (out == win[q]) & (win[q] != 0)
        covers[f"qp_error_{q}"] = up & error[q]

    # Completions never outnumber the work requests taken, except those the block counts as
    # wr_missing (a send record's last PSN acknowledged with no work request pending: completed
    # with the send record's req_id, as in the model). Counters of 8 bits, BMC < 256.
    missing_pulse = find_signal(frag, "count_wr_missing")
    missing = Signal(8, name="wr_missing_seen")
    with m.If(missing_pulse):
        m.d.sync += missing.eq(missing + 1)
    m.d.comb += Assert(outs["cpl"].taken <= ins["wr"].taken + missing,
                       "no more completions than work requests (and wr_missing)")
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
    return m, ports, {"bmc": bmc, "cover": cover}

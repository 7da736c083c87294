# SPDX-License-Identifier: BSD-2-Clause
"""The per-QP EV table and spray scheduler (docs/protocol.md 4.2-4.4); golden model ``models/spray.py``."""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.utils import bits_for, ceil_log2, exact_log2

from models.records import EvEvent
from models.spray import (DEFAULT_BACKUP, DEFAULT_EV_MIN_ACTIVE, DEFAULT_SLOTS, EV_PLANE_BITS,
                          EV_T1_BITS, EV_T1_SHIFT, LFSR_TAPS, MAX_T1, SlotState)
from rtl.common.logic import first_set as _first_set, wire as _wire
from rtl.common import records
from rtl.common.config import ConfigMap
from rtl.common.ports import config_members, record_members

__all__ = ["SprayScheduler", "ADDR_WIDTH", "ADDR_EV_MIN_ACTIVE", "ADDR_NUM_T1", "ADDR_PLANE_UP",
           "ADDR_STATUS", "ADDR_QP_ENABLE", "ADDR_COUNTERS", "COUNTERS", "TABLE_BASE",
           "table_addr", "OFF_SLOT_EV", "OFF_SLOT_STATE", "OFF_STATES", "OFF_POINTER", "OFF_LFSR",
           "OFF_PLANE_POINTER", "OFF_POOL_EV", "OFF_POOL_VALID", "STATUS_CMD_PENDING",
           "STATUS_ENGINE_BUSY", "STATUS_PIPE_BUSY", "MAX_QPS", "MAX_PLANES", "MAX_SLOTS",
           "MAX_BACKUPS", "DECISION_LATENCY"]

# --- Configuration map (word addresses); see the SprayScheduler docstring -----------------------

ADDR_WIDTH = 20
ADDR_EV_MIN_ACTIVE = 0x000
ADDR_NUM_T1 = 0x001
ADDR_PLANE_UP = 0x002
ADDR_STATUS = 0x003
ADDR_QP_ENABLE = 0x008            # 8 words: QPs 32k .. 32k+31 in word k
COUNTERS = ("decisions", "nothing", "bad_request", "ev_skip", "ev_bad", "ev_recovered",
            "ev_deny", "ev_allow", "ev_ignored", "marks_refused", "load_refused", "load_busy")
ADDR_COUNTERS = {name: 0x010 + i for i, name in enumerate(COUNTERS)}
TABLE_BASE = 0x80000
OFF_SLOT_EV = 0x00                # + slot, slot < A <= 64
OFF_SLOT_STATE = 0x40             # + slot
OFF_STATES = 0x80                 # + w, w < ceil(A / 16): 16 slot states per word
OFF_POINTER = 0x90
OFF_LFSR = 0x91
OFF_PLANE_POINTER = 0x92
OFF_POOL_EV = 0xA0                # + entry, entry < B <= 32
OFF_POOL_VALID = 0xC0             # + entry


def table_addr(qp, plane, offset):
    """The word address of ``offset`` in the table page of (QP ``qp``, plane ``plane``)."""
    return TABLE_BASE | qp << 11 | plane << 8 | offset


STATUS_CMD_PENDING = 1
STATUS_ENGINE_BUSY = 2
STATUS_PIPE_BUSY = 4

MAX_QPS = 256                     # the table map's QP field
MAX_PLANES = 8                    # plane_ok and send_record.room_mask are 8 bits
MAX_SLOTS = 64                    # the slot field of the table map
MAX_BACKUPS = 32                  # the pool field of the table map
DECISION_LATENCY = 3              # request accepted in cycle t -> answer valid in cycle t + 3

_EV_BITS = 32
_PATH_BITS = EV_T1_SHIFT + EV_T1_BITS          # EV[11:0] = (plane, j): the path
_SEED_BITS = 16
_G, _S, _A, _D = (int(s) for s in (SlotState.GOOD, SlotState.SKIP, SlotState.ASSUMED_BAD,
                                   SlotState.DENIED))

# Engine operations: EV_EVENT kinds 0..7 (5..7 unknown), then the table writes.
_OP_SLOT_EV, _OP_SLOT_STATE, _OP_SEED, _OP_POOL_EV, _OP_POOL_CLEAR = range(8, 13)
_KINDS = {"ev_skip": EvEvent.SKIP, "ev_bad": EvEvent.BAD, "ev_recovered": EvEvent.RECOVERED,
          "ev_deny": EvEvent.DENY, "ev_allow": EvEvent.ALLOW}


class _InnerPort:
    """The configuration port as :class:`ConfigMap` sees it: the block's inputs and a private
    registered read word, merged with the table's read words into ``cfg_rdata``."""

    def __init__(self, component):
        self.cfg_addr = component.cfg_addr
        self.cfg_wdata = component.cfg_wdata
        self.cfg_we = component.cfg_we
        self.cfg_rdata = Signal(32, name="cfg_rdata_regs")


def _round_robin(m, vec, start, n, name):
    """``(any, index)`` of the first set bit of ``vec`` at or after ``start``, circularly."""
    vec = _wire(m, vec, n, f"{name}_vec")
    upper = Cat(*(vec[i] & (start <= i) for i in range(n)))
    any_upper, idx_upper = _first_set(m, upper, n, f"{name}_upper")
    any_all, idx_all = _first_set(m, vec, n, f"{name}_all")
    return any_all, _wire(m, Mux(any_upper, idx_upper, idx_all), max(1, ceil_log2(n)),
                          f"{name}_index")


def _xor_permute(m, vec, mask, n, bits, name):
    """``out[r] = vec[r ^ mask]``: log2(n) layers of conditional pair swaps."""
    cur = _wire(m, vec, n, f"{name}_0")
    for k in range(bits):
        cur = _wire(m, Cat(*(Mux(mask[k], cur[r ^ (1 << k)], cur[r]) for r in range(n))), n,
                    f"{name}_{k + 1}")
    return cur


def _popcount(m, bits, name):
    """The number of set bits among 1-bit Values (an adder tree of wires)."""
    values = list(bits)
    level = 0
    while len(values) > 1:
        values = [_wire(m, values[i] + values[i + 1], bits_for(2 << level),
                        f"{name}_{level}_{i}") if i + 1 < len(values) else values[i]
                  for i in range(0, len(values), 2)]
        level += 1
    return values[0]


def _pick(vec, index, count, width):
    """Word ``index`` of ``count`` words of ``width`` bits in ``vec``."""
    if count == 1:
        return vec[:width]
    return vec.word_select(index[:ceil_log2(count)], width)


def _lfsr_next(state):
    """One step of the Galois LFSR of docs/protocol.md 4.3 (shift right, taps 0xB400)."""
    return (state >> 1) ^ Mux(state[0], LFSR_TAPS, 0)


class SprayScheduler(wiring.Component):
    """Per-QP EV table and spray scheduler (docs/protocol.md 4.2-4.4), decision by decision equal to
    ``models/spray.py`` (the choices it documents where the profile leaves room).

    State: per QP and plane, A active slots (EV and 2-bit state), a backup pool of B entries, the
    rotation pointer and the 16-bit LFSR (the mask is its low log2(A) bits); per QP the plane
    round-robin pointer and an enable bit; per plane an up bit. The slot EVs and pool EVs live in
    two memories with one word per (QP, plane) (A x 32 and B x 32 bits: the avoid compare, the
    event match and the refill see a whole plane at once); everything searched per decision
    (slot states, pointers, LFSRs) and the pool valid bits are registers. On an FPGA the EV
    memory has three read ports (request, answer, configuration), which synthesis builds as
    replicated block RAMs. The memories are not cleared by ``rst``; the registers are (slot
    states GOOD, pointers 0, LFSRs 1, pools empty, every QP disabled).

    A QP is used in this order: load its slots, pool entries and seeds through the table words,
    then set its enable bit (the model's ``configure_qp``; its plane pointers start at 0 after
    reset). Requests and events for a QP that is not enabled (or not below ``n_qps``) are the
    model's unconfigured QP: a request is answered ``found`` = 0 (counted ``bad_request``), an
    event is ignored (a BAD event still gets its single ``valid`` = 0 EV_MARKED record).

    Parameters
    ----------
    n_qps : 1..256 (default 16)
        QPs; QP q is ``qpn`` q.
    n_planes : 1..8 (default 8)
        Planes N.
    slots : 1, 2, 4, .., 64 (default 16)
        Active slots A per QP and plane.
    backups : 0..32 (default 8)
        Backup pool entries B per QP and plane.
    ev_min_active : 0..65535 (default 4)
        Reset value of the floor register.

    Ports
    -----
    ``clk``, ``rst``: clock, synchronous active-high reset.
    ``s_req_tdata/tvalid/tready``: choice requests (:data:`models.records.SPRAY_REQUEST`):
    ``qpn``, ``plane_ok`` (planes with room; ANDed with the plane up mask), ``avoid_valid`` and
    ``avoid_ev``.
    ``m_ans_tdata/tvalid/tready``: answers (:data:`models.records.SPRAY_ANSWER`), one per
    request, in order: ``found``, ``plane``, ``slot``, ``ev`` and ``position`` of the model's
    ``Choice`` (all 0 when ``found`` = 0).
    ``s_ev_tdata/tvalid/tready``: EV_EVENT records (SKIP, BAD, RECOVERED, DENY, ALLOW; kinds
    5..7 are ignored and counted ``ev_ignored``). The two input streams are arbitrated:
    ``s_req_tready`` depends on ``s_ev_tvalid`` and ``s_ev_tready`` on ``s_req_tvalid``.
    ``m_marked_tdata/tvalid/tready``: EV_MARKED records answering each BAD event: one per EV
    marked ASSUMED_BAD in slot order (``valid`` = 1, ``last`` on the final one), or one record
    ``valid`` = 0, ``last`` = 1 when none was (floor, EV not held, QP not configured).
    ``cfg_addr`` (20 bits) ``/cfg_wdata/cfg_we/cfg_rdata``: configuration port
    (``rtl/common/config.py``: reads have one cycle of latency, unmapped words read 0, counters
    are 32 bits, wrap and clear when written).

    Configuration map (word addresses)
    ----------------------------------
    ============================  ====  ========================================================
    0x00000                       rw    ev_min_active, bits 15..0 (reset: the parameter)
    0x00001                       rw    number of T1s, bits 8..0 (reset 256): an EV loads only
                                        if its T1 index is below it
    0x00002                       rw    plane up mask, bit p = plane p (reset: all up)
    0x00003                       ro    status: bit 0 a table write waits or runs, bit 1 the
                                        engine runs an event or table write, bit 2 decisions in
                                        flight (answer not yet accepted)
    0x00008 + k                   rw    QP enable bits 32k+31..32k (reset 0)
    0x00010 .. 0x0001b            cnt   decisions, nothing (found = 0, QP configured),
                                        bad_request (QP not configured), ev_skip, ev_bad,
                                        ev_recovered, ev_deny, ev_allow (events received by
                                        kind), ev_ignored, marks_refused (BAD refused by the
                                        floor), load_refused, load_busy
    T = 0x80000 | q << 11 | p << 8      (QP q < n_qps, plane p < n_planes)
    T + s (s < A)                 rw    slot s EV. Write: the slot holds it, GOOD; refill
    T + 0x40 + s                  rw    slot s state, bits 1..0 (G 0, S 1, A 2, D 3). Write:
                                        that state, no refill (the vectors' set_state)
    T + 0x80 + w                  ro    states of slots 16w .. 16w+15, 2 bits each
    T + 0x90                      ro    rotation pointer
    T + 0x91                      rw    LFSR. Write: seed (1..0xFFFF; the mask follows at once)
    T + 0x92                      ro    the QP's plane pointer
    T + 0xa0 + i (i < B)          rw    pool entry i EV. Write: the entry holds it; refill
    T + 0xc0 + i                  rw    pool entry i valid, bit 0. Write (any data): the entry
                                        is emptied; refill
    ============================  ====  ========================================================

    Table writes are executed in order with requests and events by the engine below. A table
    write refused as the model refuses it (EV plane field not p, T1 index not below the number
    of T1s, seed 0 or wider than 16 bits, or a word that is not writable, QP or plane out of
    range) changes nothing and counts ``load_refused``. One table write waits at a time: a table
    write while status bit 0 is set is refused and counts ``load_busy`` (poll the status). The
    table words read the stored state; read them while the status is 0 for a coherent view.

    Order: the scheduler applies requests, events and configuration writes in the order of their
    handshakes (for a configuration write, the cycle of ``cfg_we``). A request and an event are
    never accepted in the same cycle; a configuration write in the cycle of a handshake comes
    after it. The plane up mask and the enable bits are sampled when a request or event is
    accepted; ev_min_active and the number of T1s when an event is accepted.

    Latency and throughput
    ----------------------
    Decisions are pipelined: a request accepted in cycle t reads the EV word of its avoid plane
    (t+1: compare with ``avoid_ev``), is decided in t+2 (every plane's rotation search in
    parallel, the plane round-robin, the state update), and its answer is valid in t+3 with the
    EV read from the chosen plane's word: latency 3 cycles, one decision per cycle back to back
    (the shortest frame, 138 bytes, takes 3 cycles on a 512-bit core). An event or a table write
    waits for the decisions in flight to leave the decision stage (up to 2 cycles), then takes
    the engine: accept and read the plane (1 cycle), apply (1), refill (1 cycle per backup EV
    moved, + 1), floor check (BAD only, 1), commit (1), then the EV_MARKED records (BAD only, 1
    cycle each, stalled by ``m_marked_tready``). So 4 + moves cycles from one event's acceptance
    to the next (measured: SKIP, DENY, ALLOW, RECOVERED 4; a BAD that marks one slot, refills it
    and reports it 7); an ignored event takes 2 (BAD: 3). Requests wait meanwhile; when both
    wait, events and requests alternate.

    The avoid compare reads only the plane named by ``avoid_ev``'s plane field, and an event only
    the plane of its EV: a slot of plane p holds an EV whose plane field is p (table writes are
    refused otherwise, and backups and RECOVERED EVs enter their own plane's pool), once every
    slot of an enabled QP was loaded.
    """

    def __init__(self, n_qps=16, n_planes=8, slots=DEFAULT_SLOTS, backups=DEFAULT_BACKUP,
                 ev_min_active=DEFAULT_EV_MIN_ACTIVE):
        def check(name, value, ok, what):
            if not isinstance(value, int) or isinstance(value, bool) or not ok(value):
                raise ValueError(f"SprayScheduler: {name} must be {what}, not {value!r}")

        check("n_qps", n_qps, lambda v: 1 <= v <= MAX_QPS, f"1..{MAX_QPS}")
        check("n_planes", n_planes, lambda v: 1 <= v <= MAX_PLANES, f"1..{MAX_PLANES}")
        check("slots", slots, lambda v: 1 <= v <= MAX_SLOTS and not v & (v - 1),
              f"a power of two in 1..{MAX_SLOTS}")
        check("backups", backups, lambda v: 0 <= v <= MAX_BACKUPS, f"0..{MAX_BACKUPS}")
        check("ev_min_active", ev_min_active, lambda v: 0 <= v < 1 << 16, "0..65535")
        self.n_qps = n_qps
        self.n_planes = n_planes
        self.slots = slots
        self.backups = backups
        self.ev_min_active = ev_min_active
        self.latency = DECISION_LATENCY
        super().__init__({
            **config_members(ADDR_WIDTH),
            **record_members("s_req", records.SPRAY_REQUEST, sink=True),
            **record_members("m_ans", records.SPRAY_ANSWER, sink=False),
            **record_members("s_ev", records.EV_EVENT, sink=True),
            **record_members("m_marked", records.EV_MARKED, sink=False),
        })

    def elaborate(self, platform):
        m = Module()
        nq, npl, A, B = self.n_qps, self.n_planes, self.slots, self.backups
        ab = exact_log2(A)
        pw = max(1, ab)                       # rotation pointer / position / slot index
        qb = max(1, ceil_log2(nq))            # QP index
        plw = max(1, ceil_log2(npl))          # plane index
        pages = nq * npl
        count_w = bits_for(npl * A)

        def page(q, p):
            return q[:qb] * npl + p[:plw]

        # --- state -----------------------------------------------------------------------------
        st = [Signal(2 * A, name=f"state_{k // npl}_{k % npl}") for k in range(pages)]
        ptr = [Signal(pw, name=f"pointer_{k // npl}_{k % npl}") for k in range(pages)]
        lfsr = [Signal(_SEED_BITS, init=1, name=f"lfsr_{k // npl}_{k % npl}")
                for k in range(pages)]
        pool_valid = [Signal(max(1, B), name=f"pool_valid_{k // npl}_{k % npl}")
                      for k in range(pages)]
        plane_ptr = [Signal(plw, name=f"plane_pointer_{q}") for q in range(nq)]
        # Per-QP rows (every plane of a QP side by side): a QP is selected once, then a plane.
        def rows(regs):
            return Array(Cat(*regs[q * npl:(q + 1) * npl]) for q in range(nq))

        st_rows, ptr_rows, lfsr_rows, pv_rows = rows(st), rows(ptr), rows(lfsr), rows(pool_valid)
        pp_arr = Array(plane_ptr)

        m.submodules.ev_mem = ev_mem = Memory(shape=_EV_BITS * A, depth=pages, init=[])
        rp_req = ev_mem.read_port()          # avoid compare; the engine's plane read
        rp_ans = ev_mem.read_port()          # the chosen slot's EV
        rp_cfg = ev_mem.read_port()          # configuration read-back
        wp_ev = ev_mem.write_port()
        if B:
            m.submodules.pool_mem = pool_mem = Memory(shape=_EV_BITS * B, depth=pages, init=[])
            rp_pool = pool_mem.read_port()
            rp_pool_cfg = pool_mem.read_port()
            wp_pool = pool_mem.write_port()

        # --- configuration registers and counters --------------------------------------------
        inner = _InnerPort(self)
        cfg = ConfigMap(m, inner, "spray")
        ev_min = cfg.reg(ADDR_EV_MIN_ACTIVE, "ev_min_active", 16, init=self.ev_min_active,
                         doc="floor of choosable slots per QP")
        num_t1 = cfg.reg(ADDR_NUM_T1, "num_t1", 9, init=MAX_T1, doc="number of T1s")
        plane_up = cfg.reg(ADDR_PLANE_UP, "plane_up", npl, init=(1 << npl) - 1,
                           doc="plane up mask")
        qp_enable = cfg.wide_reg(ADDR_QP_ENABLE, "qp_enable", nq, doc="QP enable bits")
        cmd_pending = Signal()
        pipe_busy = Signal()
        count = {name: Signal(name=f"count_{name}") for name in COUNTERS}
        for name in COUNTERS:
            cfg.counter(ADDR_COUNTERS[name], name, count[name])

        # --- decision pipeline: B (avoid compare), C (decision), D (answer) -------------------
        req, ev_in = self.s_req.p, self.s_ev.p
        b_valid, c_valid, d_valid = Signal(), Signal(), Signal()
        b_q, c_q = Signal(qb), Signal(qb)
        b_qpn, c_qpn, d_qpn = Signal(24), Signal(24), Signal(24)
        b_ok, c_ok = Signal(npl), Signal(npl)
        b_cfgd, c_cfgd = Signal(), Signal()
        b_avoid, b_avoid_ev = Signal(), Signal(_EV_BITS)
        c_avoid_on, c_avoid_plane, c_hide = Signal(), Signal(EV_PLANE_BITS), Signal(A)
        d_found, d_plane, d_slot, d_pos = Signal(), Signal(plw), Signal(pw), Signal(pw)

        d_ready = ~d_valid | self.m_ans.ready
        c_adv = c_valid & d_ready
        b_adv = b_valid & (~c_valid | c_adv)
        pipe_empty = ~b_valid & ~c_valid
        m.d.comb += pipe_busy.eq(b_valid | c_valid | d_valid)

        engine_idle = Signal()
        req_turn = Signal()              # after an event, one waiting request goes first
        req_fire = Signal()
        ev_fire = Signal()
        req_block = cmd_pending | ~engine_idle | (self.s_ev.valid & ~req_turn)
        m.d.comb += [
            self.s_req.ready.eq(~req_block & (~b_valid | b_adv)),
            req_fire.eq(self.s_req.valid & self.s_req.ready),
            self.s_ev.ready.eq(engine_idle & ~cmd_pending & pipe_empty &
                                ~(req_turn & self.s_req.valid)),
            ev_fire.eq(self.s_ev.valid & self.s_ev.ready),
        ]
        with m.If(ev_fire):
            m.d.sync += req_turn.eq(1)
        with m.Elif(req_fire):
            m.d.sync += req_turn.eq(0)

        # Stage B: the request registered; the EV word of its avoid plane arrives.
        req_q = req.qpn[:qb]
        with m.If(req_fire):
            m.d.sync += [
                b_valid.eq(1), b_q.eq(req_q), b_qpn.eq(req.qpn),
                b_ok.eq(req.plane_ok[:npl] & plane_up),
                b_cfgd.eq((req.qpn < nq) & qp_enable.bit_select(req_q, 1)),
                b_avoid.eq(req.avoid_valid), b_avoid_ev.eq(req.avoid_ev),
            ]
        with m.Elif(b_adv):
            m.d.sync += b_valid.eq(0)

        # Stage C: which slots of the avoid plane hold avoid_ev.
        with m.If(b_adv):
            m.d.sync += [
                c_valid.eq(1), c_q.eq(b_q), c_qpn.eq(b_qpn), c_ok.eq(b_ok), c_cfgd.eq(b_cfgd),
                c_avoid_on.eq(b_avoid & (b_avoid_ev[:EV_PLANE_BITS] < npl)),
                c_avoid_plane.eq(b_avoid_ev[:EV_PLANE_BITS]),
                c_hide.eq(Cat(*(rp_req.data.word_select(s, _EV_BITS) == b_avoid_ev
                                for s in range(A)))),
            ]
        with m.Elif(c_adv):
            m.d.sync += c_valid.eq(0)

        # The decision (docs/protocol.md 4.3), every plane of the QP in parallel.
        has, pos, new_st, new_ptr, step = [], [], [], [], []
        cur_lfsr = []
        c_st_row, c_ptr_row = Signal(npl * 2 * A), Signal(npl * pw)
        c_lfsr_row = Signal(npl * _SEED_BITS)
        m.d.comb += [c_st_row.eq(st_rows[c_q]), c_ptr_row.eq(ptr_rows[c_q]),
                     c_lfsr_row.eq(lfsr_rows[c_q])]
        for p in range(npl):
            k_st = c_st_row.word_select(p, 2 * A)
            k_ptr = c_ptr_row.word_select(p, pw)
            k_lfsr = c_lfsr_row.word_select(p, _SEED_BITS)
            hide = _wire(m, Mux(c_avoid_on & (c_avoid_plane == p), c_hide, 0), A, f"hide_{p}")
            states = [k_st[2 * s:2 * s + 2] for s in range(A)]
            visible = _wire(m, Cat(*(~st_s[1] for st_s in states)) & ~hide, A, f"visible_{p}")
            good = _wire(m, Cat(*(st_s == _G for st_s in states)) & ~hide, A, f"good_{p}")
            mask = k_lfsr[:ab]
            vis_pos = _xor_permute(m, visible, mask, A, ab, f"visible_pos_{p}")
            good_pos = _xor_permute(m, good, mask, A, ab, f"good_pos_{p}")
            any_vis, first_vis = _round_robin(m, vis_pos, k_ptr, A, f"rr_visible_{p}")
            any_good, first_good = _round_robin(m, good_pos, k_ptr, A, f"rr_good_{p}")
            p_pos = _wire(m, Mux(any_good, first_good, first_vis), pw, f"position_{p}")
            # Visible slots from the pointer to the chosen position become GOOD (all of them
            # when none is GOOD): only SKIP slots change.
            wrap = _wire(m, p_pos < k_ptr, 1, f"wrap_{p}")
            in_range = Cat(*(Mux(wrap, (k_ptr <= r) | (r <= p_pos), (k_ptr <= r) & (r <= p_pos))
                             for r in range(A)))
            clear_pos = vis_pos & Mux(any_good, in_range, (1 << A) - 1)
            clear = _xor_permute(m, clear_pos, mask, A, ab, f"clear_{p}")
            p_new_st = _wire(m, Cat(*(Mux(clear[s], _G, states[s]) for s in range(A))), 2 * A,
                             f"new_state_{p}")
            p_new_ptr = _wire(m, (p_pos + 1) & (A - 1), pw, f"new_pointer_{p}")
            has.append(any_vis & c_ok[p])
            pos.append(p_pos)
            new_st.append(p_new_st)
            new_ptr.append(p_new_ptr)
            step.append(_wire(m, p_new_ptr <= k_ptr, 1, f"step_{p}"))
            cur_lfsr.append(k_lfsr)
        cur_pp = Signal(plw)
        m.d.comb += cur_pp.eq(pp_arr[c_q])
        any_plane, chosen = _round_robin(m, Cat(*has), cur_pp, npl, "rr_plane")
        found = Signal()
        cp = Signal(plw)
        m.d.comb += [found.eq(c_cfgd & any_plane), cp.eq(chosen)]
        sel_pos = Signal(pw)
        sel_lfsr = Signal(_SEED_BITS)
        m.d.comb += [sel_pos.eq(Array(pos)[cp]), sel_lfsr.eq(Array(cur_lfsr)[cp])]
        sel_new_st = _wire(m, Array(new_st)[cp], 2 * A, "chosen_new_state")
        sel_new_ptr = _wire(m, Array(new_ptr)[cp], pw, "chosen_new_pointer")
        sel_new_lfsr = _wire(m, Mux(Array(step)[cp], _lfsr_next(sel_lfsr), sel_lfsr), _SEED_BITS,
                             "chosen_new_lfsr")
        next_pp = Mux(cp == npl - 1, 0, cp + 1)
        decide = c_adv & found
        dec_page = Signal(range(pages))
        m.d.comb += dec_page.eq(c_q * npl + cp)

        m.d.comb += [
            rp_ans.addr.eq(dec_page),
            rp_ans.en.eq(c_adv),
            count["decisions"].eq(decide),
            count["nothing"].eq(c_adv & c_cfgd & ~found),
            count["bad_request"].eq(c_adv & ~c_cfgd),
        ]

        # Stage D: the answer, held until accepted.
        with m.If(c_adv):
            m.d.sync += [
                d_valid.eq(1), d_qpn.eq(c_qpn), d_found.eq(found),
                d_plane.eq(Mux(found, cp, 0)),
                d_slot.eq(Mux(found, sel_pos ^ sel_lfsr[:ab], 0)),
                d_pos.eq(Mux(found, sel_pos, 0)),
            ]
        with m.Elif(self.m_ans.ready):
            m.d.sync += d_valid.eq(0)
        ans = self.m_ans.p
        m.d.comb += [
            self.m_ans.valid.eq(d_valid),
            ans.qpn.eq(d_qpn), ans.found.eq(d_found), ans.plane.eq(d_plane),
            ans.slot.eq(d_slot), ans.position.eq(d_pos),
            ans.ev.eq(Mux(d_found, _pick(rp_ans.data, d_slot, A, _EV_BITS), 0)),
        ]

        # --- table writes from the configuration port ----------------------------------------
        addr, wdata = self.cfg_addr, self.cfg_wdata
        t_qp, t_plane, t_off = addr[11:19], addr[8:11], addr[:8]
        t_mapped = addr[19] & (t_qp < nq) & (t_plane < npl)
        t_slot = (t_off[6:8] == 0) & (t_off[:6] < A)
        t_state = (t_off[6:8] == 1) & (t_off[:6] < A)
        t_seed = t_off == OFF_LFSR
        t_pool_ev = (t_off[5:8] == OFF_POOL_EV >> 5) & (t_off[:5] < B)
        t_pool_clear = (t_off[5:8] == OFF_POOL_VALID >> 5) & (t_off[:5] < B)
        ev_ok = (wdata[:EV_PLANE_BITS] == t_plane) & (wdata[EV_T1_SHIFT:_PATH_BITS] < num_t1)
        seed_ok = (wdata[:_SEED_BITS] != 0) & (wdata[_SEED_BITS:] == 0)
        t_ok = t_mapped & (t_state | t_pool_clear | ((t_slot | t_pool_ev) & ev_ok) |
                           (t_seed & seed_ok))
        t_we = self.cfg_we & addr[19]
        cmd_op, cmd_page = Signal(4), Signal(range(pages))
        cmd_q, cmd_plane = Signal(qb), Signal(plw)
        cmd_idx, cmd_data = Signal(6), Signal(_EV_BITS)
        m.d.comb += [
            count["load_busy"].eq(t_we & cmd_pending),
            count["load_refused"].eq(t_we & ~cmd_pending & ~t_ok),
        ]
        with m.If(t_we & ~cmd_pending & t_ok):
            m.d.sync += [
                cmd_pending.eq(1),
                cmd_op.eq(Mux(t_slot, _OP_SLOT_EV, Mux(t_state, _OP_SLOT_STATE,
                          Mux(t_seed, _OP_SEED, Mux(t_pool_ev, _OP_POOL_EV, _OP_POOL_CLEAR))))),
                cmd_page.eq(page(t_qp, t_plane)), cmd_q.eq(t_qp[:qb]),
                cmd_plane.eq(t_plane[:plw]),
                cmd_idx.eq(Mux(t_slot | t_state, t_off[:6], t_off[:5])), cmd_data.eq(wdata),
            ]

        # --- the engine: events and table writes, one (QP, plane) at a time ------------------
        e_op, e_page, e_q, e_qpn = Signal(4), Signal(range(pages)), Signal(qb), Signal(24)
        e_plane = Signal(plw)
        e_idx, e_ev, e_min = Signal(6), Signal(_EV_BITS), Signal(16)
        e_cfgd, e_plane_ok, e_t1_ok = Signal(), Signal(), Signal()
        e_marked = Signal(A)
        e_total, e_page_count = Signal(count_w), Signal(count_w)
        w_ev, w_st = Signal(_EV_BITS * A), Signal(2 * A)
        w_pool, w_pv = Signal(_EV_BITS * max(1, B)), Signal(max(1, B))
        grant_cmd = Signal()
        m.d.comb += grant_cmd.eq(engine_idle & cmd_pending & pipe_empty)
        ev_q = ev_in.qpn[:qb]
        ev_plane = ev_in.ev[:EV_PLANE_BITS]
        m.d.comb += [
            rp_req.addr.eq(Mux(grant_cmd, cmd_page,
                               Mux(ev_fire, page(ev_q, ev_plane), page(req_q, req.avoid_ev)))),
            rp_req.en.eq(req_fire | ev_fire | grant_cmd),
        ]
        if B:
            m.d.comb += [rp_pool.addr.eq(rp_req.addr), rp_pool.en.eq(rp_req.en)]
        for name, kind in _KINDS.items():
            m.d.comb += count[name].eq(ev_fire & (ev_in.kind == kind))

        page_ev = rp_req.data
        page_pool = rp_pool.data if B else Const(0, _EV_BITS)
        e_st_row = Signal(npl * 2 * A)
        cur_st, cur_pv = Signal(2 * A), Signal(max(1, B))
        m.d.comb += [e_st_row.eq(st_rows[e_q]), cur_st.eq(_pick(e_st_row, e_plane, npl, 2 * A)),
                     cur_pv.eq(_pick(pv_rows[e_q], e_plane, npl, max(1, B)))]
        slot_ev = [page_ev.word_select(s, _EV_BITS) for s in range(A)]
        slot_st = [cur_st[2 * s:2 * s + 2] for s in range(A)]
        hold = _wire(m, Cat(*(e == e_ev for e in slot_ev)), A, "hold")
        held = _wire(m, e_cfgd & e_plane_ok & hold.any(), 1, "held")
        on_path = Cat(*(e[:_PATH_BITS] == e_ev[:_PATH_BITS] for e in slot_ev))
        marked = _wire(m, on_path & Cat(*(~s[1] for s in slot_st)), A, "marked")
        pool_evs = [page_pool.word_select(i, _EV_BITS) for i in range(B)]
        in_pool = _wire(m, Cat(*(cur_pv[i] & (pool_evs[i] == e_ev) for i in range(B))).any()
                        if B else 0, 1, "in_pool")
        pool_full = cur_pv.all() if B else Const(1, 1)
        any_empty, first_empty = _first_set(m, ~cur_pv, max(1, B), "pool_empty")

        def changed_states(rule):
            return Cat(*(rule(hold[s], slot_st[s]) for s in range(A)))

        skip_st = changed_states(lambda h, s: Mux(h & (s == _G), _S, s))
        deny_st = changed_states(lambda h, s: Mux(h, _D, s))
        allow_st = changed_states(lambda h, s: Mux(h & (s == _D), _G, s))
        recovered_st = changed_states(lambda h, s: Mux(h & (s == _A), _G, s))
        bad_st = Cat(*(Mux(marked[s], _A, slot_st[s]) for s in range(A)))

        # The refill (one backup EV moved per cycle) and the floor.
        w_states = [w_st[2 * s:2 * s + 2] for s in range(A)]
        w_slot_ev = [w_ev.word_select(s, _EV_BITS) for s in range(A)]
        w_pool_ev = [w_pool.word_select(i, _EV_BITS) for i in range(B)]
        waiting = Cat(*(s[1] for s in w_states))
        any_waiting, first_waiting = _first_set(m, waiting, A, "waiting")
        bad_slot = _wire(m, Cat(*(s == _A for s in w_states)), A, "bad_slot")
        eligible = Cat(*(w_pv[i] & ~Cat(*(bad_slot[s] & (w_slot_ev[s][:_PATH_BITS] ==
                                                         w_pool_ev[i][:_PATH_BITS])
                                          for s in range(A))).any()
                         for i in range(B))) if B else Const(0, 1)
        any_eligible, first_eligible = _first_set(m, eligible, max(1, B), "eligible")
        moved_ev = _wire(m, _pick(w_pool, first_eligible, max(1, B), _EV_BITS), _EV_BITS,
                         "moved_ev")
        page_after = _popcount(m, (~s[1] for s in w_states), "page_after")
        total_after = _wire(m, e_total - e_page_count + page_after, count_w + 1, "total_after")
        refuse = (total_after < e_min) & (page_after < e_page_count)
        total_before = _popcount(m, (~e_st_row[2 * s + 1] for s in range(npl * A)),
                                 "total_before")
        page_before = _popcount(m, (~s[1] for s in slot_st), "page_before")

        mk_first_any, mk_first = _first_set(m, e_marked, A, "marked_first")
        mk_last = _wire(m, (e_marked & (e_marked - 1)) == 0, 1, "marked_last")
        marked_out = self.m_marked.p

        def write_slot(index, ev, state):
            for s in range(A):
                with m.If(index == s):
                    m.d.sync += [w_ev.word_select(s, _EV_BITS).eq(ev),
                                 w_st[2 * s:2 * s + 2].eq(state)]

        def write_pool(index, ev, valid):
            for i in range(B):
                with m.If(index == i):
                    if ev is not None:
                        m.d.sync += w_pool.word_select(i, _EV_BITS).eq(ev)
                    m.d.sync += w_pv[i].eq(valid)

        commit = Signal()
        m.d.comb += [
            wp_ev.addr.eq(e_page), wp_ev.data.eq(w_ev), wp_ev.en.eq(commit),
            marked_out.qpn.eq(e_qpn),
        ]
        if B:
            m.d.comb += [wp_pool.addr.eq(e_page), wp_pool.data.eq(w_pool),
                         wp_pool.en.eq(commit)]

        with m.FSM(name="engine"):
            with m.State("IDLE"):
                m.d.comb += engine_idle.eq(1)
                with m.If(grant_cmd):
                    m.d.sync += [e_op.eq(cmd_op), e_page.eq(cmd_page), e_q.eq(cmd_q),
                                 e_plane.eq(cmd_plane), e_idx.eq(cmd_idx), e_ev.eq(cmd_data)]
                    m.next = "LOAD"
                with m.Elif(ev_fire):
                    m.d.sync += [
                        e_op.eq(ev_in.kind), e_page.eq(page(ev_q, ev_plane)), e_q.eq(ev_q),
                        e_plane.eq(ev_plane[:plw]),
                        e_qpn.eq(ev_in.qpn), e_ev.eq(ev_in.ev), e_min.eq(ev_min),
                        e_cfgd.eq((ev_in.qpn < nq) & qp_enable.bit_select(ev_q, 1)),
                        e_plane_ok.eq(ev_plane < npl),
                        e_t1_ok.eq(ev_in.ev[EV_T1_SHIFT:_PATH_BITS] < num_t1),
                    ]
                    m.next = "LOAD"

            with m.State("LOAD"):
                # The plane's words arrived: apply the operation to a working copy.
                m.d.sync += [w_ev.eq(page_ev), w_st.eq(cur_st), w_pool.eq(page_pool),
                             w_pv.eq(cur_pv), e_marked.eq(marked),
                             e_total.eq(total_before),
                             e_page_count.eq(page_before)]
                ignored = Signal()
                m.d.comb += count["ev_ignored"].eq(ignored)
                with m.Switch(e_op):
                    with m.Case(EvEvent.SKIP, EvEvent.DENY, EvEvent.ALLOW):
                        m.d.sync += w_st.eq(Mux(e_op == EvEvent.SKIP, skip_st,
                                                Mux(e_op == EvEvent.DENY, deny_st, allow_st)))
                        with m.If(held):
                            m.next = "REFILL"
                        with m.Else():
                            m.d.comb += ignored.eq(1)
                            m.next = "IDLE"
                    with m.Case(EvEvent.BAD):
                        m.d.sync += w_st.eq(bad_st)
                        with m.If(held & marked.any()):
                            m.next = "REFILL"
                        with m.Else():
                            m.d.comb += ignored.eq(1)
                            m.next = "EMIT_NONE"
                    with m.Case(EvEvent.RECOVERED):
                        usable = e_cfgd & e_plane_ok & e_t1_ok
                        with m.If(usable & held):
                            m.d.sync += w_st.eq(recovered_st)
                            m.next = "REFILL"
                        with m.Elif(usable & ~in_pool & ~pool_full):
                            write_pool(first_empty, e_ev, 1)
                            m.next = "REFILL"
                        with m.Else():
                            m.d.comb += ignored.eq(1)
                            m.next = "IDLE"
                    with m.Case(_OP_SLOT_EV):
                        write_slot(e_idx, e_ev, _G)
                        m.next = "REFILL"
                    with m.Case(_OP_SLOT_STATE):
                        for s in range(A):
                            with m.If(e_idx == s):
                                m.d.sync += w_st[2 * s:2 * s + 2].eq(e_ev[:2])
                        m.next = "COMMIT"
                    with m.Case(_OP_SEED):
                        m.next = "COMMIT"
                    with m.Case(_OP_POOL_EV):
                        write_pool(e_idx, e_ev, 1)
                        m.next = "REFILL"
                    with m.Case(_OP_POOL_CLEAR):
                        write_pool(e_idx, None, 0)
                        m.next = "REFILL"
                    with m.Default():             # EV_EVENT kinds 5..7
                        m.d.comb += ignored.eq(1)
                        m.next = "IDLE"

            with m.State("REFILL"):
                with m.If(any_waiting & any_eligible):
                    write_slot(first_waiting, moved_ev, _G)
                    write_pool(first_eligible, None, 0)
                with m.Elif(e_op == EvEvent.BAD):
                    m.next = "CHECK"
                with m.Else():
                    m.next = "COMMIT"

            with m.State("CHECK"):
                with m.If(refuse):
                    m.d.comb += count["marks_refused"].eq(1)
                    m.next = "EMIT_NONE"
                with m.Else():
                    m.next = "COMMIT"

            with m.State("COMMIT"):
                m.d.comb += commit.eq(1)
                with m.If(e_op[3]):                  # a table write: the next one may come
                    m.d.sync += cmd_pending.eq(0)
                with m.If(e_op == EvEvent.BAD):
                    m.next = "EMIT"
                with m.Else():
                    m.next = "IDLE"

            with m.State("EMIT"):
                # The EVs the marked slots held: the plane word read in LOAD is still on the
                # read port (it is not enabled again before the engine is idle).
                m.d.comb += [
                    self.m_marked.valid.eq(1),
                    marked_out.ev.eq(_pick(page_ev, mk_first, A, _EV_BITS)),
                    marked_out.valid.eq(1), marked_out.last.eq(mk_last),
                ]
                with m.If(self.m_marked.ready):
                    m.d.sync += e_marked.eq(e_marked & (e_marked - 1))
                    with m.If(mk_last):
                        m.next = "IDLE"

            with m.State("EMIT_NONE"):
                m.d.comb += [self.m_marked.valid.eq(1), marked_out.last.eq(1)]
                with m.If(self.m_marked.ready):
                    m.next = "IDLE"

        # Registers written by a decision or by the engine's commit.
        for k in range(pages):
            q, p = divmod(k, npl)
            with m.If(decide & (dec_page == k)):
                m.d.sync += [st[k].eq(sel_new_st), ptr[k].eq(sel_new_ptr),
                             lfsr[k].eq(sel_new_lfsr)]
            with m.Elif(commit & (e_page == k)):
                m.d.sync += [st[k].eq(w_st), pool_valid[k].eq(w_pv)]
                with m.If(e_op == _OP_SEED):
                    m.d.sync += lfsr[k].eq(e_ev[:_SEED_BITS])
        for q in range(nq):
            with m.If(decide & (c_q == q)):
                m.d.sync += plane_ptr[q].eq(next_pp)

        # --- configuration reads: registers (ConfigMap), table registers, memories -----------
        r_qp, r_plane, r_off = t_qp, t_plane, t_off
        r_page = Signal(range(pages))
        m.d.comb += r_page.eq(page(r_qp, r_plane))
        r_q, r_p = r_qp[:qb], r_plane[:plw]
        r_st, r_pv = Signal(2 * A), Signal(max(1, B))
        m.d.comb += [r_st.eq(_pick(st_rows[r_q], r_p, npl, 2 * A)),
                     r_pv.eq(_pick(pv_rows[r_q], r_p, npl, max(1, B)))]
        words = -(-2 * A // 32)
        table_word = Signal(32)
        with m.If(t_mapped):
            with m.If(t_state):
                m.d.comb += table_word.eq(_pick(r_st, r_off[:6], A, 2))
            with m.Elif((r_off[4:8] == OFF_STATES >> 4) & (r_off[:4] < words)):
                m.d.comb += table_word.eq(_pick(Cat(r_st, Const(0, 32 * words - 2 * A)),
                                                r_off[:4], words, 32))
            with m.Elif(r_off == OFF_POINTER):
                m.d.comb += table_word.eq(_pick(ptr_rows[r_q], r_p, npl, pw))
            with m.Elif(t_seed):
                m.d.comb += table_word.eq(_pick(lfsr_rows[r_q], r_p, npl, _SEED_BITS))
            with m.Elif(r_off == OFF_PLANE_POINTER):
                m.d.comb += table_word.eq(pp_arr[r_q])
            with m.Elif(t_pool_clear):
                m.d.comb += table_word.eq(_pick(r_pv, r_off[:5], max(1, B), 1))
        rd_table, rd_slot_ev, rd_pool_ev, rd_index = Signal(32), Signal(), Signal(), Signal(6)
        m.d.sync += [rd_table.eq(table_word), rd_slot_ev.eq(t_mapped & t_slot),
                     rd_pool_ev.eq(t_mapped & t_pool_ev), rd_index.eq(r_off[:6])]
        m.d.comb += [rp_cfg.addr.eq(r_page), rp_cfg.en.eq(1)]
        read = rd_table | inner.cfg_rdata
        read = Mux(rd_slot_ev, _pick(rp_cfg.data, rd_index, A, _EV_BITS), read)
        if B:
            m.d.comb += [rp_pool_cfg.addr.eq(r_page), rp_pool_cfg.en.eq(1)]
            read = Mux(rd_pool_ev, _pick(rp_pool_cfg.data, rd_index, B, _EV_BITS), read)
        m.d.comb += self.cfg_rdata.eq(read)

        cfg.ro(ADDR_STATUS, "status", Cat(cmd_pending, ~engine_idle, pipe_busy),
               doc="table write waiting, engine busy, decisions in flight")
        cfg.finish()
        return m

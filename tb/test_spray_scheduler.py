# SPDX-License-Identifier: BSD-2-Clause
"""cocotb bench of rtl.spray_scheduler.SprayScheduler against models.spray.EvTable.

``spray_random`` loads every QP through the configuration port (slot EVs on few paths, so that
timeouts mark several slots, backup pools, seeds), then runs phases of seeded random traffic: choice
requests (random QPs, some not configured, random plane_ok masks, avoided EVs, a held EV in
``avoid_ev`` with ``avoid_valid`` = 0), EV events of every kind (on held, pooled, marked, fresh and
foreign EVs, unknown kinds, unconfigured QPs) and, concurrently, configuration writes (slot and pool
loads, some refused, pool clears, seeds, slot states, plane up/down, the floor, the number of T1s,
QP enables, and table writes while one is pending, refused as busy). Sources idle and sinks
backpressure at random. A monitor takes the handshakes and configuration writes in the order the
scheduler applies them (see the class docstring) and feeds them to the model; every answer and
every EV_MARKED record is compared in order, and after each phase every slot state, rotation
pointer, LFSR and plane pointer is read back through the configuration port and compared (slot EVs,
pool entries and every counter too at the end). Streams must be empty at the end.

``spray_vectors`` replays the case of ``vectors/spray.json`` whose planes and A match the build:
``set_state`` through the slot state word, each choice compared (plane, slot, EV) and every slot
state read back after it.

``perf`` measures back-to-back decisions (cycles per decision, latency from the request handshake to
the answer) and the engine's cycles per event, and writes them with ``write_perf``.
"""

import pytest

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge

from models.records import EV_EVENT, EV_MARKED, SPRAY_ANSWER, SPRAY_REQUEST, EvEvent
from models.spray import (MAX_T1, EvTable, PlaneSet, QpSet, SlotState, ev_marked_records,
                          ev_path, ev_plane, ev_t1, make_ev)
from rtl.spray_scheduler import (ADDR_COUNTERS, ADDR_EV_MIN_ACTIVE, ADDR_NUM_T1, ADDR_PLANE_UP,
                                 ADDR_QP_ENABLE, ADDR_STATUS, COUNTERS, DECISION_LATENCY,
                                 OFF_LFSR, OFF_PLANE_POINTER, OFF_POINTER, OFF_POOL_EV,
                                 OFF_POOL_VALID, OFF_SLOT_EV, OFF_SLOT_STATE, OFF_STATES,
                                 STATUS_CMD_PENDING, TABLE_BASE, SprayScheduler, table_addr)

# Builds: each replays the vector case with its planes and A, and runs the random bench.
CONFIGS = {
    "q4p4a4b4": dict(n_qps=4, n_planes=4, slots=4, backups=4),
    "q4p8a16b4": dict(n_qps=4, n_planes=8, slots=16, backups=4),
    "q3p2a8b3": dict(n_qps=3, n_planes=2, slots=8, backups=3),
    "q5p2a4b0": dict(n_qps=5, n_planes=2, slots=4, backups=0),
}
FULL_CONFIGS = {
    "default": dict(n_qps=16, n_planes=8, slots=16, backups=8),
    "q3p3a1b1": dict(n_qps=3, n_planes=3, slots=1, backups=1),
    "q2p5a2b2": dict(n_qps=2, n_planes=5, slots=2, backups=2),
}
PHASES = 8
REQUESTS = 260               # per phase: 2080 decisions a run
EVENTS = 70
CONFIG_OPS = 14
FULL_PHASES = 24
T1_SPAN = 4                  # T1 indices of most EVs: paths collide, BAD marks several slots
NUM_T1 = 6                   # loads with T1 6 or 7 are refused
PERF_DECISIONS = 200
DRAIN_CYCLES = 200_000
ANSWER_CYCLES = 1000         # one decision answered (3 cycles of latency) within this

G = SlotState.GOOD
KIND_NAMES = {EvEvent.SKIP: "ev_skip", EvEvent.BAD: "ev_bad", EvEvent.RECOVERED: "ev_recovered",
              EvEvent.DENY: "ev_deny", EvEvent.ALLOW: "ev_allow"}


def reset_table(p):
    """The model of the scheduler just after reset: every QP present (the bench gates requests
    and events by the enable bits), slot EVs 0 and GOOD, pools empty, pointers 0, LFSRs 1."""
    nq, npl, a, b = p["n_qps"], p["n_planes"], p["slots"], p["backups"]
    table = EvTable(npl, num_t1=MAX_T1, slots=a, backup=b, ev_min_active=p["ev_min_active"], profile=1)
    for q in range(nq):
        table.qps[q] = QpSet(tuple(PlaneSet(pl, (0,) * a, (G,) * a, (None,) * b, 0, 1)
                                   for pl in range(npl)))
    return table


class Checker:
    """Applies the scheduler's inputs to the model in the scheduler's order and keeps what it
    must answer: the answers, the EV_MARKED records and the counters."""

    def __init__(self, p):
        self.p = p
        self.n_qps, self.n_planes = p["n_qps"], p["n_planes"]
        self.model = reset_table(p)
        self.enabled = [False] * self.n_qps
        self.answers = []
        self.marked = []
        self.marked_evs = []           # EVs reported marked: candidates for RECOVERED
        self.counts = dict.fromkeys(COUNTERS, 0)
        self.planes_down = self.planes_up = 0    # plane-up writes seen (coverage)
        self.table_writes = 0
        self.busy_writes = set()       # indices of table writes that must be refused as busy

    def configured(self, q):
        return q < self.n_qps and self.enabled[q]

    def request(self, word):
        r = SPRAY_REQUEST.unpack(word)
        q = r["qpn"]
        answer = {"qpn": q, "found": 0, "plane": 0, "slot": 0, "ev": 0, "position": 0}
        if not self.configured(q):
            self.counts["bad_request"] += 1
        else:
            avoid = r["avoid_ev"] if r["avoid_valid"] else None
            choice = self.model.choose(q, r["plane_ok"], avoid)
            if choice is None:
                self.counts["nothing"] += 1
            else:
                self.counts["decisions"] += 1
                answer.update(found=1, plane=choice.plane, slot=choice.slot, ev=choice.ev,
                              position=choice.position)
        self.answers.append(answer)

    def event(self, word):
        r = EV_EVENT.unpack(word)
        q, ev, kind = r["qpn"], r["ev"], r["kind"]
        if kind not in KIND_NAMES:
            self.counts["ev_ignored"] += 1
            return
        self.counts[KIND_NAMES[kind]] += 1
        if not self.configured(q):
            self.counts["ev_ignored"] += 1
            if kind == EvEvent.BAD:
                self.marked += ev_marked_records(q, ())
            return
        ignored = self.ignored(self.model.qp(q), ev, kind)
        marked = self.model.event(q, ev, kind)
        if kind == EvEvent.BAD:
            if not ignored and not marked:
                self.counts["marks_refused"] += 1
            self.marked += ev_marked_records(q, marked)
            self.marked_evs += [(q, e) for e in marked]
        if ignored:
            self.counts["ev_ignored"] += 1

    def ignored(self, qp, ev, kind):
        """True when the event leaves the QP unchanged with no refill (``ev_ignored``)."""
        plane = ev_plane(ev)
        if kind == EvEvent.RECOVERED:
            if ev_t1(ev) >= self.model.num_t1 or plane >= self.n_planes:
                return True
            ps = qp.planes[plane]
            return not ps.holds(ev) and (ev in ps.pool or None not in ps.pool)
        if not qp.holds(ev):
            return True
        if kind == EvEvent.BAD:
            ps = qp.planes[plane]
            return not any(ev_path(e) == ev_path(ev) and st.choosable
                           for e, st in zip(ps.evs, ps.states))
        return False

    def config_write(self, addr, data):
        if addr & TABLE_BASE:
            index = self.table_writes
            self.table_writes += 1
            if index in self.busy_writes:
                self.counts["load_busy"] += 1
            elif not self.table_write(addr, data):
                self.counts["load_refused"] += 1
        elif addr == ADDR_PLANE_UP:
            for plane in range(self.n_planes):
                up = data >> plane & 1
                self.planes_down += bool(self.model.plane_up[plane] and not up)
                self.planes_up += bool(up and not self.model.plane_up[plane])
                self.model.set_plane_up(plane, up)
        elif addr == ADDR_EV_MIN_ACTIVE:
            self.model.ev_min_active = data & 0xFFFF
        elif addr == ADDR_NUM_T1:
            self.model.num_t1 = data & 0x1FF
        elif ADDR_QP_ENABLE <= addr < ADDR_QP_ENABLE + 8:
            base = 32 * (addr - ADDR_QP_ENABLE)
            for q in range(base, min(base + 32, self.n_qps)):
                self.enabled[q] = bool(data >> (q - base) & 1)
        elif addr in ADDR_COUNTERS.values():
            self.counts[COUNTERS[addr - ADDR_COUNTERS[COUNTERS[0]]]] = 0

    def table_write(self, addr, data):
        """Apply one table write to the model; False when the model refuses it."""
        q, plane, off = addr >> 11 & 0xFF, addr >> 8 & 7, addr & 0xFF
        m = self.model
        try:
            if q >= self.n_qps:
                return False
            if OFF_SLOT_EV <= off < OFF_SLOT_STATE:
                m.load_slot(q, plane, off - OFF_SLOT_EV, data)
            elif OFF_SLOT_STATE <= off < OFF_STATES:
                m.set_state(q, plane, off - OFF_SLOT_STATE, data & 3)
            elif off == OFF_LFSR:
                m.load_seed(q, plane, data)
            elif OFF_POOL_EV <= off < OFF_POOL_VALID:
                m.load_pool_entry(q, plane, off - OFF_POOL_EV, data)
            elif OFF_POOL_VALID <= off < OFF_POOL_VALID + 0x20:
                m.load_pool_entry(q, plane, off - OFF_POOL_VALID, None)
            else:
                return False
        except ValueError:
            return False
        return True


async def monitor(dut, checker):
    """Every handshake and configuration write, in the scheduler's order, into the checker."""
    req_v, req_r, req_d = dut.s_req_tvalid, dut.s_req_tready, dut.s_req_tdata
    ev_v, ev_r, ev_d = dut.s_ev_tvalid, dut.s_ev_tready, dut.s_ev_tdata
    we, addr, wdata = dut.cfg_we, dut.cfg_addr, dut.cfg_wdata
    while True:
        await RisingEdge(dut.clk)
        req = int(req_v.value) and int(req_r.value)
        ev = int(ev_v.value) and int(ev_r.value)
        assert not (req and ev), "a request and an event accepted in the same cycle"
        if req:
            checker.request(int(req_d.value))
        if ev:
            checker.event(int(ev_d.value))
        if int(we.value):
            checker.config_write(int(addr.value), int(wdata.value))


# --- Configuration port helpers -------------------------------------------------------------------

async def table_write(cfg, addr, data):
    """A table write once no earlier one waits (status bit 0), so that it is not refused busy."""
    while await cfg.read(ADDR_STATUS) & STATUS_CMD_PENDING:
        pass
    await cfg.write(addr, data)


async def wait_idle(cfg):
    while await cfg.read(ADDR_STATUS):
        pass


async def read_states(cfg, p, q, plane):
    a = p["slots"]
    letters = ""
    for w in range(-(-a // 16)):
        word = await cfg.read(table_addr(q, plane, OFF_STATES + w))
        letters += "".join("GSAD"[word >> 2 * s & 3] for s in range(min(16, a - 16 * w)))
    return letters


async def check_state(cfg, checker, full=False):
    """Read every QP's state back and compare it with the model (``full``: EVs and pools too)."""
    p = checker.p
    for q in range(p["n_qps"]):
        qp = checker.model.qp(q)
        for plane, ps in enumerate(qp.planes):
            where = f"QP {q} plane {plane}"
            assert await read_states(cfg, p, q, plane) == ps.letters(), \
                f"{where}: states differ from the model's {ps.letters()}"
            assert await cfg.read(table_addr(q, plane, OFF_POINTER)) == ps.pointer, where
            assert await cfg.read(table_addr(q, plane, OFF_LFSR)) == ps.lfsr, where
            assert await cfg.read(table_addr(q, plane, OFF_PLANE_POINTER)) == qp.plane_pointer, \
                where
            if not full:
                continue
            for s in range(ps.size):
                assert await cfg.read(table_addr(q, plane, OFF_SLOT_EV + s)) == ps.evs[s], \
                    f"{where} slot {s}"
                assert await cfg.read(table_addr(q, plane, OFF_SLOT_STATE + s)) == ps.states[s]
            for i, entry in enumerate(ps.pool):
                valid = await cfg.read(table_addr(q, plane, OFF_POOL_VALID + i))
                assert valid == (entry is not None), f"{where} pool entry {i}"
                if entry is not None:
                    assert await cfg.read(table_addr(q, plane, OFF_POOL_EV + i)) == entry, \
                        f"{where} pool entry {i}"


async def read_counters(cfg):
    return {name: await cfg.read(ADDR_COUNTERS[name]) for name in COUNTERS}


def build_params(dut):
    from verif.bench import params

    p = params()
    assert len(dut.cfg_addr) == 20
    return p


# --- Random traffic -------------------------------------------------------------------------------

class Traffic:
    """Seeded random requests, events and configuration writes for one scheduler."""

    def __init__(self, rng, checker):
        self.rng = rng
        self.checker = checker
        self.p = checker.p
        self.num_t1 = NUM_T1
        self.issued = 0                # table writes issued, as the checker counts them

    async def table_write(self, cfg, addr, data, busy=False):
        """A table write; ``busy``: issued at once, while the previous one is pending (refused
        and counted busy), else once no earlier table write waits."""
        if busy:
            self.checker.busy_writes.add(self.issued)
        else:
            while await cfg.read(ADDR_STATUS) & STATUS_CMD_PENDING:
                pass
        self.issued += 1
        await cfg.write(addr, data)

    def ev(self, plane, valid=True):
        """An EV for ``plane``: a few paths, several salts; ``valid`` = False: a load the model
        refuses (another plane or a T1 index not below the number of T1s)."""
        rng = self.rng
        salt = rng.randrange(8)
        others = [x for x in range(16) if x != plane]
        if not valid and (rng.random() < 0.5 or self.num_t1 >= 256):
            return make_ev(rng.choice(others), rng.randrange(T1_SPAN), salt)
        if not valid:
            return make_ev(plane, rng.randrange(self.num_t1, 256), salt)
        return make_ev(plane, rng.randrange(min(T1_SPAN, self.num_t1)), salt)

    def qpn(self):
        rng = self.rng
        r = rng.random()
        if r < 0.03:
            return rng.choice((self.p["n_qps"], 0xFFFFFF, rng.randrange(1 << 24)))
        return rng.randrange(self.p["n_qps"])

    def held(self, q):
        q = q if q < self.p["n_qps"] else 0
        return [e for ps in self.checker.model.qp(q).planes for e in ps.evs]

    def request(self):
        rng, npl = self.rng, self.p["n_planes"]
        q = self.qpn()
        r = rng.random()
        plane_ok = (1 << npl) - 1 if r < 0.5 else rng.getrandbits(8)
        avoid_valid, avoid_ev = 0, 0
        r = rng.random()
        if r < 0.4:
            avoid_valid, avoid_ev = 1, rng.choice(self.held(q))
        elif r < 0.45:
            avoid_valid, avoid_ev = 1, rng.getrandbits(32)
        elif r < 0.55:
            avoid_ev = rng.choice(self.held(q))          # ignored: avoid_valid = 0
        return SPRAY_REQUEST.pack(qpn=q, plane_ok=plane_ok, avoid_valid=avoid_valid,
                                  avoid_ev=avoid_ev)

    def event(self):
        rng, npl = self.rng, self.p["n_planes"]
        q = self.qpn()
        kind = rng.choices([EvEvent.SKIP, EvEvent.BAD, EvEvent.RECOVERED, EvEvent.DENY,
                            EvEvent.ALLOW, 5, 6, 7], [30, 22, 20, 10, 12, 1, 1, 1])[0]
        r = rng.random()
        marked = [e for mq, e in self.checker.marked_evs if mq == q]
        pooled = [e for ps in self.checker.model.qp(q if q < self.p["n_qps"] else 0).planes
                  for e in ps.pool if e is not None]
        if r < 0.6:
            ev = rng.choice(self.held(q))
        elif r < 0.72 and marked:
            ev = rng.choice(marked)
        elif r < 0.8 and pooled:
            ev = rng.choice(pooled)
        elif r < 0.92:
            ev = self.ev(rng.randrange(npl))
        elif r < 0.96:
            ev = make_ev(rng.randrange(npl, 16), rng.randrange(T1_SPAN), rng.randrange(8))
        else:
            ev = rng.getrandbits(32)
        return EV_EVENT.pack(qpn=q, ev=ev, kind=kind)

    async def configure(self, cfg):
        """Load every QP (slots, some pool entries, seeds) and enable all but maybe one."""
        p, rng = self.p, self.rng
        await cfg.write(ADDR_NUM_T1, self.num_t1)
        await cfg.write(ADDR_EV_MIN_ACTIVE, rng.randrange(p["n_planes"] * p["slots"] // 2 + 2))
        for q in range(p["n_qps"]):
            for plane in range(p["n_planes"]):
                for s in range(p["slots"]):
                    await self.table_write(cfg, table_addr(q, plane, OFF_SLOT_EV + s),
                                           self.ev(plane))
                for i in range(rng.randrange(p["backups"] + 1)):
                    await self.table_write(cfg, table_addr(q, plane, OFF_POOL_EV + i),
                                           self.ev(plane))
                await self.table_write(cfg, table_addr(q, plane, OFF_LFSR),
                                       rng.randrange(1, 1 << 16))
        # A refused load, and a write while the previous one is pending (refused busy).
        await self.table_write(cfg, table_addr(0, 0, OFF_SLOT_EV), self.ev(0, valid=False))
        await self.table_write(cfg, table_addr(0, 0, OFF_SLOT_EV), self.ev(0))
        await self.table_write(cfg, table_addr(0, 0, OFF_SLOT_EV), self.ev(0), busy=True)
        enable = (1 << p["n_qps"]) - 1
        if p["n_qps"] > 1:
            enable &= ~(1 << rng.randrange(p["n_qps"]))
        await self.write_enable(cfg, enable)

    async def write_enable(self, cfg, enable):
        for k in range(-(-self.p["n_qps"] // 32)):
            await cfg.write(ADDR_QP_ENABLE + k, enable >> 32 * k & 0xFFFFFFFF)

    async def config_ops(self, cfg, count):
        """Random configuration writes while requests and events flow."""
        p, rng = self.p, self.rng
        for _ in range(count):
            await ClockCycles(cfg.dut.clk, rng.randrange(5, 120))
            q, plane = rng.randrange(p["n_qps"]), rng.randrange(p["n_planes"])
            op = rng.choices(["slot", "pool", "clear", "seed", "state", "busy", "bad_address",
                              "plane_up", "floor", "num_t1", "enable"],
                             [20, 14, 6, 6, 6, 5, 3, 6, 4, 2, 3])[0]
            slot, entry = rng.randrange(p["slots"]), rng.randrange(max(1, p["backups"]))
            if op == "slot":
                await self.table_write(cfg, table_addr(q, plane, OFF_SLOT_EV + slot),
                                       self.ev(plane, rng.random() < 0.8))
            elif op == "pool" and p["backups"]:
                await self.table_write(cfg, table_addr(q, plane, OFF_POOL_EV + entry),
                                       self.ev(plane, rng.random() < 0.85))
            elif op == "clear" and p["backups"]:
                await self.table_write(cfg, table_addr(q, plane, OFF_POOL_VALID + entry), 0)
            elif op == "seed":
                await self.table_write(cfg, table_addr(q, plane, OFF_LFSR),
                                       rng.choice((0, 1 << 16, rng.randrange(1, 1 << 16))))
            elif op == "state":
                await self.table_write(cfg, table_addr(q, plane, OFF_SLOT_STATE + slot),
                                       rng.randrange(4))
            elif op == "busy":
                await self.table_write(cfg, table_addr(q, plane, OFF_SLOT_EV + slot),
                                       self.ev(plane))
                await self.table_write(cfg, table_addr(q, plane, OFF_SLOT_EV), self.ev(plane),
                                       busy=True)
            elif op == "bad_address":
                off = rng.choice((OFF_STATES, OFF_POINTER, OFF_PLANE_POINTER, 0xFF,
                                  OFF_SLOT_EV + p["slots"], OFF_POOL_EV + p["backups"]))
                addrs = [table_addr(q, plane, off)]
                if p["n_qps"] < 256:
                    addrs.append(table_addr(p["n_qps"], plane, OFF_SLOT_EV))
                if p["n_planes"] < 8:
                    addrs.append(table_addr(q, p["n_planes"], OFF_SLOT_EV))
                await self.table_write(cfg, rng.choice(addrs), self.ev(plane))
            elif op == "plane_up":
                mask = (1 << p["n_planes"]) - 1
                if rng.random() < 0.7:
                    mask &= ~(1 << rng.randrange(p["n_planes"]))
                await cfg.write(ADDR_PLANE_UP, mask)
            elif op == "floor":
                await cfg.write(ADDR_EV_MIN_ACTIVE, rng.randrange(p["n_planes"] * p["slots"] + 2))
            elif op == "num_t1":
                self.num_t1 = rng.choice((NUM_T1, T1_SPAN + 1, 256))
                await cfg.write(ADDR_NUM_T1, self.num_t1)
            elif op == "enable":
                enable = (1 << p["n_qps"]) - 1
                if rng.random() < 0.6:
                    enable &= ~(1 << rng.randrange(p["n_qps"]))
                await self.write_enable(cfg, enable)


async def drain(dut, checker, sources, ans_sink, marked_sink, cfg):
    """Wait until every record was accepted, answered and the scheduler is idle."""
    for _ in range(DRAIN_CYCLES):
        await RisingEdge(dut.clk)
        if all(s.empty() for s in sources) and len(ans_sink.queue) >= len(checker.answers) \
                and len(marked_sink.queue) >= len(checker.marked):
            break
    else:
        raise AssertionError(f"no drain: {len(ans_sink.queue)}/{len(checker.answers)} answers, "
                             f"{len(marked_sink.queue)}/{len(checker.marked)} EV_MARKED records")
    await wait_idle(cfg)


def compare_outputs(checker, ans_sink, marked_sink, phase):
    got = [SPRAY_ANSWER.unpack(w) for w in ans_sink.queue]
    assert len(got) == len(checker.answers), \
        f"phase {phase}: {len(got)} answers for {len(checker.answers)} requests"
    for n, (g, want) in enumerate(zip(got, checker.answers)):
        assert g == want, f"phase {phase}, answer {n}: {g}, model {want}"
    got = [EV_MARKED.unpack(w) for w in marked_sink.queue]
    assert got == checker.marked, f"phase {phase}: EV_MARKED {got}, model {checker.marked}"
    n = len(checker.answers)
    ans_sink.queue.clear()
    marked_sink.queue.clear()
    checker.answers.clear()
    checker.marked.clear()
    return n


@cocotb.test()
async def spray_random(dut):
    from verif.bench import ConfigDriver, RecordSink, RecordSource, make_rng, phased_pause, \
        start, write_result

    p = build_params(dut)
    phases = p.get("phases", PHASES)
    rng = make_rng(dut)
    cfg = ConfigDriver(dut)
    idle = (0.0, 0.0, 0.3, 0.7)
    backpressure = (0.0, 0.2, 0.5, 0.9)
    requests = RecordSource(dut, "s_req", pause=phased_pause(rng, idle))
    events = RecordSource(dut, "s_ev", pause=phased_pause(rng, idle))
    answers = RecordSink(dut, "m_ans", pause=phased_pause(rng, backpressure))
    marked = RecordSink(dut, "m_marked", pause=phased_pause(rng, backpressure))
    await start(dut)
    checker = Checker(p)
    cocotb.start_soon(monitor(dut, checker))
    traffic = Traffic(rng, checker)
    await traffic.configure(cfg)
    await wait_idle(cfg)
    await check_state(cfg, checker, full=True)
    checked = 0
    for phase in range(phases):
        for _ in range(REQUESTS):
            requests.send(traffic.request())
        for _ in range(EVENTS):
            events.send(traffic.event())
        await traffic.config_ops(cfg, CONFIG_OPS)
        await drain(dut, checker, (requests, events), answers, marked, cfg)
        checked += compare_outputs(checker, answers, marked, phase)
        await check_state(cfg, checker, full=phase == phases - 1)
        dut._log.info("phase %d: %d answers checked; counters so far %s", phase, checked,
                      checker.counts)

    counts = dict(checker.counts)
    assert await read_counters(cfg) == counts
    assert min(counts[k] for k in KIND_NAMES.values()) > 0 and counts["ev_ignored"] > 0
    assert counts["decisions"] > 0 and counts["nothing"] + counts["bad_request"] > 0
    assert counts["load_refused"] > 0 and counts["load_busy"] > 0
    for name in COUNTERS:                       # a write clears a counter
        await cfg.write(ADDR_COUNTERS[name], 0)
    assert set((await read_counters(cfg)).values()) == {0}
    await ClockCycles(dut.clk, 20)
    assert requests.empty() and events.empty() and answers.empty() and marked.empty()
    assert not int(dut.m_ans_tvalid.value) and not int(dut.m_marked_tvalid.value)
    assert not checker.answers and not checker.marked
    dut._log.info("%d answers and every EV_MARKED record checked; counters %s", checked, counts)
    from verif import coverage
    coverage.hit_counts("EV event (4.4)", {k[3:].upper(): v for k, v in counts.items()
                                           if k.startswith("ev_")})
    coverage.hit("plane", "down", checker.planes_down)
    coverage.hit("plane", "up", checker.planes_up)
    write_result(dut, "spray_scheduler", checked)


# --- Conformance vectors -------------------------------------------------------------------------

@cocotb.test()
async def spray_vectors(dut):
    from verif.bench import ConfigDriver, RecordSink, RecordSource, start, wait_until

    p = build_params(dut)
    from models import conformance as vectors

    cases = [c for c in vectors.load("spray.json")
             if (c["init"]["planes"], c["init"]["A"]) == (p["n_planes"], p["slots"])]
    assert cases, "no vector case for this build"
    cfg = ConfigDriver(dut)
    requests = RecordSource(dut, "s_req")
    answers = RecordSink(dut, "m_ans")
    dut.s_ev_tvalid.value = 0
    dut.s_ev_tdata.value = 0
    dut.m_marked_tready.value = 1
    await start(dut)
    q = p["n_qps"] - 1
    for case in cases:
        init = case["init"]
        await cfg.write(ADDR_QP_ENABLE + q // 32, 0)
        for plane, evs in enumerate(init["slots"]):
            for s, ev in enumerate(evs):
                await table_write(cfg, table_addr(q, plane, OFF_SLOT_EV + s), ev)
            await table_write(cfg, table_addr(q, plane, OFF_LFSR), init["lfsr_seeds"][plane])
        await wait_idle(cfg)
        await cfg.write(ADDR_QP_ENABLE + q // 32, 1 << q % 32)
        for n, op in enumerate(case["ops"]):
            if op["op"] == "set_state":
                await table_write(cfg, table_addr(q, op["plane"], OFF_SLOT_STATE + op["slot"]),
                                  SlotState[op["state"]])
                await wait_idle(cfg)
                continue
            plane_ok = sum(1 << i for i, ok in enumerate(op["plane_ok"]) if ok)
            avoid = op["avoid_ev"]
            requests.send(SPRAY_REQUEST.pack(qpn=q, plane_ok=plane_ok,
                                             avoid_valid=int(avoid is not None),
                                             avoid_ev=avoid or 0))
            await wait_until(dut, lambda: answers.queue, ANSWER_CYCLES, f"op {n}: answer")
            got = SPRAY_ANSWER.unpack(answers.queue.popleft())
            chosen = op["chosen"]
            if chosen is None:
                assert not got["found"], f"op {n}: chose {got}, the vector nothing"
            else:
                assert (got["found"], got["plane"], got["slot"]) == \
                    (1, chosen["plane"], chosen["slot"]), f"op {n}: {got}, vector {chosen}"
                assert got["ev"] == init["slots"][chosen["plane"]][chosen["slot"]]
            await wait_idle(cfg)
            letters = [await read_states(cfg, p, q, plane) for plane in range(p["n_planes"])]
            assert letters == op["states_after"], f"op {n}: states {letters}"
    assert requests.empty() and answers.empty()


# --- Performance ----------------------------------------------------------------------------------

@cocotb.test()
async def perf(dut):
    from verif.bench import ConfigDriver, RecordSink, RecordSource, start, wait_until, write_perf

    p = build_params(dut)
    cfg = ConfigDriver(dut)
    requests = RecordSource(dut, "s_req")
    events = RecordSource(dut, "s_ev")
    answers = RecordSink(dut, "m_ans")
    marked = RecordSink(dut, "m_marked")
    await start(dut)
    for plane in range(p["n_planes"]):
        for s in range(p["slots"]):
            await table_write(cfg, table_addr(0, plane, OFF_SLOT_EV + s), make_ev(plane, s % 16))
        await table_write(cfg, table_addr(0, plane, OFF_LFSR), 0xACE1 + plane)
    await cfg.write(ADDR_QP_ENABLE, 1)
    await wait_idle(cfg)
    req_cycles, ans_cycles, ev_cycles = [], [], []

    async def log():
        cycle = 0
        while True:
            await RisingEdge(dut.clk)
            if int(dut.s_req_tvalid.value) and int(dut.s_req_tready.value):
                req_cycles.append(cycle)
            if int(dut.m_ans_tvalid.value) and int(dut.m_ans_tready.value):
                ans_cycles.append(cycle)
            if int(dut.s_ev_tvalid.value) and int(dut.s_ev_tready.value):
                ev_cycles.append(cycle)
            cycle += 1

    cocotb.start_soon(log())
    for _ in range(PERF_DECISIONS):
        requests.send(SPRAY_REQUEST.pack(qpn=0, plane_ok=0xFF))
    await wait_until(dut, lambda: len(answers.queue) >= PERF_DECISIONS,
                     PERF_DECISIONS * 8 + 100, f"{PERF_DECISIONS} answers")
    assert all(SPRAY_ANSWER.unpack(w)["found"] for w in answers.queue)
    cycles = (ans_cycles[-1] - ans_cycles[0]) / (PERF_DECISIONS - 1)
    latencies = {a - r for a, r in zip(ans_cycles, req_cycles)}
    assert cycles == 1 and latencies == {DECISION_LATENCY}, (cycles, latencies)

    # The engine: back-to-back events of each kind (SKIP and DENY on held EVs, BAD marking one
    # slot, RECOVERED of a fresh EV into the pool and ALLOW of a DENIED slot).
    event_cycles = {}
    plan = [("skip", EvEvent.SKIP, make_ev(0, 1)), ("deny", EvEvent.DENY, make_ev(0, 2)),
            ("allow", EvEvent.ALLOW, make_ev(0, 2)), ("recovered", EvEvent.RECOVERED,
                                                       make_ev(0, 3, 9)),
            ("bad", EvEvent.BAD, make_ev(0, 0))]
    for name, kind, ev in plan:
        await cfg.write(ADDR_EV_MIN_ACTIVE, 0)
        start_index = len(ev_cycles)
        for _ in range(2):
            events.send(EV_EVENT.pack(qpn=0, ev=ev, kind=kind))
        while len(ev_cycles) < start_index + 2:
            await RisingEdge(dut.clk)
        event_cycles[name] = ev_cycles[start_index + 1] - ev_cycles[start_index]
        await wait_idle(cfg)
    assert requests.empty() and events.empty()
    write_perf(dut, "spray_scheduler", 0, [dict(
        payload=0, frames=PERF_DECISIONS, cycles_per_frame=cycles, bytes_per_cycle=0,
        efficiency=0, latency=latencies.pop(), event_cycles=event_cycles,
        marked_records=len(marked.queue))])


# --- pytest ---------------------------------------------------------------------------------------

def run(sim, config, *, name, testcase, extra=None):
    from verif.runner import run_bench

    params = dict(config, ev_min_active=4, **(extra or {}))
    run_bench(SprayScheduler(**config, ev_min_active=4), name=name, toplevel="spray_scheduler",
              test_module="tb.test_spray_scheduler", sim=sim, params=params, testcase=testcase)


@pytest.mark.sim
@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_spray_scheduler(sim, config):
    run(sim, CONFIGS[config], name=f"spray_scheduler-{config}",
        testcase=["spray_random", "spray_vectors"])


@pytest.mark.sim
@pytest.mark.parametrize("sim", ["verilator"])
def test_spray_scheduler_perf(sim):
    run(sim, CONFIGS["q4p4a4b4"], name="perf-spray_scheduler", testcase="perf")


@pytest.mark.sim
@pytest.mark.full
@pytest.mark.parametrize("config", list(FULL_CONFIGS))
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_spray_scheduler_full(sim, config):
    run(sim, FULL_CONFIGS[config], name=f"spray_scheduler-full-{config}",
        testcase="spray_random", extra={"phases": FULL_PHASES})

# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""cocotb bench of rtl.reliability.Reliability against models.reliability, in a closed loop.

``rel_random`` runs episodes of ``models/reliability_world.py`` around the RTL: a transmit
engine (work requests, new PSNs below the block's PSN limits, the retransmissions it requests,
EVs from the EV table model ``models/spray.py``, planes that go down and flush), a fabric with
random loss, dead paths, trims, CE marks and reordering, receivers (``models/rx_tracker.py``) that
make the SACKs, NACKs and probe answers, and the EV table's EV_MARKED answers to BAD events. The
block's inputs go through record sources with random idle, its seven outputs (the trace
included) through sinks with random backpressure; ``tick_count`` steps every 16 or 32 cycles.
The model takes the inputs in the order of the block's trace (:meth:`Reliability.apply`), and
every record of every output stream must equal the model's, in order. Junk records (unknown QPs
and opcodes, SACKs beyond ``next_psn``, unknown NACK reasons, NACKs and resends of acknowledged
PSNs, new PSNs out of sequence, work requests of unknown QPs) are mixed in. Episodes: (1) random
loss, trims, CE marks, NO_PKT_BUFFER and PSN_OOR_WINDOW NACKs, planes going down; (2) a path that
dies and heals, a QP whose every path is dead (RETRY_EXCEEDED) and a wrong R_Key (QP_ERROR), back
to back with sinks always ready;
(3) heavy idle and backpressure. At each episode's end (block idle) the world checks its end state
(every work request completed in order and retired; all PSNs acknowledged unless the QP failed),
every QP's state, the probe list, ``now``, the next probe_id and every counter are read back and
compared with the model's; every sink must be empty at the end.

``perf`` measures cycles per input back to back (new PSNs; SACKs that complete a work request
each; NACKs) and the latency from a SACK's handshake to its PSN limit and completion.
"""

import pytest

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge

from models.layouts import NackReason, Opcode
from models.records import (COMPLETION, CONTROL_RECORD, EV_EVENT, EV_MARKED, FEEDBACK_RECORD,
                            PSN_LIMIT, RETIRE, RETX_REQUEST, SEND_RECORD, WORK_REQUEST,
                            ext_to_int)
from models.reliability import COUNTERS, TRACE, QpConfig, ReliabilityV1 as Model, Source
from models.rx_tracker import Nack, Sack, psn_add
from models.reliability_world import Scenario, World
from rtl.reliability import (ADDR_COUNTERS, ADDR_NOW, ADDR_PROBE_ID, ADDR_STATUS, OFF_INFO,
                             OFF_K, OFF_MPR, OFF_NEXT, OFF_PERIOD, OFF_RETRY, OFF_SETUP,
                             OFF_W_MAX, SETUP_ENABLE, Reliability, probe_addr, qp_addr)
from verif.runner import SIMULATORS, run_bench

# Builds of the default run: (n_qps, ring, probe_entries, wr_depth, timer_bits).
CONFIGS = {"q4r16": (4, 16, 8, 8, 8)}
FULL_CONFIGS = {"q2r64": (2, 64, 16, 16, 10), "q8r32": (8, 32, 4, 4, 6)}
OUTPUTS = {"retx": ("m_retx", RETX_REQUEST), "limit": ("m_limit", PSN_LIMIT),
           "retire": ("m_retire", RETIRE), "cpl": ("m_cpl", COMPLETION),
           "ev": ("m_ev", EV_EVENT), "ctrl": ("m_ctrl", CONTROL_RECORD)}
INPUTS = {Source.SEND: ("s_send", SEND_RECORD), Source.FEEDBACK: ("s_fb", FEEDBACK_RECORD),
          Source.MARKED: ("s_marked", EV_MARKED), Source.WORK_REQUEST: ("s_wr", WORK_REQUEST)}
JUNK_PROBABILITY = 0.01      # per cycle
EPISODE_CYCLES = 60_000      # a bound: an episode ends when every work request completed
PERF_COUNT = 64


def episodes(n_qps, timer_bits):
    """(scenario, per-QP configs, idle/backpressure level) of each episode."""
    k = min(4, timer_bits - 1)
    base = dict(planes=2, num_t1=3, slots=4, backup=2, ev_min_active=2, profile=1)
    normal = QpConfig(w_max=12, timeout_exp=k, retry_limit=7, probe_period=4)
    doomed = QpConfig(w_max=12, timeout_exp=k - 1, retry_limit=1, probe_period=3)
    first = Scenario(**base, tick_cycles=32, wrs_per_qp=14, loss=0.03, trim=0.03, ce=0.03,
                     nobuf=0.02, oor=0.02,
                     planes_down=tuple((i % 2, 150 + 200 * i, 250 + 200 * i) for i in range(8)))
    second = Scenario(**base, tick_cycles=16, wrs_per_qp=40, loss=0.0, trim=0.01, ce=0.02,
                      dead_paths=(((0, 0), 200, 900),), doomed_qp=n_qps - 1,
                      bad_wr=(min(1, n_qps - 1), 3) if n_qps > 2 else None, send_gap=(2, 5))
    third = Scenario(**base, tick_cycles=32, wrs_per_qp=10, loss=0.02, trim=0.02, ce=0.02,
                     nobuf=0.01, oor=0.01,
                     planes_down=tuple((i % 2, 100 + 150 * i, 160 + 150 * i) for i in range(6)))
    return [(first, [normal] * n_qps, 0.2),
            (second, [normal] * (n_qps - 1) + [doomed], 0.0),
            (third, [normal] * n_qps, 0.5)]


class Bench:
    """The RTL, its model and the world around them (see the module docstring)."""

    def __init__(self, dut, rng, level):
        from verif.bench import ConfigDriver, RecordSink, RecordSource

        self.dut = dut
        self.rng = rng
        self.level = level           # a one-element list: idle/backpressure probability

        def pauses(scale):
            while True:
                yield rng.random() < level[0] * scale

        self.cfg = ConfigDriver(dut)
        self.sources = {s: RecordSource(dut, prefix, pause=pauses(1))
                        for s, (prefix, _) in INPUTS.items()}
        self.sinks = {name: RecordSink(dut, prefix, pause=pauses(1))
                      for name, (prefix, _) in OUTPUTS.items()}
        self.trace = RecordSink(dut, "m_trace", pause=pauses(0.5))
        self.sent = {s: [] for s in INPUTS}          # records given to each source, in order
        self.taken = {s: 0 for s in INPUTS}          # ... of which the trace reported so many
        self.rtl_out = {name: [] for name in OUTPUTS}
        self.model_out = {name: [] for name in OUTPUTS}
        self.model = None
        self.world = None
        self.junk = {s: set() for s in INPUTS}       # indices of junk records in self.sent
        self.junk_given = 0
        self.checked = 0

    async def build(self):
        """Read the block's parameters back from its info word."""
        info = await self.cfg.read(0)
        return info & 0xFF, 1 << (info >> 8 & 0xF), info >> 12 & 0xFF, 1 << (info >> 20 & 0xF), \
            info >> 24 & 0x1F

    def give(self, source, record, junk=False):
        if junk:
            self.junk[source].add(len(self.sent[source]))
        self.sent[source].append(record)
        self.sources[source].send(INPUTS[source][1].pack(record))

    def poll(self):
        """Take the sinks' records: outputs go to the world (and are kept for comparison), trace
        records drive the model; then the two sides are compared as far as both got."""
        for name, (_, record) in OUTPUTS.items():
            queue = self.sinks[name].queue
            while queue:
                rec = record.unpack(queue.popleft())
                self.rtl_out[name].append(rec)
                if self.world is not None:
                    self.world.output(name, rec)
        while self.trace.queue:
            trace = TRACE.unpack(self.trace.queue.popleft())
            source = trace["source"]
            if source == Source.TICK:
                self.model.apply(trace)
            else:
                index = self.taken[source]
                record = self.sent[source][index]
                self.taken[source] += 1
                self.model.apply(trace, record)
                if self.world is not None and index not in self.junk[source]:
                    self.world.consumed(source, record)
            self.checked += 1
            for name, records in self.model.take().items():
                self.model_out[name] += records
        for name in OUTPUTS:
            got, want = self.rtl_out[name], self.model_out[name]
            n = min(len(got), len(want))
            for i in range(n):
                assert got[i] == want[i], f"{name} record: RTL {got[i]}, model {want[i]}"
            del got[:n], want[:n]

    def inputs_pending(self):
        return any(not s.empty() for s in self.sources.values())

    async def idle(self, limit=20_000):
        """Wait until every input was taken, the block is idle and every output was read."""
        for _ in range(limit):
            await RisingEdge(self.dut.clk)
            self.poll()
            if self.inputs_pending():
                continue
            if await self.cfg.read(ADDR_STATUS) == 0:
                await ClockCycles(self.dut.clk, 3)
                self.poll()
                if not any(s.queue for s in self.sinks.values()) and not self.trace.queue:
                    return
        raise AssertionError("the block does not go idle")

    async def setup(self, cfgs, starts):
        for q, (c, start) in enumerate(zip(cfgs, starts)):
            for off, value in ((OFF_W_MAX, c.w_max), (OFF_MPR, c.mpr), (OFF_K, c.timeout_exp),
                               (OFF_RETRY, c.retry_limit), (OFF_PERIOD, c.probe_period)):
                await self.cfg.write(qp_addr(q, off), value)
            await self.cfg.write(qp_addr(q, OFF_SETUP), start | SETUP_ENABLE)
            self.model.setup(q, start, True, c)
            for name, records in self.model.take().items():
                self.model_out[name] += records

    def junk_record(self, n_qps):
        """A record the block must drop or ignore without effect on the traffic."""
        rng = self.rng
        q = rng.randrange(n_qps)
        s = self.world.senders[q]
        kind = self.junk_given % 8      # every kind in turn
        self.junk_given += 1
        if kind == 0:
            return Source.SEND, dict(SEND_RECORD.unpack(0), qpn=n_qps + rng.randrange(8),
                                     psn=rng.randrange(1 << 24))
        if kind == 1:
            return Source.SEND, dict(SEND_RECORD.unpack(0), qpn=q,
                                     psn=psn_add(s.engine_next, rng.randint(1, 1000)))
        if kind == 2:
            return Source.FEEDBACK, {"qpn": q, "opcode": rng.choice((0, Opcode.PROBE, 0xC6)),
                                     "ecn": 0, "ext": rng.randrange(1 << 288)}
        if kind == 3:
            bad = Sack(cack_psn=psn_add(s.engine_next, rng.randint(0, 5000)), ack_psn_offset=0,
                       sack_offset=1, sack_bitmap=rng.randrange(1 << 64), mpr=8, m=1, pr=0,
                       entropy=0, probe_id=0, ooo_count=0, placed_256=0)
            return Source.FEEDBACK, {"qpn": q, "opcode": Opcode.SACK, "ecn": 0,
                                     "ext": ext_to_int(bad.ext_bytes())}
        if kind == 4:
            reason = rng.choice((0, 3, 0x19 + 1, 0xFF))
            return Source.FEEDBACK, {"qpn": q, "opcode": Opcode.NACK, "ecn": 0,
                                     "ext": ext_to_int(Nack(reason, s.engine_next, 0).ext_bytes())}
        if kind == 5:                # a resend of an acknowledged PSN: stale, changes nothing
            return Source.SEND, dict(SEND_RECORD.unpack(0), qpn=q, psn=s.acked_upto,
                                     ev=rng.randrange(1 << 32), rtx=1)
        if kind == 6:                # behind cack_psn: stale, changes nothing
            return Source.FEEDBACK, {"qpn": q, "opcode": Opcode.NACK, "ecn": 0, "ext": ext_to_int(
                Nack(NackReason.TRIMMED_LASTHOP, s.acked_upto, 0).ext_bytes())}
        return Source.WORK_REQUEST, dict(WORK_REQUEST.unpack(0), qpn=n_qps + rng.randrange(8),
                                         req_id=rng.randrange(1 << 16))

    async def episode(self, scenario, cfgs, n_qps, wr_depth, index):
        rng = self.rng
        starts = [rng.choice((rng.randrange(1 << 24), (1 << 24) - rng.randint(1, 30)))
                  for _ in range(n_qps)]
        tick0 = await self.cfg.read(ADDR_NOW)
        self.world = World(rng, scenario, starts, wr_depth=wr_depth, tick0=tick0)
        await self.setup(cfgs, starts)
        for cycle in range(EPISODE_CYCLES):
            await RisingEdge(self.dut.clk)
            if self.world.step():
                self.dut.tick_count.value = self.world.tick_count
            while self.world.inputs:
                self.give(*self.world.inputs.popleft())
            if rng.random() < JUNK_PROBABILITY:
                self.give(*self.junk_record(n_qps), junk=True)
            self.poll()
            if self.world.done():
                break
        else:
            raise AssertionError(f"episode {index}: not done after {EPISODE_CYCLES} cycles")
        await self.idle()
        self.world.check_end()
        for name in OUTPUTS:
            assert not self.rtl_out[name] and not self.model_out[name], \
                (name, self.rtl_out[name][:3], self.model_out[name][:3])
        await self.compare_state(n_qps)
        self.dut._log.info("episode %d: %d cycles, world %s, EV events %s", index, cycle,
                           dict(self.world.stats), dict(self.world.events))
        return cycle

    async def compare_state(self, n_qps):
        model = self.model
        for q in range(n_qps):
            qp = model.qp(q)
            want = {OFF_SETUP: qp.cack | qp.error << 30 | SETUP_ENABLE, OFF_NEXT: qp.next_psn,
                    OFF_INFO: qp.window | len(qp.wrs) << 16}
            got = {off: await self.cfg.read(qp_addr(q, off)) for off in want}
            assert got == want, f"QP {q}: state {got}, model {want}"
        for e, entry in enumerate(model.probe_list()):
            word0, word1 = await self.cfg.read(probe_addr(e, 0)), await self.cfg.read(
                probe_addr(e, 1))
            if entry is None:
                assert not word0 & 1, f"probe entry {e} valid, model free"
                continue
            qpn, ev, count, outstanding, probe_id = entry
            want = 1 | outstanding << 1 | count << 2 | qpn << 8 | \
                (probe_id << 16 if outstanding else word0 & 0xFFFF0000)
            assert (word0, word1) == (want, ev), f"probe entry {e}: {word0:#x} {word1:#x}"
        assert await self.cfg.read(ADDR_NOW) == model.now % (1 << 32)
        assert await self.cfg.read(ADDR_PROBE_ID) == model.probe_id
        counts = {name: await self.cfg.read(ADDR_COUNTERS[name]) for name in COUNTERS}
        assert counts == dict(model.counters), f"counters {counts}, model {dict(model.counters)}"


@cocotb.test()
async def rel_random(dut):
    from verif.bench import make_rng, start, write_result

    rng = make_rng(dut)
    tick0 = rng.choice((0, rng.randrange(1 << 32), (1 << 32) - 40))
    dut.tick_count.value = tick0
    level = [0.0]
    bench = Bench(dut, rng, level)
    await start(dut)
    n_qps, ring, probe_entries, wr_depth, timer_bits = await bench.build()
    await ClockCycles(dut.clk, 2)
    bench.model = Model(n_qps=n_qps, ring=ring, probe_entries=probe_entries, wr_depth=wr_depth,
                        timer_bits=timer_bits, now=await bench.cfg.read(ADDR_NOW))
    assert bench.model.now == tick0
    total = 0
    for index, (scenario, cfgs, pause) in enumerate(episodes(n_qps, timer_bits)):
        level[0] = pause
        total += await bench.episode(scenario, cfgs, n_qps, wr_depth, index)
    counters = bench.model.counters
    for name in ("send", "send_retx", "send_flushed", "send_bad", "send_stale", "sack", "nack",
                 "fb_bad", "fb_stale", "probe_answer", "marked", "timeout", "retx", "probe",
                 "recovered", "completion", "qp_error", "wr_dropped"):
        assert counters[name], f"the run never counted {name}: {dict(counters)}"
    for sink in (*bench.sinks.values(), bench.trace):
        assert sink.empty()
    assert not bench.inputs_pending()
    dut._log.info("%d cycles, %d trace records checked; counters %s", total, bench.checked,
                  dict(counters))
    write_result(dut, "reliability", bench.checked)


# --- Performance ----------------------------------------------------------------------------------

@cocotb.test()
async def perf(dut):
    """Cycles per input back to back, outputs always ready."""
    from verif.bench import ConfigDriver, RecordSink, RecordSource, start, write_perf

    dut.tick_count.value = 0
    cfg = ConfigDriver(dut)
    sources = {s: RecordSource(dut, prefix) for s, (prefix, _) in INPUTS.items()}
    sinks = {name: RecordSink(dut, prefix) for name, (prefix, _) in OUTPUTS.items()}
    trace = RecordSink(dut, "m_trace")
    await start(dut)
    info = await cfg.read(0)
    count = min(PERF_COUNT, 1 << (info >> 8 & 0xF), 1 << (info >> 20 & 0xF))
    ring = 1 << (info >> 8 & 0xF)
    log = {p: [] for p in ("s_send", "s_fb", "m_limit", "m_cpl")}

    async def monitor():
        cycle = 0
        while True:
            await RisingEdge(dut.clk)
            for p, cycles in log.items():
                if int(getattr(dut, f"{p}_tvalid").value) and \
                        int(getattr(dut, f"{p}_tready").value):
                    cycles.append(cycle)
            cycle += 1

    cocotb.start_soon(monitor())

    async def settle():
        while any(not s.empty() for s in sources.values()) or await cfg.read(ADDR_STATUS):
            await ClockCycles(dut.clk, 4)

    def rate(cycles):
        return (cycles[-1] - cycles[0]) / (len(cycles) - 1)

    await cfg.write(qp_addr(0, OFF_W_MAX), ring)
    await cfg.write(qp_addr(0, OFF_K), 15)
    rows = []
    start_psn = 5000
    for lap in range(2):
        first = start_psn + lap * count
        if lap == 0:
            await cfg.write(qp_addr(0, OFF_SETUP), start_psn | SETUP_ENABLE)
        for i in range(count):
            sources[Source.WORK_REQUEST].send(WORK_REQUEST.pack(qpn=0, req_id=first + i))
        await settle()
        for p in log.values():
            p.clear()
        for i in range(count):
            sources[Source.SEND].send(SEND_RECORD.pack(qpn=0, psn=first + i, ev=i, req_id=first + i,
                                                       last=1))
        await settle()
        sends = rate(log["s_send"])
        if lap == 0:
            # NACKs TRIMMED_LASTHOP: each requests a retransmission.
            for i in range(count):
                sources[Source.FEEDBACK].send(FEEDBACK_RECORD.pack(
                    qpn=0, opcode=Opcode.NACK,
                    ext=ext_to_int(Nack(NackReason.TRIMMED_LASTHOP, first + i, i).ext_bytes())))
            await settle()
            nacks = rate(log["s_fb"])
            for i in range(count):
                sources[Source.SEND].send(SEND_RECORD.pack(qpn=0, psn=first + i, ev=i + 1,
                                                           rtx=1))
            await settle()
        log["s_fb"].clear()
        for i in range(count):
            sack = Sack(cack_psn=first + i, ack_psn_offset=0, sack_offset=1, sack_bitmap=0,
                        mpr=8, m=0, pr=0, entropy=i, probe_id=0, ooo_count=0, placed_256=0)
            sources[Source.FEEDBACK].send(FEEDBACK_RECORD.pack(
                qpn=0, opcode=Opcode.SACK, ext=ext_to_int(sack.ext_bytes())))
        await settle()
        sacks = rate(log["s_fb"])
        limit_latency = {b - a for a, b in zip(log["s_fb"], log["m_limit"])}
        cpl_latency = {b - a for a, b in zip(log["s_fb"], log["m_cpl"])}
        assert len(log["m_cpl"]) == count and len(log["m_limit"]) == count
        if lap == 0:
            rows += [dict(case="new PSN (send record)", payload=0, frames=count,
                          cycles_per_frame=sends, bytes_per_cycle=0, efficiency=0, latency=0),
                     dict(case="NACK TRIMMED_LASTHOP (retransmission)", payload=0,
                          frames=count, cycles_per_frame=nacks, bytes_per_cycle=0,
                          efficiency=0, latency=0)]
            rows.append(dict(case="SACK completing one work request", payload=0, frames=count,
                             cycles_per_frame=sacks, bytes_per_cycle=0, efficiency=0,
                             latency=min(limit_latency), latency_last=max(cpl_latency)))
        dut._log.info("lap %d: send %.2f, SACK %.2f cycles; SACK to limit %s, to completion %s",
                      lap, sends, sacks, limit_latency, cpl_latency)
    for sink in sinks.values():
        sink.queue.clear()
    trace.queue.clear()
    write_perf(dut, "reliability", 0, rows)


# --- pytest ---------------------------------------------------------------------------------------

def cases(configs, sims):
    return [pytest.param(sim, name, id=f"{sim}-{name}",
                         marks=pytest.mark.xdist_group(f"reliability-{name}-{sim}"))
            for sim in sims for name in configs]


def run(sim, name, config, *, testcase):
    n_qps, ring, probe_entries, wr_depth, timer_bits = config
    build_args = ["-CFLAGS", "-O0"] if sim == "verilator" else []
    run_bench(Reliability(n_qps=n_qps, ring=ring, probe_entries=probe_entries,
                          wr_depth=wr_depth, timer_bits=timer_bits),
              name=f"reliability-{name}", toplevel="reliability",
              test_module="tb.test_reliability", sim=sim, testcase=testcase,
              build_args=build_args)


@pytest.mark.sim
@pytest.mark.parametrize("sim, name", cases(CONFIGS, SIMULATORS))
def test_reliability(sim, name):
    """The random run on both simulators; on Verilator also the quick perf run (same build)."""
    run(sim, name, CONFIGS[name],
        testcase=["rel_random"] + (["perf"] if sim == "verilator" else []))


@pytest.mark.sim
@pytest.mark.full
@pytest.mark.parametrize("sim, name", cases(FULL_CONFIGS, SIMULATORS))
def test_reliability_full(sim, name):
    run(sim, f"full-{name}", FULL_CONFIGS[name], testcase="rel_random")


@pytest.mark.parametrize("kwargs", [dict(n_qps=0), dict(n_qps=3), dict(n_qps=64),
                                    dict(ring=2), dict(ring=48), dict(ring=512),
                                    dict(probe_entries=0), dict(probe_entries=33),
                                    dict(wr_depth=1), dict(wr_depth=12), dict(timer_bits=3),
                                    dict(timer_bits=17), dict(n_qps=True), dict(ring=16.0)])
def test_reliability_rejects_parameters(kwargs):
    with pytest.raises(ValueError, match="Reliability"):
        Reliability(**kwargs)


def test_reliability_parameters():
    block = Reliability()
    assert (block.n_qps, block.ring, block.probe_entries, block.wr_depth, block.timer_bits) == \
        (4, 64, 8, 16, 10)

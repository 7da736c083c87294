# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""cocotb bench of rtl.segmenter.Segmenter against models.segmenter.SegmenterModel.

``packets_match_model``: host memory is cocotbext-axi's ``AxiRamRead`` (random contents, a few
words that answer with an error, random pauses on AR and R), the QPs are configured through the
configuration port (three open, one of them starting just below the 24-bit PSN wrap, one never
given a PSN limit, one disabled), and a driver sends
seeded random traffic with random idle on every source: work requests (0 bytes to several PMTU,
any alignment, with and without immediate) on several QPs, PSN limit updates, retransmit requests
of sent PSNs and retires of fully sent requests, and bad input of every kind (unknown and disabled
QPs, invalid shapes, retransmit requests of PSNs never sent or retired, retires out of order or of
unsent requests, limits for unknown QPs). Both outputs see random backpressure.

How the model is driven: the QP served next depends on timing, so the comparison is per QP. The
bench applies every input to the model when it queues it; for each record taken from ``m_pkt`` it
asks the model for the next packet of that record's QP, a retransmission or a new one as the
record's ``rtx`` says (:meth:`SegmenterModel.packet`), and compares every field, then every byte
of the payload and its bad flag. The driver keeps the inputs whose answer could depend on timing
out of the random traffic: a retransmit request names only a PSN already seen on ``m_pkt`` and a
request not yet retired; a request is retired only once all its packets were seen and no
retransmission of it is pending; a retransmit request of a retired PSN is sent only when every
retire was applied (queue empty, no retransmission pending, 8 cycles after the last handshake).
Checked on the fly: bursts (INCR, full width, aligned, within 4 KB), the
record of each packet before its first payload beat, ``tkeep`` all ones but on the last beat;
at the end every counter and every QP status word against the model, and all queues empty;
the run must have dropped input of every kind, retransmitted, retired, wrapped QP 1's PSNs and
made a work request wait for room in its QP's table.

``service_order``: what the per-QP comparison cannot see, the order of service. With decisions
held back by a full record queue, several QPs become ready at once; released, they must be served
round-robin, a QP's retransmission before its new packets and regardless of its PSN limit.

``perf``: back-to-back work requests of each size of ``PERF_SIZES`` over four QPs, no idle, no
backpressure, host memory without pauses, payload aligned and then misaligned by 5 bytes:
steady-state cycles per packet (asserted to be the payload's beats, one per cycle, when aligned),
payload bytes per cycle and the latency from a work request's handshake to its record and to its
first payload beat; written with ``write_perf``.
"""

import math
from collections import deque

import pytest

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge, with_timeout

from models.packets import PSN_MODULUS
from models.records import PSN_LIMIT, RETIRE, RETX_REQUEST, TX_PACKET, WORK_REQUEST
from models.segmenter import (COUNTERS, INFO, MAX_LENGTH, QP_CONTEXT, QP_STATUS, QP_STATUS_WORDS,
                              HostMemory, SegmenterModel)

WIDTHS = (64, 512)
FULL_WIDTHS = (128, 256)
WORK_REQUESTS = 160          # work requests a run (besides the bad ones)
FULL_WORK_REQUESTS = 600
CONFIG = dict(n_qps=5, wrs_per_qp=4, pmtu=256, max_outstanding=8)
OPEN_QPS = (0, 1, 2)
CLOSED_QP = 3                # enabled, never given a PSN limit
DISABLED_QP = 4
MEMORY_SIZE = 1 << 16
POISONED_WORDS = 3
FAR = 1 << 22                # a PSN this far from the start is never sent
PERF_CONFIG = dict(n_qps=4, wrs_per_qp=8, pmtu=4096, max_outstanding=16)
PERF_WRS = 16
MASK32 = 0xFFFF_FFFF
TIMEOUT_NS = 5_000_000


def lanes_of(dut):
    return len(dut.m_axis_tdata) // 8


class HostRam:
    """cocotbext-axi's AxiRamRead as host memory, with poisoned words answering SLVERR."""

    @staticmethod
    def create(dut, size, poisoned):
        from cocotbext.axi import AxiReadBus, AxiRamRead

        class PoisonedRam(AxiRamRead):
            async def _read(self, address, length):
                if (address % self.size) // self.byte_lanes in poisoned:
                    raise ValueError(f"poisoned word at {address:#x}")
                return self.read(address % self.size, length)

        ram = PoisonedRam(AxiReadBus.from_prefix(dut, "m_axi"), dut.clk, dut.rst, size=size)
        ram.log.setLevel("ERROR")
        return ram


class Tracked:
    """What the bench knows of one QP: the requests not yet retired (with their retransmissions
    pending), the next new PSN seen on m_pkt, the limit queued, retired PSN ranges."""

    def __init__(self, start):
        self.start = start
        self.wrs = deque()          # dicts: req_id, first, packets, retx
        self.seen_next = start
        self.limit = start
        self.retx = deque()         # PSNs of retransmissions requested, not yet seen
        self.retired = []           # (first PSN, packets)
        self.req_id = 0

    def fully_seen(self, wr):
        return (self.seen_next - wr["first"]) % PSN_MODULUS >= wr["packets"] and \
            (self.seen_next - wr["first"]) % PSN_MODULUS < PSN_MODULUS // 2

    def seen_psns(self):
        """PSNs of held requests already seen on m_pkt."""
        if not self.wrs:
            return 0, 0
        first = self.wrs[0]["first"]
        return first, (self.seen_next - first) % PSN_MODULUS

    def owner(self, psn):
        for wr in self.wrs:
            if (psn - wr["first"]) % PSN_MODULUS < wr["packets"]:
                return wr
        raise AssertionError(f"PSN {psn:#x} belongs to no tracked request")


class Checker:
    """Compares each record (and then its payload) with the model's next packet of its QP."""

    def __init__(self, model, tracked):
        self.model = model
        self.tracked = tracked
        self.payloads = deque()     # model packets whose payload is still to come
        self.records = 0
        self.payload_packets = 0

    def record(self, rec):
        q, rtx = rec["qpn"], rec["rtx"]
        assert q < self.model.n_qps, f"record for QP {q}"
        try:
            expected = self.model.packet(q, rtx)
        except ValueError as exc:
            raise AssertionError(f"record {self.records} {rec}: {exc}") from None
        assert rec == expected.record, \
            f"record {self.records}: {rec}\n model {expected.record}"
        tracked = self.tracked.get(q)
        if tracked is not None:
            if rtx:
                want = tracked.retx.popleft()
                assert rec["psn"] == want, f"retransmission of {rec['psn']:#x}, asked {want:#x}"
                tracked.owner(rec["psn"])["retx"] -= 1
            else:
                tracked.seen_next = (rec["psn"] + 1) % PSN_MODULUS
        if expected.record["length"]:
            self.payloads.append(expected)
        self.records += 1

    def payload(self, data, user):
        assert self.payloads, f"payload of {len(data)} B without a record"
        expected = self.payloads.popleft()
        what = f"payload {self.payload_packets} (QP {expected.record['qpn']} PSN " \
               f"{expected.record['psn']:#x}, {len(expected.payload)} B)"
        assert data == expected.payload, f"{what}: {data.hex()}\n model {expected.payload.hex()}"
        assert user == expected.bad, f"{what}: tuser {user}, model bad {expected.bad}"
        self.payload_packets += 1


class Monitor:
    """One coroutine per clock: takes m_pkt records and m_axis beats (driving both readies with
    the pause generators), checks AR bursts and the record-before-payload rule, and notes the
    cycles of handshakes."""

    def __init__(self, dut, checker, pkt_pause=None, axis_pause=None):
        self.dut = dut
        self.checker = checker
        self.lanes = lanes_of(dut)
        self.pkt_pause = pkt_pause
        self.axis_pause = axis_pause
        self.cycle = 0
        self.beats = bytearray()
        self.nz_records = 0         # records with a payload taken
        self.started = 0            # payload packets started
        self.last_retire = 0
        self.record_cycles = []     # (cycle, record)
        self.first_beat_cycles = []
        self.wr_cycles = []
        self.wr_waits = 0           # cycles a work request waited for room in its QP
        self.bursts = 0
        self.moves = 0              # handshakes on m_pkt and m_axis
        self.hold_records = False   # m_pkt_tready held low
        dut.m_pkt_tready.value = 0 if pkt_pause else 1
        dut.m_axis_tready.value = 0 if axis_pause else 1
        cocotb.start_soon(self.run())

    def _check_burst(self):
        d = self.dut
        addr, beats = int(d.m_axi_araddr.value), int(d.m_axi_arlen.value) + 1
        lanes = self.lanes
        assert int(d.m_axi_arburst.value) == 1, "burst not INCR"
        assert 1 << int(d.m_axi_arsize.value) == lanes, "burst not of full-width beats"
        assert addr % lanes == 0, f"burst address {addr:#x} not aligned"
        assert addr % 4096 + beats * lanes <= 4096, f"burst {addr:#x} x {beats} crosses 4 KB"
        self.bursts += 1

    async def run(self):
        d = self.dut
        lanes = self.lanes
        while True:
            await RisingEdge(d.clk)
            self.cycle += 1
            if int(d.s_wr_tvalid.value):
                if int(d.s_wr_tready.value):
                    self.wr_cycles.append(self.cycle)
                else:
                    self.wr_waits += 1
            if int(d.s_retire_tvalid.value) and int(d.s_retire_tready.value):
                self.last_retire = self.cycle
            if int(d.m_axi_arvalid.value) and int(d.m_axi_arready.value):
                self._check_burst()
            if int(d.m_pkt_tvalid.value) and int(d.m_pkt_tready.value):
                rec = TX_PACKET.unpack(int(d.m_pkt_tdata.value))
                self.record_cycles.append((self.cycle, rec))
                self.moves += 1
                self.nz_records += rec["length"] != 0
                self.checker.record(rec)
            if int(d.m_axis_tvalid.value) and int(d.m_axis_tready.value):
                self.moves += 1
                if not self.beats:
                    assert self.nz_records > self.started, \
                        f"payload {self.started} starts before its record"
                    self.started += 1
                    self.first_beat_cycles.append(self.cycle)
                data, keep = int(d.m_axis_tdata.value), int(d.m_axis_tkeep.value)
                last = int(d.m_axis_tlast.value)
                n = bin(keep).count("1")
                assert keep == (1 << n) - 1 and (last or n == lanes), \
                    f"tkeep {keep:#x} (tlast {last})"
                self.beats += data.to_bytes(lanes, "little")[:n]
                user = int(d.m_axis_tuser.value)
                assert last or not user, "tuser set before the last beat"
                if last:
                    self.checker.payload(bytes(self.beats), bool(user))
                    self.beats = bytearray()
            if self.hold_records:
                d.m_pkt_tready.value = 0
            elif self.pkt_pause is not None:
                d.m_pkt_tready.value = 0 if next(self.pkt_pause) else 1
            else:
                d.m_pkt_tready.value = 1
            if self.axis_pause is not None:
                d.m_axis_tready.value = 0 if next(self.axis_pause) else 1


class Bench:
    """Sources, sinks, host memory, model and the bench's view of each QP."""

    def __init__(self, dut, rng, config, idle=0.0, backpressure=0.0, memory_pause=0.0,
                 poisoned=()):
        from verif.bench import ConfigDriver, RecordSource, random_pause

        self.dut = dut
        self.rng = rng
        self.lanes = lanes_of(dut)
        self.config = config
        self.poisoned = list(poisoned)

        def pause(p):
            return random_pause(rng, p) if p else None

        self.wr = RecordSource(dut, "s_wr", pause(idle))
        self.retx = RecordSource(dut, "s_retx", pause(idle))
        self.retire = RecordSource(dut, "s_retire", pause(idle))
        self.limit = RecordSource(dut, "s_limit", pause(idle))
        self.cfg = ConfigDriver(dut)
        self.ram = HostRam.create(dut, MEMORY_SIZE, set(poisoned))
        if memory_pause:
            self.ram.ar_channel.set_pause_generator(random_pause(rng, memory_pause))
            self.ram.r_channel.set_pause_generator(random_pause(rng, memory_pause))
        contents = rng.randbytes(MEMORY_SIZE)
        self.ram.write(0, contents)
        memory = HostMemory(MEMORY_SIZE, self.lanes, contents, poisoned)
        self.model = SegmenterModel(memory, n_qps=config["n_qps"],
                                    wrs_per_qp=config["wrs_per_qp"], pmtu=config["pmtu"])
        self.tracked = {}
        self.checker = Checker(self.model, self.tracked)
        self.monitor = Monitor(dut, self.checker, pause(backpressure), pause(backpressure))

    async def configure(self, q, enabled, start):
        await self.cfg.write(QP_CONTEXT + q, int(enabled) << 31 | start)
        self.model.configure_qp(q, enabled, start)
        if enabled:
            self.tracked[q] = Tracked(start)

    def send_wr(self, rec):
        rec = {**dict.fromkeys(WORK_REQUEST.names, 0), **rec}
        accepted = self.model.work_request(rec)
        self.wr.send(WORK_REQUEST.pack(rec))
        q = rec["qpn"]
        if accepted and q in self.tracked:
            qp = self.model.qps[q]
            wr = qp.held[-1]
            self.tracked[q].wrs.append(dict(req_id=wr.req_id, first=wr.first_psn,
                                            packets=wr.packets, retx=0))
        return accepted

    def send_limit(self, q, limit):
        self.model.psn_limit({"qpn": q, "psn_limit": limit})
        self.limit.send(PSN_LIMIT.pack(qpn=q, psn_limit=limit))
        if q in self.tracked:
            self.tracked[q].limit = limit

    def send_retx(self, q, psn, expect):
        rec = dict(qpn=q, psn=psn, avoid_ev=self.rng.getrandbits(32),
                   cause=self.rng.randrange(8))
        assert self.model.retx_request(rec) == expect, f"retransmit request {rec}"
        self.retx.send(RETX_REQUEST.pack(rec))
        if expect:
            tracked = self.tracked[q]
            tracked.retx.append(psn)
            tracked.owner(psn)["retx"] += 1

    def send_retire(self, q, req_id, expect):
        assert self.model.retire({"qpn": q, "req_id": req_id}) == expect, \
            f"retire of QP {q} request {req_id}"
        self.retire.send(RETIRE.pack(qpn=q, req_id=req_id))
        if expect:
            wr = self.tracked[q].wrs.popleft()
            self.tracked[q].retired.append((wr["first"], wr["packets"]))

    def sources_empty(self):
        return all(s.empty() for s in (self.wr, self.retx, self.retire, self.limit))

    async def drain(self, cycles=40):
        """Until every source is empty and nothing moved for ``cycles`` cycles."""
        quiet, last = 0, None
        while quiet < cycles:
            await RisingEdge(self.dut.clk)
            state = (self.monitor.moves, self.sources_empty())
            quiet = quiet + 1 if state == last and state[1] else 0
            last = state

    async def check_counters(self):
        for name, addr in COUNTERS.items():
            value = await self.cfg.read(addr)
            want = self.model.counters[name] & MASK32
            assert value == want, f"counter {name}: {value}, model {want}"
        info = dict(data_width=self.lanes * 8, n_qps=self.config["n_qps"],
                    wrs_per_qp=self.config["wrs_per_qp"], pmtu=self.config["pmtu"])
        for name, addr in INFO.items():
            assert await self.cfg.read(addr) == info[name], f"info word {name}"
        for q in range(self.config["n_qps"]):
            status = self.model.status(q)
            for word, offset in QP_STATUS_WORDS.items():
                value = await self.cfg.read(QP_STATUS + 4 * q + offset)
                assert value == status[word], f"QP {q} {word}: {value:#x}, model " \
                                              f"{status[word]:#x}"


def random_length(rng, pmtu):
    kind = rng.random()
    if kind < 0.08:
        return 0
    if kind < 0.22:
        return rng.randint(1, 16)
    if kind < 0.50:
        return rng.randint(17, pmtu)
    if kind < 0.65:
        return max(1, rng.randint(1, 4) * pmtu + rng.randint(-3, 3))
    return rng.randint(pmtu + 1, 4 * pmtu + 7)


def random_wr(bench, q):
    """A work request on QP ``q``, any alignment; one in twelve reads a poisoned word (at its
    first, last or any beat)."""
    rng = bench.rng
    length = random_length(rng, bench.config["pmtu"])
    tracked = bench.tracked.get(q)
    req_id = 0
    if tracked is not None:
        req_id = tracked.req_id
        tracked.req_id = (tracked.req_id + 1) & 0x7FFF
    local = rng.randrange(MEMORY_SIZE)
    if length and rng.random() < 1 / 12:
        word = rng.choice(bench.poisoned) * bench.lanes
        local = rng.choice((word + rng.randrange(bench.lanes),
                            word + rng.randrange(bench.lanes) - length + 1,
                            word - rng.randrange(length))) % MEMORY_SIZE
    return dict(qpn=q, local_addr=rng.getrandbits(47) << 16 | local,
                remote_va=rng.getrandbits(63), rkey=rng.getrandbits(32), length=length,
                has_imm=int(rng.random() < 0.4), imm=rng.getrandbits(32), req_id=req_id)


async def drive(bench, count):
    """The random traffic: ``count`` good work requests on the open QPs, interleaved with every
    other input and the bad ones."""
    rng, dut = bench.rng, bench.dut
    n_qps, wrs_per_qp = bench.config["n_qps"], bench.config["wrs_per_qp"]
    mon = bench.monitor
    sent = closed = 0
    while sent < count:
        action = rng.random()
        if action < 0.30:
            q = rng.choice(OPEN_QPS)
            bench.send_wr(random_wr(bench, q))
            sent += 1
        elif action < 0.36:
            kind = rng.randrange(5)
            if kind == 0 and closed < wrs_per_qp:
                bench.send_wr(random_wr(bench, CLOSED_QP))
                closed += 1
            elif kind == 1:
                bench.send_wr(random_wr(bench, DISABLED_QP))
            elif kind == 2:
                bench.send_wr({**random_wr(bench, 0), "qpn": rng.randrange(n_qps, 1 << 24)})
            else:
                rec = random_wr(bench, rng.choice(OPEN_QPS))
                if kind == 3:
                    rec["length"] = rng.randrange(MAX_LENGTH + 1, 1 << 32)
                else:
                    field = rng.choice(("local_addr", "remote_va"))
                    rec["length"] = rng.randint(2, 600)
                    rec[field] = (1 << 64) - rng.randint(1, rec["length"] - 1)
                assert not bench.send_wr(rec)
        elif action < 0.52:
            q = rng.choice(OPEN_QPS)
            t = bench.tracked[q]
            if (t.limit - t.start) % PSN_MODULUS < FAR // 4:
                bench.send_limit(q, (t.limit + rng.randint(1, 6)) % PSN_MODULUS)
        elif action < 0.55:
            bench.send_limit(rng.choice((DISABLED_QP, rng.randrange(n_qps, 1 << 24))),
                             rng.getrandbits(24))
        elif action < 0.66:
            q = rng.choice(OPEN_QPS)
            t = bench.tracked[q]
            first, count_seen = t.seen_psns()
            if count_seen and len(t.retx) < 3:
                bench.send_retx(q, (first + rng.randrange(count_seen)) % PSN_MODULUS, True)
        elif action < 0.71:
            kind = rng.randrange(4)
            if kind == 0:
                q = rng.choice(OPEN_QPS + (CLOSED_QP,))
                bench.send_retx(q, (bench.tracked[q].start + FAR + rng.randrange(1000))
                                % PSN_MODULUS, False)
            elif kind == 1:
                bench.send_retx(rng.choice((DISABLED_QP, rng.randrange(n_qps, 1 << 24))),
                                rng.getrandbits(24), False)
            elif kind == 2:
                bench.send_retx(CLOSED_QP, (bench.tracked[CLOSED_QP].start +
                                            rng.randrange(8)) % PSN_MODULUS, False)
            else:
                q = rng.choice(OPEN_QPS)
                retired = bench.tracked[q].retired
                settled = bench.retire.empty() and mon.cycle - mon.last_retire >= 8 and \
                    not any(t.retx for t in bench.tracked.values())
                if retired and settled:
                    first, packets = rng.choice(retired)
                    bench.send_retx(q, (first + rng.randrange(packets)) % PSN_MODULUS, False)
        elif action < 0.88:
            q = rng.choice(OPEN_QPS)
            t = bench.tracked[q]
            if t.wrs and t.fully_seen(t.wrs[0]) and not t.wrs[0]["retx"]:
                bench.send_retire(q, t.wrs[0]["req_id"], True)
        else:
            kind = rng.randrange(4)
            if kind == 0:
                bench.send_retire(rng.choice(OPEN_QPS), 0x8000 | rng.getrandbits(15), False)
            elif kind == 1:
                t = bench.tracked[CLOSED_QP]
                if t.wrs:
                    bench.send_retire(CLOSED_QP, t.wrs[0]["req_id"], False)
            else:
                bench.send_retire(rng.choice((DISABLED_QP, rng.randrange(n_qps, 1 << 24))),
                                  rng.getrandbits(16), False)
        await ClockCycles(dut.clk, rng.choice((0, 0, 1, 1, 2, 4)) or 1)
    return sent


async def finish(bench):
    """Open every open QP's limit to its last PSN, wait for every packet, retire most of the
    requests and wait until everything drained."""
    dut, rng = bench.dut, bench.rng
    for q in OPEN_QPS:
        bench.send_limit(q, bench.model.qps[q].alloc_psn)

    async def settle():
        """Every packet seen; requests retired as they complete (the newest kept), so that
        requests still queued find room."""
        while True:
            for q in OPEN_QPS:
                t = bench.tracked[q]
                if len(t.wrs) > 1 and t.fully_seen(t.wrs[0]) and not t.wrs[0]["retx"]:
                    bench.send_retire(q, t.wrs[0]["req_id"], True)
            done = all(bench.tracked[q].seen_next == bench.model.qps[q].alloc_psn and
                       not bench.tracked[q].retx for q in OPEN_QPS)
            if done and not bench.checker.payloads and bench.sources_empty():
                return
            await RisingEdge(dut.clk)

    await with_timeout(settle(), TIMEOUT_NS, "ns")
    for q in OPEN_QPS:
        t = bench.tracked[q]
        while t.wrs and rng.random() < 0.8:
            bench.send_retire(q, t.wrs[0]["req_id"], True)
    await with_timeout(bench.drain(), TIMEOUT_NS, "ns")


@cocotb.test()
async def packets_match_model(dut):
    from verif.bench import frames, make_rng, params, start, write_result

    p = params()
    config = {k: p[k] for k in CONFIG}
    rng = make_rng(dut)
    lanes = lanes_of(dut)
    poisoned = [rng.randrange(MEMORY_SIZE // lanes) for _ in range(POISONED_WORDS)]
    idle, backpressure = rng.uniform(0.05, 0.3), rng.uniform(0.05, 0.4)
    memory_pause = rng.uniform(0.05, 0.3)
    bench = Bench(dut, rng, config, idle, backpressure, memory_pause, poisoned)
    await start(dut)
    for q in range(config["n_qps"]):            # QP 1 crosses the 24-bit PSN wrap
        start_psn = PSN_MODULUS - rng.randint(1, 60) if q == 1 else rng.getrandbits(24)
        await bench.configure(q, q != DISABLED_QP, start_psn)
    count = await drive(bench, frames(WORK_REQUESTS))
    await finish(bench)
    checker = bench.checker
    assert not checker.payloads and not bench.monitor.beats, "payloads missing"
    assert all(not qp.retx for qp in bench.model.qps), "retransmissions never sent"
    await bench.check_counters()
    c = bench.model.counters
    dut._log.info("idle %.2f, backpressure %.2f, memory pauses %.2f: %d work requests, "
                  "%d packets (%d retransmitted), %d bursts, %d cycles of work requests "
                  "waiting for room; counters %s", idle, backpressure, memory_pause, count,
                  checker.records, c["rtx_packets"], bench.monitor.bursts,
                  bench.monitor.wr_waits, c)
    assert bench.monitor.wr_waits, "no work request ever waited for room in its QP"
    assert bench.model.qps[1].next_psn < bench.tracked[1].start, "QP 1 did not wrap"
    for name in ("wr_drop_qp", "wr_drop_shape", "retx_drop", "retire_drop", "limit_drop",
                 "rtx_packets", "retire_in"):
        assert c[name], f"the run exercised no {name}"
    write_result(dut, "segmenter", checker.records)


@cocotb.test()
async def service_order(dut):
    """Round-robin over QPs, retransmissions first, regardless of the PSN limit.

    QP 3 sends 2 packets and QP 0 one, then with ``m_pkt`` held QP 3's limit opens to 8 more
    (they fill the record queue, so decisions stop) but not to its second request; then QPs 0..2
    get two 3-packet requests each and open limits, and retransmit requests of QP 3's second PSN
    and QP 0's first arrive. Once ``m_pkt`` is released, after QP 3's queued packets, the QPs
    must be served in round-robin order from QP 4 (disabled) on, QP 0 with its retransmission
    before its new packets, QP 3 with its retransmission only (its limit holds the rest).
    """
    from models.spray import serve_qp
    from verif.bench import make_rng, params, start

    p = params()
    config = {k: p[k] for k in CONFIG}
    pmtu = config["pmtu"]
    rng = make_rng(dut)
    bench = Bench(dut, rng, config)
    mon = bench.monitor
    await start(dut)
    starts = [rng.getrandbits(24) for _ in range(config["n_qps"])]
    for q, psn in enumerate(starts):
        await bench.configure(q, q != DISABLED_QP, psn)

    def request(q, length, k):
        return dict(qpn=q, local_addr=rng.randrange(MEMORY_SIZE), remote_va=k << 20,
                    length=length, req_id=k)

    bench.send_wr(request(3, 10 * pmtu, 0))
    bench.send_wr(request(3, 3 * pmtu, 1))
    bench.send_limit(3, (starts[3] + 2) % PSN_MODULUS)
    bench.send_wr(request(0, pmtu, 2))
    bench.send_limit(0, (starts[0] + 1) % PSN_MODULUS)
    await ClockCycles(dut.clk, 40)
    assert bench.checker.records == 3
    mon.hold_records = True
    bench.send_limit(3, (starts[3] + 10) % PSN_MODULUS)
    await ClockCycles(dut.clk, 40)
    for k in range(2):
        for q in OPEN_QPS:
            bench.send_wr(request(q, 3 * pmtu - 5, k))
    for q in OPEN_QPS:
        bench.send_limit(q, (starts[q] + 100) % PSN_MODULUS)
    bench.send_retx(3, (starts[3] + 1) % PSN_MODULUS, True)
    bench.send_retx(0, starts[0], True)
    await ClockCycles(dut.clk, 40)
    mon.hold_records = False
    await with_timeout(bench.drain(), TIMEOUT_NS, "ns")
    order = [(rec["qpn"], rec["rtx"]) for _, rec in mon.record_cycles[3:]]
    queued = next(i for i, (q, _) in enumerate(order) if q != 3)
    assert queued and all(entry == (3, 0) for entry in order[:queued])
    retx = [False] * config["n_qps"]
    retx[0] = retx[3] = True
    new = [0] * config["n_qps"]
    new[3] = 8 - queued
    for q in OPEN_QPS:
        new[q] = 6
    expected, pointer = [], 4
    while True:
        serve, pointer = serve_qp(pointer, retx, [n > 0 for n in new], [True] * len(new))
        if serve is None:
            break
        expected.append((serve.qp, int(serve.retx)))
        if serve.retx:
            retx[serve.qp] = False
        else:
            new[serve.qp] -= 1
    assert order[queued:] == expected, f"service order {order}, expected {expected}"
    bench.send_limit(3, (starts[3] + 13) % PSN_MODULUS)
    await with_timeout(bench.drain(), TIMEOUT_NS, "ns")
    assert bench.checker.records == 3 + 8 + 18 + 2 + 3 and not bench.checker.payloads
    await bench.check_counters()


@cocotb.test()
async def perf(dut):
    """Back-to-back work requests of each size over four QPs; see the module docstring."""
    from verif.bench import PERF_SIZES, make_rng, params, start, write_perf

    p = params()
    config = {k: p[k] for k in PERF_CONFIG}
    lanes = lanes_of(dut)
    rng = make_rng(dut)
    bench = Bench(dut, rng, config)
    mon = bench.monitor
    await start(dut)
    n_qps = config["n_qps"]
    for q in range(n_qps):
        await bench.configure(q, True, 0)
        bench.send_limit(q, FAR)
    retired = 0

    async def retire_sent():
        nonlocal retired
        while True:
            await RisingEdge(dut.clk)
            while retired < len(mon.record_cycles):
                rec = mon.record_cycles[retired][1]
                retired += 1
                bench.send_retire(rec["qpn"], rec["req_id"], True)

    cocotb.start_soon(retire_sent())
    await ClockCycles(dut.clk, 20)
    rows = []
    for size in PERF_SIZES:
        steady = {}
        for misalign in (0, 5):
            first_rec, first_beat, first_wr = (len(mon.record_cycles),
                                               len(mon.first_beat_cycles), len(mon.wr_cycles))
            for k in range(PERF_WRS):
                bench.send_wr(dict(qpn=k % n_qps, local_addr=0x10000 * k + misalign,
                                   remote_va=0x1000_0000 + k * 0x10000, length=size,
                                   req_id=k, rkey=7))
            await with_timeout(bench.drain(), TIMEOUT_NS, "ns")
            recs = [c for c, _ in mon.record_cycles[first_rec:]]
            beats = mon.first_beat_cycles[first_beat:]
            times = beats if size else recs
            assert len(recs) == PERF_WRS and len(beats) == (PERF_WRS if size else 0)
            steady[misalign] = (times[-1] - times[1]) / (PERF_WRS - 2)
            if not misalign:
                wr0 = mon.wr_cycles[first_wr]
                latency_record = recs[0] - wr0
                latency = (beats[0] - wr0) if size else latency_record
        beats = max(1, math.ceil(size / lanes))
        assert steady[0] == beats, \
            f"payload {size}: {steady[0]} cycles per packet aligned, {beats} beats"
        rows.append(dict(
            payload=size, frames=PERF_WRS, cycles_per_frame=steady[0],
            bytes_per_cycle=round(size / steady[0], 3),
            efficiency=round(size / steady[0] / lanes, 4), latency=latency,
            latency_record=latency_record, cycles_per_frame_misaligned=steady[5]))
    assert bench.checker.records == len(PERF_SIZES) * 2 * PERF_WRS
    write_perf(dut, "segmenter", lanes * 8, rows)


# --- pytest side -----------------------------------------------------------------------------

def run(sim, width, testcase="packets_match_model", tag="random", config=CONFIG, count=None):
    from rtl.segmenter import Segmenter
    from verif.runner import run_bench

    run_bench(Segmenter(width, **config), name=f"segmenter-{tag}-w{width}",
              toplevel="segmenter", test_module="tb.test_segmenter", sim=sim,
              params={"data_width": width, **config}, frames=count, testcase=testcase)


@pytest.mark.sim
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_segmenter(sim, width):
    run(sim, width)


@pytest.mark.sim
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_segmenter_service_order(sim):
    run(sim, 64, testcase="service_order", tag="order")


@pytest.mark.sim
def test_segmenter_perf():
    run("verilator", 64, testcase="perf", tag="perf", config=PERF_CONFIG)


@pytest.mark.sim
@pytest.mark.full
@pytest.mark.parametrize("width", (128, 256, 512))
def test_segmenter_perf_full(width):
    run("verilator", width, testcase="perf", tag="perf", config=PERF_CONFIG)


@pytest.mark.sim
@pytest.mark.full
@pytest.mark.parametrize("width", FULL_WIDTHS + WIDTHS)
@pytest.mark.parametrize("sim", ["icarus", "verilator"])
def test_segmenter_full(sim, width):
    run(sim, width, tag="full", count=FULL_WORK_REQUESTS)


@pytest.mark.parametrize("kwargs", [dict(data_width=32), dict(n_qps=0), dict(n_qps=257),
                                    dict(wrs_per_qp=1), dict(wrs_per_qp=6),
                                    dict(wrs_per_qp=128), dict(pmtu=128), dict(pmtu=1500),
                                    dict(max_outstanding=1), dict(n_qps=True)])
def test_segmenter_rejects_parameters(kwargs):
    from rtl.segmenter import Segmenter

    with pytest.raises(ValueError):
        Segmenter(**kwargs)

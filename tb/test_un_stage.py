# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""cocotb bench of rtl.un_stage.UnStage against models.un_stage.UnStageModel.

``un_stage_random`` configures the stage through its configuration port (own block and uSID, a
random 64-entry table with invalid entries and duplicate keys), then sends seeded random traffic
with random idle on the source and random backpressure on the sink: valid MRC frames (every
opcode, payloads 0..PMTU, carriers from ``models.usid`` where the stage's own uSID is active, not
active but routed, or missing from the table; Hop Limits 0, 1, 2 and above) mixed with bad frames
(1..53 bytes, wrong EtherType, IP version not 6, truncated frames of 54 bytes or more, foreign
blocks). Every output frame is compared byte for byte with the model, with its port (tdest) and
tuser, in order; the valid ones are also read by scapy (``verif/scapy_check.py``), which checks
the stack and ICRC and whose reading of the outer destination and Hop Limit must be the model's.
Every counter is read back and compared; the sink must be empty at the end.

``perf`` sends 32 back-to-back frames of each payload size of ``PERF_SIZES`` with no idle and no
backpressure and measures cycles per frame, throughput and latency (``make bench``); it also
asserts full line rate (one beat per cycle) and a constant latency.
"""

from ipaddress import IPv6Address

import pytest

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge, with_timeout

from models.layouts import CONTROL_OPCODES, DATA_OPCODES, Opcode, ext_length
from models.packets import build_frame
from models.records import ext_to_int
from models.un_stage import DST_BYTE, HOP_LIMIT_BYTE, MIN_FRAME, REASONS, Forwarded, UnStageModel
from models.usid import DEFAULT_BLOCK, MAX_USIDS, Role, carrier, encode, path_carrier, shift
from rtl.un_stage import (ADDR_COUNTERS, ADDR_OWN_BLOCK, ADDR_OWN_USID, ENTRY_KEY_HI, ENTRY_KEY_LO,
                          ENTRY_PORT, ENTRY_VALID, TABLE_BASE, TABLE_STRIDE, UnStage)
from verif.runner import SIMULATORS, run_bench

WIDTHS = (64, 512)
FULL_WIDTHS = (128, 256)
FRAMES = 500
PMTU = 4096                 # the profile's largest
PORT_WIDTH = 4
TABLE_DEPTH = 64
PERF_FRAMES = 32

# Frame kinds of the random traffic, with weights. "valid" kinds are MRC frames that scapy reads.
KINDS = {
    "own_active": 34, "routed": 14, "miss": 8, "hop_limit": 10, "exhausted": 2,
    "short": 10, "ethertype": 5, "version": 5, "truncated": 6, "foreign_block": 6,
    "edge_length": 4,
}
# Lengths around the 54 bytes the decision needs and around beat boundaries.
EDGE_LENGTHS = (1, 7, 8, 9, 31, 32, 33, 52, 53, 54, 55, 63, 64, 65)
VALID_KINDS = ("own_active", "routed", "miss", "hop_limit", "exhausted", "foreign_block")


# --- Traffic -------------------------------------------------------------------------------------

class Traffic:
    """Seeded random frames for one switch: its identity, its table and the frames' carriers."""

    def __init__(self, rng, pmtu):
        self.rng = rng
        self.pmtu = pmtu
        self.plane = rng.randrange(16)
        self.role = rng.choice((Role.T0, Role.T1))
        self.index = rng.randrange(1024)
        self.own = encode(self.plane, self.role, self.index)
        self.block = rng.choice((DEFAULT_BLOCK, 0xFD000300 | rng.randrange(256)))
        # The nodes the table knows, by role: T0s, T1s and host ports of the plane; the carriers
        # mostly name them (routed) and sometimes a random index (most likely a miss).
        self.known = {role: rng.sample(range(1024), 12) for role in (Role.T0, Role.T1, Role.HOST)}
        self.known_usids = [encode(self.plane, role, i) for role, indexes in self.known.items()
                            for i in indexes if encode(self.plane, role, i) != self.own]
        self.known_usids += [encode((self.plane + 1) % 16, Role.T0, rng.randrange(1024))
                             for _ in range(4)]

    def table(self):
        """``TABLE_DEPTH`` entries (key, port, valid): keys of known nodes (some twice, with
        different ports: the lowest valid index wins), about one in ten invalid."""
        usids = self.known_usids + [self.rng.choice(self.known_usids)
                                    for _ in range(TABLE_DEPTH - len(self.known_usids))]
        self.rng.shuffle(usids)
        entries = []
        for usid in usids:
            block = self.block if self.rng.random() < 0.95 else DEFAULT_BLOCK ^ 0x100
            entries.append((block << 16 | usid, self.rng.randrange(1 << PORT_WIDTH),
                            self.rng.random() < 0.9))
        return entries

    def _index(self, role):
        """A known index of ``role`` most of the time, else any."""
        if self.rng.random() < 0.85:
            return self.rng.choice(self.known[role])
        return self.rng.randrange(1024)

    def own_carrier(self):
        """A carrier whose active uSID is ours: a path template through this switch."""
        if self.role == Role.T0:
            t0_dst = self.index if self.rng.random() < 0.3 else self._index(Role.T0)
            return path_carrier(self.plane, self.index, self._index(Role.T1), t0_dst,
                                self._index(Role.HOST), self.block)
        # a T1 sees the carrier after the source T0 has shifted it
        t0_dst = self._index(Role.T0)
        t0_src = (t0_dst + 1 + self.rng.randrange(1023)) % 1024
        return shift(path_carrier(self.plane, t0_src, self.index, t0_dst,
                                  self._index(Role.HOST), self.block))

    def routed_carrier(self):
        """A carrier whose active uSID is another node's, as the table knows it (or not)."""
        usids = [self.rng.choice(self.known_usids)]
        usids += [encode(self.plane, self.rng.choice((1, 2, 3)), self.rng.randrange(1024))
                  for _ in range(self.rng.randrange(MAX_USIDS))]
        return carrier(usids, self.block)

    def miss_carrier(self):
        """A carrier that the table cannot hold: a uSID of a plane nobody routes to."""
        plane = (self.plane + 2 + self.rng.randrange(14)) % 16
        usids = [encode(plane, self.rng.choice((1, 2, 3)), self.rng.randrange(1024))
                 for _ in range(1 + self.rng.randrange(MAX_USIDS))]
        return carrier(usids, self.block)

    def payload_length(self):
        r = self.rng.random()
        if r < 0.4:
            return self.rng.randrange(0, 65)
        if r < 0.8:
            return self.rng.randrange(0, min(self.pmtu, 512) + 1)
        return self.rng.randrange(0, self.pmtu + 1)

    def mrc_frame(self, da, hop_limit):
        """A valid MRC frame (any opcode of docs/protocol.md 1.4) with outer destination ``da``."""
        rng = self.rng
        opcode = rng.choice(DATA_OPCODES + CONTROL_OPCODES)
        payload = bytes(rng.getrandbits(8) for _ in range(self.payload_length())) \
            if opcode in DATA_OPCODES else b""
        hdr = {
            "eth_dst": rng.getrandbits(48), "eth_src": rng.getrandbits(48),
            "dscp": rng.choice((0, 4, 8, 12, 16, 46)), "ecn": rng.randrange(4),
            "flow_label": rng.getrandbits(16), "hop_limit": hop_limit,
            "outer_src": 0xFD000000 << 96 | self.plane << 80 | rng.getrandbits(32),
            "outer_dst": da,
            "inner_src": 0xFD00FFFF << 96 | rng.getrandbits(32),
            "inner_dst": 0xFD00FFFF << 96 | rng.getrandbits(32),
            "udp_sport": rng.getrandbits(16), "opcode": opcode,
            "dest_qpn": rng.getrandbits(24), "ackreq": rng.randrange(2), "rtx": rng.randrange(2),
            "psn": rng.getrandbits(24),
            "ext": ext_to_int(bytes(rng.getrandbits(8) for _ in range(ext_length(opcode)))),
            "length": len(payload),
        }
        return build_frame(hdr, payload)

    def hop_limit(self):
        return self.rng.choice((64, 64, 2, 3, 255, self.rng.randrange(2, 256)))

    def frame(self, kind):
        """``(frame bytes, tuser)`` of one frame of ``kind`` (see :data:`KINDS`)."""
        rng = self.rng
        tuser = int(rng.random() < 0.1)
        if kind == "own_active":
            return self.mrc_frame(self.own_carrier(), self.hop_limit()), tuser
        if kind == "routed":
            return self.mrc_frame(self.routed_carrier(), self.hop_limit()), tuser
        if kind == "miss":
            return self.mrc_frame(self.miss_carrier(), self.hop_limit()), tuser
        if kind == "hop_limit":
            da = self.own_carrier() if rng.random() < 0.7 else self.miss_carrier()
            return self.mrc_frame(da, rng.choice((0, 1, 1, 2))), tuser
        if kind == "exhausted":        # our uSID is the last: the shift leaves block|0x0000
            return self.mrc_frame(carrier([self.own], self.block), self.hop_limit()), tuser
        if kind == "foreign_block":    # our uSID behind another block: not ours, no shift
            usids = [self.own] + [rng.choice(self.known_usids) for _ in range(rng.randrange(3))]
            return self.mrc_frame(carrier(usids, self.block ^ 0x10000), self.hop_limit()), tuser
        base = bytearray(self.mrc_frame(self.own_carrier(), self.hop_limit()))
        if kind == "short":
            length = rng.randrange(1, MIN_FRAME)
            if rng.random() < 0.5:
                return bytes(base[:length]), tuser
            return bytes(rng.getrandbits(8) for _ in range(length)), tuser
        if kind == "ethertype":
            base[12:14] = rng.choice((0x0800, 0x86DC, 0x86DE, 0x8100, 0xDD86)).to_bytes(2, "big")
            return bytes(base), tuser
        if kind == "version":
            base[14] = rng.choice([v for v in range(16) if v != 6]) << 4 | base[14] & 0xF
            return bytes(base), tuser
        if kind == "edge_length":
            return bytes(base[:rng.choice(EDGE_LENGTHS)]), tuser
        if kind == "truncated":
            return bytes(base[:rng.randrange(MIN_FRAME, len(base))]), tuser
        raise ValueError(f"unknown frame kind {kind!r}")


async def configure(cfg, model, block, own, entries):
    await cfg.write(ADDR_OWN_BLOCK, block)
    await cfg.write(ADDR_OWN_USID, own)
    model.set_own(block=block, usid=own)
    for i, (key, port, valid) in enumerate(entries):
        base = TABLE_BASE + TABLE_STRIDE * i
        await cfg.write(base + ENTRY_KEY_LO, key & 0xFFFFFFFF)
        await cfg.write(base + ENTRY_KEY_HI, key >> 32)
        await cfg.write(base + ENTRY_PORT, port)
        await cfg.write(base + ENTRY_VALID, int(valid))
        model.set_entry(i, key, port, valid)


async def read_counters(cfg):
    return {name: await cfg.read(ADDR_COUNTERS[name]) for name in REASONS}


# --- The random bench ----------------------------------------------------------------------------

@cocotb.test()
async def un_stage_random(dut):
    from cocotbext.axi import AxiStreamFrame
    from scapy.layers.inet6 import IPv6

    from verif.bench import ConfigDriver, axis_ends, frames, make_rng, params, start, \
        write_result
    from verif.scapy_check import check_frame

    width = params()["data_width"]
    n_frames = frames(FRAMES)
    rng = make_rng(dut)
    assert len(dut.s_axis_tdata) == width and len(dut.m_axis_tdest) == PORT_WIDTH
    cfg = ConfigDriver(dut)
    # The streams before the reset: tvalid must not be X when it ends (X would reach the counters).
    source, sink = axis_ends(dut, rng, idle=(0.0, 0.0, 0.2, 0.6),
                             backpressure=(0.0, 0.0, 0.3, 0.8))
    await start(dut)

    traffic = Traffic(rng, PMTU)
    model = UnStageModel(table_depth=TABLE_DEPTH, port_width=PORT_WIDTH)
    await configure(cfg, model, traffic.block, traffic.own, traffic.table())
    dut._log.info("switch: plane %d role %d index %d, uSID %#06x, block %#010x",
                  traffic.plane, traffic.role, traffic.index, traffic.own, traffic.block)

    kinds = list(KINDS)
    weights = [KINDS[k] for k in kinds]
    expected = []
    sent = dict.fromkeys(kinds, 0)
    for _ in range(n_frames):
        kind = rng.choices(kinds, weights)[0]
        frame, tuser = traffic.frame(kind)
        sent[kind] += 1
        result = model.process(frame)
        if isinstance(result, Forwarded):
            expected.append((result, tuser, kind in VALID_KINDS))
        await source.send(AxiStreamFrame(frame, tuser=tuser))
    dut._log.info("sent %s; model counters %s", sent, model.counters)

    timeout_ns = 200 * (sum(len(e[0].frame) for e in expected) + 100 * n_frames) // (width // 8)
    scapy_checked = 0
    for n, (want, tuser, valid) in enumerate(expected):
        got = await with_timeout(sink.recv(), timeout_ns, "ns")
        data = bytes(got.tdata)
        if data != want.frame:
            diff = [i for i, (a, b) in enumerate(zip(data, want.frame)) if a != b]
            raise AssertionError(f"output frame {n}: {len(data)} B, the model's "
                                 f"{len(want.frame)} B; first differing bytes {diff[:16]}")
        assert got.tdest == want.port, f"output frame {n}: tdest {got.tdest}, model {want.port}"
        assert got.tuser == tuser, f"output frame {n}: tuser {got.tuser}, sent {tuser}"
        if valid:
            pkt = check_frame(data)
            outer = pkt[IPv6]
            assert IPv6Address(outer.dst) == IPv6Address(want.frame[DST_BYTE:DST_BYTE + 16]), \
                f"output frame {n}: scapy reads outer DA {outer.dst}"
            assert outer.hlim == want.frame[HOP_LIMIT_BYTE]
            scapy_checked += 1

    await with_timeout(source.wait(), timeout_ns, "ns")     # trailing dropped frames
    await ClockCycles(dut.clk, 50)
    assert sink.empty(), f"{sink.count()} unexpected frames at the output"
    assert int(dut.m_axis_tvalid.value) == 0

    assert await cfg.read(ADDR_OWN_BLOCK) == traffic.block
    assert await cfg.read(ADDR_OWN_USID) == traffic.own
    for i in rng.sample(range(TABLE_DEPTH), 4):
        base = TABLE_BASE + TABLE_STRIDE * i
        key, port, valid = model.entries[i]
        words = [await cfg.read(base + k) for k in
                 (ENTRY_KEY_LO, ENTRY_KEY_HI, ENTRY_PORT, ENTRY_VALID)]
        assert words == [key & 0xFFFFFFFF, key >> 32, port, int(valid)], f"entry {i}: {words}"
    counters = await read_counters(cfg)
    assert counters == model.counters, f"counters {counters}, model {model.counters}"
    # A table word read right after its write reads as written.
    i = rng.randrange(TABLE_DEPTH)
    base = TABLE_BASE + TABLE_STRIDE * i
    key, port, valid = model.entries[i]
    for offset, value in ((ENTRY_VALID, int(not valid)), (ENTRY_KEY_LO, key ^ 0x5A5A5A5A),
                          (ENTRY_KEY_HI, (key >> 32) ^ 0xA5A5), (ENTRY_PORT, port ^ 1)):
        await cfg.write(base + offset, value & 0xFFFFFFFF)
        assert await cfg.read(base + offset) == value & 0xFFFFFFFF, f"entry {i} word {offset}"
    # A write clears a counter.
    await cfg.write(ADDR_COUNTERS["forwarded"], 0)
    model.clear_counter("forwarded")
    assert await read_counters(cfg) == model.counters
    dut._log.info("%d frames in, %d out (%d read by scapy), counters %s", n_frames, len(expected),
                  scapy_checked, counters)
    write_result(dut, "un_stage", n_frames)


# --- Performance -------------------------------------------------------------------------------

class BeatLog:
    """Cycle numbers of every frame's first and last beat on one AXI-Stream port."""

    def __init__(self):
        self.first = []
        self.last = []
        self._in_frame = False

    def beat(self, cycle, last):
        if not self._in_frame:
            self.first.append(cycle)
            self._in_frame = True
        if last:
            self.last.append(cycle)
            self._in_frame = False


async def log_beats(dut, inputs, outputs):
    cycle = 0
    while True:
        await RisingEdge(dut.clk)
        if int(dut.s_axis_tvalid.value) and int(dut.s_axis_tready.value):
            inputs.beat(cycle, int(dut.s_axis_tlast.value))
        if int(dut.m_axis_tvalid.value) and int(dut.m_axis_tready.value):
            outputs.beat(cycle, int(dut.m_axis_tlast.value))
        cycle += 1


@cocotb.test()
async def perf(dut):
    from cocotbext.axi import AxiStreamFrame

    from verif.bench import PERF_SIZES, ConfigDriver, axis_ends, params, start, write_perf

    width = params()["data_width"]
    lanes = width // 8
    cfg = ConfigDriver(dut)
    source, sink = axis_ends(dut)
    await start(dut)
    own, nxt, port = encode(3, Role.T0, 7), encode(3, Role.T1, 200), 5
    model = UnStageModel(table_depth=TABLE_DEPTH, port_width=PORT_WIDTH)
    await configure(cfg, model, DEFAULT_BLOCK, own, [(DEFAULT_BLOCK << 16 | nxt, port, True)])
    inputs, outputs = BeatLog(), BeatLog()
    cocotb.start_soon(log_beats(dut, inputs, outputs))

    rows = []
    for size in PERF_SIZES:
        hdr = {"opcode": Opcode.WRITE_ONLY, "hop_limit": 64, "length": size,
               "outer_dst": path_carrier(3, 7, 200, 9, 1), "eth_dst": 0x020000000009,
               "eth_src": 0x020000000007}
        frame = build_frame(hdr, bytes(range(256)) * (size // 256) + bytes(size % 256))
        want = model.process(frame)
        assert isinstance(want, Forwarded)
        done = len(outputs.last)
        for _ in range(PERF_FRAMES):
            await source.send(AxiStreamFrame(frame))
        for _ in range(PERF_FRAMES):
            got = await with_timeout(sink.recv(), 100 * len(frame), "ns")
            assert bytes(got.tdata) == want.frame and got.tdest == port
        ins_first = inputs.first[done:]
        outs_first, ins_last, outs_last = (x[done:] for x in
                                           (outputs.first, inputs.last, outputs.last))
        # Steady state: skip the first frame (it fills the pipeline).
        cycles = (outs_last[-1] - outs_last[0]) / (PERF_FRAMES - 1)
        beats = -(-len(frame) // lanes)
        latencies = {o - i for o, i in zip(outs_first, ins_first)}
        latencies_last = {o - i for o, i in zip(outs_last, ins_last)}
        assert cycles == beats, f"payload {size}: {cycles} cycles per frame for {beats} beats"
        assert len(latencies) == 1 and len(latencies_last) == 1, \
            f"payload {size}: latencies {latencies}, last-in {latencies_last}"
        rows.append(dict(
            payload=size, frames=PERF_FRAMES, cycles_per_frame=cycles,
            bytes_per_cycle=size / cycles, efficiency=size / cycles / lanes,
            latency=latencies.pop(), latency_last=latencies_last.pop(), frame_bytes=len(frame),
            beats_per_frame=beats, frame_bytes_per_cycle=len(frame) / cycles,
            beat_efficiency=beats / cycles))
    assert sink.empty()
    write_perf(dut, "un_stage", width, rows)


# --- pytest ------------------------------------------------------------------------------------
# The tests of one bench name, simulator and width share one build folder (run_bench recompiles
# only what changed) and one xdist group, so that they run one after the other on one worker. The
# full sweep has its own name, hence its own seed.

def cases(name, sims, widths):
    return [pytest.param(sim, width, id=f"{sim}-{width}",
                         marks=pytest.mark.xdist_group(f"{name}-{width}-{sim}"))
            for sim in sims for width in widths]


def run(name, sim, width, *, testcase, frames=None):
    run_bench(UnStage(data_width=width, table_depth=TABLE_DEPTH, port_width=PORT_WIDTH),
              name=f"{name}-{width}", toplevel="un_stage", test_module="tb.test_un_stage",
              sim=sim, params={"data_width": width}, frames=frames, testcase=testcase)


@pytest.mark.sim
@pytest.mark.parametrize("sim, width", cases("un_stage", SIMULATORS, WIDTHS))
def test_un_stage(sim, width):
    run("un_stage", sim, width, testcase="un_stage_random", frames=FRAMES)


@pytest.mark.sim
@pytest.mark.full
@pytest.mark.parametrize("sim, width", cases("un_stage-full", SIMULATORS, FULL_WIDTHS + WIDTHS))
def test_un_stage_full(sim, width):
    run("un_stage-full", sim, width, testcase="un_stage_random", frames=4 * FRAMES)


@pytest.mark.sim
@pytest.mark.parametrize("sim, width", cases("un_stage", ["verilator"], [64]))
def test_un_stage_perf(sim, width):
    run("un_stage", sim, width, testcase="perf")


@pytest.mark.parametrize("kwargs", [dict(data_width=32), dict(data_width=96),
                                    dict(table_depth=0), dict(table_depth=1025),
                                    dict(table_depth=8.0), dict(port_width=0),
                                    dict(port_width=17)])
def test_un_stage_rejects_parameters(kwargs):
    with pytest.raises(ValueError, match="UnStage"):
        UnStage(**kwargs)


@pytest.mark.parametrize("width, beats, latency", [(64, 7, 20), (128, 4, 14), (256, 2, 9),
                                                   (512, 1, 8)])
def test_un_stage_header_beats(width, beats, latency):
    # latency H + 4 + tree levels + rows (two compare steps): the table (64 entries) scanned in
    # H rows of ceil(64 / H) lanes at W = 64 and 128, in one row of 64 registers at 256 and 512
    stage = UnStage(data_width=width)
    assert stage.header_beats == beats
    assert stage.latency == latency
    assert UnStage(data_width=width, table_depth=1).latency == beats + 4

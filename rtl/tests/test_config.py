# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""Shared RTL helpers in the Amaranth simulator: the configuration map (rtl.common.config) and
header packing and field extraction (rtl.common.headers) against models.layouts."""

import random

import pytest
from hypothesis import given, settings, strategies as st
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from models import layouts
from rtl.common.config import READ_LATENCY, ConfigMap
from rtl.common.headers import field, field_lanes, pack
from rtl.common.ports import config_members

MASK32 = 0xFFFF_FFFF

# --- ConfigMap ----------------------------------------------------------------------------------

# The map of the harness below: address -> (kind, bits, reset value). The wide register spans
# three words (72 bits, low word first).
REG_A, REG_B, WIDE, RO, CNT_EVENTS, CNT_AMOUNT = 0x00, 0x01, 0x04, 0x08, 0x10, 0x11
WIDE_BITS, WIDE_INIT, REG_B_BITS, REG_B_INIT = 72, 0x12_3456789A_BCDEF012, 5, 0x11


class ConfigHarness(wiring.Component):
    """One register of each kind on one configuration port; ``event`` and ``amount`` feed the
    counters (+1 and +value), ``ro_in`` is read through a read-only word."""

    def __init__(self, registered=False, decoded=False):
        self.registered, self.decoded = registered, decoded
        super().__init__({
            **config_members(8),
            "event": In(1),
            "amount": In(32),
            "ro_in": In(16),
            "reg_a": Out(32),
            "reg_b": Out(REG_B_BITS),
            "wide": Out(WIDE_BITS),
        })
        self.rows = None

    def elaborate(self, platform):
        m = Module()
        cfg = ConfigMap(m, self)
        m.d.comb += [
            self.reg_a.eq(cfg.reg(REG_A, "a", doc="plain 32-bit register")),
            self.reg_b.eq(cfg.reg(REG_B, "b", width=REG_B_BITS, init=REG_B_INIT)),
            self.wide.eq(cfg.wide_reg(WIDE, "wide", WIDE_BITS, init=WIDE_INIT)),
        ]
        cfg.ro(RO, "ro", self.ro_in)
        cfg.counter(CNT_EVENTS, "events", self.event, registered=self.registered)
        cfg.counter(CNT_AMOUNT, "amount", self.amount, registered=self.registered)
        cfg.finish(decoded=self.decoded)
        self.rows = cfg.doc_rows()
        return m


class ConfigReference:
    """What the harness's port must read, cycle by cycle (the convention of rtl.common.config)."""

    def __init__(self, registered=False):
        self.registered = registered
        self.held = (0, 0)      # the events of the previous cycle (registered counters)
        self.words = {REG_A: 0, REG_B: REG_B_INIT, RO: 0, CNT_EVENTS: 0, CNT_AMOUNT: 0}
        for i in range(3):
            self.words[WIDE + i] = (WIDE_INIT >> (32 * i)) & MASK32
        self.rdata = 0

    def read(self, addr):
        return self.words.get(addr, 0)

    def clock(self, addr, wdata, we, event, amount, ro_in):
        """One edge: rdata takes the word at ``addr`` as it was before the edge."""
        self.words[RO] = ro_in
        self.rdata = self.read(addr)
        for addr_c, value in ((CNT_EVENTS, event), (CNT_AMOUNT, amount)):
            if self.registered:
                # Counted a cycle late (the event of the write's cycle lands after the clear);
                # a write is a plain clear, dropping the event of the cycle before it.
                held = self.held[0] if addr_c == CNT_EVENTS else self.held[1]
                count = 0 if we and addr == addr_c else self.words[addr_c] + held
            else:
                count = (0 if we and addr == addr_c else self.words[addr_c]) + value
            self.words[addr_c] = count & MASK32
        self.held = (event, amount)
        if we and addr in (REG_A, REG_B, WIDE, WIDE + 1, WIDE + 2):
            width = {REG_B: REG_B_BITS, WIDE + 2: WIDE_BITS - 64}.get(addr, 32)
            self.words[addr] = wdata & ((1 << width) - 1)

    def wide(self):
        return sum(self.words[WIDE + i] << (32 * i) for i in range(3))


def run_config(bench, **options):
    dut = ConfigHarness(**options)
    sim = Simulator(dut)
    sim.add_clock(4e-9)

    async def testbench(ctx):
        await bench(ctx, dut)

    sim.add_testbench(testbench)
    sim.run()
    return dut


async def cfg_write(ctx, dut, addr, value):
    ctx.set(dut.cfg_addr, addr)
    ctx.set(dut.cfg_wdata, value)
    ctx.set(dut.cfg_we, 1)
    await ctx.tick()
    ctx.set(dut.cfg_we, 0)


async def cfg_read(ctx, dut, addr):
    ctx.set(dut.cfg_addr, addr)
    for _ in range(READ_LATENCY):
        await ctx.tick()
    return ctx.get(dut.cfg_rdata)


def test_read_latency_is_one_cycle():
    async def bench(ctx, dut):
        assert READ_LATENCY == 1
        await cfg_write(ctx, dut, REG_A, 0xCAFE_F00D)
        ctx.set(dut.cfg_addr, REG_A)
        assert ctx.get(dut.cfg_rdata) != 0xCAFE_F00D     # not yet: the address was just presented
        await ctx.tick()
        assert ctx.get(dut.cfg_rdata) == 0xCAFE_F00D
        ctx.set(dut.cfg_addr, REG_B)
        assert ctx.get(dut.cfg_rdata) == 0xCAFE_F00D     # holds until the next edge
        await ctx.tick()
        assert ctx.get(dut.cfg_rdata) == REG_B_INIT
    run_config(bench)


def test_registers_reset_values_and_widths():
    async def bench(ctx, dut):
        assert await cfg_read(ctx, dut, REG_B) == REG_B_INIT
        for i in range(3):
            assert await cfg_read(ctx, dut, WIDE + i) == (WIDE_INIT >> (32 * i)) & MASK32
        await cfg_write(ctx, dut, REG_B, MASK32)
        assert await cfg_read(ctx, dut, REG_B) == (1 << REG_B_BITS) - 1
        assert ctx.get(dut.reg_b) == (1 << REG_B_BITS) - 1
    run_config(bench)


def test_wide_register_low_word_first():
    async def bench(ctx, dut):
        for i, word in enumerate((0x0403_0201, 0x0807_0605, 0xFFFF_FF09)):
            await cfg_write(ctx, dut, WIDE + i, word)
        assert ctx.get(dut.wide) == 0x09_0807_0605_0403_0201
        assert await cfg_read(ctx, dut, WIDE + 2) == 0x09        # only 8 bits in the top word
        await cfg_write(ctx, dut, WIDE + 1, 0)                   # one word changes alone
        assert ctx.get(dut.wide) == 0x09_0000_0000_0403_0201
    run_config(bench)


def test_unmapped_and_read_only():
    async def bench(ctx, dut):
        await cfg_write(ctx, dut, REG_A, MASK32)
        for addr in (0x02, 0x03, WIDE + 3, 0x12, 0xFF):
            assert await cfg_read(ctx, dut, addr) == 0
        ctx.set(dut.ro_in, 0xBEEF)
        assert await cfg_read(ctx, dut, RO) == 0xBEEF
        await cfg_write(ctx, dut, RO, 0x1234)                    # writes to a read-only word
        ctx.set(dut.ro_in, 0x5555)
        assert await cfg_read(ctx, dut, RO) == 0x5555
    run_config(bench)


def test_counter_wraps_at_2_32():
    async def bench(ctx, dut):
        ctx.set(dut.amount, MASK32 - 2)
        await ctx.tick()
        ctx.set(dut.amount, 5)
        await ctx.tick()
        ctx.set(dut.amount, 0)
        assert await cfg_read(ctx, dut, CNT_AMOUNT) == 2
    run_config(bench)


def test_counter_clears_on_write_and_counts_the_event_of_that_cycle():
    async def bench(ctx, dut):
        ctx.set(dut.event, 1)
        for _ in range(7):
            await ctx.tick()
        ctx.set(dut.event, 0)
        assert await cfg_read(ctx, dut, CNT_EVENTS) == 7
        await cfg_write(ctx, dut, CNT_EVENTS, 0x1234)            # any data clears
        assert await cfg_read(ctx, dut, CNT_EVENTS) == 0
        for _ in range(3):
            ctx.set(dut.event, 1)
            await ctx.tick()
        ctx.set(dut.event, 1)                                    # an event in the write cycle
        await cfg_write(ctx, dut, CNT_EVENTS, 0)
        ctx.set(dut.event, 0)
        assert await cfg_read(ctx, dut, CNT_EVENTS) == 1
    run_config(bench)


@pytest.mark.parametrize("registered, decoded", [(False, False), (True, True)])
@pytest.mark.parametrize("seed", range(3))
def test_random_traffic_matches_reference(seed, registered, decoded):
    """Random writes (mapped or not), reads, events and amounts; cfg_rdata checked every cycle;
    also with registered counters (counted a cycle late, the same clear rule) and the decoded
    read mux."""
    rng = random.Random(seed)
    ref = ConfigReference(registered)
    addresses = [REG_A, REG_B, WIDE, WIDE + 1, WIDE + 2, RO, CNT_EVENTS, CNT_AMOUNT, 0x02, 0x20]

    async def bench(ctx, dut):
        for cycle in range(600):
            inputs = dict(addr=rng.choice(addresses), wdata=rng.getrandbits(32),
                          we=int(rng.random() < 0.3), event=rng.getrandbits(1),
                          amount=rng.choice((0, 1, rng.getrandbits(32))),
                          ro_in=rng.getrandbits(16))
            for name, value in inputs.items():
                port = {"addr": "cfg_addr", "wdata": "cfg_wdata", "we": "cfg_we"}.get(name, name)
                ctx.set(getattr(dut, port), value)
            await ctx.tick()
            ref.clock(**inputs)
            assert ctx.get(dut.cfg_rdata) == ref.rdata, f"seed {seed} cycle {cycle}"
            assert ctx.get(dut.reg_a) == ref.words[REG_A]
            assert ctx.get(dut.wide) == ref.wide()
    run_config(bench, registered=registered, decoded=decoded)


def test_doc_rows():
    async def bench(ctx, dut):
        await ctx.tick()

    dut = run_config(bench)
    assert [row[:3] for row in dut.rows] == [
        (REG_A, "a", "rw"), (REG_B, "b", "rw"), (WIDE, "wide[31:0]", "rw"),
        (WIDE + 1, "wide[63:32]", "rw"), (WIDE + 2, "wide[71:64]", "rw"), (RO, "ro", "ro"),
        (CNT_EVENTS, "events", "counter"), (CNT_AMOUNT, "amount", "counter")]
    assert dut.rows[0][3] == "plain 32-bit register"


class _Port:
    def __init__(self, addr_width=8):
        self.cfg_addr = Signal(addr_width)
        self.cfg_wdata = Signal(32)
        self.cfg_we = Signal()
        self.cfg_rdata = Signal(32)


@pytest.mark.parametrize("declare, message", [
    (lambda cfg: (cfg.reg(3, "x"), cfg.reg(3, "y")), "used twice"),
    (lambda cfg: (cfg.reg(5, "x"), cfg.wide_reg(4, "w", 64)), "used twice"),
    (lambda cfg: (cfg.counter(7, "c", Signal()), cfg.ro(7, "r", Signal(4))), "used twice"),
    (lambda cfg: cfg.reg(0x100, "x"), "does not fit"),
    (lambda cfg: cfg.wide_reg(0xFF, "w", 40), "does not fit"),
    (lambda cfg: cfg.reg(0, "x", width=33), "at most 32 bits"),
])
def test_bad_maps_raise(declare, message):
    with pytest.raises(ValueError, match=message):
        declare(ConfigMap(Module(), _Port()))


# --- Header packing and field extraction ----------------------------------------------------------

# Every header declared in models/layouts.py (a new one joins the tests by itself).
HEADERS = [h for h in vars(layouts).values() if isinstance(h, layouts.Header)]


def field_values(header):
    """Random values for every field of ``header`` (reserved fields 0, as Header.pack wants)."""
    return st.fixed_dictionaries({
        f.name: st.just(0) if f.name.startswith("rsvd") else st.integers(0, (1 << f.width) - 1)
        for f in header.fields})


def lane_int(data):
    """Wire bytes as a lane-ordered integer: byte 0 in bits 7..0."""
    return int.from_bytes(bytes(data), "little")


@pytest.mark.parametrize("header", HEADERS, ids=lambda h: h.name)
@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_pack_matches_model(header, data):
    """rtl pack() of random field values equals Header.pack in lane order."""
    examples = data.draw(st.lists(field_values(header), min_size=1, max_size=12))
    inputs = {f.name: Signal(f.width, name=f.name) for f in header.fields}
    packed = Signal(header.size * 8)
    m = Module()
    m.d.comb += packed.eq(pack(header, **inputs))

    async def bench(ctx):
        for values in examples:
            for name, value in values.items():
                ctx.set(inputs[name], value)
            assert ctx.get(packed) == lane_int(header.pack(**values)), values

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("header", HEADERS, ids=lambda h: h.name)
@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_field_matches_model(header, data):
    """rtl field() on random wire bytes (header at a random byte offset) equals Header.unpack."""
    base = data.draw(st.integers(0, 9), label="base")
    frames = data.draw(st.lists(st.binary(min_size=base + header.size + 3,
                                          max_size=base + header.size + 3),
                                min_size=1, max_size=12))
    vector = Signal(len(frames[0]) * 8)
    outputs = {f.name: Signal(f.width, name=f.name) for f in header.fields}
    m = Module()
    m.d.comb += [outputs[name].eq(field(header, vector, name, base)) for name in outputs]

    async def bench(ctx):
        for frame in frames:
            ctx.set(vector, lane_int(frame))
            expected = header.unpack(frame[base:])
            assert {name: ctx.get(sig) for name, sig in outputs.items()} == expected

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("header", HEADERS, ids=lambda h: h.name)
def test_field_lanes(header):
    for f in header.fields:
        lanes = field_lanes(header, f.name, base=3)
        assert lanes.start == 3 + f.offset // 8
        assert lanes.stop - 1 == 3 + (f.offset + f.width - 1) // 8


def test_pack_rejects_unknown_field():
    with pytest.raises(KeyError):
        pack(layouts.UDP, nonsense=Signal(4))

# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""The self-test's small parts in the Amaranth simulator: the checker's every verdict (equal,
different data, a frame ending early or late, a frame lost by timeout or skipped over, a frame
nobody expects), the UART transmitter's bit timing and the reporter's line."""

import pytest
from amaranth.hdl import ClockDomain, Module
from amaranth.sim import Simulator

from models.selftest import STATUS_WORDS
from rtl.selftest_check import FrameChecker
from rtl.selftest_report import Reporter, template_items
from rtl.uart_tx import UartTx

W = 64
LANES = W // 8


def frame(seq, n_bytes, fill=0x40):
    """A frame whose first two bytes are ``seq`` (big-endian), then bytes fill, fill + 1, ..."""
    body = bytes((fill + k) & 0xFF for k in range(n_bytes - 2))
    return seq.to_bytes(2, "big") + body


def beats(data):
    out = []
    for at in range(0, len(data), LANES):
        chunk = data[at:at + LANES]
        out.append((int.from_bytes(chunk, "little"), (1 << len(chunk)) - 1,
                    at + LANES >= len(data)))
    return out


def run_checker(expected, received, *, timeout=50, window=4, rx_delay=0, cycles=600):
    """Feeds the two frame lists (rx after ``rx_delay`` cycles); returns the result pulses in
    order, as names."""
    m = Module()
    m.domains.sync = ClockDomain("sync")
    m.submodules.dut = dut = FrameChecker(W, window=window, timeout=timeout)
    results = []

    async def source(ctx, prefix, frames, delay):
        await ctx.tick().repeat(delay + 1)
        for f in frames:
            port = getattr(dut, prefix)
            for data, keep, last in beats(f):
                ctx.set(port.p.data, data)
                ctx.set(port.p.keep, keep)
                ctx.set(port.p.last, last)
                ctx.set(port.valid, 1)
                await ctx.tick().until(port.ready)
        ctx.set(getattr(dut, prefix).valid, 0)

    async def exp_source(ctx):
        await source(ctx, "exp", expected, 0)

    async def rx_source(ctx):
        await source(ctx, "rx", received, rx_delay)

    async def monitor(ctx):
        for _ in range(cycles):
            await ctx.tick()
            for name in ("ok", "bad", "lost", "extra"):
                if ctx.get(getattr(dut, f"res_{name}")):
                    results.append(name)

    sim = Simulator(m)
    sim.add_clock(4e-9)
    sim.add_testbench(exp_source, background=True)
    sim.add_testbench(rx_source, background=True)
    sim.add_testbench(monitor)
    sim.run()
    return results


def test_equal_frames_are_ok():
    frames = [frame(i, 20 + 7 * i) for i in range(5)]
    assert run_checker(frames, frames, rx_delay=9) == ["ok"] * 5


def test_a_different_byte_a_short_and_a_long_frame_are_bad():
    expected = [frame(0, 40), frame(1, 40), frame(2, 40), frame(3, 40), frame(4, 40)]
    flipped = bytearray(expected[1])
    flipped[37] ^= 0x10
    received = [expected[0], bytes(flipped), expected[2][:30], expected[3] + b"\x00" * 9,
                expected[4]]
    assert run_checker(expected, received) == ["ok", "bad", "bad", "bad", "ok"]


def test_keep_beyond_the_frame_is_not_compared():
    """Lanes tkeep drops may differ; equal kept bytes make an ok frame."""
    assert run_checker([frame(0, 21)], [frame(0, 21)]) == ["ok"]


def test_a_frame_that_never_comes_is_lost_after_the_timeout():
    expected = [frame(0, 30), frame(1, 30)]
    assert run_checker(expected, [expected[0]], timeout=40) == ["ok", "lost"]


def test_a_skipped_frame_is_lost_and_the_next_still_matches():
    expected = [frame(i, 30) for i in range(4)]
    received = [expected[0], expected[2], expected[3]]
    assert run_checker(expected, received, timeout=400) == ["ok", "lost", "ok", "ok"]


def test_a_frame_nobody_expects_is_extra():
    expected = [frame(5, 30), frame(6, 30)]
    received = [frame(5, 30), frame(5, 30), frame(6, 30)]       # a duplicate (behind)
    assert run_checker(expected, received, timeout=400) == ["ok", "extra", "ok"]
    far = [frame(5, 30), frame(200, 30), frame(6, 30)]          # too far ahead for the window
    assert run_checker(expected, far, timeout=400) == ["ok", "extra", "ok"]


def uart_bits(divisor, data, cycles):
    """``tx`` sampled every cycle after sending ``data`` through a UartTx."""
    m = Module()
    m.domains.sync = ClockDomain("sync")
    m.submodules.dut = dut = UartTx(divisor * 1000, 1000)
    samples = []

    async def bench(ctx):
        for byte in data:
            ctx.set(dut.data, byte)
            ctx.set(dut.valid, 1)
            await ctx.tick().until(dut.ready)
        ctx.set(dut.valid, 0)

    async def monitor(ctx):
        for _ in range(cycles):
            await ctx.tick()
            samples.append(ctx.get(dut.tx))

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench, background=True)
    sim.add_testbench(monitor)
    sim.run()
    return samples


def decode(samples, divisor):
    """Bytes of an 8N1 line sampled once per cycle."""
    out = []
    k = 0
    while k < len(samples):
        if samples[k] == 0:
            mid = k + divisor // 2
            bits = [samples[mid + divisor * (b + 1)] for b in range(9)]
            assert samples[mid] == 0 and bits[8] == 1, "framing"
            out.append(sum(bit << b for b, bit in enumerate(bits[:8])))
            k = mid + divisor * 9
        else:
            k += 1
    return bytes(out)


@pytest.mark.parametrize("divisor", [2, 3, 10])
def test_uart_sends_8n1_back_to_back(divisor):
    data = b"\x00\xffMRC\x55"
    samples = uart_bits(divisor, data, divisor * 10 * (len(data) + 1) + 5)
    assert decode(samples, divisor) == data
    first_low = samples.index(0)
    assert samples[first_low:first_low + divisor] == [0] * divisor    # a whole start bit


def test_uart_rejects_too_fast_a_rate():
    with pytest.raises(ValueError):
        UartTx(1000, 600)


def test_reporter_line():
    """The line: literal text, counters in hex (snapshot at its start), the status word."""
    m = Module()
    m.domains.sync = ClockDomain("sync")
    template = "n={sent} e={bad} {status}\r\n"
    dut = Reporter(template, ("sent", "bad"), STATUS_WORDS, 3000, 1000, period=1000)
    m.submodules.dut = dut
    samples = []

    async def bench(ctx):
        ctx.set(dut.v_sent, 0x1234ABCD)
        ctx.set(dut.v_bad, 7)
        ctx.set(dut.status, 2)
        for _ in range(1900):
            await ctx.tick()
            samples.append(ctx.get(dut.tx))

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    text = decode(samples, 3).decode()
    assert text == "n=1234abcd e=00000007 FAIL\r\n"
    assert len(template_items(template, ("sent", "bad"), STATUS_WORDS)) == len(text)


def test_reporter_rejects_unknown_fields():
    with pytest.raises(ValueError, match="not one of"):
        Reporter("{nope}", ("sent",), STATUS_WORDS, 3000, 1000, 10)

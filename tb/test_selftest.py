# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""cocotb bench of rtl.selftest.SelfTest (the FPGA loopback self-test core) against
models.selftest.

:func:`selftest_runs` lets the core run until it has sent ``frames`` frames, pulsing ``inject``
a few times at random moments, then stops it and waits for every frame to be checked. It
compares every frame entering the loop (``tap_tx``) with :func:`models.selftest.sent_frame`
(the injected ones with :func:`models.selftest.corrupt` of it) and every frame the checker takes
(``tap_rx``) with :func:`models.selftest.expected_frame` (corrupted likewise; an injected frame
the switch drops is missing). The counters must say: every frame sent, the clean ones ok, the
injected ones bad (or lost, when ``inject_byte`` makes the switch drop them), and the status
outputs must agree. The UART line is decoded and must be
:func:`models.selftest.report_line` of counter values that never decrease.
"""

import pytest

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge, Timer

from models.selftest import (SelfTestConfig, corrupt, expected_frame, parse_report, report_line,
                             sent_frame)
from verif.runner import SIMULATORS, run_bench

CLK_HZ = 250_000_000
BAUD_DIVISOR = 2                    # cycles per UART bit in the bench
REPORT_PERIOD = 2_600               # cycles between report lines in the bench (a line: ~2,400)

# name -> (SelfTest parameters, frames sent, injections)
CONFIGS = {
    "k2": (dict(data_width=64, ports=2, passes=3, max_payload=256, window=4), 160, 3),
    "wire": (dict(data_width=64, ports=0, passes=0, max_payload=256, window=2), 240, 3),
    "drop": (dict(data_width=64, ports=2, passes=1, max_payload=64, window=2, inject_byte=12,
                  timeout=1500), 60, 2),
}
FULL_CONFIGS = {
    "k4-w128": (dict(data_width=128, ports=4, passes=5, max_payload=1024, window=6), 400, 4),
    "wire-w512": (dict(data_width=512, ports=0, passes=0, max_payload=4096, window=3), 300, 4),
}


def _core_params(p):
    return {k: v for k, v in p.items() if k not in ("frames", "injections")}


class Collector:
    """Frames of a tap (``tdata/tkeep/tlast/tvalid/tready`` outputs), as bytes."""

    def __init__(self, dut, prefix, lanes):
        self.dut = dut
        self.sig = {n: getattr(dut, f"{prefix}_{n}") for n in
                    ("tdata", "tkeep", "tlast", "tvalid", "tready")}
        self.lanes = lanes
        self.frames = []
        self.beats = 0
        cocotb.start_soon(self._run())

    async def _run(self):
        current = bytearray()
        sig = self.sig
        while True:
            await RisingEdge(self.dut.clk)
            if not (int(sig["tvalid"].value) and int(sig["tready"].value)):
                continue
            self.beats += 1
            data = int(sig["tdata"].value).to_bytes(self.lanes, "little")
            keep = int(sig["tkeep"].value)
            current += bytes(data[k] for k in range(self.lanes) if keep >> k & 1)
            if int(sig["tlast"].value):
                self.frames.append(bytes(current))
                current = bytearray()


async def uart_lines(dut, lines):
    """Decodes ``uart_tx`` (8N1, BAUD_DIVISOR cycles a bit) into text lines."""
    bit_ns = BAUD_DIVISOR * 1e9 / CLK_HZ
    text = ""
    while True:
        await FallingEdge(dut.uart_tx)
        await Timer(bit_ns * 1.5, unit="ns")
        byte = 0
        for k in range(8):
            byte |= int(dut.uart_tx.value) << k
            await Timer(bit_ns, unit="ns")
        assert int(dut.uart_tx.value) == 1, "UART stop bit is not 1"
        text += chr(byte)
        if text.endswith("\r\n"):
            lines.append(text)
            text = ""


def counters(dut):
    return {name: int(getattr(dut, f"frames_{name}").value)
            for name in ("sent", "ok", "bad", "lost")}


@cocotb.test()
async def selftest_runs(dut):
    from verif.bench import frames as n_frames, make_rng, params, start, write_result

    p = params()
    core = _core_params(p)
    cfg = SelfTestConfig(**{k: core[k] for k in ("data_width", "ports", "passes",
                                                 "max_payload")})
    window = core["window"]
    rng = make_rng(dut)
    total = n_frames(p["frames"])
    lanes = cfg.data_width // 8
    dut.enable.value = 0
    dut.inject.value = 0
    await start(dut)
    tx = Collector(dut, "tap_tx", lanes)
    rx = Collector(dut, "tap_rx", lanes)
    lines = []
    cocotb.start_soon(uart_lines(dut, lines))

    # Before any frame: neither passed nor failed, and the report says WAIT.
    assert not int(dut.passed.value) and not int(dut.failed.value)
    await with_lines(dut, lines, 1)
    assert lines[0] == report_line(cfg, window, 0, 0, 0, 0) and " WAIT\r\n" in lines[0]

    # Frames flow: after a few good ones the core passes, and so does the next report line.
    t0 = cocotb.utils.get_sim_time("ns")
    dut.enable.value = 1
    while int(dut.frames_ok.value) < 2 * window:
        await ClockCycles(dut.clk, 16)
    assert int(dut.passed.value) and not int(dut.failed.value)
    await with_lines(dut, lines, 1)
    assert parse_report(lines[-1])["status"] == "PASS"

    # Injections at random moments, then no new frames, and every frame in flight checked.
    inject_at = sorted(rng.sample(range(int(dut.frames_sent.value), total), p["injections"]))
    pulses = 0
    next_allowed = 0        # a pulse arms the next frame sent: one pulse per frame, sent
    sent_now = 0
    while sent_now < max(total, next_allowed) or pulses < len(inject_at):
        await ClockCycles(dut.clk, 8)
        sent_now = int(dut.frames_sent.value)
        if pulses < len(inject_at) and sent_now >= max(inject_at[pulses], next_allowed):
            dut.inject.value = 1
            await RisingEdge(dut.clk)
            dut.inject.value = 0
            pulses += 1
            next_allowed = sent_now + 2
            await ClockCycles(dut.clk, rng.randint(1, 300))
    dut.enable.value = 0
    for _ in range(20_000):
        c = counters(dut)
        if c["sent"] == c["ok"] + c["bad"] + c["lost"] and not int(dut.tap_tx_tvalid.value):
            break
        await ClockCycles(dut.clk, 16)
    else:
        raise AssertionError(f"the self-test never settled: counters {counters(dut)}")
    cycles = (cocotb.utils.get_sim_time("ns") - t0) * CLK_HZ / 1e9
    await ClockCycles(dut.clk, 20)
    c = counters(dut)
    sent = c["sent"]
    assert sent >= total and sent == len(tx.frames), (c, len(tx.frames))

    # Every frame sent: the model's, or its corruption (one per pulse).
    injected = []
    for i, frame in enumerate(tx.frames):
        if frame != sent_frame(cfg, i):
            assert frame == corrupt(cfg, sent_frame(cfg, i), core.get("inject_byte")), \
                f"frame {i} sent differs from the model's"
            injected.append(i)
    assert len(injected) == pulses == p["injections"], (injected, pulses)

    # Every frame back: the expected one, corrupted likewise, or missing when the switch drops it.
    dropped = core.get("inject_byte") == 12 and cfg.ports
    expect = []
    for i in range(sent):
        frame = expected_frame(cfg, i)
        if i in injected:
            if dropped:
                continue
            frame = corrupt(cfg, frame, core.get("inject_byte"))
        expect.append((i, frame))
    assert len(rx.frames) == len(expect), (len(rx.frames), len(expect))
    for (i, want), got in zip(expect, rx.frames):
        assert got == want, f"frame {i} back differs from the expected one"

    # The counters: the injected frames bad (or lost), all others ok; the core has failed.
    bad = 0 if dropped else len(injected)
    lost = len(injected) if dropped else 0
    assert c == {"sent": sent, "ok": sent - len(injected), "bad": bad, "lost": lost}, c
    assert int(dut.failed.value) == 1 and int(dut.passed.value) == 0

    # The report: the model's line for counter values that only grow, ending with the final ones.
    await with_lines(dut, lines, 2)
    previous = None
    for line in lines:
        values = parse_report(line)
        assert line == report_line(cfg, window, values["sent"], values["ok"], values["bad"],
                                   values["lost"]), line
        if previous:
            assert all(values[k] >= previous[k] for k in ("sent", "ok", "bad", "lost"))
        previous = values
    assert lines[-1] == report_line(cfg, window, c["sent"], c["ok"], c["bad"], c["lost"])
    beats = tx.beats
    dut._log.info("%d frames, %d beats sent in %.0f cycles (%.2f beats/cycle into the loop), "
                  "%d report lines", sent, beats, cycles, beats / cycles, len(lines))
    write_result(dut, "selftest", sent, loop_beats_per_cycle=round(beats / cycles, 3))


async def with_lines(dut, lines, n):
    """Waits for ``n`` more complete report lines."""
    target = len(lines) + n
    for _ in range(n * 2 * REPORT_PERIOD // 64):
        if len(lines) >= target:
            return
        await ClockCycles(dut.clk, 64)
    raise AssertionError(f"only {len(lines)} report lines")


# --- pytest side -----------------------------------------------------------------------------

def run(name, sim, params, frames, injections, *, full=False):
    """One build and run; Icarus (about 20 times slower on this core) sends a third of the
    frames outside ``make test-full``."""
    from rtl.selftest import SelfTest

    if sim == "icarus" and not full:
        frames //= 3
    core = dict(params, clk_hz=CLK_HZ, baud=CLK_HZ // BAUD_DIVISOR, report_period=REPORT_PERIOD)
    run_bench(SelfTest(**core), name=f"selftest-{name}", toplevel="selftest",
              test_module="tb.test_selftest", sim=sim,
              params={**core, "frames": frames, "injections": injections},
              testcase="selftest_runs")


def cases(pairs):
    return [pytest.param(name, sim, id=f"{name}-{sim}",
                         marks=pytest.mark.xdist_group(f"selftest-{name}-{sim}"))
            for name, sim in pairs]


@pytest.mark.sim
@pytest.mark.parametrize("name, sim", cases([("k2", "icarus"), ("k2", "verilator"),
                                             ("wire", "icarus"), ("wire", "verilator"),
                                             ("drop", "verilator")]))
def test_selftest(name, sim):
    run(name, sim, *CONFIGS[name])


@pytest.mark.sim
@pytest.mark.full
@pytest.mark.parametrize("name, sim", cases([("drop", "icarus")] +
                                            [(n, s) for n in FULL_CONFIGS for s in SIMULATORS]))
def test_selftest_full(name, sim):
    run(name, sim, *{**CONFIGS, **FULL_CONFIGS}[name], full=True)


@pytest.mark.parametrize("kwargs", [
    dict(window=0), dict(window=65), dict(inject_byte=130), dict(inject_byte=1),
    dict(ports=1), dict(passes=0), dict(max_payload=100), dict(data_width=32),
])
def test_selftest_rejects_parameters(kwargs):
    from rtl.selftest import SelfTest

    with pytest.raises(ValueError, match="SelfTest"):
        SelfTest(**kwargs)

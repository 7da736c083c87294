# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""cocotb test of the RTL fabric (``sim/rtl_fabric.py``) driven by its controller
(``sim/rtl_controller.py``), at the small size: 2 hosts, 1 plane of 2 T0s and 2 T1s, NICs of
2 QPs and 64 bits, a link on every wire direction, everything configured through AXI4-Lite.

``steady_cut_heal``:

1. steady: random Writes (0 bytes to 2 PMTU, with and without immediate) both ways on every
   QP; every message completes with status OK, its bytes land in the receiver's memory byte
   for byte, every immediate completes at the receiver, and no packet is retransmitted;
2. cut: more Writes (2 and 3 PMTU); mid-run the T0 0 - T1 0 cable is cut (both directions): every message
   still completes and lands (the paths through T1 1 carry it), and the cut dropped frames
   (the cable was busy when it went);
3. heal and loss: the cable comes back, the other T1's cable of T0 1 drops 10% of its frames
   and runs at half rate: more Writes all complete and land, EVs of the healed paths are probed
   back (RECOVERED), and the lossy cable lost frames.

A summary (messages, bytes, the NICs' retransmissions and timeouts, the switches' and links'
counters, cycles, simulated cycles per wall second) is printed. Verilator only, in
``make test-full``. Measured on the shared 2-core machine (nice 10, FPGA builds running): Verilog
generation 42 s (9.4 MB), Verilator build 155 s, simulation about 400 cycles (1.6 us) per wall
second; the whole test under 5 minutes. A run: 72 messages, 149 kB landed in 30 200 cycles; the
cut dropped 42 frames and cost 24 retransmissions (all by timeout); after the heal 8 EVs
recovered, the lossy cable lost 17 frames, the half-rate one caused 16 trims and 38 ECN marks.
"""

import time

import pytest

import cocotb

from models.fabric_topology import Topology

TOPOLOGY = dict(hosts=2, planes=1, t0s=2, t1s=2, link_delay_ns=20.0)
MESSAGES = 6              # per QP and host, per phase
CUT_AFTER = 800           # cycles of the second phase before the cut


def sizes_mixed(pmtu):
    return (0, 1, 17, 64, 200, pmtu - 1, pmtu, pmtu + 1, 2 * pmtu, 2 * pmtu - 5)


def sizes_big(pmtu):
    return (2 * pmtu, 3 * pmtu)


@cocotb.test()
async def steady_cut_heal(dut):
    from sim.rtl_controller import Controller
    from verif.bench import frames, make_rng, params

    topo = Topology(**TOPOLOGY)
    ctl = Controller(dut, make_rng(dut), topo, params())
    began = time.monotonic()
    await ctl.start()
    count = frames(MESSAGES)
    # 1. steady
    for host in ctl.hosts:
        host.add_messages(count, sizes_mixed)
    steady_start = ctl.cycle
    await ctl.run_until_idle(400_000)
    messages, size = ctl.check_memory()
    steady = await ctl.counters()
    dut._log.info("steady: %d messages, %d bytes in %d cycles; %s", messages, size,
                  ctl.cycle - steady_start, steady)
    assert steady["nic_send_retx"] == 0 and steady["link_frames_lost"] == 0, \
        f"retransmissions on a lossless fabric: {steady}"
    # 2. a T0-T1 cable cut mid-run (large messages: the cable is busy when it goes)
    for host in ctl.hosts:
        host.add_messages(count, sizes_big)
    cut_phase = ctl.cycle
    await ctl.keep_posting(CUT_AFTER)
    cable = ctl.uplink(0, 0, 0)
    await ctl.cut(cable)
    cut_at = ctl.cycle
    await ctl.run_until_idle(800_000)
    messages, size = ctl.check_memory()
    cut = await ctl.counters()
    assert cut["link_frames_cut"] > 0, "the cut met no frame: the test proves nothing"
    dut._log.info("cut: %d messages, %d bytes by cycle %d; %s", messages, size, ctl.cycle, cut)
    # 3. healed, and the other T1's cable of T0 1 lossy (10%) and slowed to half rate
    await ctl.heal(cable)
    other = ctl.uplink(0, 1, 1)
    await ctl.lossy(other, 0.1)
    await ctl.slow(other, 1)
    for host in ctl.hosts:
        host.add_messages(count, sizes_big)
    await ctl.run_until_idle(800_000)
    messages, size = ctl.check_memory()
    final = await ctl.counters()
    assert final["nic_recovered"] > cut["nic_recovered"], \
        f"no EV of the healed cable recovered: {final}"
    assert final["link_frames_lost"] > 0, "the lossy cable lost nothing: the test proves nothing"
    wall = time.monotonic() - began
    dut._log.info(
        "summary: %s; %d messages, %d bytes landed byte for byte; NIC packets sent %d, "
        "retransmitted %d, timeouts %d, NACKs %d, EVs recovered %d; switches forwarded %d, "
        "trimmed %d, ECN-marked %d, dropped full %d; links cut %d frames, lost %d; cut at cycle "
        "%d (phase 2 from %d), %d cycles in all, %.0f s wall, %.0f cycles/s; faults %s",
        topo.describe(), messages, size, final["nic_send"], final["nic_send_retx"],
        final["nic_timeout"], final["nic_nack"], final["nic_recovered"],
        final["switch_forwarded"], final["switch_trimmed"], final["switch_ecn_marked"],
        final["switch_dropped_full"], final["link_frames_cut"], final["link_frames_lost"],
        cut_at, cut_phase, ctl.cycle, wall, ctl.cycle / wall, ctl.faults)


# --- pytest ---------------------------------------------------------------------------------------

def run(testcase, frames=None):
    from sim.rtl_fabric import RtlFabric
    from verif.runner import run_bench

    fabric = RtlFabric(Topology(**TOPOLOGY))
    run_bench(fabric, name="rtl_fabric-small", toplevel="rtl_fabric",
              test_module="sim.tests.test_rtl_fabric", sim="verilator", params=fabric.nic_params,
              testcase=testcase, frames=frames, extra_sources=fabric.part_sources)


@pytest.mark.sim
@pytest.mark.full
def test_rtl_fabric_steady_cut_heal():
    """Steady writes, a T0-T1 cut mid-run, heal and loss (Verilator; minutes to build)."""
    run("steady_cut_heal")

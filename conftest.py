# SPDX-License-Identifier: BSD-2-Clause
"""pytest set-up shared by every test folder.

Hypothesis runs without its per-example deadline: CI and the 2-core development machines run
two pytest workers beside simulators, so wall time per example says nothing about the code, and
a deadline only turns load into flaky failures (a slow example is still reported by
``--durations``). Each test keeps its own ``max_examples``.

:data:`FULL_ONLY` keeps ``make test`` under 20 minutes on 2 cores (issue [standalone]): the runs
it names are marked ``full`` at collection, so only ``make test-full`` plays them. What stays in
``make test``: every leaf block's bench on both simulators at its narrowest width (the larger
blocks also at a wide one on Verilator); a composite on one simulator when its parts run on the
other (``rx_front`` on Icarus and ``rx_engine`` on Verilator, ``tx_engine`` on Icarus, the
switch on Verilator, the NIC engine on Icarus; the NIC self-test loop ``selftest_nic`` only in
``make test-full``); each memory form (generic and ECP5 DP16KD, with and without the output
register) on at least one simulator; one FPGA bitstream (the iCEBreaker's).
"""

import pytest
from hypothesis import settings

settings.register_profile("mrc", deadline=None)
settings.load_profile("mrc")

# Test ids (``file::function[param]``) that only ``make test-full`` runs, with the reason.
FULL_ONLY = {
    # repeats of a bench on the slower simulator at the wide width (Verilator plays it)
    "tb/test_header_inserter.py::test_header_inserter[icarus-512]",
    "tb/test_link.py::test_link[icarus-512]",
    "tb/test_placement.py::test_placement[icarus-w512]",
    "tb/test_segmenter.py::test_segmenter[icarus-512]",
    "tb/test_un_stage.py::test_un_stage[icarus-512]",
    "tb/test_rx_tracker.py::test_rx_tracker[icarus-q2m1024w16]",
    "tb/test_rx_tracker.py::test_rx_tracker[verilator-q4m128w4]",
    "tb/test_axil_config.py::test_axil_config[icarus-3]",
    "tb/test_axil_config.py::test_axil_config[verilator-1]",
    "tb/test_tick_generator.py::test_tick_generator[icarus-156250000]",
    "tb/test_axil_config.py::test_axil_switch[icarus]",
    # the wide width of the smaller blocks: header_inserter, placement and plane_splitter play
    # W = 256 and 512 here (rx_engine plays W = 64 here, its wide widths in test_rx_engine_full)
    "tb/test_link.py::test_link[verilator-512]",
    "tb/test_segmenter.py::test_segmenter[verilator-512]",
    "tb/test_un_stage.py::test_un_stage[verilator-512]",
    # memory forms: each stays on one simulator at least
    "tb/test_memory.py::test_block_ram[icarus-36x1024-reg-generic]",
    "tb/test_memory.py::test_block_ram[icarus-36x1024-noreg-ecp5]",
    "tb/test_memory.py::test_block_ram[verilator-36x1024-noreg-generic]",
    "tb/test_memory.py::test_block_ram[verilator-36x1024-reg-ecp5]",
    "tb/test_memory.py::test_block_ram[icarus-3x20000-reg-init-ecp5]",
    "tb/test_memory.py::test_read_modify_write[icarus-18x1024-reg-generic]",
    "tb/test_memory.py::test_read_modify_write[icarus-36x64-noreg-ecp5]",
    "tb/test_memory.py::test_read_modify_write[verilator-18x1024-reg-ecp5]",
    # spray scheduler configurations: each stays on one simulator
    "tb/test_spray_scheduler.py::test_spray_scheduler[icarus-q4p8a16b4]",
    "tb/test_spray_scheduler.py::test_spray_scheduler[icarus-q3p2a8b3]",
    "tb/test_spray_scheduler.py::test_spray_scheduler[verilator-q4p4a4b4]",
    "tb/test_spray_scheduler.py::test_spray_scheduler[verilator-q5p2a4b0]",
    "tb/test_selftest.py::test_selftest[k2-icarus]",
    "tb/test_selftest.py::test_selftest[wire-verilator]",
    # composites: one simulator here, both in test-full
    "tb/test_switch.py::test_switch[icarus-64]",
    "tb/test_rx_engine.py::test_rx_engine[icarus-n2-w64]",
    "tb/test_rx_front.py::test_rx_front[verilator-n3-w64]",
    "tb/test_tx_engine.py::test_tx_engine[verilator-4-64]",
    "tb/test_selftest_nic.py::test_selftest_nic[icarus]",
    "tb/test_selftest_nic.py::test_pattern_memory[icarus-512]",
    "tb/test_spray_scheduler.py::test_spray_scheduler[verilator-q4p8a16b4]",
    "tb/test_selftest.py::test_selftest[k2-verilator]",
    # measurements with a fuller sweep of their own (tx_engine_perf_full), board builds and
    # core lints that CI's fpga job and the NIC core's lint also make
    "tb/test_tx_engine.py::test_tx_engine_perf",
    # the longest proofs and engine runs when a shorter one covers the same here (measured
    # 2026-12-06: make test at 19.3 minutes of pytest on this machine): the header inserter's
    # k-induction at W = 512 (W = 64 stays), the NIC engine with both clock crossings (each
    # crossing alone stays in tb/test_cdc.py, the engine in one clock domain in test_nic_engine)
    "verif/tests/test_formal_tx_streams.py::test_header_inserter_inductive_w512",
    "tb/test_nic_engine.py::test_nic_engine_cdc[icarus-link5ns-mem3ns]",
    "fpga/tests/test_bitstreams.py::test_bitstream_builds_and_meets_its_clock[ulx3s_frame]",
    "fpga/tests/test_fusesoc.py::test_switch_core_lints",
}


# The longest runs of ``make test`` (measured, 2 workers), played first: with two workers a long
# test started last would run alone at the end (longest first keeps both workers busy).
SLOW_FIRST = (
    "sim/tests/test_rtl_scenarios.py::test_rtl_fabric_smoke",
    "tb/test_switch.py::test_switch[verilator-64]",
    "tb/test_nic_engine.py::test_nic_engine_lossy[icarus]",
    "fpga/tests/test_bitstreams.py::test_bitstream_builds_and_meets_its_clock[icebreaker]",
    "tb/test_rx_engine.py::test_rx_engine[verilator-n2-w64]",
    "verif/tests/test_formal_tx_streams.py::test_plane_splitter_inductive",
    "verif/tests/test_formal_rx_streams.py::test_plane_merge_stream_inductive",
)


def pytest_collection_modifyitems(config, items):
    """Mark the runs of :data:`FULL_ONLY` ``full``, and put :data:`SLOW_FIRST` at the front. In
    a run of the whole suite (``make test``, ``make test-full``) an id there that names no test
    is an error: a renamed test must not drift back into ``make test`` unseen."""
    rank = {nodeid: k for k, nodeid in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid, len(rank)))
    seen = set()
    for item in items:
        if item.nodeid in FULL_ONLY:
            item.add_marker(pytest.mark.full)
            seen.add(item.nodeid)
    missing = sorted(FULL_ONLY - seen)
    if missing and config.args_source == pytest.Config.ArgsSource.TESTPATHS:
        raise pytest.UsageError(f"conftest.FULL_ONLY names tests that do not exist: {missing}")

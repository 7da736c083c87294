# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""How a scenario maps onto the RTL fabric (``sim/rtl_scenario.py``) and what a run leaves behind
(``sim/rtl_report.py``), without a simulator: the QP plan, the NIC parameters and their timing
against the model's, the fault timeline, the refusals, the route-around measure, the files the
recorder writes, and every scenario file's rtl form run on the fabric model meeting its checks
(the model side of ``make sim``; the RTL side runs in ``sim/tests/test_rtl_scenarios.py``).
"""

import json
import shutil
from contextlib import ExitStack
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings, strategies as st

from models.fabric import FORMS, load_scenario, run_scenario
from models.fabric_nic import TICK_NS
from models.fabric_topology import frame_between
from models.tick import tick_fraction
from sim.rtl_fabric import DOWN, UP
from sim.rtl_report import Recorder, route_around
from sim.rtl_scenario import (CLK_HZ, CYCLES_PER_US, TICK_SCALE, check_fabric, fault_timeline,
                              flows_of, nic_params, qp_config, qp_plan)
from verif.tshark import tshark_fields

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "sim" / "scenarios").glob("*.yaml"))
WITH_RTL = [p for p in SCENARIOS if "\nrtl:" in p.read_text()]
CYCLE_NS = 4


def test_the_rtl_forms():
    """Every small scenario has an rtl form; the 64 x 8 permutations and htsim's topology (model
    only) have none."""
    assert FORMS == ("reduced", "rtl")
    assert sorted(p.stem for p in SCENARIOS if p not in WITH_RTL) == \
        ["htsim_permutation", "permutation", "permutation_link_down"]
    with pytest.raises(ValueError, match="no 'rtl' form"):
        load_scenario(ROOT / "sim/scenarios/permutation.yaml", rtl=True)
    with pytest.raises(ValueError, match="not both"):
        load_scenario(WITH_RTL[0], reduced=True, rtl=True)


@pytest.mark.parametrize("path", WITH_RTL, ids=lambda p: p.stem)
def test_rtl_form_on_the_model_meets_its_checks(path):
    """The fabric model plays the rtl form (same fabric, NICs, switches, traffic, faults) and
    meets the scenario's checks, as the RTL must."""
    scenario = load_scenario(path, rtl=True)
    check_fabric(scenario)
    result = run_scenario(scenario)
    assert result.ok, result.summary()
    assert result.finished


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 9), st.data())
def test_qp_plan_pairs_every_flow_once_both_ways(hosts, data):
    pairs = [(a, b) for a in range(hosts) for b in range(hosts) if a != b]
    flows = data.draw(st.lists(st.sampled_from(pairs), min_size=1, max_size=20, unique=True))
    peers, qp_of = qp_plan(flows, hosts)
    assert set(qp_of) == set(flows)
    for (a, b), q in qp_of.items():
        assert peers[a][q] == b and peers[b][q] == a
        assert qp_of.get((b, a), q) == q          # one QP carries both directions
    used = {frozenset(pair) for pair in flows}
    assert sum(len(t) for t in peers.values()) == 2 * len(used)
    degree = max(sum(1 for pair in used if h in pair) for h in range(hosts))
    assert max(q for t in peers.values() for q in t) < 2 * degree      # greedy bound


def test_qp_plan_of_all_to_all_and_incast():
    peers, _ = qp_plan([(a, b) for a in range(4) for b in range(4) if a != b], 4)
    assert all(sorted(t) == [0, 1, 2] for t in peers.values())          # K4: 3 QPs each
    peers, qp_of = qp_plan([(1, 0), (2, 0), (3, 0)], 4)
    assert peers[0] == {0: 1, 1: 2, 2: 3} and qp_of == {(1, 0): 0, (2, 0): 1, (3, 0): 2}


def test_nic_timing_equals_the_model():
    """The NIC's tick at CLK_HZ is 16 cycles (1.024 us / 16 at 250 MHz), and timeouts and probe
    periods scaled by 16 last as long in simulated time as the model's."""
    step, threshold = tick_fraction(CLK_HZ)
    assert threshold // step == TICK_SCALE and threshold % step == 0
    scenario = load_scenario(ROOT / "sim/scenarios/link_down.yaml", rtl=True)
    cfg = qp_config(scenario)
    rtl_timeout_ns = (1 << cfg.timeout_exp) * TICK_SCALE * CYCLE_NS
    assert rtl_timeout_ns == scenario.nic.timeout_us * 1000
    assert cfg.probe_period * TICK_SCALE * CYCLE_NS == scenario.nic.probe_period * TICK_NS
    p = nic_params(scenario, 3)
    assert (p["n_qps"], p["n_regions"], p["pmtu"], p["slots"], p["backups"], p["clk_hz"]) == \
        (3, 3, scenario.nic.pmtu, scenario.nic.slots, scenario.nic.backup, CLK_HZ)


def test_fault_timeline_of_every_kind():
    scenario = load_scenario(ROOT / "sim/scenarios/flapping_link.yaml", rtl=True)
    fault = scenario.faults[0]
    actions = fault_timeline(scenario)
    assert [(a.cycle, a.op) for a in actions] == [
        (round(t * CYCLES_PER_US), op) for start, end in fault.windows()
        for t, op in ((start, "cut"), (end, "heal"))]
    assert {a.cable for a in actions} == {("uplink", fault.plane, fault.t0, fault.t1)}
    port = fault_timeline(load_scenario(ROOT / "sim/scenarios/port_down.yaml", rtl=True))
    assert [(a.op, a.cable) for a in port] == [("plane_down", ("host", 0, 1)),
                                               ("cut", ("host", 0, 1))]
    path = load_scenario(ROOT / "sim/scenarios/lossy_path.yaml", rtl=True)
    lossy = fault_timeline(path)
    assert [(a.op, a.cable, a.directions, a.value) for a in lossy] == [
        ("loss", ("uplink", 1, t0, 0), (DOWN,), 0.2) for t0 in range(path.topology.t0s)]
    healed = fault_timeline(path.with_changes(faults=(
        path.faults[0].__class__(kind="link_impair", plane=0, t0=1, t1=1, loss=0.5, at_us=4,
                                 until_us=8),)))
    assert [(a.cycle, a.op, a.directions, a.value) for a in healed] == [
        (1000, "loss", (UP, DOWN), 0.5), (2000, "loss", (UP, DOWN), 0.0)]


def test_what_the_rtl_fabric_cannot_play_is_refused():
    scenario = load_scenario(ROOT / "sim/scenarios/lossy_path.yaml", rtl=True)
    with pytest.raises(ValueError, match="link_gbps must be 16"):
        check_fabric(scenario.with_changes(topology={"link_gbps": 100}))
    trim = scenario.faults[0].__class__(kind="path", plane=1, t1=0, trim=0.1, jitter_ns=5)
    with pytest.raises(ValueError, match="no trim, jitter_ns impairment"):
        check_fabric(scenario.with_changes(faults=(trim,)))
    with pytest.raises(ValueError, match="sprays"):
        nic_params(scenario.with_changes(nic={"transport": "ecmp"}), 1)


def test_route_around_is_the_last_data_frame_of_the_outage():
    entries = [10, 90, 120, 300, 420]
    assert route_around(entries, 100, None) == (320, 3)
    assert route_around(entries, 100, 400) == (200, 2)
    assert route_around(entries, 500, None) == (0, 0)


class _Tap:
    def __init__(self, bins):
        self.bins, self.total = bins, sum(bins)
        self.last = CYCLES_PER_US * 2 * len(bins) - 1 if bins else 0


def test_recorder_writes_pcaps_plot_and_summary(tmp_path):
    """The recorder on a made-up run: one frame per plane, a cut with data frames entering
    the cable after it, two hosts' placed bytes; the files say what happened and a failed check
    is reported."""
    scenario = load_scenario(ROOT / "sim/scenarios/link_down.yaml", rtl=True)
    action = fault_timeline(scenario)[0]
    rec = Recorder(scenario, tmp_path, 4000)
    frame = frame_between(scenario.topology, 0, 1, ev=0)
    with ExitStack() as stack:
        writers = rec.open_pcaps(stack)
        for plane, writer in enumerate(writers):
            iface = writer.interface("host0-tx", rec.describe(plane, 0, UP))
            rec.pcap_sink(writer, iface)(100 + plane, frame)
        entry = rec.entry_sink(action.cable)
        rec.action(action, action.cycle)
        entry(action.cycle + 250, frame)
        entry(action.cycle + 9000, b"\x00" * 60)        # not a data frame
    host = SimpleNamespace(done=[({"length": 100}, 0)] * 3)
    ctl = SimpleNamespace(hosts=[host, host])
    counters = {"nic_send": 10, "nic_send_retx": 12, "nic_recovered": 0, "switch_trimmed": 0,
                "switch_ecn_marked": 0, "link_frames_cut": 1}
    summary = rec.finish(ctl, [_Tap([500, 1000]), _Tap([0, 250])], 6, 600, counters, 1000, 2.0,
                         [(0, 1), (1, 0)], {(0, 1): 0, (1, 0): 0})
    assert summary.failed == []
    data = json.loads((tmp_path / "summary.json").read_text())
    assert data["route_around"][0]["route_around_us"] == 1.0
    assert data["placed_bytes"] == {"0": 1500, "1": 250}
    assert data["frames"] == [1, 1]
    text = (tmp_path / "summary.txt").read_text()
    assert "(fault 0, outage 0 from 10.00 us): last data frame on the broken cable 1.00 us " \
        "after it went, 1 data frames entered it" in text
    assert "2 | 4.00 | 1.00" in text          # 1000 B and 250 B in the 2 us from 2 us
    assert (tmp_path / "goodput.png").read_bytes().startswith(b"\x89PNG")
    assert data["receiver_gbps"]["1"] == pytest.approx(250 * 8 / (999 * CYCLE_NS))
    strict = scenario.with_changes(checks={"route_around_us": 0.5, "min_retransmitted": 13,
                                           "min_goodput_raw": 0.5})
    again = Recorder(strict, tmp_path / "again", 4000)
    again.action(action, action.cycle)
    again.entry_sink(action.cable)(action.cycle + 250, frame)
    failed = again.finish(ctl, [_Tap([1]), _Tap([])], 1, 1, counters, 10, 1.0, [], {}).failed
    assert len(failed) == 3 and "1.00 us after it went" in failed[0]
    assert "min_retransmitted" in failed[1] and "host 0 received 0.00 Gb/s" in failed[2]
    if shutil.which("tshark"):
        assert tshark_fields(tmp_path / "plane0.pcapng", "frame.number",
                             display_filter="_ws.malformed") == []


@pytest.mark.parametrize("path", WITH_RTL, ids=lambda p: p.stem)
def test_every_rtl_form_builds_its_fabric(path):
    """The fabric of every rtl form constructs (elaboration is the Verilator flow's); its NICs
    have a power-of-two number of QPs, enough for the QP plan."""
    from sim.rtl_run import build_fabric

    scenario = load_scenario(path, rtl=True)
    fabric = build_fabric(scenario)
    peers, _ = qp_plan(flows_of(scenario), scenario.topology.hosts)
    n_qps = fabric.nic_params["n_qps"]
    assert n_qps & (n_qps - 1) == 0
    assert all(q < n_qps for table in peers.values() for q in table)
    assert fabric.topology == scenario.topology


def _finish_quiet(rec):
    host = SimpleNamespace(done=[({"length": 100}, 0)])
    ctl = SimpleNamespace(hosts=[host, host])
    counters = {"nic_send": 10, "nic_send_retx": 99, "nic_recovered": 99, "switch_trimmed": 99,
                "switch_ecn_marked": 99, "link_frames_cut": 0}
    return rec.finish(ctl, [_Tap([500]), _Tap([500])], 2, 100, counters, 1000, 1.0,
                      [(0, 1), (1, 0)], {(0, 1): 0, (1, 0): 0}).failed


def test_an_outage_no_data_frame_met_fails_unless_the_scenario_allows_it(tmp_path):
    """Audit #2 (RTL side): a cut that no data frame ever entered used to pass the route-around
    check with 0 us; it fails now, and passes only with ``checks.idle_faults_ok``."""
    import dataclasses

    scenario = load_scenario(ROOT / "sim/scenarios/link_down.yaml", rtl=True)
    action = fault_timeline(scenario)[0]
    rec = Recorder(scenario, tmp_path / "idle", 4000)
    rec.action(action, action.cycle)
    rec.entry_sink(action.cable)(action.cycle - 10, frame_between(scenario.topology, 0, 1, ev=0))
    failed = _finish_quiet(rec)
    assert any("no data frame entered the broken cable" in f for f in failed), failed
    allowed = dataclasses.replace(scenario, checks=dataclasses.replace(scenario.checks,
                                                                       idle_faults_ok=True))
    rec = Recorder(allowed, tmp_path / "allowed", 4000)
    rec.action(action, action.cycle)
    assert not any("no data frame" in f for f in _finish_quiet(rec))


def test_a_run_that_ends_before_its_faults_fails(tmp_path):
    """Audit #3: a run whose traffic ended before the fault timeline was applied used to only
    log it; the summary fails now."""
    scenario = load_scenario(ROOT / "sim/scenarios/flapping_link.yaml", rtl=True)
    actions = fault_timeline(scenario)
    assert len(actions) >= 2
    rec = Recorder(scenario, tmp_path, 4000)
    rec.plan(actions)
    rec.action(actions[0], actions[0].cycle)
    rec.entry_sink(actions[0].cable)(actions[0].cycle + 5,
                                     frame_between(scenario.topology, 0, 1, ev=0))
    failed = _finish_quiet(rec)
    assert any(f.startswith(f"faults: 1 of {len(actions)} fault actions applied") for f in failed)
    for action in actions[1:]:
        rec.action(action, action.cycle)
    assert not any(f.startswith("faults:") for f in _finish_quiet(rec))

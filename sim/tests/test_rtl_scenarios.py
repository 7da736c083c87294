# SPDX-License-Identifier: BSD-2-Clause
"""Every scenario file's rtl form played on the RTL fabric (``sim/rtl_run.py``, the flow of
``make sim``) under Verilator, and compared with the fabric model playing the same form.

For each scenario with an ``rtl`` form (``sim/scenarios/*.yaml``):

- the run passes the scenario's checks (``sim/rtl_scenario.py``): every message completes with
  status OK, every byte lands in the receiver's memory, every immediate completes, the broken
  path is left within ``route_around_us``, the counts reach their minimums;
- it writes one pcapng per plane holding frames (tshark reads them with no malformed frame),
  the goodput PNG and the summaries;
- the model and the RTL agree (:func:`agree`): the same completions, and retransmissions and
  trims each within :data:`TOLERANCE_ABS` or :data:`TOLERANCE_REL` of the larger count,
  whichever is wider, of the range the model gives over the scenario's seed and
  :data:`MODEL_SEEDS`. Timing differs between the two (the model's NICs take no cycles, its
  switches cut through in zero time, the RTL's store and forward), so counts that depend on
  what was in flight when a link went are close, not equal; and the RTL plays one seed, whose
  EV sets and traffic are drawn apart from the model's, so its count is compared with what the
  model does over several draws, not with one of them. Measured (2026-12-02, profile 1, seeds
  1-10): flapping_link retransmits 20-28 in the model (5 or 6 EVs marked), 17 on the RTL (4
  marked; seed 6 alone gives 23, outside the old one-seed tolerance of 5.75); link_down 17-18,
  port_down 18-20, lossy_path 3-7, incast_trim 244-348, switch_restart 16-17,
  steady_all_to_all 0.

Verilator only, in ``make test-full``: each scenario builds its fabric (about 4 minutes) and runs
1 to 4 minutes on the shared 2-core machine. ``make test`` plays one short form of the default
scenario (:func:`test_rtl_fabric_smoke`): link_down on one plane, three messages each way, the
cut at 5 us (audit #1: ``make sim``'s flow, controller and recorder run on every CI run).
"""

import shutil
from pathlib import Path

import pytest
import yaml

from models.fabric import load_scenario, run_scenario

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted(p for p in (ROOT / "sim" / "scenarios").glob("*.yaml")
                   if "\nrtl:" in p.read_text())
# Counts: at most this far apart, or this fraction of the larger of the two. The absolute term is
# the widest gap measured between small counts (lossy_path 7 / 3, docs/scenarios.md section 6);
# it was 8, under which any two counts up to 8 agreed (0 and 8 included; audit #9).
TOLERANCE_ABS = 4
TOLERANCE_REL = 0.25


def within(rtl, model):
    """True when two counts agree within the stated tolerance."""
    return abs(rtl - model) <= max(TOLERANCE_ABS, TOLERANCE_REL * max(rtl, model))


# Seeds the model plays besides the scenario's own for the comparison with the RTL's one run.
MODEL_SEEDS = range(1, 11)


def within_range(rtl, low, high):
    """True when a count agrees (:func:`within`) with some count from ``low`` to ``high``: inside
    the range, or within the tolerance of its nearer end."""
    return low <= rtl <= high or within(rtl, low) or within(rtl, high)


def model_runs(form):
    """The model's results for a scenario form at its own seed and at each of
    :data:`MODEL_SEEDS`."""
    seeds = sorted({form.seed, *MODEL_SEEDS})
    return [run_scenario(form.with_changes(seed=seed)) for seed in seeds]


def agree(rtl, models):
    """The differences between an RTL run's ``summary.json`` and the model's
    :class:`models.fabric.Result` s of the same form over several seeds (empty: they agree):
    every model run completes every message, as the RTL does; the RTL's retransmissions and
    trims each agree with the model's range (:func:`within_range`)."""
    out = []
    for model in models:
        expected = sum(f.messages for f in model.flows)
        completed = sum(f.completed for f in model.flows)
        if not rtl["completions"] == completed == expected:
            out.append(f"completions: RTL {rtl['completions']}, model {completed} of "
                       f"{expected} (seed {model.scenario.seed})")
    pairs = (("retransmissions", rtl["counters"]["nic_send_retx"],
              [m.counters["retransmitted"] for m in models]),
             ("trims", rtl["counters"]["switch_trimmed"], [m.trims for m in models]))
    for name, a, counts in pairs:
        if not within_range(a, min(counts), max(counts)):
            out.append(f"{name}: RTL {a}, model {min(counts)}-{max(counts)} over "
                       f"{len(counts)} seeds")
    return out


def test_every_scenario_with_an_rtl_form_is_played():
    """The list the RTL runs are drawn from is the scenario folder's (an empty list would skip
    every run without a word: it did, after this file moved from ``tb/`` to ``sim/tests/``)."""
    assert "link_down" in [p.stem for p in SCENARIOS] and len(SCENARIOS) >= 7


def test_tolerance_can_fail():
    assert within(19, 17) and within(300, 240) and not within(40, 20) and not within(0, 9)
    # the measured pairs agree; 0 against 8 (agreed under the old tolerance of 8) does not
    assert within(7, 3) and within(16, 21) and within(254, 312)
    assert not within(0, 8) and not within(2, 8)
    # a range widens the comparison by its spread, and no further
    assert within_range(17, 20, 28) and within_range(24, 20, 28) and within_range(33, 20, 28)
    assert not within_range(14, 20, 28) and not within_range(40, 20, 28)
    assert not within_range(0, 8, 9) and within_range(0, 0, 0) and not within_range(5, 0, 0)


@pytest.mark.sim
@pytest.mark.full
@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_rtl_scenario_verilator(path, tmp_path):
    """The scenario's rtl form on the RTL fabric: checks pass, files written, model agrees."""
    from sim.rtl_run import run
    from verif.tshark import tshark_fields

    rtl = run(path, out=tmp_path)
    assert rtl["failed"] == [], rtl["failed"]
    assert all(count > 0 for count in rtl["frames"]), rtl["frames"]
    assert (tmp_path / "goodput.png").read_bytes().startswith(b"\x89PNG")
    if shutil.which("tshark"):
        for pcap in rtl["pcaps"]:
            assert tshark_fields(pcap, "frame.number", display_filter="_ws.malformed") == []
    # The RTL implements profile 1 until [feedback-v2-rtl]: compare it with the model's profile 1.
    models = model_runs(load_scenario(path, rtl=True).with_changes(nic={"profile": 1}))
    retx = [m.counters["retransmitted"] for m in models]
    trims = [m.trims for m in models]
    print(f"{path.stem}: RTL {rtl['completions']} messages in {rtl['sim_us']:.1f} us, "
          f"retransmissions {rtl['counters']['nic_send_retx']}, trims "
          f"{rtl['counters']['switch_trimmed']}; model over {len(models)} seeds: "
          f"retransmissions {min(retx)}-{max(retx)}, trims {min(trims)}-{max(trims)}")
    assert agree(rtl, models) == []


def smoke_form(path, out):
    """The default scenario's rtl form cut down for ``make test``: one plane (half the fabric to
    build), three messages per host, the cut at 5 us; written to ``out`` as
    ``link_down_smoke.yaml`` (its own name, so its own build folder)."""
    spec = yaml.safe_load(Path(path).read_text())
    spec["name"] = "link_down_smoke"
    rtl = spec["rtl"]
    rtl["topology"] = dict(rtl["topology"], planes=1)
    rtl["traffic"] = dict(rtl["traffic"], messages=3)
    rtl["faults"] = [dict(rtl["faults"][0], at_us=5)]
    rtl["duration_us"] = 200
    target = Path(out) / "link_down_smoke.yaml"
    target.write_text(yaml.safe_dump(spec, sort_keys=False))
    return target


@pytest.mark.sim
def test_rtl_fabric_smoke(tmp_path):
    """``make sim``'s flow in ``make test``: the RTL fabric (2 NICs, 2 T0s and 2 T1s) built by
    Verilator, configured through AXI4-Lite, a T0-T1 cable cut while data flows; every byte
    checked in the receivers' memory, the cut met data frames and the senders left it, the
    files written, and the capture read by the MRC Wireshark dissector (data, SACK and probe
    frames, none malformed)."""
    from sim.rtl_run import DEFAULT_SCENARIO, run

    rtl = run(smoke_form(DEFAULT_SCENARIO, tmp_path), out=tmp_path / "out")
    assert rtl["failed"] == [], rtl["failed"]
    assert rtl["completions"] == 2 * 3
    assert rtl["route_around"] and all(r["data_frames"] > 0 for r in rtl["route_around"])
    assert rtl["counters"]["nic_send_retx"] > 0 and rtl["counters"]["link_frames_cut"] > 0
    assert (tmp_path / "out" / "goodput.png").read_bytes().startswith(b"\x89PNG")
    if shutil.which("tshark"):
        kinds = mrc_kinds_of_rtl_capture(rtl["pcaps"][0])
        assert {"data", "sack"} <= set(kinds), kinds


# Wireshark's expert severity "error" (epan/proto.h PI_ERROR).
PI_ERROR = 0x00800000


def mrc_kinds_of_rtl_capture(pcap):
    """The MRC dissector (``sim/wireshark/mrc.lua``, issue [ecosystem]) over a capture of the RTL
    fabric: every frame is an MRC kind, none malformed, no expert item of severity error, and
    the opcode, QPN and PSN it decodes are the bytes that :mod:`models.packets` reads. Returns
    ``{kind: frames}``."""
    from scapy.utils import RawPcapNgReader

    from sim.dissector import tshark_mrc

    frames = [bytes(data) for data, _ in RawPcapNgReader(str(pcap))]
    out = tshark_mrc(pcap, "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=,",
                     "-e", "mrc.kind", "-e", "mrc.bth.opcode", "-e", "mrc.bth.dest_qpn",
                     "-e", "mrc.bth.psn", "-e", "_ws.malformed",
                     "-e", "_ws.expert.severity").stdout.splitlines()
    assert len(out) == len(frames) > 0
    kinds = {}
    for number, (line, frame) in enumerate(zip(out, frames), 1):
        kind, opcode, qpn, psn, malformed, severity = line.split("\t")
        assert kind and malformed == "", (number, line)
        assert all(int(s) < PI_ERROR for s in severity.split(",") if s), (number, line)
        assert int(opcode, 0) == frame[102], number
        assert int(qpn, 0) == int.from_bytes(frame[107:110], "big"), number
        assert int(psn) == int.from_bytes(frame[111:114], "big"), number
        kinds[kind] = kinds.get(kind, 0) + 1
    return kinds

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
  whichever is wider. Timing differs between the two (the model's NICs take no cycles, its
  switches cut through in zero time, the RTL's store and forward), so counts that depend on
  what was in flight when a link went are close, not equal.

Verilator only, in ``make test-full``: each scenario builds its fabric (about 4 minutes) and runs
1 to 4 minutes on the shared 2-core machine.
"""

import shutil
from pathlib import Path

import pytest

from models.fabric import load_scenario, run_scenario

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted(p for p in (ROOT / "sim" / "scenarios").glob("*.yaml")
                   if "\nrtl:" in p.read_text())
TOLERANCE_ABS = 8          # counts: at most this far apart ...
TOLERANCE_REL = 0.25       # ... or this fraction of the larger of the two


def within(rtl, model):
    """True when two counts agree within the stated tolerance."""
    return abs(rtl - model) <= max(TOLERANCE_ABS, TOLERANCE_REL * max(rtl, model))


def agree(rtl, model):
    """The differences between an RTL run's ``summary.json`` and the model's
    :class:`models.fabric.Result` of the same form (empty: they agree)."""
    out = []
    expected = sum(f.messages for f in model.flows)
    completed = sum(f.completed for f in model.flows)
    if not rtl["completions"] == completed == expected:
        out.append(f"completions: RTL {rtl['completions']}, model {completed} of {expected}")
    pairs = (("retransmissions", rtl["counters"]["nic_send_retx"],
              model.counters["retransmitted"]),
             ("trims", rtl["counters"]["switch_trimmed"], model.trims))
    for name, a, b in pairs:
        if not within(a, b):
            out.append(f"{name}: RTL {a}, model {b}")
    return out


def test_tolerance_can_fail():
    assert within(19, 17) and within(300, 240) and not within(40, 20) and not within(0, 9)


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
    model = run_scenario(load_scenario(path, rtl=True).with_changes(nic={"profile": 1}))
    print(f"{path.stem}: RTL {rtl['completions']} messages in {rtl['sim_us']:.1f} us, "
          f"retransmissions {rtl['counters']['nic_send_retx']}, trims "
          f"{rtl['counters']['switch_trimmed']}; model {model.sim_us:.1f} us, retransmissions "
          f"{model.counters['retransmitted']}, trims {model.trims}")
    assert agree(rtl, model) == []

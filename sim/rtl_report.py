# SPDX-License-Identifier: BSD-2-Clause
"""What a scenario run on the RTL fabric (``sim/rtl_scenario.py``) leaves behind: one pcapng per
plane, the goodput plot, ``summary.txt`` and ``summary.json``, and the scenario's checks.

:class:`Recorder` takes the frames and events during the run (callbacks of the taps) and writes
the files at the end (:meth:`Recorder.finish`). It imports no cocotb: the controller and the
taps are passed in.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path

from models.layouts import BTH_OFFSET, DATA_OPCODES

from .pcapng import PcapngWriter
from .plot import fault_markers, goodput_plot

__all__ = ["Recorder", "Summary", "route_around"]

CYCLES_PER_US = 250


@dataclass
class Summary:
    """The end of a run: ``text`` (printed and in ``summary.txt``), ``data`` (``summary.json``)
    and ``failed``, the checks that failed (empty when the run passed)."""
    text: str
    data: dict
    failed: list = field(default_factory=list)


def route_around(entries, start, end):
    """``(cycles, frames)``: cycles from ``start`` (an outage's first cycle) to the last data
    frame of ``entries`` (sorted cycles of data frames entering the broken cable) in
    ``[start, end)`` (``end`` None: the run's end), 0 if none entered; and how many entered."""
    inside = [c for c in entries if c >= start and (end is None or c < end)]
    return (inside[-1] - start if inside else 0), len(inside)


class Recorder:
    """Files and measurements of one run of ``scenario`` into folder ``out``; ``cycle_ps``
    picoseconds per cycle. Cycles count from the run's time zero."""

    def __init__(self, scenario, out, cycle_ps):
        self.scenario, self.out, self.cycle_ps = scenario, Path(out), cycle_ps
        self.out.mkdir(parents=True, exist_ok=True)
        self.pcaps = [self.out / f"plane{p}.pcapng" for p in range(scenario.topology.planes)]
        self.writers = []
        self.entries = {}           # cable key -> cycles of data frames entering it
        self.actions = []           # (cycle applied, Action)
        self.planned = None         # actions of the fault timeline (set by plan())

    def open_pcaps(self, stack):
        """One :class:`sim.pcapng.PcapngWriter` per plane, closed by the ``ExitStack``."""
        scen = self.scenario
        self.writers = [stack.enter_context(PcapngWriter(
            path, application="mrc RTL fabric simulation (cocotb, Verilator)",
            comment=f"scenario {scen.name} (rtl form), seed {scen.seed}, plane {p}: "
                    f"{scen.topology.describe()}"))
            for p, path in enumerate(self.pcaps)]
        return self.writers

    def describe(self, plane, host, direction):
        t0 = self.scenario.topology.t0_of(host)
        return (f"plane {plane}: host {host} NIC -> T0 {t0}" if direction == "up" else
                f"plane {plane}: T0 {t0} -> host {host} NIC")

    def pcap_sink(self, writer, interface):
        def record(cycle, frame):
            writer.packet(interface, max(cycle, 0) * self.cycle_ps, frame)
        return record

    def entry_sink(self, key):
        entries = self.entries.setdefault(key, [])

        def record(cycle, frame):
            if len(frame) > BTH_OFFSET and frame[BTH_OFFSET] in DATA_OPCODES:
                entries.append(cycle)
        return record

    def action(self, action, cycle):
        self.actions.append((cycle, action))

    def plan(self, actions):
        """The fault timeline the run must apply in full (a run that ends first fails: its
        fault claims were never exercised)."""
        self.planned = list(actions)

    # --- the end ----------------------------------------------------------------------------------

    def outages(self):
        """``(fault index, window, cable key, start cycle, end cycle or None)`` of every hard
        fault's outage (a cut, or a loss of 1)."""
        out = []
        for cycle, action in self.actions:
            fault = self.scenario.faults[action.fault]
            if not fault.hard:
                continue
            if action.op in ("cut", "loss") and (action.op == "cut" or action.value > 0):
                out.append([action.fault, action.window, action.cable, cycle, None])
            elif action.op in ("heal", "loss"):
                for row in out:
                    if row[2] == action.cable and row[4] is None:
                        row[4] = cycle
        return [tuple(row) for row in out]

    def finish(self, ctl, write_taps, messages, size, counters, end, wall, flows, qp_of):
        """Write ``summary.txt``, ``summary.json`` and ``goodput.png``; returns the
        :class:`Summary` with the checks' verdicts."""
        scen = self.scenario
        topo = scen.topology
        checks = scen.checks
        sim_us = end / CYCLES_PER_US
        failed = []
        # every scheduled fault applied (audit #3)
        if self.planned is not None and len(self.actions) < len(self.planned):
            missing = self.planned[len(self.actions):]
            failed.append(f"faults: {len(self.actions)} of {len(self.planned)} fault actions "
                          f"applied; the run ended before {missing[0].op} {missing[0].cable} "
                          f"at {missing[0].cycle / CYCLES_PER_US:.2f} us")
        # route around; an outage no data frame met proves nothing and fails unless the scenario
        # says so (checks.idle_faults_ok; audit #2)
        idle_ok = checks.idle_faults_ok
        arounds = []
        for fault, window, cable, start, stop in self.outages():
            cycles, frames = route_around(self.entries.get(cable, []), start, stop)
            arounds.append(dict(fault=fault, window=window, cable=list(cable),
                                start_us=start / CYCLES_PER_US, route_around_us=cycles /
                                CYCLES_PER_US, data_frames=frames))
            if checks.route_around_us is not None and \
                    cycles / CYCLES_PER_US > checks.route_around_us:
                failed.append(f"fault {fault} outage {window}: last data frame on the broken "
                              f"cable {cycles / CYCLES_PER_US:.2f} us after it went, more than "
                              f"{checks.route_around_us} us")
            if frames == 0 and not idle_ok:
                failed.append(f"fault {fault} outage {window}: no data frame entered the broken "
                              f"cable, so the route-around claim was not tested "
                              f"(checks.idle_faults_ok allows it)")
        for name, counter in (("min_trims", "switch_trimmed"),
                              ("min_ecn_marks", "switch_ecn_marked"),
                              ("min_retransmitted", "nic_send_retx"),
                              ("min_ev_recovered", "nic_recovered")):
            if counters.get(counter, 0) < getattr(checks, name):
                failed.append(f"{name}: {counter} is {counters.get(counter, 0)}, fewer than "
                              f"{getattr(checks, name)}")
        receivers = {h: tap.total * 8 / (tap.last / CYCLES_PER_US * 1000)
                     for h, tap in enumerate(write_taps) if tap.total and tap.last}
        raw = topo.planes * topo.link_gbps
        if checks.min_goodput_raw is not None:
            for h, gbps in receivers.items():
                if gbps < checks.min_goodput_raw * raw:
                    failed.append(f"min_goodput_raw: host {h} received {gbps:.2f} Gb/s, "
                                  f"{gbps / raw:.1%} of its raw line rate ({raw:g} Gb/s), less "
                                  f"than {checks.min_goodput_raw:.0%}")
        # goodput
        bin_us = scen.bin_us
        bins = max(len(t.bins) for t in write_taps) if write_taps else 0
        series = {}
        for host, tap in enumerate(write_taps):
            if not tap.total:
                continue
            values = [(tap.bins[k] if k < len(tap.bins) else 0) * 8 / (bin_us * 1000)
                      for k in range(bins)]
            series[f"host {host}"] = ([k * bin_us for k in range(bins + 1)], values)
        markers = [m for m in fault_markers(scen.faults) if m.time_us <= sim_us]
        plot = self.out / "goodput.png"
        goodput_plot(series, markers, plot,
                     f"{scen.name} (rtl form) on the RTL fabric, seed {scen.seed}: goodput per "
                     f"receiving host\n{topo.describe()}", line_gbps=raw)
        sent = {h: sum(1 for _ in host.done) for h, host in enumerate(ctl.hosts)}
        sent_bytes = {h: sum(m["length"] for m, _ in host.done)
                      for h, host in enumerate(ctl.hosts)}
        placed = {h: tap.total for h, tap in enumerate(write_taps)}
        data = dict(
            scenario=scen.name, form="rtl", seed=scen.seed, topology=topo.describe(),
            flows=[list(f) for f in flows], qps={f"{a}->{b}": q for (a, b), q in qp_of.items()},
            messages=messages, bytes=size, completions=messages, counters=counters,
            placed_bytes=placed, receiver_gbps=receivers, route_around=arounds,
            faults=[dict(cycle=c, us=c / CYCLES_PER_US, op=a.op, cable=list(a.cable),
                         directions=list(a.directions), value=a.value)
                    for c, a in self.actions],
            cycles=end, sim_us=sim_us, wall_s=wall, sim_us_per_wall_s=sim_us / wall if wall else 0,
            pcaps=[str(p) for p in self.pcaps], frames=[w.packets for w in self.writers],
            plot=str(plot), failed=failed)
        lines = [f"scenario {scen.name} (rtl form), seed {scen.seed}: {scen.description}",
                 f"fabric: {topo.describe()}; RTL NICs and switches, 64-bit links at 250 MHz "
                 f"({topo.link_gbps:g} Gb/s)",
                 f"traffic: {scen.traffic.pattern}, {len(flows)} flows of "
                 f"{scen.traffic.messages} x {scen.traffic.message_bytes} B",
                 "",
                 "host | messages sent | bytes sent | bytes placed in its memory | mean goodput "
                 "(Gb/s)",
                 "---|---|---|---|---"]
        for h in range(topo.hosts):
            lines.append(f"{h} | {sent[h]} | {sent_bytes[h]} | {placed[h]} | "
                         f"{placed[h] * 8 / (sim_us * 1000) if sim_us else 0:.2f}")
        lines.append("receiving hosts' goodput (bytes written x 8 / time to the last one): " +
                     ", ".join(f"host {h} {g:.2f} Gb/s ({g / raw:.1%} of {raw:g})"
                               for h, g in receivers.items()))
        lines += ["",
                  f"every message completed OK and landed byte for byte: {messages} messages, "
                  f"{size} bytes in {sim_us:.1f} us ({end} cycles)",
                  "NICs: " + ", ".join(f"{k[4:]} {v}" for k, v in counters.items()
                                       if k.startswith("nic_")),
                  "receive fronts: " + ", ".join(f"{k[3:]} {v}" for k, v in counters.items()
                                                 if k.startswith("rx_")),
                  "switches: " + ", ".join(f"{k[7:]} {v}" for k, v in counters.items()
                                           if k.startswith("switch_")),
                  "links: " + ", ".join(f"{k[5:]} {v}" for k, v in counters.items()
                                        if k.startswith("link_"))]
        for c, a in self.actions:
            lines.append(f"fault at {c / CYCLES_PER_US:.2f} us: {a.op} {a.cable} "
                         f"{'/'.join(a.directions)}{f' {a.value:g}' if a.op == 'loss' else ''}")
        for row in arounds:
            where = f"route around (fault {row['fault']}, outage {row['window']} from " \
                f"{row['start_us']:.2f} us):"
            lines.append(f"{where} last data frame on the broken cable "
                         f"{row['route_around_us']:.2f} us after it went, "
                         f"{row['data_frames']} data frames entered it" if row["data_frames"]
                         else f"{where} no data frame entered the broken cable")
        lines += [f"speed: {wall:.0f} s of wall time, {end / wall if wall else 0:.0f} cycles/s, "
                  f"{sim_us / wall if wall else 0:.2f} simulated us per wall second",
                  "outputs: " + ", ".join(str(p) for p in self.pcaps) + f", {plot}, "
                  f"{self.out / 'summary.txt'}, {self.out / 'summary.json'}",
                  "checks: " + ("passed" if not failed else "FAILED: " + "; ".join(failed))]
        table = ["", f"goodput per receiving host per {bin_us:g} us bin (Gb/s):",
                 "time (us) | " + " | ".join(series)]
        for k in range(bins):
            table.append(f"{k * bin_us:g} | " + " | ".join(f"{v[1][k]:.2f}"
                                                          for v in series.values()))
        text = "\n".join(lines)
        (self.out / "summary.txt").write_text(text + "\n" + "\n".join(table) + "\n")
        (self.out / "summary.json").write_text(json.dumps(data, indent=1) + "\n")
        return Summary(text, data, failed)

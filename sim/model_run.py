# SPDX-License-Identifier: BSD-2-Clause
"""Run a fabric scenario on the fabric model with frame taps, and write what people look at.

    python -m sim.model_run sim/scenarios/link_down.yaml [--out build/sim-out/link_down]
        [--reduced] [--seed N] [--bin-us B]

The scenario runs in bytes mode (real frames) on :mod:`models.fabric`. A
:class:`models.fabric_net.WireTap` on both directions of every host link of every plane
records each frame as it arrives at the link's far end (frames a cut or a fault loses on that
link are not seen). Into the output folder (default ``build/sim-out/<scenario name>``):

- ``plane<p>.pcapng``: one per plane, one interface per tapped link direction, in the order
  ``host<h>-tx`` (host h's NIC -> its T0) and ``host<h>-rx`` (T0 -> host h's NIC) for h = 0, 1,
  ...; Ethernet frames without FCS, timestamps in nanoseconds of simulated time
  (:mod:`sim.pcapng`);
- ``goodput.png``: the goodput of each receiving host against time, per bin of the scenario's
  ``bin_us`` (the payload bytes placed in its memory in the bin, x 8 / the bin), with each fault
  and heal marked (:mod:`sim.plot`);
- ``summary.txt``: the model's summary (``python -m models.fabric`` prints the same) and the
  plotted goodput as a table.

The exit status is 0 when every check of the scenario passed, as for ``models.fabric``.
"""

import argparse
import sys
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from models.fabric import FabricRun, load_scenario
from models.fabric_net import WireTap

from .pcapng import PcapngWriter
from .plot import fault_markers, goodput_plot

__all__ = ["ModelRun", "run", "tap_host_links", "goodput_series", "main"]

DEFAULT_OUT = Path("build/sim-out")


@dataclass
class ModelRun:
    """Where a run's files landed, its :class:`models.fabric.Result`, the frames written per
    plane file and what the plot drew (:func:`sim.plot.goodput_plot`)."""
    result: object
    out: Path
    pcaps: list
    plot: Path
    summary: Path
    frames: list = field(default_factory=list)
    drawn: dict = field(default_factory=dict)


def tap_host_links(network, writers, observe=None):
    """Tap both directions of every host link of ``network``: frames of plane p go to
    ``writers[p]`` (a :class:`sim.pcapng.PcapngWriter`), each direction its own interface.
    ``observe(plane, interface name, time_ps, packet)`` (optional) sees each frame as well."""
    topo = network.topology
    for plane, writer in enumerate(writers):
        for host in range(topo.hosts):
            t0, port = topo.t0_of(host), topo.port_of(host)
            links = ((f"host{host}-tx", f"plane {plane}: host {host} NIC -> T0 {t0} port {port}",
                      network.host_wires[host, plane]),
                     (f"host{host}-rx", f"plane {plane}: T0 {t0} port {port} -> host {host} NIC",
                      network.down_wires[host, plane]))
            for name, description, wire in links:
                interface = writer.interface(name, description)

                def record(time_ps, packet, writer=writer, interface=interface, plane=plane,
                           name=name):
                    writer.packet(interface, time_ps, packet.frame)
                    if observe is not None:
                        observe(plane, name, time_ps, packet)
                WireTap(wire, record)


def goodput_series(result):
    """Each receiving host's goodput per bin of the scenario's ``bin_us``, as the
    ``(edges_us, gbps)`` series :func:`sim.plot.goodput_plot` draws."""
    bin_us = result.scenario.bin_us
    return {f"host {host}": ([k * bin_us for k in range(len(values) + 1)], values)
            for host, values in sorted(result.host_timeline().items())}


def run(scenario, out, observe=None, label=None):
    """Run ``scenario`` in bytes mode with taps on every host link; write the plane pcapng
    files, ``goodput.png`` and ``summary.txt`` into the folder ``out``; returns a
    :class:`ModelRun`. ``observe`` is passed to :func:`tap_host_links`; ``label`` (e.g.
    "reduced") is added to the plot's title."""
    scenario = scenario.with_changes(mode="bytes")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    topo = scenario.topology
    fabric = FabricRun(scenario)
    pcaps = [out / f"plane{p}.pcapng" for p in range(topo.planes)]
    with ExitStack() as stack:
        writers = [stack.enter_context(PcapngWriter(
            path, comment=f"scenario {scenario.name}{f' ({label})' if label else ''}, seed "
                          f"{scenario.seed}, plane {p}: {topo.describe()}"))
            for p, path in enumerate(pcaps)]
        tap_host_links(fabric.network, writers, observe)
        result = fabric.run()
        frames = [w.packets for w in writers]
    markers = [m for m in fault_markers(scenario.faults) if m.time_us <= result.sim_us]
    name = f"{scenario.name}{f' ({label})' if label else ''}"
    title = (f"{name}, seed {scenario.seed}: goodput per receiving host\n{topo.describe()}")
    plot = out / "goodput.png"
    drawn = goodput_plot(goodput_series(result), markers, plot, title,
                         line_gbps=result.host_line_gbps)
    summary = out / "summary.txt"
    summary.write_text(f"{result.summary()}\n\ngoodput per receiving host per {scenario.bin_us:g} "
                       f"us bin (goodput.png):\n{result.timeline_table()}\n")
    return ModelRun(result, out, pcaps, plot, summary, frames, drawn)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Run a fabric scenario on the fabric model (bytes "
                                             "mode) and write pcapng files per plane, a goodput "
                                             "plot and the summary.")
    ap.add_argument("scenario", type=Path, help="a scenario file (sim/scenarios/*.yaml)")
    ap.add_argument("--out", type=Path,
                    help=f"output folder (default {DEFAULT_OUT}/<scenario name>)")
    ap.add_argument("--reduced", action="store_true", help="apply the file's reduced overrides")
    ap.add_argument("--seed", type=int, help="override the seed")
    ap.add_argument("--bin-us", type=float, help="override the goodput bin (us)")
    args = ap.parse_args(argv)
    try:
        scenario = load_scenario(args.scenario, reduced=args.reduced)
        changes = {}
        if args.seed is not None:
            changes["seed"] = args.seed
        if args.bin_us is not None:
            changes["bin_us"] = args.bin_us
        scenario = scenario.with_changes(**changes)
    except (OSError, ValueError, yaml.YAMLError) as error:
        sys.exit(f"model_run: {error}")
    out = args.out or DEFAULT_OUT / scenario.name
    done = run(scenario, out, label="reduced" if args.reduced else None)
    print(done.result.summary())
    for path, count in zip(done.pcaps, done.frames):
        print(f"wrote {path}: {count} frames, {2 * scenario.topology.hosts} interfaces")
    print(f"wrote {done.plot}: goodput per receiving host, {scenario.bin_us:g} us bins, "
          f"{len(done.drawn['markers'])} fault/heal markers")
    print(f"wrote {done.summary}")
    return 0 if done.result.ok else 1


if __name__ == "__main__":
    sys.exit(main())

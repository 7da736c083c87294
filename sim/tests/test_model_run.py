# SPDX-License-Identifier: BSD-2-Clause
"""sim.model_run on the reduced link_down scenario (a T0-T1 link of plane 0 cut at 10 us), and
sim.plot.

The run writes one pcapng per plane holding every frame the host links delivered, byte for
byte and at the time the model delivered it (read back with scapy, dissected into the model
packet's outer header fields; tshark finds no malformed frame), a PNG that marks the cut where
it happened, and the model's summary; the taps change nothing in the run.
"""

import shutil
import struct
import subprocess
from pathlib import Path

import pytest
import yaml
from matplotlib.image import imread
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.utils import PcapNgReader, RawPcapNgReader

from models.fabric import Fault, load_scenario, run_scenario
from models.layouts import Dscp, ROCE_UDP_PORT, ip6_str
from sim import model_run
from sim.plot import HEAL_COLOR, Marker, fault_markers, goodput_plot
from verif.tshark import NO_TSHARK, TSHARK_ROCE

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "sim/scenarios/link_down.yaml"
CUT_US = 10.0                      # the reduced form's cut
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def done(tmp_path_factory):
    """The reduced run with every tapped frame also observed: ``(scenario, ModelRun, seen)``,
    ``seen`` holding ``(plane, interface, time_ps, frame, size, da, hop_limit, dscp, ecn)`` as
    the tap saw them (the packet changes further on)."""
    seen = []

    def observe(plane, name, time_ps, packet):
        seen.append((plane, name, time_ps, packet.frame, packet.size, packet.da,
                     packet.hop_limit, packet.dscp, packet.ecn))
    scenario = load_scenario(SCENARIO, reduced=True)
    out = tmp_path_factory.mktemp("link_down")
    return scenario, model_run.run(scenario, out, observe=observe, label="reduced"), seen


def test_files_land(done):
    scenario, run, seen = done
    assert run.result.ok and run.result.finished
    assert [p.name for p in run.pcaps] == [f"plane{p}.pcapng" for p in range(4)]
    assert all(p.stat().st_size > 0 for p in run.pcaps + [run.plot, run.summary])
    network = run.result.run.network
    for plane, count in enumerate(run.frames):
        delivered = sum(network.host_wires[h, plane].delivered +
                        network.down_wires[h, plane].delivered for h in range(4))
        assert count == delivered == sum(1 for s in seen if s[0] == plane)
        assert count > 1000


def test_taps_change_nothing(done):
    """The same scenario without taps runs the same: events, goodputs, counters."""
    scenario, run, _ = done
    plain = run_scenario(scenario.with_changes(mode="bytes"))
    assert (plain.events, plain.sim_us, plain.goodputs, plain.counters, plain.fabric) == \
        (run.result.events, run.result.sim_us, run.result.goodputs, run.result.counters,
         run.result.fabric)


def test_pcapng_holds_the_model_frames(done):
    """Each plane file: the interfaces host<h>-tx, host<h>-rx in order; its frames the ones the
    taps saw, in order, with their bytes, interface and time in ns; time never going back."""
    _, run, seen = done
    for plane, path in enumerate(run.pcaps):
        reader = RawPcapNgReader(str(path))
        got = list(reader)
        assert [i[2]["name"].decode() for i in reader.interfaces] == \
            [f"host{h}-{d}" for h in range(4) for d in ("tx", "rx")]
        mine = [s for s in seen if s[0] == plane]
        assert len(got) == len(mine)
        for (data, meta), (_, name, time_ps, frame, *_) in zip(got, mine):
            assert data == frame and meta.wirelen == len(frame)
            assert meta.ifname.decode() == name
            assert meta.tshigh << 32 | meta.tslow == time_ps // 1000
        stamps = [m.tshigh << 32 | m.tslow for _, m in got]
        assert stamps == sorted(stamps)


def test_frames_dissect_to_the_model_packets(done):
    """scapy's outer IPv6 and UDP fields of every frame of every plane are the model packet's:
    destination, Hop Limit, DSCP and ECN, length; trimmed frames among them."""
    _, run, seen = done
    trimmed = 0
    for plane, path in enumerate(run.pcaps):
        mine = [s for s in seen if s[0] == plane]
        for packet, (_, _, _, frame, size, da, hop_limit, dscp, ecn) in \
                zip(PcapNgReader(str(path)), mine):
            outer = packet[IPv6]
            assert len(packet) == size == len(frame)
            assert outer.dst == ip6_str(da)
            assert outer.hlim == hop_limit
            assert outer.tc == dscp << 2 | ecn
            assert outer.plen == size - 54
            assert packet[UDP].dport == ROCE_UDP_PORT and packet[UDP].len == size - 94
            trimmed += dscp in (Dscp.TRIMMED, Dscp.TRIMMED_LASTHOP)
    assert trimmed > 0


@pytest.mark.skipif(shutil.which("tshark") is None, reason=NO_TSHARK)
def test_tshark_finds_no_malformed_frame(done):
    """Read as RoCE (every lower UDP port decoded as InfiniBand, see test_pcapng): every frame
    dissects to InfiniBand, none malformed. With Wireshark's defaults, no frame it dissects as
    InfiniBand is malformed; any other is one whose UDP source port (the EV's bits 31:16) is a
    lower port Wireshark gives to another protocol."""
    _, run, _ = done
    for path, count in zip(run.pcaps, run.frames):
        base = ["tshark", "-n", "-r", str(path)]
        rows = subprocess.run(base + TSHARK_ROCE + ["-T", "fields", "-e", "frame.protocols",
                                                    "-e", "_ws.malformed"],
                              capture_output=True, text=True, check=True).stdout.splitlines()
        assert len(rows) == count
        assert all(r == "eth:ethertype:ipv6:ipv6:udp:infiniband\t" for r in rows)
        other = subprocess.run(base + ["-Y", "!infiniband || _ws.malformed", "-T", "fields",
                                       "-e", "udp.srcport", "-e", "frame.protocols"],
                               capture_output=True, text=True, check=True).stdout.splitlines()
        for line in other:
            sport, protocols = line.split("\t")
            assert int(sport) < ROCE_UDP_PORT and not protocols.endswith(":infiniband")


def png_text(path):
    """The tEXt chunks of a PNG as a dictionary."""
    data = Path(path).read_bytes()
    out = {}
    offset = 8
    while offset < len(data):
        length, kind = struct.unpack_from(">I4s", data, offset)
        if kind == b"tEXt":
            key, _, value = data[offset + 8:offset + 8 + length].partition(b"\0")
            out[key.decode("latin-1")] = value.decode("latin-1")
        offset += 12 + length
    return out


def red_share(image, column, top, bottom):
    """The share of rows from ``top`` to ``bottom`` with a red pixel within a pixel of
    ``column``."""
    band = image[top:bottom, max(column - 1, 0):column + 2, :3]
    red = (band[..., 0] > 0.6) & (band[..., 1] < 0.4) & (band[..., 2] < 0.4)
    return red.any(axis=1).mean()


def test_plot_marks_the_cut(done):
    """The PNG: its header, its size as drawn, one red line at the cut's column across the
    plot (and none half-way to the right edge), the cut named in its text."""
    _, run, _ = done
    data = run.plot.read_bytes()
    assert data[:8] == PNG_MAGIC and data[12:16] == b"IHDR"
    width, height = struct.unpack_from(">II", data, 16)
    assert (width, height) == run.drawn["size"]
    [(time_us, label, column)] = run.drawn["markers"]
    assert time_us == CUT_US and label.startswith("link down P0 T0 0-T1 1")
    left, top, right, bottom = (round(v) for v in run.drawn["axes"])
    assert left < column < right
    image = imread(run.plot)
    assert image.shape[:2] == (height, width)
    assert red_share(image, round(column), top + 2, bottom - 2) > 0.95
    assert red_share(image, round((column + right) / 2), top + 2, bottom - 2) < 0.05
    assert "link down P0 T0 0-T1 1 (10 us) at 10 us" in png_text(run.plot)["Description"]


def test_summary(done):
    _, run, _ = done
    text = run.summary.read_text()
    assert text.startswith(run.result.summary())
    assert "check PASS: route around within 21.4 us" in text
    assert "goodput per receiving host per 5 us bin" in text


def test_cli(tmp_path, capsys):
    """The command line on a small scenario: files written, where they landed printed, exit
    status 0; a missing file is refused with a message."""
    data = yaml.safe_load(SCENARIO.read_text())
    data["reduced"]["traffic"] = {"messages": 1, "message_bytes": 32768}
    data["reduced"]["faults"][0].update(at_us=2, until_us=4)
    data["checks"] = {"complete": True}       # a run too short for the scenario's fault claims
    scenario = tmp_path / "small.yaml"
    scenario.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    assert model_run.main([str(scenario), "--reduced", "--out", str(out), "--seed", "3",
                           "--bin-us", "1"]) == 0
    printed = capsys.readouterr().out
    assert "scenario link_down (bytes mode, seed 3)" in printed
    for name in ("plane0.pcapng", "plane3.pcapng", "goodput.png", "summary.txt"):
        assert f"wrote {out / name}" in printed and (out / name).stat().st_size > 0
    assert "1 us bins, 2 fault/heal markers" in printed
    with pytest.raises(SystemExit, match="model_run: .*missing.yaml"):
        model_run.main([str(tmp_path / "missing.yaml")])


def test_fault_markers():
    markers = fault_markers([
        Fault("link", at_us=5, until_us=9, plane=1, t0=0, t1=1),
        Fault("flap", at_us=10, plane=2, t0=1, t1=0, down_us=3, up_us=4, count=2),
        Fault("port", at_us=20, plane=3, host=2),
        Fault("path", at_us=30, until_us=40, plane=0, t1=1, loss=0.5)])
    assert [(m.time_us, m.heal) for m in markers] == [
        (5, False), (9, True), (10, False), (13, True), (17, False), (20, True), (20, False),
        (30, False), (40, True)]
    assert markers[0].label == "link down P1 T0 0-T1 1 (5 us)"
    assert markers[1].label == "link up P1 T0 0-T1 1 (9 us)"
    assert markers[6].label == "port down host 2 P3 (20 us)"
    assert markers[7].label == "impaired P0 T1 1 (30 us)"


def test_goodput_plot_heal_and_bad_series(tmp_path):
    """A heal is drawn green where it happened; a series with the wrong number of edges is
    refused."""
    path = tmp_path / "g.png"
    drawn = goodput_plot({"flow 0": ([0, 2, 4, 6], [10.0, 20.0, 30.0])},
                         [Marker(2.0, "down"), Marker(4.0, "up", heal=True)], path, "t")
    (_, _, down), (_, _, up) = drawn["markers"]
    _, top, _, bottom = (round(v) for v in drawn["axes"])
    band = imread(path)[top + 2:bottom - 2, round(up) - 1:round(up) + 2, :3]
    green = [int(HEAL_COLOR[k:k + 2], 16) / 255 for k in (1, 3, 5)]
    assert (abs(band - green).max(axis=2) < 0.1).any(axis=1).mean() > 0.5      # dashed
    assert red_share(imread(path), round(down), top + 2, bottom - 2) > 0.95
    with pytest.raises(ValueError, match="one more edge than values"):
        goodput_plot({"x": ([0, 1], [1.0, 2.0])}, [], path, "t")

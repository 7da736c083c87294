# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""The driver API and the generated register maps (rtl/regmap.py) read the same source.

Every word the driver's operations touch, on a NIC, a switch and a link of the parameters the
maps are generated with, is a word of that map (writes only to read/write words, counters and
words the block acts on when written); the driver's block bases and packed fields are the
map's; every counter of the map has a driver name.
"""

import pytest

from models.fabric_nic import draw_ev_sets
from rtl import regmap
from verif.driver import READ, WRITE, Link, Nic, Recorder, Switch
from verif.driver.nic import NIC_COUNTERS
from verif.driver.switch import LINK_COUNTERS, SWITCH_COUNTERS


@pytest.fixture(scope="module")
def maps():
    return {top: regmap.build(top) for top in regmap.TOPS}


def check_log(log, words, top):
    assert log
    for kind, addr, _ in log:
        assert addr in words, f"{top}: the driver touches word {addr:#x}, not in the map"
        reg = words[addr][2]
        if kind == WRITE:
            assert reg.access in ("rw", "counter") or reg.write_action, \
                f"{top}: the driver writes {words[addr][:2]}, a {reg.access} word"


def test_nic_driver_touches_only_map_words(maps):
    import random
    m = maps["nic_engine"]
    words = m.words()
    rec = Recorder()
    nic = Nic(rec, m.params)
    rng = random.Random(3)
    nic.set_own(5, t0=1, block=0xFD000200)
    for plane in range(nic.n_planes):
        nic.set_port_macs(plane, 0x0200_0000_0001, 0x0200_0000_0002)
    nic.set_inner_address(0xFD00_FFFF << 96 | 5)
    nic.set_spray(4, 2)
    nic.set_planes_up(3)
    for q in range(nic.n_qps):
        nic.reset_tx_qp(q, 100 * q)
        nic.set_peer(q, q, 6, 1, 9)
        nic.write_ev_set(q, *draw_ev_sets(rng, nic.n_planes, 2, nic.p["slots"],
                                          nic.p["backups"], False))
        nic.register_region(q, 7, 0x1000 * q, 0x1000)
        nic.setup_rx_qp(q, 5)
        nic.setup_reliability(q, 9)
        nic.qp_status(q)
        for plane in range(nic.n_planes):
            nic.ev_table(q, plane)
    nic.enable_tx_qps(0xF)
    nic.enable_rx_qps(0xF)
    nic.counters()
    nic.status()
    nic.probes()
    for block in ("engine", "reliability", "rx_tracker", "tx_path", "segmenter",
                  "header_inserter", "plane_splitter", "rx_front", "placement", "rx_engine"):
        nic.info(block)
    check_log(rec.log, words, "nic_engine")
    # every counter of the map has a driver name, and the driver's are all counters
    counters = {a for a, (_, _, r) in words.items() if r.access == "counter"}
    named = {nic.counter_addr(n, p) for n in NIC_COUNTERS.names()
             for p in ([None] if n.split(".")[0] not in NIC_COUNTERS.indexed or
                       n.split(".")[1] not in NIC_COUNTERS.indexed[n.split(".")[0]][0]
                       else range(nic.n_planes))}
    assert named == counters


def test_nic_blocks_and_fields_are_the_maps(maps):
    m = maps["nic_engine"]
    nic = Nic(Recorder(), m.params)
    for block in m.blocks:
        assert nic.addr(block.name, 0) == block.base
    from verif.driver import nic as nic_module
    assert nic_module._REL_SETUP_FIELDS == regmap.FIELDS[("reliability", "qp.cack")]
    info = m.block("engine").items[0]
    assert [f.name for f in info.fields] == [f for f, _, _ in nic_module._ENGINE_INFO_FIELDS]


def test_switch_and_link_drivers_touch_only_map_words(maps):
    m = maps["switch"]
    words = m.words()
    rec = Recorder()
    sw = Switch(rec, ports=m.params["ports"])
    sw.set_own_usid(0x1401)
    sw.set_own_block(0xFD000200)
    sw.write_routes({0xFD00_0200_1401 + k: k % 4 for k in range(8)})
    for port in range(4):
        sw.set_port(port, up=True, fabric=port > 1)
        sw.set_ecn(port, 1000, 2000)
        sw.seed_lfsr(port, 7)
        sw.port_state(port)
    sw.route(3)
    sw.info()
    sw.counters()
    check_log(rec.log, words, "switch")
    counters = {a for a, (_, _, r) in words.items() if r.access == "counter"}
    assert {a for kind, a, _ in rec.log if kind == READ} >= counters
    lm = maps["link"]
    rec = Recorder()
    link = Link(rec)
    link.set("delay", 3)
    link.cut()
    link.heal()
    link.counters()
    check_log(rec.log, lm.words(), "link")
    assert {a for kind, a, _ in rec.log if kind == READ} >= \
        {a for a, (_, _, r) in lm.words().items() if r.access == "counter"}
    assert SWITCH_COUNTERS and LINK_COUNTERS

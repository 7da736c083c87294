# amaranth: UnusedElaboratable=no
# SPDX-License-Identifier: BSD-2-Clause
"""rtl/regmap.py: the register maps read from the RTL, and the files generated from them.

- ``make regs`` is current: regenerating docs/regs/ (SystemRDL, C header, IP-XACT, Markdown)
  and section 6 of docs/registers.md gives the committed files byte for byte.
- Every ConfigMap row of every block of a top is a word of its map, at the top's address of it,
  with its access; the hand-decoded windows (REGIONS) sit where the blocks' constants say.
- The C header compiles (gcc) and its struct puts every word of the map at its byte address.
- The IP-XACT file imports back (PeakRDL-ipxact) into as many registers at the same addresses.
- The map follows the RTL: other parameters give other array sizes.
"""

import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest
from amaranth.hdl import Fragment

from rtl import regmap
from rtl.common.config import collect_maps
from rtl.regmap import OUT, build


@pytest.fixture(scope="module")
def maps():
    return {top: build(top) for top in regmap.TOPS}


def test_generated_files_are_current():
    assert regmap.check() == [], "run `make regs`"


def test_every_row_is_a_word(maps):
    """The map holds every ConfigMap row the elaborated top declares, nothing else but the
    REGIONS, each at a distinct address."""
    from rtl.gen import TOPS as GEN
    with collect_maps() as cmaps:
        Fragment.get(GEN["nic_engine"](), None)
    rows = sum(len(c.rows) for c in cmaps)
    words = maps["nic_engine"].words()
    from_rows = [w for w in words.values() if w[2].rows]
    assert len({id(w[2]) for w in from_rows}) <= rows
    assert sum(1 for _ in from_rows) == rows
    regions = len(words) - rows
    # the scheduler's EV table pages (4 QPs x 2 planes: 16 slot EVs and states, 1 word of
    # states, pointer, LFSR, plane pointer, 8 pool EVs and valids) and path building's contexts
    assert regions == 4 * 2 * (2 * 16 + 1 + 3 + 2 * 8) + 4 * 3


def test_addresses_are_the_rtl_constants(maps):
    from rtl import reliability, rx_engine, rx_tracker, spray_scheduler, switch, tx_path, un_stage
    from rtl.nic_engine import ENGINE_COUNTERS, nic_addr
    from rtl.tx_engine import engine_addr
    nic = {name: (addr, reg) for addr, (_, name, reg) in
           ((a, (b, f"{b}.{n}", r)) for a, (b, n, r) in maps["nic_engine"].words().items())}
    assert nic["engine.wr"][0] == nic_addr("engine", ENGINE_COUNTERS["wr"])
    assert nic["engine.wr"][1].access == "counter"
    assert nic["reliability.qp[2].cack"][0] == nic_addr("reliability",
                                                        reliability.qp_addr(2, reliability.OFF_SETUP))
    assert nic["reliability.qp[2].cack"][1].write_action
    assert nic["rx_tracker.qp[3].cack"][0] == nic_addr(
        "rx", rx_engine.TRACKER_BASE + rx_tracker.qp_addr(3, rx_tracker.OFF_CACK))
    assert nic["spray.table[3].plane[1].lfsr"][0] == nic_addr("tx", engine_addr(
        "spray", spray_scheduler.table_addr(3, 1, spray_scheduler.OFF_LFSR)))
    assert nic["tx_path.qp[1].peer_path"][0] == nic_addr("tx", engine_addr(
        "tx_path", tx_path.qp_addr(1, tx_path.OFF_PEER_PATH)))
    assert nic["tx_path.own_host"][1].access == "rw"
    sw = {f"{b}.{n}": (a, r) for a, (b, n, r) in maps["switch"].words().items()}
    assert sw["ports.port[2].trimmed"][0] == switch.egress_counter(2, "trimmed")
    assert sw["ports.port[1].ctrl"][0] == switch.port_reg(1, switch.REG_CTRL)
    assert [f.name for f in sw["ports.port[1].ctrl"][1].fields] == ["up", "fabric_facing"]
    assert sw["un_stage.route[5].key_w1"][0] == un_stage.TABLE_BASE + 5 * un_stage.TABLE_STRIDE \
        + un_stage.ENTRY_KEY_HI
    assert sw["un_stage.own_block"][1].reset == un_stage.DEFAULT_BLOCK


def _c_path(block, name):
    parts = []
    for part in f"{block}.{name}".split("."):
        m = re.fullmatch(r"(\w+)((?:\[\d+\])*)", part)
        parts.append(regmap._ident(m.group(1)) + m.group(2))
    return ".".join(parts)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
def test_c_header_compiles_with_every_offset(maps, tmp_path):
    for top, regmap_ in maps.items():
        lines = [f'#include "{OUT / f"mrc_{top}.h"}"', "#include <stddef.h>"]
        for addr, (block, name, _) in sorted(regmap_.words().items()):
            lines.append(f"_Static_assert(offsetof(mrc_{top}_t, {_c_path(block, name)}) == "
                         f"{4 * addr}u, \"{block}.{name}\");")
        src = tmp_path / f"{top}.c"
        src.write_text("\n".join(lines) + "\n")
        subprocess.run(["gcc", "-std=c11", "-fsyntax-only", "-Wall", "-Werror", str(src)],
                       check=True, capture_output=True, text=True)


def test_ipxact_reads_back(maps):
    from peakrdl_ipxact import IPXACTImporter
    from systemrdl import RDLCompiler
    for top, regmap_ in maps.items():
        path = OUT / f"mrc_{top}.xml"
        ET.parse(path)                           # well-formed XML
        rdlc = RDLCompiler()
        IPXACTImporter(rdlc).import_file(str(path))
        root = rdlc.elaborate()
        addresses = set()

        def walk(node):
            from systemrdl.node import RegNode
            for child in node.children(unroll=True):
                if isinstance(child, RegNode):
                    addresses.add(child.absolute_address)
                else:
                    walk(child)
        walk(root.top)
        assert addresses == {4 * a for a in regmap_.words()}, top


def test_the_map_follows_the_rtl():
    """Other parameters, other arrays: 2 QPs and 1 plane, a 3-port switch."""
    nic = build("nic_engine", n_qps=2, n_planes=1, data_width=64)
    names = {f"{b}.{n}" for b, n, _ in nic.words().values()}
    assert "rx_tracker.qp[1].cack" in names and "rx_tracker.qp[2].cack" not in names
    assert "spray.table[1].plane[0].lfsr" in names and "spray.table[0].plane[1].lfsr" not in names
    sw = build("switch", ports=3, data_width=64)
    assert "ports.port[2].forwarded" in {f"{b}.{n}" for b, n, _ in sw.words().values()}
    assert "} port[3] @ 0x0 += 0x100;" in regmap.systemrdl(sw)

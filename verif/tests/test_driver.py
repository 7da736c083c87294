# SPDX-License-Identifier: BSD-2-Clause
"""The driver API (``verif/driver``) without a simulator: against a register file in a dict
through the synchronous callable access.

- ``configure`` issues exactly the steps (every write and status read, in order, with the status
  answers a busy scheduler gives) that ``configure_nic`` of ``verif/nic_setup.py`` issued before
  the driver existed: the reference ``data/configure_reference.json`` was captured from that code
  (commit 4303899) on the inputs of :func:`scenario_inputs`;
- counters are read by name, at the addresses of the blocks' map constants;
- bad names, QPs, planes, slots, ports and values raise :class:`verif.driver.DriverError` with a
  readable message;
- the same driver object runs on an asynchronous access (asyncio here, cocotb in the benches);
- every counter, info and status word the driver names is one the elaborated RTL declares
  (``rtl/common/config.py: ConfigMap`` rows), at that address and with that access.
"""

import asyncio
import json
import random
from pathlib import Path

import pytest

from models.fabric_nic import region_base, region_rkey
from models.fabric_topology import Topology
from models.records import COMPLETION, EV_EVENT, WORK_REQUEST, CompletionStatus, EvEvent
from models.reliability import QpConfig
from models.spray import SlotState
from rtl import reliability as rel_map
from rtl import spray_scheduler as spray_map
from rtl.nic_engine import nic_addr
from rtl.tx_engine import engine_addr
from verif.driver import (READ, WRITE, AsyncAccess, DriverError, Link, Nic, Recorder, Switch,
                          SyncAccess, as_access, completion, ev_event, work_request)

REFERENCE = Path(__file__).parent / "data" / "configure_reference.json"
REFERENCE_EV_SETS = Path(__file__).parent / "data" / "configure_reference_ev_sets.json"
STATUS = nic_addr("tx", engine_addr("spray", spray_map.ADDR_STATUS))
# What the scheduler's status word answers, read after read: table writes wait (bit 0), the
# engine and the pipeline run (bits 1, 2), so both of configure's polling loops go round.
STATUS_ANSWERS = (spray_map.STATUS_CMD_PENDING, 0, spray_map.STATUS_ENGINE_BUSY, 0, 0,
                  spray_map.STATUS_PIPE_BUSY | spray_map.STATUS_CMD_PENDING, 0)

BENCH_NIC = dict(n_qps=4, n_planes=2, data_width=64, pmtu=1024, clk_hz=16_000_000, wrs_per_qp=4,
                 slots=4, backups=2, ev_min_active=2, max_outstanding=8, n_regions=4,
                 buffer_bytes=8192, header_slots=8, mpr=128, wimm_max=16, ring=32,
                 probe_entries=4, wr_depth=4, timer_bits=10)      # tb/test_nic_engine.py CONFIG
FABRIC_NIC = dict(BENCH_NIC, n_qps=2, n_regions=2)                # sim/rtl_fabric.py defaults
SCENARIOS = ("bench_host0", "bench_host1", "fabric_one_plane", "four_hosts_partial")


class StatusFake:
    """A register file: writes stored, reads of it answered from it, except the scheduler's
    status word (:data:`STATUS_ANSWERS` in turn); every step logged as ``[kind, addr, value]``."""

    def __init__(self):
        self.regs, self.log, self.status_reads = {}, [], 0

    def read(self, addr):
        if addr == STATUS:
            value = STATUS_ANSWERS[self.status_reads % len(STATUS_ANSWERS)]
            self.status_reads += 1
        else:
            value = self.regs.get(addr, 0)
        self.log.append([READ, addr, value])
        return value

    def write(self, addr, value):
        self.log.append([WRITE, addr, value])
        self.regs[addr] = value


def scenario_inputs(name):
    """The inputs of one reference scenario: NIC parameters, topology, host, peers, PSNs, EV
    sets and the QP configuration (deterministic)."""
    rng = random.Random(name)
    if name.startswith("bench"):
        params, topo = BENCH_NIC, Topology(hosts=2, planes=2, t0s=2, t1s=2, link_delay_ns=20.0)
        host = int(name[-1])
        peers = {q: 1 - host for q in range(4)}
        qp_config = QpConfig(w_max=32, mpr=128, timeout_exp=7, retry_limit=3, probe_period=16)
    elif name == "fabric_one_plane":
        params = dict(FABRIC_NIC, n_planes=1)
        topo = Topology(hosts=2, planes=1, t0s=2, t1s=2, link_delay_ns=20.0)
        host = 0
        peers = {q: (2 * q + 1 - host) % 2 for q in range(2)}       # sim/rtl_controller peer_of
        qp_config = QpConfig(w_max=32, mpr=128, timeout_exp=8, retry_limit=3, probe_period=16)
    else:
        params = dict(BENCH_NIC, n_qps=4)
        topo = Topology(hosts=4, planes=2, t0s=2, t1s=2)
        host = 2
        peers = {1: 3, 3: 0}                  # not every QP, a peer under the same T0 and not
        qp_config = QpConfig()
    start_psns = {q: rng.choice((0, (1 << 24) - 3, rng.getrandbits(24))) for q in peers}
    peer_starts = {q: rng.getrandbits(24) for q in peers}
    # The EV sets the reference was captured with (models.fabric_nic.draw_ev_sets as it drew
    # them at that commit; the drawing has changed since, the set-up steps must not).
    drawn = json.loads(REFERENCE_EV_SETS.read_text())[name]
    ev_sets = {q: drawn[str(q)] for q in peers}
    return dict(params=params, topo=topo, host=host, peers=peers, start_psns=start_psns,
                peer_starts=peer_starts, ev_sets=ev_sets, qp_config=qp_config)


def configure_steps(name):
    """The steps ``Nic.configure`` issues on scenario ``name``, and the QPs ``on_setup`` saw."""
    args = scenario_inputs(name)
    fake, setups = StatusFake(), []
    nic = Nic(SyncAccess(fake.read, fake.write), args.pop("params"))
    result = nic.configure(on_setup=setups.append, **args)
    assert result is None
    return fake.log, setups


@pytest.fixture(scope="module")
def reference():
    return json.loads(REFERENCE.read_text())


# --- configure == today's configure_nic -----------------------------------------------------------

@pytest.mark.parametrize("name", SCENARIOS)
def test_configure_issues_the_reference_steps(reference, name):
    log, setups = configure_steps(name)
    want = reference[name]
    assert len(log) == len(want["log"])
    for i, (got, expected) in enumerate(zip(log, want["log"])):
        assert got == expected, f"{name}: step {i}: {got} instead of {expected}"
    assert setups == want["setups"]


def test_reference_polls_the_status():
    """The reference exercises both polling loops (a table write waiting, the idle wait)."""
    log, _ = configure_steps("bench_host0")
    reads = [addr for kind, addr, _ in log if kind == READ]
    assert reads and set(reads) == {STATUS}
    assert len(reads) > sum(1 for kind, *_ in log if kind == WRITE) // 3


def test_nic_setup_wrapper_is_the_driver(reference):
    """``verif.nic_setup.configure_nic`` (kept for old callers) is the driver's configure."""
    from verif.nic_setup import configure_nic

    args = scenario_inputs("bench_host1")
    fake, setups = StatusFake(), []

    class Port:
        async def read(self, addr):
            return fake.read(addr)

        async def write(self, addr, value):
            fake.write(addr, value)

    asyncio.run(configure_nic(Port(), args["params"], args["topo"], args["host"], args["peers"],
                              args["start_psns"], args["peer_starts"], args["ev_sets"],
                              args["qp_config"], setups.append))
    assert fake.log == reference["bench_host1"]["log"]
    assert setups == reference["bench_host1"]["setups"]


def test_configure_on_an_async_access_is_the_same(reference):
    """The same driver class on an ``async read`` / ``async write`` object: an awaitable with
    the same steps."""
    args = scenario_inputs("four_hosts_partial")
    fake = StatusFake()

    class Port:
        async def read(self, addr):
            await asyncio.sleep(0)
            return fake.read(addr)

        async def write(self, addr, value):
            await asyncio.sleep(0)
            fake.write(addr, value)

    nic = Nic(Port(), args.pop("params"))
    assert isinstance(nic.access, AsyncAccess)
    pending = nic.configure(**args)
    assert fake.log == []                      # nothing runs before it is awaited
    asyncio.run(pending)
    assert fake.log == reference["four_hosts_partial"]["log"]


def test_configure_writes_the_regions():
    """What configure leaves in the register file: each QP's region and reliability set-up."""
    args = scenario_inputs("bench_host0")
    regs = {}
    nic = Nic((lambda a: regs.get(a, 0), regs.__setitem__), args.pop("params"))
    nic.configure(**args)
    for q in range(4):
        rkey = nic.addr("rx_front", 0x100 + 8 * q)
        assert regs[rkey] == region_rkey(q)
        assert regs[rkey + 1] | regs[rkey + 2] << 32 == region_base(q)
        assert regs[nic.addr("reliability", rel_map.qp_addr(q, rel_map.OFF_SETUP))] == \
            args["start_psns"][q] | rel_map.SETUP_ENABLE


# --- counters, info, status by name ---------------------------------------------------------------

def counting_nic(params=BENCH_NIC):
    """A NIC over a register file whose every word reads as its own address plus 7."""
    rec = Recorder(read=lambda addr: addr + 7)
    return Nic(rec, params), rec


def test_counters_by_name():
    nic, rec = counting_nic()
    want = nic_addr("reliability", rel_map.ADDR_COUNTERS["send_retx"])
    assert nic.counter("reliability.send_retx") == want + 7
    assert nic.counter("send_retx") == want + 7          # only one block has it
    assert nic.counter("engine.cpl_send") == nic_addr("engine", 0x5) + 7
    assert nic.counter("spray.ev_bad") == spray_map.ADDR_COUNTERS["ev_bad"] + 7
    assert nic.counter_addr("plane_splitter.frames_out", plane=1) == \
        engine_addr("plane_splitter", 0x20 + 4 + 0)
    assert nic.counter_addr("rx_front.frames", plane=1) == nic_addr("rx", 0x200 + 8)
    assert nic.counter_addr("segmenter.packets") == engine_addr("segmenter", 0x09)
    assert nic.counter_addr("placement.placed") == nic_addr("rx", 0x2000 + 0x01)
    assert nic.counter_addr("rx_tracker.placed") == nic_addr("rx", 0x1000 + 0x10)
    assert [kind for kind, *_ in rec.log] == [READ] * 4


def test_every_counter_once():
    nic, rec = counting_nic()
    values = nic.counters()
    per_plane = [k for k in values if k.endswith("]")]
    assert len(per_plane) == 2 * (3 + 4)                  # splitter 3 and front 4, per plane
    assert len(set(addr for _, addr, _ in rec.log)) == len(values)
    assert values["reliability.send"] == nic.counter_addr("reliability.send") + 7
    assert set(nic.counters(["engine"])) == {"engine.wr", "engine.cpl_send", "engine.cpl_recv",
                                             "engine.ev_host"}
    nic.clear_counter("reliability.timeout")
    assert rec.log[-1] == (WRITE, nic.counter_addr("reliability.timeout"), 0)


def test_info_and_status_decoded():
    regs = {nic_addr("engine", 0x0): 2 | (64 // 8) << 8 | 4 << 16,
            nic_addr("reliability", rel_map.ADDR_INFO): 4 | 5 << 8 | 4 << 12 | 2 << 20 | 10 << 24,
            nic_addr("rx", 0x1000): 4 | 1 << 8 | 16 << 16,
            nic_addr("engine", 0x1): 0b0101,
            STATUS: spray_map.STATUS_PIPE_BUSY}
    nic = Nic(SyncAccess(lambda a: regs.get(a, 0), regs.__setitem__), BENCH_NIC)
    assert nic.info() == dict(n_planes=2, data_width=64, n_qps=4)
    assert nic.info("reliability") == dict(n_qps=4, ring=32, probe_entries=4, wr_depth=4,
                                           timer_bits=10)
    assert nic.info("rx_tracker") == dict(n_qps=4, mpr=128, wimm_max=16)
    assert set(nic.info("segmenter")) == {"data_width", "n_qps", "wrs_per_qp", "pmtu"}
    status = nic.status()
    assert status["engine"] == dict(fork=1, ev_merge=0, ctrl_merge=1, cpl_merge=0)
    assert status["spray"] == dict(cmd_pending=0, engine_busy=0, pipe_busy=1)
    assert nic.busy()
    regs.clear()
    assert not nic.busy()


def test_qp_status_and_error():
    regs = {nic_addr("reliability", rel_map.qp_addr(3, rel_map.OFF_SETUP)): 1 << 30 | 1 << 31 | 77}
    nic = Nic((lambda a: regs.get(a, 0), regs.__setitem__), BENCH_NIC)
    assert nic.qp_in_error(3) and not nic.qp_in_error(2)
    status = nic.qp_status(3)
    assert status["reliability"]["cack_psn"] == 77 and status["reliability"]["enable"] == 1
    assert set(status["tx"]) == {"next_psn", "psn_limit", "oldest_psn", "held", "unsent",
                                 "retx_waiting"}


def test_ev_table_and_plane_state():
    rec = Recorder()
    nic = Nic(rec, BENCH_NIC)
    nic.write_slot_ev(1, 1, 3, 0xABCD)
    nic.write_slot_state(1, 1, 3, "skip")
    nic.write_pool_ev(1, 1, 1, 0x1234)
    table = nic.ev_table(1, 1)
    assert table["slots"][3] == 0xABCD and table["states"][3] == SlotState.SKIP
    assert table["pool"] == [None, None]           # valid bits read 0 in a plain dict
    nic.set_planes_up(0b11)
    nic.set_plane(0, False)
    assert nic.plane_state()["spray_mask"] == 0b10
    assert nic.plane_state()["splitter_mask"] == 0b10


def test_create_and_reset_qp():
    rec = Recorder()
    nic = Nic(rec, BENCH_NIC)
    evs = [[1, 2, 3, 4], [5, 6, 7, 8]]
    nic.create_qp(2, peer_host=1, peer_t0=1, peer_port=0, start_psn=5, peer_start_psn=9,
                  ev_set=(evs, [3, 4], [[9, 10], [11, 12]]), qp_config=QpConfig(),
                  region=(0x77, 1 << 40, 4096))
    assert nic.qp_enables() == dict(tx_path=0b100, spray=0b100, rx_front=0b100)
    nic.create_qp(0, 1, 1, 0, 0, 0, (evs, [3, 4], [[], []]), QpConfig())
    assert nic.qp_enables() == dict(tx_path=0b101, spray=0b101, rx_front=0b101)
    nic.reset_qp(2)
    assert nic.qp_enables() == dict(tx_path=0b001, spray=0b001, rx_front=0b001)
    assert rec.regs[nic.addr("reliability", rel_map.qp_addr(2, rel_map.OFF_SETUP))] == 0


# --- records on the streams ---------------------------------------------------------------------

def test_records():
    word = work_request(3, 0x1000, 1 << 40, 0x55, 100, imm=0xDEAD, req_id=9)
    rec = WORK_REQUEST.unpack(word)
    assert rec["has_imm"] == 1 and rec["imm"] == 0xDEAD and rec["req_id"] == 9
    assert WORK_REQUEST.unpack(work_request(0, 0, 0, 0, 1))["has_imm"] == 0
    cpl = completion(COMPLETION.pack(qpn=1, status=CompletionStatus.RETRY_EXCEEDED))
    assert cpl["status_name"] == "RETRY_EXCEEDED"
    assert EV_EVENT.unpack(ev_event(1, 0x42, "deny"))["kind"] == EvEvent.DENY
    with pytest.raises(DriverError, match="QP 4 is out of range 0..3"):
        Nic(Recorder(), BENCH_NIC).work_request(4, 0, 0, 0, 0)


# --- errors ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("call,message", [
    (lambda n: n.counter("reliability.sendd"), r"block reliability has no counter 'sendd'; "
                                               r"did you mean send"),
    (lambda n: n.counter("nosuch"), r"no NIC counter 'nosuch'"),
    (lambda n: n.counter("probe"), r"'probe' is ambiguous: rx_front.probe, rx_tracker.probe, "
                                   r"reliability.probe"),
    (lambda n: n.counter("tx.packets"), r"no block 'tx' with counters"),
    (lambda n: n.counter("plane_splitter.frames_out"), r"one per plane: give plane=0..1"),
    (lambda n: n.counter("plane_splitter.frames_out", plane=2),
     r"plane 2 is out of range 0..1 \(n_planes = 2\)"),
    (lambda n: n.counter("reliability.send", plane=0), r"not per plane"),
    (lambda n: n.reset_tx_qp(4, 0), r"QP 4 is out of range 0..3 \(n_qps = 4\)"),
    (lambda n: n.reset_tx_qp(-1, 0), r"QP -1 is out of range"),
    (lambda n: n.reset_tx_qp(0, 1 << 24), r"start PSN 0x1000000 is out of range"),
    (lambda n: n.write_slot_ev(0, 0, 4, 1), r"slot 4 is out of range 0..3 \(slots = 4\)"),
    (lambda n: n.write_pool_ev(0, 3, 0, 1), r"plane 3 is out of range 0..1"),
    (lambda n: n.write_slot_state(0, 0, 0, "great"), r"no slot state 'GREAT'"),
    (lambda n: n.seed_lfsr(0, 0, 0), r"LFSR seed 0 is out of range 1..65535"),
    (lambda n: n.register_region(4, 1, 0, 0), r"region 4 is out of range 0..3"),
    (lambda n: n.set_planes_up(0b100), r"plane mask 4 is out of range 0..3"),
    (lambda n: n.set_reliability(0, QpConfig(timeout_exp=15, probe_period=1 << 12)),
     r"QP 0 probe_period 4096 is out of range 0..1023"),
    (lambda n: n.info("tx"), r"no block with info words 'tx'"),
    (lambda n: n.read("receive", 0), r"no block 'receive'"),
    (lambda n: n.read("rx_tracker", 1 << 12), r"does not fit block rx_tracker"),
    (lambda n: n.set_own("a"), r"own host id must be an integer"),
    (lambda n: n.set_own(True), r"own host id must be an integer"),
])
def test_readable_errors(call, message):
    nic = Nic(Recorder(), BENCH_NIC)
    with pytest.raises(DriverError, match=message):
        call(nic)


def test_configure_input_errors():
    args = scenario_inputs("bench_host0")
    nic = Nic(Recorder(), args.pop("params"))
    del args["ev_sets"][2]
    with pytest.raises(DriverError, match=r"ev_sets has no entry for QPs \[2\]"):
        nic.configure(**args)
    args = scenario_inputs("bench_host0")
    with pytest.raises(DriverError, match="QP 4 is out of range"):
        Nic(Recorder(), args.pop("params")).configure(**dict(args, peers={4: 1}))


def test_constructor_errors():
    with pytest.raises(DriverError, match=r"unknown NicEngine parameters \['n_qp'\]"):
        Nic(Recorder(), dict(n_qp=4))
    with pytest.raises(DriverError, match="has no read"):
        Nic(object())
    with pytest.raises(DriverError, match="mixes"):

        class Mixed:
            async def read(self, addr):
                return 0

            def write(self, addr, value):
                pass

        as_access(Mixed())


# --- switch and link ----------------------------------------------------------------------------

def test_switch_routes_ports_counters():
    from rtl import switch as switch_map
    from rtl import un_stage as un_map

    rec = Recorder()
    sw = Switch(rec, ports=3, table_depth=8)
    sw.set_own_usid(0x1234)
    assert sw.write_routes({0xFD00_0200_0002: 2, 0xFD00_0200_0001: 1}) == 2
    assert rec.writes()[1:5] == [(un_map.TABLE_BASE + un_map.ENTRY_KEY_LO, 0x0200_0001),
                                 (un_map.TABLE_BASE + un_map.ENTRY_KEY_HI, 0xFD00),
                                 (un_map.TABLE_BASE + un_map.ENTRY_PORT, 1),
                                 (un_map.TABLE_BASE + un_map.ENTRY_VALID, 1)]
    assert sw.route(1) == dict(key=0xFD00_0200_0002, port=2, valid=1)
    rec.regs[switch_map.port_reg(1, switch_map.REG_CTRL)] = 0b11
    sw.port_down(1)
    assert rec.regs[switch_map.port_reg(1, switch_map.REG_CTRL)] == 0b10
    sw.set_ecn(0, 2048, 6144)
    assert sw.port_state(0)["kmax"] == 6144
    rec.regs[switch_map.egress_counter(2, "trimmed")] = 17
    assert sw.counter("egress.trimmed", port=2) == 17
    assert sw.counter("trimmed", port=2) == 17
    assert sw.counter_addr("un.no_route") == un_map.ADDR_COUNTERS["no_route"]
    assert len(sw.counters()) == 5 + 3 * (5 + 4)
    for call, message in [
            (lambda: sw.counter("forwarded", port=0), r"ambiguous: un.forwarded, "
                                                      r"egress.forwarded"),
            (lambda: sw.counter("egress.trimmed"), r"one per port: give port=0..2"),
            (lambda: sw.counter("egress.trimmed", port=3), r"port 3 is out of range 0..2 "
                                                           r"\(ports = 3\)"),
            (lambda: sw.write_route(8, 1, 0), r"route entry 8 is out of range 0..7"),
            (lambda: sw.write_route(0, 1 << 48, 0), r"route key"),
            (lambda: sw.write_route(0, 1, 3), r"port 3 is out of range"),
            (lambda: sw.write_routes([(i, 0) for i in range(9)]), r"9 routes for a table of 8"),
            (lambda: sw.set_ecn(0, 0, 1 << 20), r"Kmax 0x100000 is out of range"),
            (lambda: sw.set_port(0), r"needs up= or fabric=")]:
        with pytest.raises(DriverError, match=message):
            call()


def test_link():
    from rtl.link import ADDR, ADDR_COUNTERS

    rec = Recorder(read=lambda a: a)
    link = Link(rec.window(0x100))
    link.set("delay", 5)
    link.cut()
    assert rec.writes() == [(0x100 + ADDR["delay"], 5), (0x100 + ADDR["up"], 0)]
    assert link.counter("frames_lost") == 0x100 + ADDR_COUNTERS["frames_lost"]
    with pytest.raises(DriverError, match="no link register 'dealy'; did you mean delay"):
        link.set("dealy", 1)
    with pytest.raises(DriverError, match=r"loss 65536 is out of range 0..65535"):
        link.set("loss", 1 << 16)


def test_window_moves_addresses():
    rec = Recorder()
    nic = Nic(rec.window(5 << 25), BENCH_NIC)
    nic.set_own(3, 1)
    assert rec.writes() == [(5 << 25 | nic_addr("tx", engine_addr("tx_path", 0)), 3),
                            (5 << 25 | nic_addr("tx", engine_addr("tx_path", 1)), 1)]


# --- the names are the RTL's ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def rtl_maps():
    """Every ConfigMap of an elaborated NIC engine and switch: ``{owner: {addr: (name, access)}}``
    with owner the block's module (or the ConfigMap's name for the engines' own words)."""
    from amaranth.hdl import Fragment

    from rtl.common import config
    from rtl.nic_engine import NicEngine
    from rtl.switch import Switch as SwitchRtl

    maps = []
    original = config.ConfigMap.__init__

    def record(self, *args, **kwargs):
        original(self, *args, **kwargs)
        maps.append(self)

    config.ConfigMap.__init__ = record
    try:
        Fragment.get(NicEngine(**BENCH_NIC), None)
        Fragment.get(SwitchRtl(ports=3, data_width=64), None)
    finally:
        config.ConfigMap.__init__ = original
    out = {}
    for cmap in maps:
        module = type(cmap.port).__module__
        owner = cmap.name if module == "types" else module
        out[owner] = {addr: (name, access) for addr, name, access, _ in cmap.doc_rows()}
    return out


NIC_OWNERS = {"spray": "rtl.spray_scheduler", "segmenter": "rtl.segmenter",
              "tx_path": "rtl.tx_path", "header_inserter": "rtl.header_inserter",
              "plane_splitter": "rtl.plane_splitter", "rx_front": "rtl.rx_front",
              "rx_tracker": "rtl.rx_tracker", "placement": "rtl.placement",
              "reliability": "rtl.reliability", "engine": "nic", "rx_engine": "engine"}


def test_nic_counters_are_the_rtl_counters(rtl_maps):
    """Every counter name of the driver is a counter of the elaborated NIC at that address, and
    every counter the NIC declares has a name in the driver."""
    from verif.driver import NIC_COUNTERS

    nic = Nic(Recorder(), BENCH_NIC)
    seen = {owner: set() for owner in NIC_OWNERS.values()}
    for block, words in NIC_COUNTERS.plain.items():
        rows = rtl_maps[NIC_OWNERS[block]]
        for name, word in words.items():
            assert rows.get(word) == (name, "counter"), f"{block}.{name} at {word:#x}"
            seen[NIC_OWNERS[block]].add(word)
            assert nic.counter_addr(f"{block}.{name}") == nic.addr(block, word)
    for block, (names, fn) in NIC_COUNTERS.indexed.items():
        rows = rtl_maps[NIC_OWNERS[block]]
        for plane in range(BENCH_NIC["n_planes"]):
            for name in names:
                word = fn(plane, name)
                assert rows[word][1] == "counter" and name in rows[word][0], \
                    f"{block}.{name}[{plane}] at {word:#x}: {rows.get(word)}"
                seen[NIC_OWNERS[block]].add(word)
    for owner, rows in rtl_maps.items():
        if owner in seen:
            missing = {rows[a][0] for a in rows if rows[a][1] == "counter"} - \
                {rows[a][0] for a in seen[owner]}
            assert not missing, f"{owner}: counters without a driver name: {missing}"


def test_nic_info_and_status_words_are_the_rtl_words(rtl_maps):
    """The info and status words the driver reads are read-only words of the RTL maps."""
    from verif.driver.nic import _INFO_BLOCKS

    for block, words in _INFO_BLOCKS.items():
        rows = rtl_maps[NIC_OWNERS[block]]
        for name, word in (words or {"info": 0}).items():
            assert rows[word][1] == "ro" and rows[word][0] == name, (block, name, rows.get(word))
    rows = rtl_maps["nic"]
    assert rows[0x0] == ("info", "ro") and rows[0x1] == ("status", "ro")
    assert rtl_maps["rtl.spray_scheduler"][spray_map.ADDR_STATUS] == ("status", "ro")
    assert rtl_maps["rtl.reliability"][rel_map.ADDR_STATUS] == ("status", "ro")


def test_switch_counters_are_the_rtl_counters(rtl_maps):
    from verif.driver import SWITCH_COUNTERS

    switch_rows, un_rows = rtl_maps["sw"], rtl_maps["rtl.un_stage"]
    for name, word in SWITCH_COUNTERS.plain["un"].items():
        assert un_rows[word] == (name, "counter")
    declared = {a for a, (_, access) in switch_rows.items() if access == "counter"}
    named = set()
    for block, (names, fn) in SWITCH_COUNTERS.indexed.items():
        for port in range(3):
            for name in names:
                word = fn(port, name)
                assert switch_rows[word][1] == "counter" and name in switch_rows[word][0]
                named.add(word)
    assert named == declared


def test_switch_set_up_is_the_former_controller_writes():
    """``sim/rtl_controller.py`` set each switch up with raw writes before the driver: own uSID,
    then per route in key order key low, key high, port, valid. ``Switch`` writes the same."""
    from models.fabric_topology import T0, T1
    from rtl import un_stage as un_map

    topo = Topology(hosts=4, planes=2, t0s=2, t1s=2)
    for role, plane, index in [(T0, 0, 0), (T0, 1, 1), (T1, 1, 0)]:
        routes = topo.routes(role, plane, index)
        former = [(un_map.ADDR_OWN_USID, topo.own_usid(role, plane, index))]
        for i, (key, port) in enumerate(sorted(routes.items())):
            base = un_map.TABLE_BASE + un_map.TABLE_STRIDE * i
            former += [(base + un_map.ENTRY_KEY_LO, key & 0xFFFF_FFFF),
                       (base + un_map.ENTRY_KEY_HI, key >> 32), (base + un_map.ENTRY_PORT, port),
                       (base + un_map.ENTRY_VALID, 1)]
        rec = Recorder()
        sw = Switch(rec, ports=topo.switch_ports(role), table_depth=8)
        sw.set_own_usid(topo.own_usid(role, plane, index))
        sw.write_routes(routes)
        assert rec.writes() == former

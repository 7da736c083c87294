# SPDX-License-Identifier: BSD-2-Clause
"""Setting up one NIC engine top (``rtl/nic_engine.py``) through its configuration map, shared by
the two-NIC bench (``tb/test_nic_engine.py``) and the RTL fabric controller
(``sim/rtl_controller.py``).

``cfg`` is anything with ``async write(addr, value)`` and ``async read(addr)`` on the NIC's own
word addresses (:class:`verif.bench.ConfigDriver` on a NIC port, or an AXI4-Lite window).
"""

from models.fabric_nic import region_base, region_rkey
from models.fabric_topology import nic_address, port_mac
from models import segmenter as seg_map
from rtl import reliability as rel_map
from rtl import rx_engine as rx_map
from rtl import spray_scheduler as spray_map
from rtl import tx_path as path_map
from rtl.nic_engine import nic_addr
from rtl.rx_front import ADDR_INNER_DST, ADDR_QP_ENABLE, region_reg
from rtl.rx_tracker import OFF_CACK, SETUP_ENABLE as TRACKER_ENABLE, qp_addr as tracker_qp_addr
from rtl.tx_engine import engine_addr

__all__ = ["configure_nic", "tx_addr", "table_write", "REGION_BYTES", "MASK32"]

REGION_BYTES = 1 << 22
MASK32 = 0xFFFF_FFFF


def tx_addr(block, addr):
    """The NIC's configuration address of word ``addr`` of transmit block ``block``."""
    return nic_addr("tx", engine_addr(block, addr))


async def table_write(cfg, addr, data):
    """A spray scheduler table write (word ``addr`` of the scheduler's map) through ``cfg``, once
    no earlier one waits. The transmit engine's map sits at the NIC's base, so ``cfg`` may be the
    NIC's or the transmit engine's own port."""
    status = tx_addr("spray", spray_map.ADDR_STATUS)
    while await cfg.read(status) & spray_map.STATUS_CMD_PENDING:
        pass
    await cfg.write(tx_addr("spray", addr), data)


async def configure_nic(cfg, p, topo, host, peers, start_psns, peer_starts, ev_sets, qp_config,
                        on_setup=None):
    """Every block of NIC ``host`` through its configuration port.

    ``p``: the NicEngine parameters; ``topo``: :class:`models.fabric_topology.Topology`;
    ``peers``: ``{qpn: peer host}`` (QP q talks to QP q of its peer; the plane ports' destination
    MACs are those of the first QP's peer); ``start_psns`` / ``peer_starts``: ``{qpn: PSN}`` of
    this NIC's and the peer's sending side; ``ev_sets``: ``{qpn: (evs, seeds, pools)}``
    (:func:`models.fabric_nic.draw_ev_sets`); ``qp_config``: :class:`models.reliability.QpConfig`
    for every QP. ``on_setup(q)`` runs after QP q's reliability set-up write (a bench mirrors it
    on its model)."""
    qps = sorted(peers)
    n = p["n_planes"]
    assert nic_addr("tx", 0) == 0            # the transmit engine's map is at the base
    await cfg.write(tx_addr("tx_path", path_map.ADDR_OWN_HOST), host)
    await cfg.write(tx_addr("tx_path", path_map.ADDR_OWN_T0), topo.t0_of(host))
    for plane in range(n):
        src, dst = port_mac(plane, host), port_mac(plane, peers[qps[0]])
        for word, value in enumerate((src & MASK32, src >> 32, dst & MASK32, dst >> 32)):
            await cfg.write(tx_addr("tx_path", path_map.port_addr(plane, word)), value)
    await cfg.write(tx_addr("spray", spray_map.ADDR_EV_MIN_ACTIVE), p["ev_min_active"])
    await cfg.write(tx_addr("spray", spray_map.ADDR_NUM_T1), topo.t1s)
    for q in qps:
        peer = peers[q]
        await cfg.write(tx_addr("segmenter", seg_map.QP_CONTEXT + q), 1 << 31 | start_psns[q])
        for off, value in ((path_map.OFF_PEER_QPN, q), (path_map.OFF_PEER_HOST, peer),
                           (path_map.OFF_PEER_PATH, topo.t0_of(peer) | topo.port_of(peer) << 16)):
            await cfg.write(tx_addr("tx_path", path_map.qp_addr(q, off)), value)
        evs, seeds, pools = ev_sets[q]
        for plane in range(n):
            for s, ev in enumerate(evs[plane]):
                await table_write(cfg, spray_map.table_addr(
                    q, plane, spray_map.OFF_SLOT_EV + s), ev)
            for i, ev in enumerate(pools[plane]):
                await table_write(cfg, spray_map.table_addr(
                    q, plane, spray_map.OFF_POOL_EV + i), ev)
            await table_write(cfg, spray_map.table_addr(q, plane, spray_map.OFF_LFSR),
                              seeds[plane])
    enable = sum(1 << q for q in qps)
    await cfg.write(tx_addr("tx_path", path_map.ADDR_QP_ENABLE), enable)
    while await cfg.read(tx_addr("spray", spray_map.ADDR_STATUS)):
        pass
    await cfg.write(tx_addr("spray", spray_map.ADDR_QP_ENABLE), enable)
    # Receive: QPs, own address, one region per QP, tracker start PSNs (the peer's).
    await cfg.write(nic_addr("rx", rx_map.FRONT_BASE + ADDR_QP_ENABLE), enable)
    inner = nic_address(host)
    for i in range(4):
        await cfg.write(nic_addr("rx", rx_map.FRONT_BASE + ADDR_INNER_DST + i),
                        inner >> (32 * i) & MASK32)
    for q in qps:
        for name, value in (("rkey", region_rkey(q)), ("base_lo", region_base(q)),
                            ("base_hi", region_base(q) >> 32), ("length_lo", REGION_BYTES),
                            ("length_hi", 0), ("valid", 1)):
            await cfg.write(nic_addr("rx", rx_map.FRONT_BASE + region_reg(q, name)),
                            value & MASK32)
        await cfg.write(nic_addr("rx", rx_map.TRACKER_BASE + tracker_qp_addr(q, OFF_CACK)),
                        peer_starts[q] | TRACKER_ENABLE)
    # Reliability: parameters, then set-up.
    c = qp_config
    for q in qps:
        for off, value in ((rel_map.OFF_W_MAX, c.w_max), (rel_map.OFF_MPR, c.mpr),
                           (rel_map.OFF_K, c.timeout_exp), (rel_map.OFF_RETRY, c.retry_limit),
                           (rel_map.OFF_PERIOD, c.probe_period)):
            await cfg.write(nic_addr("reliability", rel_map.qp_addr(q, off)), value)
        await cfg.write(nic_addr("reliability", rel_map.qp_addr(q, rel_map.OFF_SETUP)),
                        start_psns[q] | rel_map.SETUP_ENABLE)
        if on_setup is not None:
            on_setup(q)

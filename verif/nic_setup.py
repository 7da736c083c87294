# SPDX-License-Identifier: BSD-2-Clause
"""The NIC set-up of the benches before the driver API, kept for old callers: thin wrappers over
:class:`verif.driver.Nic` (``verif/driver/nic.py``), which new code uses directly.

``cfg`` is anything :func:`verif.driver.as_access` takes on the NIC's own word addresses
(:class:`verif.bench.ConfigDriver` on a NIC port, or an AXI4-Lite window).
"""

from rtl.nic_engine import nic_addr
from rtl.tx_engine import engine_addr
from verif.driver import MASK32, REGION_BYTES, Nic, table_write

__all__ = ["configure_nic", "tx_addr", "table_write", "REGION_BYTES", "MASK32"]


def tx_addr(block, addr):
    """The NIC's configuration address of word ``addr`` of transmit block ``block``."""
    return nic_addr("tx", engine_addr(block, addr))


def configure_nic(cfg, p, topo, host, peers, start_psns, peer_starts, ev_sets, qp_config,
                  on_setup=None):
    """:meth:`verif.driver.Nic.configure` of NIC ``host`` (NicEngine parameters ``p``) through
    ``cfg``: an awaitable on an asynchronous port, done at once on a synchronous one."""
    return Nic(cfg, p).configure(topo, host, peers, start_psns, peer_starts, ev_sets, qp_config,
                                 on_setup)

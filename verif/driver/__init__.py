# SPDX-License-Identifier: BSD-2-Clause
"""The driver API: host-side :class:`Nic`, :class:`Switch` and :class:`Link` objects over any
register access, every register by name from the blocks' own map constants.

An access (:mod:`verif.driver.access`) is a synchronous ``(read, write)`` pair of callables
(:class:`SyncAccess`: firmware-like code, a model, a unit test's register dict), an object with
``async read`` / ``async write`` (:class:`AsyncAccess`: :class:`verif.bench.ConfigDriver` on a
configuration port) or cocotbext-axi's ``AxiLiteMaster`` (:class:`AxiLiteAccess`, word address
``a`` at byte ``4 a``); :meth:`Access.window` moves it to one node of a bigger map (the RTL
fabric's single AXI4-Lite slave). One driver class serves both kinds: an operation returns its
result on a synchronous access and an awaitable on an asynchronous one::

    nic = Nic(SyncAccess(regs.get, regs.__setitem__), params)
    nic.configure(topo, host, peers, start_psns, peer_starts, ev_sets, qp_config)
    sent = nic.counter("reliability.send")

    nic = Nic(ConfigDriver(dut), params)                      # in a cocotb bench
    await nic.configure(topo, host, peers, start_psns, peer_starts, ev_sets, qp_config)

Unknown names, out-of-range QPs, planes, slots, ports and values that do not fit their field
raise :class:`DriverError` (a ``ValueError``) with the choices.
"""

from .access import (MASK32, READ, WRITE, Access, AsyncAccess, AxiLiteAccess, DriverError,
                     Recorder, SyncAccess, as_access, operation)
from .nic import (NIC_BLOCKS, NIC_COUNTERS, NIC_DEFAULTS, REGION_BYTES, Nic, completion, ev_event,
                  table_write, work_request)
from .switch import LINK_COUNTERS, SWITCH_COUNTERS, Link, Switch

__all__ = ["Access", "SyncAccess", "AsyncAccess", "AxiLiteAccess", "Recorder", "as_access",
           "operation", "DriverError", "READ", "WRITE", "MASK32", "Nic", "NIC_BLOCKS",
           "NIC_COUNTERS", "NIC_DEFAULTS", "REGION_BYTES", "work_request", "completion",
           "ev_event", "table_write", "Switch", "SWITCH_COUNTERS", "Link", "LINK_COUNTERS"]

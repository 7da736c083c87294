# SPDX-License-Identifier: BSD-2-Clause
"""Register access for the driver objects: one driver class over a synchronous or an asynchronous
register port.

A driver operation is written once, as a *program*: a generator that yields
``(READ, addr)`` (and is sent the word read) or ``(WRITE, addr, value)`` (and is sent ``None``)
and returns its result. An access runs programs: :class:`SyncAccess` at once (the call returns
the result), :class:`AsyncAccess` as a coroutine (the call returns an awaitable, for cocotb).
So ``nic.configure(...)`` is a plain call in firmware-like code or a model, and
``await nic.configure(...)`` in a bench, with the same register writes in the same order.

Addresses are word addresses of the node's own map (docs/registers.md section 1: byte address =
4 x word address); :meth:`Access.window` moves them by a base word address (a node of the RTL
fabric's single AXI4-Lite slave, ``sim/rtl_fabric.py: AddressMap``).

Nothing here imports cocotb.
"""

import functools
import inspect

__all__ = ["READ", "WRITE", "MASK32", "DriverError", "Access", "SyncAccess", "AsyncAccess",
           "AxiLiteAccess", "Recorder", "as_access", "operation"]

READ, WRITE = "read", "write"
MASK32 = 0xFFFF_FFFF          # registers are 32-bit words (docs/protocol.md section 8)


class DriverError(ValueError):
    """A driver call with an unknown name, an index out of range or a value that does not fit its
    field; the message names the node, the register and what would be allowed."""


class Access:
    """The base of every access: runs driver programs, moved by ``base`` word addresses.

    Parameters
    ----------
    base : int
        Added to every word address of the programs run.
    """

    is_async = False

    def __init__(self, base=0):
        self.base = base

    def window(self, base):
        """The same port, addresses moved by ``base`` more words (a node behind a decoder)."""
        raise NotImplementedError

    def run(self, program):
        """Run ``program`` (a generator of ``(READ, addr)`` / ``(WRITE, addr, value)``)."""
        raise NotImplementedError


def _check_op(op):
    if not (isinstance(op, tuple) and op and op[0] in (READ, WRITE)):
        raise TypeError(f"driver program yielded {op!r}, not a (READ, addr) or "
                        f"(WRITE, addr, value) step")
    return op


class SyncAccess(Access):
    """Access through two plain callables ``read(addr) -> int`` and ``write(addr, value)``.

    Parameters
    ----------
    read, write : callable
        Word read and word write of the port (``value`` is given masked to 32 bits).
    base : int
        Word address added to every access.
    """

    def __init__(self, read, write, base=0):
        super().__init__(base)
        self.read, self.write = read, write

    def window(self, base):
        return SyncAccess(self.read, self.write, self.base + base)

    def run(self, program):
        value = None
        try:
            while True:
                op = _check_op(program.send(value))
                if op[0] == READ:
                    value = int(self.read(self.base + op[1]))
                else:
                    self.write(self.base + op[1], op[2] & MASK32)
                    value = None
        except StopIteration as stop:
            return stop.value


class AsyncAccess(Access):
    """Access through an object with ``async read(addr)`` and ``async write(addr, value)``
    (:class:`verif.bench.ConfigDriver` on a configuration port, or any such window).

    Parameters
    ----------
    port : object
        Has coroutine methods ``read(addr)`` and ``write(addr, value)`` on word addresses.
    base : int
        Word address added to every access.
    """

    is_async = True

    def __init__(self, port, base=0):
        super().__init__(base)
        self.port = port

    def window(self, base):
        return AsyncAccess(self.port, self.base + base)

    async def _read(self, addr):
        return int(await self.port.read(addr))

    async def _write(self, addr, value):
        await self.port.write(addr, value)

    def run(self, program):
        return self._drive(program)

    async def _drive(self, program):
        value = None
        try:
            while True:
                op = _check_op(program.send(value))
                if op[0] == READ:
                    value = await self._read(self.base + op[1])
                else:
                    await self._write(self.base + op[1], op[2] & MASK32)
                    value = None
        except StopIteration as stop:
            return stop.value


class AxiLiteAccess(AsyncAccess):
    """Access through cocotbext-axi's ``AxiLiteMaster``: word ``a`` at byte address ``4 a``
    (docs/registers.md section 1), whole 32-bit words (``write_dword`` / ``read_dword``).

    Parameters
    ----------
    master : cocotbext.axi.AxiLiteMaster
        The master on the slave's ``s_axil`` port.
    base : int
        Word address added to every access (a node's window of the RTL fabric's one slave).
    """

    def __init__(self, master, base=0):
        super().__init__(master, base)

    def window(self, base):
        return AxiLiteAccess(self.port, self.base + base)

    async def _read(self, addr):
        return int(await self.port.read_dword(4 * addr))

    async def _write(self, addr, value):
        await self.port.write_dword(4 * addr, value)


class Recorder(SyncAccess):
    """A synchronous access over a register file in a dict, recording every step: for unit tests
    and for turning a driver program into a list of writes (firmware, a ROM).

    Reads return ``regs.get(addr, 0)`` unless ``read`` is given; writes store into ``regs``
    unless ``store`` is false (a write-only map, or counters that clear on write).

    Parameters
    ----------
    regs : dict, optional
        ``{word address: value}``; a new dict by default.
    read : callable, optional
        ``read(addr) -> int`` instead of the dict (e.g. a status word that clears itself).
    store : bool
        Keep written values in ``regs`` (default True).
    """

    def __init__(self, regs=None, read=None, store=True, base=0):
        self.regs = {} if regs is None else regs
        self.log = []            # (READ, addr, value) and (WRITE, addr, value), in order
        self._read_fn, self._store = read, store
        super().__init__(self._do_read, self._do_write, base)

    def window(self, base):
        out = Recorder.__new__(Recorder)
        out.__dict__.update(self.__dict__)
        out.base = self.base + base
        return out

    def _do_read(self, addr):
        value = self._read_fn(addr) if self._read_fn else self.regs.get(addr, 0)
        self.log.append((READ, addr, value))
        return value

    def _do_write(self, addr, value):
        self.log.append((WRITE, addr, value))
        if self._store:
            self.regs[addr] = value

    def writes(self):
        """The ``(addr, value)`` of every write so far, in order."""
        return [(addr, value) for kind, addr, value in self.log if kind == WRITE]


def as_access(access, write=None):
    """An :class:`Access` from what a caller has.

    Parameters
    ----------
    access : Access, object or callable
        An :class:`Access` (returned as is); an object with ``read`` and ``write`` methods,
        coroutine functions (an :class:`AsyncAccess`) or plain ones (a :class:`SyncAccess`);
        or a ``read`` callable, with ``write`` given too.
    write : callable, optional
        The write callable when ``access`` is the read callable.
    """
    if isinstance(access, Access):
        if write is not None:
            raise DriverError("as_access: an Access takes no separate write callable")
        return access
    if write is not None:
        if not (callable(access) and callable(write)):
            raise DriverError("as_access: read and write must both be callables")
        if inspect.iscoroutinefunction(access) != inspect.iscoroutinefunction(write):
            raise DriverError("as_access: read and write must be both plain or both async")
        if inspect.iscoroutinefunction(access):
            return AsyncAccess(_Pair(access, write))
        return SyncAccess(access, write)
    if isinstance(access, tuple) and len(access) == 2:
        return as_access(*access)
    read_fn, write_fn = getattr(access, "read", None), getattr(access, "write", None)
    if not (callable(read_fn) and callable(write_fn)):
        raise DriverError(f"as_access: {access!r} has no read(addr) and write(addr, value)")
    if inspect.iscoroutinefunction(read_fn) and inspect.iscoroutinefunction(write_fn):
        return AsyncAccess(access)
    if not inspect.iscoroutinefunction(read_fn) and not inspect.iscoroutinefunction(write_fn):
        return SyncAccess(read_fn, write_fn)
    raise DriverError(f"as_access: {access!r} mixes an async and a plain read/write")


class _Pair:
    def __init__(self, read, write):
        self.read, self.write = read, write


class operation:
    """Turns a driver method written as a program (a generator) into a call that runs it on the
    driver's access: the result at once on a synchronous access, an awaitable on an
    asynchronous one. ``driver.method.steps(...)`` gives the program itself, for composing
    programs (``yield from self.other.steps(...)``)."""

    def __init__(self, fn):
        if not inspect.isgeneratorfunction(fn):
            raise TypeError(f"operation {fn.__qualname__} must be a generator function")
        self.fn = fn
        functools.update_wrapper(self, fn)

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        return _Bound(self.fn, obj)


class _Bound:
    def __init__(self, fn, obj):
        self.fn, self.obj = fn, obj
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        return self.obj.access.run(self.fn(self.obj, *args, **kwargs))

    def steps(self, *args, **kwargs):
        """The program of this operation (a generator), to ``yield from`` in another one."""
        return self.fn(self.obj, *args, **kwargs)

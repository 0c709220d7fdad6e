"""How long a Case may run before it is a hang: calibrated on the implementation's measured
times, with the caller's timeout (``--timeout``) only as the upper bound.

AFL's rule, adapted: a fuzzer that waits a fixed minute on every Case that hangs the same way
runs for hours. Executors report, per answer, the longest stretch between two progress marks
(an implementation's call, a device synchronisation: ``diagfuzz.execution.beacon``); a Case
may then stall ``MULTIPLIER`` times the slowest stretch seen for its oracle, op and size
(a factor of 4 in elements), at least a floor and at most the caller's timeout. An
executor's first call of an op and dtype (where a JIT library compiles) is allowed
``MULTIPLIER`` times the slowest first call seen instead (before any, the slowest Case);
before any Case was answered, the caller's timeout. While Triton compiles, only the
caller's timeout applies (the runner reads that from the beacon).

A stall past a calibrated allowance is confirmed, once per cause: the runner judges the Case
again alone in a fresh executor, allowed ``confirm_allowance`` of what it stalled past (a
loaded machine slows a call, it does not make a hang). Once an op has a confirmed hang
(or crash), ``KnownFaults`` says so to every runner of the run (``learnt_for``: one file
per run, which a gate names to its suite's processes in ``KNOWN_FAULTS_ENV``): its Cases
are judged alone, a stall past ``KNOWN_MULTIPLIER`` times the slowest stretch (at least
``KNOWN_FLOOR``) is that hang again, stopped by the executor itself where it can be
(``beacon.StallWatch``; the runner then replaces that executor, since the stop may have
landed anywhere: inside an import, a lock held), and no Case of it is confirmed again.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from diagfuzz.execution.fault_shapes import FaultShapes

if TYPE_CHECKING:  # torch-heavy: a worker launches its executors before it imports torch
    from diagfuzz.core.case import Case

#: A Case may stall this many times the slowest stretch seen for its kind of Case.
MULTIPLIER = 10.0
#: Size classes (factors of 4 in elements) a Case larger than any seen scales the largest
#: one's stretch by, at most: past it a slower Case is confirmed in a fresh executor before
#: it is a hang (waiting up to the caller's timeout: ``confirm_allowance``), while an
#: unbounded first wait let one hang of a Case three classes up stall 46 s before its
#: confirmation (a CPU gate's covering stage, 2026-12-07).
SCALE_CLASSES = 1
#: The size class (65,536 elements and more) from which a hang's confirmation waits what
#: the Case's elements warrant (``Calibration.scaled_allowance``): a smaller call's time is
#: its fixed costs, and scaling the small classes measured early in a run by elements made
#: each op's first hang of a 240-element Case wait 60 s to be confirmed.
LARGE_CLASS = 8
#: The least allowance of an op with no confirmed hang (seconds): a stall past it is
#: confirmed in a fresh executor, so a loaded machine costs a re-run, never a false hang.
FLOOR = 1.0
#: The least allowance of an op whose hang is confirmed: a stall past it is that hang again.
KNOWN_FLOOR = 0.2
#: An op whose hang is confirmed: a Case may stall this many times the slowest stretch seen
#: (its first call's, for a first call) before it is that hang again; no confirmation
#: follows, so the margin is narrower than ``MULTIPLIER``'s.
KNOWN_MULTIPLIER = 3.0
#: The most allowance of an op whose hang is confirmed, once anything was measured: its
#: stretches are a kernel's (a compile is progress of its own, ``beacon``), so a first call
#: in a fresh executor after each of its hangs gets no more than a warm Case of the op,
#: while 3x the op's slowest first call (one large interpreted Case's) let each such hang
#: stall 8 s (a CPU gate, 2026-12-07). A slower Case past it joins the known hang's
#: Cases, which never make a finding of their own.
KNOWN_CAP = 3.0
#: The least allowance of an executor's first call of an op and dtype (of an op with a
#: confirmed hang: ``KNOWN_FLOOR``).
FIRST_FLOOR = 2.0
#: A hang past a calibrated allowance is judged again alone in a fresh executor with this
#: many times that allowance, at least ``CONFIRM_FLOOR`` seconds (at most the caller's
#: timeout): a machine loaded enough to stall a call past its allowance once must not
#: turn it into a hang. A true hang pays this once per op and run.
CONFIRM_MULTIPLIER = 5.0
CONFIRM_FLOOR = 10.0
#: The least wait for the health check after a failing Case (seconds), ``MULTIPLIER``
#: times the slowest warm check seen above it: a 2x2 copy and two synchronisations, which
#: a loaded machine delays by milliseconds. An unanswered check makes the Case a crash, so
#: the floor keeps a slow machine from inventing one; the caller's timeout is its cap.
HEALTH_FLOOR = 10.0
#: The least wait for that check after a failing Case of an op with a confirmed hang or
#: crash: a check stuck behind a kernel the Case left running is that fault again.
KNOWN_HEALTH_FLOOR = 1.0
#: The allowance of an op with a confirmed hang while no Case of the run was answered (when
#: the first Cases all hang, nothing is measured): the hang waited the whole timeout once.
KNOWN_UNMEASURED = 10.0
#: Where the processes of one run share their confirmed faults (a file, one per line).
KNOWN_FAULTS_ENV = "DIAGFUZZ_KNOWN_FAULTS"
#: The kinds of verdict that stop or kill an executor: each is confirmed once per op.
FAULT_KINDS = ("hang", "crash")
#: What a known hang's later Case says of itself (its verdict's ``known_hang``).
KNOWN_HANG_NOTE = ("a hang of this op is confirmed: judged alone with the calibrated "
                   "allowance, not confirmed again")


def unconfirmed_stall(kind: str, details: dict[str, Any] | None) -> bool:
    """Whether a verdict is a known hang's later Case: a stall past the short allowance,
    never confirmed, so on a loaded machine possibly a slow call of the op. It counts in
    its hang's finding but never represents it: the confirmed hang's Case reproduces. A
    confirmation (``first_attempt``: it stalled again alone, with the longer allowance) is
    never one."""
    details = details or {}
    if "blocked" in details:  # not run: its fault's shape (``fault_shapes``)
        return True
    return kind == "hang" and "known_hang" in details and "first_attempt" not in details


def confirm_allowance(allowance: float, cap: float, scaled: float = 0.0) -> float:
    """Seconds a hang's confirmation may stall, after a first attempt that stalled past
    ``allowance``: ``CONFIRM_MULTIPLIER`` times that or ``scaled`` (what the Case's
    elements warrant: ``Calibration.scaled_allowance``), whichever is more, at least
    ``CONFIRM_FLOOR``, at most ``cap``. A large Case that is merely slow answers here
    instead of becoming a hang: a 1025 x 1024 complex128 tril Case took 16 s on a loaded
    CPU, past its scaled 15.8 s (and past 5x the one-class bound of its first wait)."""
    return min(cap, max(CONFIRM_FLOOR, CONFIRM_MULTIPLIER * max(allowance, scaled)))


def size_class(case: Case) -> int:
    """The Case's size class: its largest tensor's elements, in factors of 4."""
    largest = 1
    for shape in (case.sizes, *(layout.shape for _, layout, _ in case.others)):
        count = 1
        for n in shape:
            count *= max(1, int(n))
        largest = max(largest, count)
    return largest.bit_length() // 2


class Slowest:
    """The slowest of the last ``KEPT`` stretches of one kind of Case, past its outliers:
    the ``QUANTILE`` of them (their maximum while fewer than ten). Why not the maximum of
    all: one stretch of a process the machine did not schedule (a loaded CI runner, a
    spinning hang beside it) would raise the allowance tenfold for the rest of the run."""

    KEPT = 64
    QUANTILE = 0.9

    def __init__(self) -> None:
        self._kept: deque[float] = deque(maxlen=self.KEPT)
        self.value = 0.0

    def __len__(self) -> int:
        """Stretches kept (0: nothing measured yet)."""
        return len(self._kept)

    def add(self, stretch: float) -> None:
        self._kept.append(stretch)
        kept = sorted(self._kept)
        self.value = (kept[-1] if len(kept) < 10
                      else kept[int(self.QUANTILE * (len(kept) - 1))])


class Calibration:
    """The slowest stretches seen (``Slowest``), per (oracle, op, size class) and per first
    call of an op; shared by the runners of one run (``learnt_for``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._warm: dict[tuple[str, str], dict[int, Slowest]] = {}
        self._first: dict[tuple[str, str], Slowest] = {}
        #: Counts the observations: an allowance worked out earlier holds while it is equal.
        self.version = 0
        #: The oracles with an answer measured (``measured``, asked at every submit).
        self._measured: set[str] = set()
        #: Warm health checks' seconds (each executor's at its start, then each answered).
        self._health = Slowest()

    def observe(self, oracle: str, cases: list[Case], stretch: float, first: bool) -> None:
        """An answer for ``cases`` whose longest stretch took ``stretch`` seconds (``first``:
        it held an executor's first call of one of their op and dtype). A batch's stretch is
        its slowest Case's, so it measures the batch's largest size class only: given to
        every Case, one large interpreted Case made each small one of its batch wait 60 s
        as a confirmed hang's later Case (a CPU gate, 2026-12-07)."""
        largest = max((size_class(case) for case in cases), default=0)
        with self._lock:
            self.version += 1
            self._measured.add(oracle)
            for key in {(oracle, case.op, size_class(case)) for case in cases
                        if size_class(case) == largest}:
                if first:
                    self._first.setdefault(key[:2], Slowest()).add(stretch)
                else:
                    self._warm.setdefault(key[:2], {}).setdefault(key[2], Slowest()).add(
                        stretch)

    def observe_health(self, seconds: float) -> None:
        """A health check answered in ``seconds``."""
        with self._lock:
            self._health.add(seconds)

    def health_allowance(self, cap: float, *, known: bool = False) -> float:
        """Seconds the runner waits for the health check after a failing Case, at most
        ``cap``: ``MULTIPLIER`` times the slowest check seen, at least ``HEALTH_FLOOR``
        (``known``: the Case's op has a confirmed hang or crash, ``KNOWN_HEALTH_FLOOR``);
        ``cap`` while no check was measured."""
        with self._lock:
            if not self._health:
                return cap
            slowest = self._health.value
        floor = KNOWN_HEALTH_FLOOR if known else HEALTH_FLOOR
        return min(cap, max(floor, MULTIPLIER * slowest))

    def measured(self, oracle: str) -> bool:
        """Whether any answer of ``oracle`` was measured yet."""
        return oracle in self._measured

    def allowance(self, oracle: str, case: Case, cap: float, *, first: bool,
                  known: bool = False) -> float:
        """Seconds ``case`` may stall (see the module docstring), at most ``cap``."""
        with self._lock:
            slowest = None if first else self._slowest_warm(oracle, case, scale=not known)
            floor = KNOWN_FLOOR if known else FLOOR
            if slowest is None:
                mine = self._first.get((oracle, case.op))
                seen = mine.value if mine is not None else max(
                    (s.value for (o, _), s in self._first.items() if o == oracle),
                    default=None)
                if seen is None:  # no first call answered yet: the slowest Case of any op
                    seen = max((c.value for (o, _), classes in self._warm.items()
                                if o == oracle for c in classes.values()), default=None)
                if seen is None:
                    return min(cap, KNOWN_UNMEASURED) if known else cap
                slowest, floor = seen, (KNOWN_FLOOR if known else FIRST_FLOOR)
        if known:
            return min(cap, KNOWN_CAP, max(floor, KNOWN_MULTIPLIER * slowest))
        return min(cap, max(floor, MULTIPLIER * slowest))

    def scaled_allowance(self, oracle: str, case: Case) -> float:
        """``MULTIPLIER`` times the slowest warm stretch of ``case``'s size class, scaled by
        its elements from the largest class seen however far above it is (no
        ``SCALE_CLASSES`` bound), for a Case of ``LARGE_CLASS`` or more; 0.0 for a smaller
        one, or while none was measured. A hang's confirmation waits ``CONFIRM_MULTIPLIER``
        times it at least (``confirm_allowance``)."""
        if size_class(case) < LARGE_CLASS:
            return 0.0
        with self._lock:
            slowest = self._slowest_warm(oracle, case, bound=None)
        return 0.0 if slowest is None else MULTIPLIER * slowest

    def _slowest_warm(self, oracle: str, case: Case, scale: bool = True,
                      bound: int | None = SCALE_CLASSES) -> float | None:
        """The slowest stretch of ``case``'s size class, else of the next larger one seen;
        for a Case larger than any seen, the largest's scaled by the elements, at most
        ``bound`` classes' worth (None: unbounded; ``scale``), else the largest's itself (a known
        hang's Case: that hang again, or no slower than the op's slowest Case seen, never a
        wait scaled past every measure)."""
        classes = self._warm.get((oracle, case.op))
        if not classes:
            return None
        size = size_class(case)
        above = [c for c in classes if c >= size]
        if above:
            return classes[min(above)].value
        largest = max(classes)
        above_all = size - largest if bound is None else min(size - largest, bound)
        return classes[largest].value * (4.0 ** above_all if scale else 1.0)

    def summary(self, oracle: str, cap: float) -> dict[str, Any]:
        """Per op, the allowance of a warm Case of its slowest size class and of a first
        call (seconds), as the report prints them."""
        with self._lock:
            ops = sorted({op for o, op in (*self._warm, *self._first) if o == oracle})
            out: dict[str, Any] = {}
            for op in ops:
                warm = max((s.value for s in self._warm.get((oracle, op), {}).values()),
                           default=None)
                slowest_first = self._first.get((oracle, op))
                first = None if slowest_first is None else slowest_first.value
                out[op] = {
                    "warm_s": None if warm is None else round(
                        min(cap, max(FLOOR, MULTIPLIER * warm)), 3),
                    "first_call_s": None if first is None else round(
                        min(cap, max(FIRST_FLOOR, MULTIPLIER * first)), 3)}
            return out


class KnownFaults:
    """Ops with a confirmed hang or crash, and the shapes that mark them
    (``fault_shapes``), shared by the runners of one run and, through the file ``path``,
    by every process of the run (read again at most every ``refresh`` seconds): a line
    "op kind" per fault, a JSON line per shape published."""

    def __init__(self, path: str | None = None, refresh: float = 0.5) -> None:
        self._lock = threading.Lock()
        self._faults: set[tuple[str, str]] = set()
        self.path = path
        self.refresh = refresh
        self._read_at = float("-inf")
        self._read_bytes = 0
        #: What marks each op's hang or crash (``fault_shapes``): learnt in this process,
        #: and adopted from the run's others through the file.
        self.shapes = FaultShapes(self._append_shape if path else None)

    def add(self, op: str, kind: str) -> None:
        """``op`` has a confirmed fault of ``kind``."""
        with self._lock:
            if (op, kind) in self._faults:
                return
            self._faults.add((op, kind))
        self._append(f"{op} {kind}")

    def _append_shape(self, entry: dict[str, Any]) -> None:
        self._append(json.dumps(entry, sort_keys=True))

    def _append(self, line: str) -> None:
        """One line onto the run's file (one write, so lines of processes never mix)."""
        if self.path:
            with contextlib.suppress(OSError):
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    os.write(fd, f"{line}\n".encode())
                finally:
                    os.close(fd)

    def count(self) -> int:
        """How many faults are confirmed (read again from the run's file): it grows when
        one is, so an allowance worked out before is worked out again."""
        self._reload()
        with self._lock:
            return len(self._faults)

    def items(self) -> list[str]:
        """'op kind' of every confirmed fault, sorted."""
        self._reload()
        with self._lock:
            return sorted(f"{op} {kind}" for op, kind in self._faults)

    def has(self, op: str, kind: str | None = None) -> bool:
        """Whether ``op`` has a confirmed fault (of ``kind``, else of any kind)."""
        self._reload()
        with self._lock:
            kinds = FAULT_KINDS if kind is None else (kind,)
            return any((op, k) in self._faults for k in kinds)

    def _reload(self) -> None:
        if not self.path or time.monotonic() - self._read_at < self.refresh:
            return
        self._read_at = time.monotonic()
        try:
            size = os.path.getsize(self.path)
            if size == self._read_bytes:
                return
            with open(self.path, "rb") as f:
                f.seek(self._read_bytes)
                data = f.read()
        except OSError:
            return
        data = data[:data.rfind(b"\n") + 1]  # a line still being written: read next time
        self._read_bytes += len(data)
        shapes = []
        with self._lock:
            for line in data.decode("utf-8", "replace").splitlines():
                if line.startswith("{"):
                    with contextlib.suppress(ValueError):
                        shapes.append(json.loads(line))
                    continue
                op, _, kind = line.partition(" ")
                if kind in FAULT_KINDS:
                    self._faults.add((op, kind))
        for entry in shapes:  # (this process's own too: adopting a shape it has is a no-op)
            with contextlib.suppress(KeyError, TypeError, ValueError):
                self.shapes.adopt(entry)


def rule(cap: float) -> str:
    """The rule in words, as the gate's summary says it."""
    return (f"at most {cap:g} s (--timeout); below it calibrated: {MULTIPLIER:g}x the slowest "
            f"stretch without progress seen for the op and size, at least {FLOOR:g} s (a "
            f"first call of an op and dtype: {FIRST_FLOOR:g} s; an op with a confirmed hang: "
            f"{KNOWN_MULTIPLIER:g}x, {KNOWN_FLOOR:g} s to {KNOWN_CAP:g} s); a hang is "
            f"confirmed alone in a fresh executor with {CONFIRM_MULTIPLIER:g}x its allowance, "
            f"at least {CONFIRM_FLOOR:g} s")


def report(learnt: tuple[Calibration, KnownFaults], cap: float) -> dict[str, Any]:
    """The timeouts a run used, for its JSON report: the rule, each op's allowances (seconds)
    and the confirmed faults."""
    calibration, known = learnt
    blocked = {op: {"cases": n, "fault": known.shapes.blocked_by[op][0],
                    "shape": known.shapes.blocked_by[op][1]}
               for op, n in sorted(known.shapes.blocked.items())}
    return {"cap_s": cap, "rule": rule(cap), "ops": calibration.summary("check", cap),
            "confirmed_faults": known.items(), "blocked_by_fault_shape": blocked}


_learnt: dict[str, tuple[Calibration, KnownFaults]] = {}
_learnt_lock = threading.Lock()


def learnt_for(path: str | os.PathLike[str] | None) -> tuple[Calibration, KnownFaults]:
    """What the runners of one run learn together: the calibration and the known faults of
    the run whose faults file is ``path`` (one pair per path in a process; the file shares
    the faults with the run's other processes). None: a new pair, shared with nobody."""
    if path is None:
        return Calibration(), KnownFaults()
    key = os.fspath(path)
    with _learnt_lock:
        if key not in _learnt:
            _learnt[key] = (Calibration(), KnownFaults(key))
        return _learnt[key]


def learnt_of_run(default: str | os.PathLike[str] | None) -> tuple[Calibration, KnownFaults]:
    """``learnt_for`` the file ``KNOWN_FAULTS_ENV`` names (a gate's, for its suite), else
    ``default`` (the run's own)."""
    return learnt_for(os.environ.get(KNOWN_FAULTS_ENV) or default)

"""What the runner and its executor say to each other: typed messages, one JSON line each.

Requests go from the runner (``parent``) to the executor (``child``), replies back. The
wire is a pipe pair carrying JSON text: every message has a ``type``; ``encode`` and
``decode`` are the only places that know the field names, so neither side handles raw
dicts.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Run:
    """Judge one Case (its JSON) with the oracle function of ``diagfuzz.oracles`` named.

    Unless ``single`` (or ``stall``), the executor may judge it in a batch with the ``Run``
    requests queued right behind it (``BatchJudged`` answers them all); ``single`` Cases are
    judged alone, each answered by its own ``Judged`` (how a failed batch is judged again).
    """

    case: str
    oracle: str = "check"
    single: bool = False
    #: Seconds without progress after which the executor stops the Case itself and answers
    #: ``hang`` (0: it never does; ``diagfuzz.execution.beacon.StallWatch``).
    stall: float = 0.0


@dataclass(frozen=True)
class Health:
    """Run the health check now."""


@dataclass(frozen=True)
class Close:
    """Exit."""


@dataclass(frozen=True)
class Ready:
    """The executor started: the impl loaded, the health check passed, the warm-up ran.
    ``health_s``: a warm health check's seconds, which calibrate how long the runner waits
    for the one after a failing Case (``timeouts.Calibration.health_allowance``)."""

    pid: int
    warmed: int
    health_s: float = 0.0


@dataclass(frozen=True)
class StartFailed:
    """The executor cannot start: the impl cannot be loaded (``impl_error``: a usage
    error), or anything else (``message`` holds the traceback)."""

    message: str
    impl_error: bool = False


@dataclass(frozen=True)
class Judged:
    """A Case's Verdict as JSON; ``same_case``: without its Case (the runner has it).
    ``stretch``: the longest seconds between two progress marks while judging it (what the
    runner calibrates its timeouts on: ``diagfuzz.execution.timeouts``)."""

    verdict: str
    same_case: bool = False
    stretch: float = 0.0


@dataclass(frozen=True)
class BatchJudged:
    """The verdicts of the next ``len(which)`` Cases, judged as one batch: Case i's verdict
    (JSON, without its Case) is ``verdicts[which[i]]``. Passing Cases share a few rows; a
    failing Case's verdict is its judgement alone (the executor judged it again alone).
    ``health``: '' when the health check after failing Cases passed (or none failed), else
    its traceback: the batch must be judged again, one Case at a time, elsewhere.
    ``stretch``: as ``Judged``'s, over the whole batch."""

    verdicts: list[str]
    which: list[int]
    health: str = ""
    stretch: float = 0.0


@dataclass(frozen=True)
class Raised:
    """The oracle (or the health check) raised: not a Case's verdict."""

    message: str
    traceback: str


@dataclass(frozen=True)
class Healthy:
    """The health check passed."""


Message = (Run | Health | Close | Ready | StartFailed | Judged | BatchJudged | Raised
           | Healthy)
_TYPES: dict[str, type] = {cls.__name__: cls for cls in (
    Run, Health, Close, Ready, StartFailed, Judged, BatchJudged, Raised, Healthy)}


def encode(message: Message) -> str:
    """One JSON line for ``message``."""
    return json.dumps({"type": type(message).__name__, **asdict(message)})


def decode(text: str) -> Message:
    """The message ``encode`` wrote; ValueError for anything else."""
    data: dict[str, Any] = json.loads(text)
    cls = _TYPES.get(str(data.pop("type", "")))
    if cls is None:
        raise ValueError(f"not an executor message: {text[:200]}")
    return cls(**data)


# --- the protocol's side channels ---------------------------------------------------------

#: The oracles an executor judges in batches (``diagfuzz.oracles.BATCHED``'s names, kept
#: here so that a runner knows them without importing torch): a Run for any other oracle is
#: judged alone.
BATCHED_ORACLES = ("check",)

#: The executor's command line: the runner's sys.path first, then ``child.child_main``.
BOOTSTRAP = ("import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
             "from diagfuzz.execution.child import child_main; "
             "child_main(*map(int, sys.argv[2:5]), *sys.argv[5:8])")

#: Written to the executor's stderr before each Case it runs (0-based within the executor),
#: when its stderr is the runner's log (``MARKERS_ENV`` set), never onto a terminal: the
#: runner cuts a dying Case's stderr tail there.
CASE_MARKER = "[diagfuzz-executor: case {}]\n"
MARKERS_ENV = "DIAGFUZZ_CASE_MARKERS"
#: "0" in a replacement executor's environment: no warm-up (diagfuzz.execution.warmup).
WARM_UP_ENV = "DIAGFUZZ_WARM_UP"

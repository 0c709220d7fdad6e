"""What ``diagfuzz gate`` was asked to do (``cli.py`` makes it from the flags)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from diagfuzz.core import corpus
from diagfuzz.core.roots import DEFAULT_IMPL
from diagfuzz.execution.classification import DEFAULT_REPEATS
from diagfuzz.execution.parent import DEFAULT_TIMEOUT
from diagfuzz.execution.timeouts import Calibration, KnownFaults, learnt_for

#: Examples the fuzz suite draws by default (None: the gate profile's, see profiles.py).
DEFAULT_BUDGET: int | None = None
#: The gate's own directory: one sub-directory per run, ``latest`` and the Triton cache.
DEFAULT_OUT = Path(".diagfuzz/gate")


@dataclass
class Options:
    """Everything ``diagfuzz gate`` accepts (see ``cli.py`` for the flags)."""

    impl: str = DEFAULT_IMPL
    budget: int | None = DEFAULT_BUDGET
    workers: str = "auto"
    junit: Path | None = None
    report: Path | None = None
    summary: Path | None = None
    timeout: float = DEFAULT_TIMEOUT
    device: str | None = None
    corpus_dir: Path = Path(corpus.DEFAULT_DIR)
    out_dir: Path = DEFAULT_OUT
    repeats: int = DEFAULT_REPEATS
    save_corpus: bool = True
    suite: bool = True
    compile_sample: bool = True
    opinfo: bool = True
    #: The sequence search stage (``diagfuzz.gate.sequences``).
    sequences: bool = True
    #: Judge every op's covering Cases (``stages.covering_stage``).
    covering: bool = True
    max_classify: int = 20
    #: Narrowing passed to the suite (comma-separated names, as its options take them).
    ops: str | None = None
    dtypes: str | None = None
    ranks: str | None = None
    layouts: str | None = None
    max_elements: int | None = None
    strict: bool = False
    max_seconds: float | None = None
    quiet: bool = False
    #: Run the huge tier (Cases past 2**31 elements, ``stages.huge_stage``): GPU only.
    huge: bool = False
    #: Executors judging the fixed stages (None: ``pool.STAGE_EXECUTORS_RULE``).
    stage_executors: int | None = None
    #: A stage that cannot run here is an error (exit 3), not a "Not run" line.
    require_stages: bool = False
    #: This run's directory under ``out_dir`` (made when the run starts).
    run_dir: Path = field(default=DEFAULT_OUT / "pending")

    @property
    def repro_dir(self) -> Path:
        """This run's reproducers."""
        return self.run_dir / "repro"

    @property
    def known_faults(self) -> Path:
        """Where every process of this run shares the ops with a confirmed hang or crash
        (``diagfuzz.execution.timeouts``)."""
        return self.run_dir / "known-faults"

    def learnt(self) -> tuple[Calibration, KnownFaults]:
        """The calibration and known faults every runner of this gate process shares."""
        return learnt_for(self.known_faults)

    @property
    def triton_cache(self) -> Path:
        """One Triton cache for every stage's processes, kept across gate runs."""
        return self.out_dir / "triton-cache"

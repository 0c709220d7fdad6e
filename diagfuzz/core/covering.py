"""Factor models and covering arrays: reach every t-way combination by construction.

A factor model names the properties of a call that a kernel's fast path may key on (its
*factors*), a few *levels* of each, and the *constraints* that rule combinations out (a
rank-2 tensor has no channels_last layout). Faults of real libraries are triggered by one
to four factors at once (NIST's interaction rule), so a test set that holds every valid
combination of any t factors (a covering array of strength t) reaches them whatever they
are, in far fewer rows than random draws need.

``covering_array`` builds one greedily (one row at a time, each row seeded with a
combination still uncovered and completed level by level to cover the most others, as
PICT and AETG do), of mixed strength: ``Model.strength`` over every factor and
``Model.core_strength`` over the factors of ``Model.core``. It is deterministic for a
model and seed. ``coverage`` measures the same share for any rows (a random sample, a
gate's judged Cases): NIST's combinatorial coverage measurement.

Pure Python, no torch: the specs declare models (``diagfuzz.specs.factors``), the
strategies turn rows into Cases and Cases back into rows.
"""

from __future__ import annotations

import operator
import random
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import combinations, product


@dataclass(frozen=True)
class Factor:
    """One property of a call and the levels a covering array gives it."""

    name: str
    levels: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(set(self.levels)) != len(self.levels) or not self.levels:
            raise ValueError(f"factor {self.name!r}: levels must be distinct and non-empty, "
                             f"got {self.levels}")


@dataclass(frozen=True)
class Constraint:
    """A rule over a few factors: ``allows(*levels)`` (in ``factors``' order) says whether
    that combination of their levels can occur in one call; ``why`` says why not."""

    factors: tuple[str, ...]
    allows: Callable[..., bool]
    why: str


#: A combination of levels: ((factor name, level), ...) in the model's factor order.
Combination = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Model:
    """Factors, constraints, and the strengths a covering array of them has."""

    name: str
    factors: tuple[Factor, ...]
    constraints: tuple[Constraint, ...] = ()
    #: Factors covered at ``core_strength`` (the geometric core).
    core: tuple[str, ...] = ()
    strength: int = 3
    core_strength: int = 4
    _memo: dict[tuple[tuple[int, int], ...], bool] = field(
        default_factory=dict, compare=False, hash=False, repr=False)
    _valid: dict[tuple[int, ...], list[tuple[int, ...]]] = field(
        default_factory=dict, compare=False, hash=False, repr=False)

    def narrowed(self, drop: Mapping[str, Collection[str]]) -> Model:
        """This model without the levels ``drop`` names (factor -> levels): the calls an
        implementation can take, where it declares some unsupported. A factor keeps at
        least one level; the constraints stand (they read levels by name)."""
        if not any(drop.values()):
            return self
        factors = tuple(
            Factor(f.name, tuple(lv for lv in f.levels if lv not in drop.get(f.name, ()))
                   or f.levels)
            for f in self.factors)
        return Model(self.name, factors, self.constraints, self.core, self.strength,
                     self.core_strength)

    def __post_init__(self) -> None:
        names = [f.name for f in self.factors]
        if len(set(names)) != len(names):
            raise ValueError(f"model {self.name}: factor names repeat: {names}")
        for c in self.constraints:
            missing = [f for f in c.factors if f not in names]
            if missing:
                raise ValueError(f"model {self.name}: constraint {c.why!r} names unknown "
                                 f"factors {missing}")
        unknown = [f for f in self.core if f not in names]
        if unknown:
            raise ValueError(f"model {self.name}: core names unknown factors {unknown}")

    @cached_property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.factors)

    @cached_property
    def _index(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.names)}

    @cached_property
    def _rules(self) -> tuple[tuple[tuple[int, ...], frozenset[tuple[int, ...]]], ...]:
        """Each constraint as (factor indices, the allowed level-index tuples)."""
        rules = []
        for c in self.constraints:
            idx = tuple(self._index[f] for f in c.factors)
            levels = [self.factors[i].levels for i in idx]
            allowed = frozenset(
                combo for combo in product(*(range(len(lv)) for lv in levels))
                if c.allows(*(lv[k] for lv, k in zip(levels, combo, strict=True))))
            rules.append((idx, allowed))
        return tuple(rules)

    @cached_property
    def _rules_of(self) -> tuple[tuple[tuple[tuple[int, ...], frozenset[tuple[int, ...]]],
                                       ...], ...]:
        """For each factor, the rules that involve it."""
        return tuple(tuple(rule for rule in self._rules if i in rule[0])
                     for i in range(len(self.factors)))

    def sets(self, t: int, within: Sequence[str] | None = None) -> list[tuple[int, ...]]:
        """Every set of ``t`` factor indices (of ``within``'s factors where given)."""
        pool = sorted(self._index[f] for f in within) if within is not None else list(
            range(len(self.factors)))
        return list(combinations(pool, t)) if t <= len(pool) else []

    def strength_sets(self) -> list[tuple[int, ...]]:
        """The factor sets a covering array of this model must cover: every
        ``strength``-set, and every ``core_strength``-set of the core."""
        chosen = dict.fromkeys(self.sets(min(self.strength, len(self.factors))))
        if self.core:
            chosen.update(dict.fromkeys(self.sets(min(self.core_strength, len(self.core)),
                                                  self.core)))
        # A t-set inside a covered (t+1)-set of the core is covered with it: drop it.
        bigger = [set(s) for s in chosen if len(s) > self.strength]
        return [s for s in chosen if not any(set(s) < b for b in bigger)]

    # --- validity ------------------------------------------------------------------------
    def consistent(self, partial: Mapping[int, int], changed: int | None = None) -> bool:
        """No rule whose factors are all set in ``partial`` forbids it (only the rules of
        factor ``changed`` are checked when given)."""
        rules = self._rules_of[changed] if changed is not None else self._rules
        get = partial.get
        for idx, allowed in rules:
            levels = tuple(map(get, idx))
            if None not in levels and levels not in allowed:
                return False
        return True

    def completable(self, partial: Mapping[int, int]) -> bool:
        """Whether ``partial`` (factor index -> level index) extends to a valid call."""
        key = tuple(sorted(partial.items()))
        known = self._memo.get(key)
        if known is None:
            known = self.consistent(partial) and self._extend(dict(partial))
            self._memo[key] = known
        return known

    @cached_property
    def _constrained(self) -> tuple[int, ...]:
        """The factors some rule involves (the others take any level)."""
        return tuple(i for i in range(len(self.factors)) if self._rules_of[i])

    def _extend(self, partial: dict[int, int]) -> bool:
        free = [i for i in self._constrained if i not in partial]
        if not free:
            return True
        i = free[0]
        for level in range(len(self.factors[i].levels)):
            partial[i] = level
            if self.consistent(partial, i) and self._extend(partial):
                del partial[i]
                return True
        del partial[i]
        return False

    def valid(self, levels: Mapping[str, str]) -> bool:
        """Whether a (partial) assignment by name extends to a valid call."""
        try:
            partial = {self._index[f]: self.factors[self._index[f]].levels.index(level)
                       for f, level in levels.items()}
        except (KeyError, ValueError):
            return False
        return self.completable(partial)

    def combination(self, idx: tuple[int, ...], levels: tuple[int, ...]) -> Combination:
        """A combination by names, from factor and level indices."""
        return tuple((self.factors[i].name, self.factors[i].levels[k])
                     for i, k in zip(idx, levels, strict=True))

    def valid_combinations(self, idx: tuple[int, ...]) -> list[tuple[int, ...]]:
        """The level-index tuples of factors ``idx`` that some valid call has (made once
        per factor set; ``known_combinations`` primes them from a cache)."""
        found = self._valid.get(idx)
        if found is None:
            ranges = [range(len(self.factors[i].levels)) for i in idx]
            found = self._valid[idx] = [
                combo for combo in product(*ranges)
                if self.completable(dict(zip(idx, combo, strict=True)))]
        return found

    def known_combinations(self) -> dict[str, list[list[int]]]:
        """Every factor set's valid combinations made so far, as JSON data."""
        return {",".join(map(str, idx)): [list(c) for c in combos]
                for idx, combos in self._valid.items()}

    def prime(self, data: Mapping[str, Sequence[Sequence[int]]]) -> None:
        """Take valid combinations that ``known_combinations`` gave (of this model)."""
        for key, combos in data.items():
            idx = tuple(int(i) for i in key.split(","))
            self._valid[idx] = [tuple(c) for c in combos]


# --- generation --------------------------------------------------------------------------

def covering_array(model: Model, seed: int = 0) -> list[dict[str, str]]:
    """Rows (factor name -> level) that together hold every valid combination of every
    factor set of ``model.strength_sets()``; each row a valid call. Deterministic for
    ``model`` and ``seed`` (ties between equally good levels are broken by a
    ``random.Random(seed)``).
    """
    rng = random.Random(seed)
    sets = model.strength_sets()
    uncovered: dict[tuple[int, ...], set[tuple[int, ...]]] = {
        s: set(model.valid_combinations(s)) for s in sets}
    sets_of: list[list[tuple[int, ...]]] = [[s for s in sets if i in s]
                                           for i in range(len(model.factors))]
    queue = [(s, combo) for s in sets for combo in sorted(uncovered[s])]
    rows: list[dict[str, str]] = []
    at = 0
    while at < len(queue):
        s, combo = queue[at]
        if combo not in uncovered[s]:
            at += 1
            continue
        row = dict(zip(s, combo, strict=True))
        for i in _fill_order(model, row, rng):
            row[i] = _best_level(model, row, i, sets_of[i], uncovered, rng)
        for t in sets:
            uncovered[t].discard(tuple(row[i] for i in t))
        rows.append({model.factors[i].name: model.factors[i].levels[k]
                     for i, k in sorted(row.items())})
    return rows


def _fill_order(model: Model, row: Mapping[int, int], rng: random.Random) -> list[int]:
    """The free factors, most levels first (they are the hardest to cover late)."""
    free = [i for i in range(len(model.factors)) if i not in row]
    rng.shuffle(free)
    return sorted(free, key=lambda i: -len(model.factors[i].levels))


def _best_level(model: Model, row: dict[int, int], i: int, sets: list[tuple[int, ...]],
                uncovered: Mapping[tuple[int, ...], set[tuple[int, ...]]],
                rng: random.Random) -> int:
    """The level of factor ``i`` that keeps ``row`` valid and covers the most
    still-uncovered combinations among the factors already set."""
    best: list[int] = []
    top = -1
    ready = [s for s in sets if all(j in row or j == i for j in s)]
    for level in range(len(model.factors[i].levels)):
        row[i] = level
        if not (model.consistent(row, i) and model.completable(row)):
            continue
        gain = sum(tuple(row[j] for j in s) in uncovered[s] for s in ready)
        if gain > top:
            best, top = [level], gain
        elif gain == top:
            best.append(level)
    del row[i]
    if not best:
        named = {model.names[j]: model.factors[j].levels[k] for j, k in row.items()}
        raise ValueError(f"model {model.name}: no valid level of {model.names[i]} for {named}")
    return best[0] if len(best) == 1 else rng.choice(best)


# --- measurement -------------------------------------------------------------------------

@dataclass(frozen=True)
class Coverage:
    """The share of a model's valid t-way combinations that some row holds."""

    t: int
    covered: int
    total: int
    #: The first few valid combinations no row holds, by name.
    missing: tuple[Combination, ...] = ()

    @property
    def share(self) -> float:
        return self.covered / self.total if self.total else 1.0

    def to_dict(self) -> dict[str, object]:
        return {"t": self.t, "covered": self.covered, "total": self.total,
                "share": round(self.share, 4),
                "missing": [dict(c) for c in self.missing]}


def coverage(model: Model, rows: Iterable[Mapping[str, str | None]], t: int,
             within: Sequence[str] | None = None, show: int = 3) -> Coverage:
    """How many valid combinations of every ``t`` factors (of ``within`` where given) the
    ``rows`` hold; a factor a row leaves out (or None) covers nothing. ``show`` of those
    never reached are named, in the model's order. (For an implementation that cannot
    take some levels, pass the model ``narrowed`` by them.)"""
    index = {name: i for i, name in enumerate(model.names)}
    seen: set[tuple[int, ...]] = set()
    for row in rows:
        levels = []
        for f in model.factors:
            level = row.get(f.name)
            levels.append(f.levels.index(level) if level in f.levels else -1)
        seen.add(tuple(levels))
    sets = model.sets(t, within) if within is None or all(f in index for f in within) else []
    covered = total = 0
    missing: list[Combination] = []
    for s in sets:
        pick = operator.itemgetter(*s)  # in C: a t-tuple of each row (t >= 2), else a level
        held = set(map(pick, seen)) if len(s) > 1 else {(pick(r),) for r in seen}
        for combo in model.valid_combinations(s):
            total += 1
            if combo in held:
                covered += 1
            elif len(missing) < show:
                missing.append(model.combination(s, combo))
    return Coverage(t, covered, total, tuple(missing))

"""Checks of a checkpoint's fields, for :func:`numptx.search.resume`: every field of the state
:func:`numptx.search.checkpoint.read` returns is checked for its type, its range and its
agreement with the others before the search is rebuilt, so a damaged or forged file is a
:class:`CheckpointError` naming the field, never a ``TypeError`` later in the run::

    from numptx.search import checkpoint
    from numptx.search.fields import Fields
    f = Fields(checkpoint.read("run.nxck"), "run.nxck")
    kind = f.keys()                                    # exactly the fields of its kind
    genes, cfg = f.genes(), f.config(kind, None)       # the API's checks and bounds
    f.fail("seed", "not an int")                       # CheckpointError: ... field seed: ...

A program must be made of the genes' pieces (an input of theirs, a constant of their dtype,
the words of one of their ops) and no longer than the run could make it.
"""
from __future__ import annotations

import base64
import math
import typing
from typing import Any, NoReturn

import numpy as np

from .. import stack_ptx as sp
from .checkpoint import FITS_SAVED, CheckpointError, brief, decode_array, decode_program
from .config import (CACHE_MAX, DEFAULTS, GENERATIONS_MAX, KINDS, Kind, SearchOptions,
                     check_config, check_seed, first_lengths)
from .evaluate import BUILDS, EVALUATE, PER_MODULE_MAX
from .genes import Genes, SearchError

__all__ = ["Fields", "KINDS"]

_COMMON = ("kind", "seed", "genes", "config", "rng", "population", "archive", "best", "history",
           "evaluated", "children_made", "seconds", "improved_at", "restarts")
_OPTIONAL = ("cache", "fits", "semantic",     # older checkpoints have none of them
             "islands",                         # a run of one island has none
             "screen",                          # a run without a predictor has none
             "learned",                         # nor one without learned descriptors
             "front")                           # the Pareto front: checked by resume
#: what a checkpoint without ``data.evaluate`` (written before it existed) was scored with
EVALUATE_BEFORE = "compile"
#: what a checkpoint without ``data.build`` (written before it existed) was assembled with
BUILD_BEFORE = "full"
_U128 = 1 << 128
_COUNT_MAX = 1 << 62                   # programs scored or made: any real run stays below


class Fields:
    """The checks of one checkpoint's state (``st``, read from ``spath``)."""

    def __init__(self, st: dict, spath: str):
        self.st, self.spath = st, spath

    def fail(self, field: str, what: str) -> NoReturn:
        raise CheckpointError(f"checkpoint {self.spath!r}: field {field}: {what}",
                              path=self.spath)

    # ---- leaves ----------------------------------------------------------------------------
    def int_(self, field: str, v: Any, low: int, high: int) -> int:
        if type(v) is not int or not low <= v <= high:
            self.fail(field, f"{brief(v)} is not an int in [{low}, {high:,}]")
        return v

    def num(self, field: str, v: Any, low: float = -math.inf, high: float = math.inf) -> float:
        """A number (int or float, not NaN) in [low, high]."""
        if type(v) not in (int, float) or not low <= v <= high:
            self.fail(field, f"{brief(v)} is not a number in [{low}, {high}]")
        try:
            return float(v)
        except OverflowError:          # an int past the float range (JSON allows 1e400 digits)
            self.fail(field, f"{brief(v)} is past the float range")

    def list_(self, field: str, v: Any, high: int, size: int | None = None) -> list:
        if not isinstance(v, list) or len(v) > high or (size is not None and len(v) != size):
            want = f"{size} items" if size is not None else f"at most {high:,} items"
            self.fail(field, f"{brief(v)} is not a list of {want}")
        return v

    def str_(self, field: str, v: Any) -> str:
        if not isinstance(v, str):
            self.fail(field, f"{brief(v)} is not text")
        return v

    # ---- the layout ------------------------------------------------------------------------
    def keys(self) -> Kind:
        """The kind, after checking that the state has exactly the kind's fields."""
        st = self.st
        kind = st.get("kind")
        if kind not in KINDS:
            self.fail(f"kind={brief(kind)}", f"not one of {', '.join(KINDS)}")
        need = set(_COMMON) | {"evolve" if kind == "evolve" else "data"}
        missing, extra = need - set(st), set(st) - need - set(_OPTIONAL)
        if missing:
            self.fail(sorted(missing)[0], "missing")
        if extra:
            self.fail(sorted(extra)[0], f"unknown for a {kind} checkpoint")
        return typing.cast(Kind, kind)

    def genes(self) -> Genes:
        try:
            return Genes.from_dict(self.st["genes"])
        except SearchError as e:
            self.fail("genes", str(e))

    def seed(self) -> int:
        try:
            seed = check_seed(self.st["seed"])
        except SearchError as e:
            self.fail("seed", str(e))
        if seed is None:
            self.fail("seed", "null; a run's seed is an int")
        return seed

    def config(self, kind: Kind, descriptors: Any) -> SearchOptions:
        """The run's options through the API's checks (bounds included)."""
        c = self.st["config"]
        if not isinstance(c, dict):
            self.fail("config", f"{brief(c)} is not an object")
        extra = set(c) - set(DEFAULTS) - {"user_descriptors"}
        if extra:
            self.fail("config", f"unknown option(s) {sorted(extra)}")
        cfg = dict(c)
        # a run saved before semantic dedup existed ran without it
        cfg.setdefault("semantic_dedup", 0)
        # ... and before linear scaling and Levenberg–Marquardt: without them
        cfg.setdefault("linear_scaling", False)
        cfg.setdefault("fit_method", "es")
        cfg.setdefault("input_weights", False)
        # ... and before (mu + lambda) survivors: generational
        cfg.setdefault("survivors", "children")
        # ... and before islands: one population (not the islands regress derives now)
        cfg.setdefault("islands", 1)
        # ... and before tree variation: linear
        cfg.setdefault("variation", "linear")
        # ... and before first lengths derived from the inputs: (2, 12) whatever the inputs
        cfg.setdefault("init_length", [2, 12])
        # a data run saves the method it resolved "auto" to (check_config bounds fit_trials
        # by the resolved one: "auto" alone would leave fit_top x fit_trials unbounded)
        if kind != "evolve" and cfg["fit_method"] == "auto":
            self.fail("config", "fit_method='auto': a data run's checkpoint holds the method "
                                "its run resolved ('lm' or 'es')")
        user = cfg.pop("user_descriptors", None)
        if user is not None:
            if kind != "map_elites" or not isinstance(user, list) or \
                    not all(isinstance(u, str) for u in user):
                self.fail("config.user_descriptors", f"{brief(user)} is not a list of names")
            if descriptors is None:
                raise SearchError(f"resume: checkpoint {self.spath!r} uses user descriptors "
                                  f"{user}; pass descriptors= again")
        saved = cfg.get("descriptors")
        if saved is not None and (not isinstance(saved, list)
                                  or not all(isinstance(n, str) for n in saved)):
            self.fail("config.descriptors", f"{brief(saved)} is not a list of names")
        if descriptors is not None:
            given = [d if isinstance(d, str) else d[0] if isinstance(d, tuple) and d else d
                     for d in descriptors]                  # a Descriptor's name comes first
            if kind == "map_elites" and saved is not None and given != saved:
                raise SearchError(f"resume: descriptors={given}: checkpoint {self.spath!r} "
                                  f"was run with descriptors {saved} (in that order); its "
                                  f"archive is filed by them: pass those again")
            cfg["descriptors"] = tuple(descriptors)
        elif saved is not None:
            cfg["descriptors"] = tuple(saved)
        if "init_length" in cfg:
            il = cfg["init_length"]
            if il is not None and not isinstance(il, list):
                self.fail("config", f"init_length={brief(il)}: not a [low, high] pair or null")
            cfg["init_length"] = None if il is None else tuple(il)
        try:                   # the same checks as the API's (a hand-edited file, say)
            return check_config(kind, **cfg)
        except SearchError as e:
            self.fail("config", str(e))

    def rng_state(self) -> dict:
        """The random generator's state (PCG64: two 128-bit words, a buffered 32-bit draw)."""
        r = self.st["rng"]
        if not isinstance(r, dict) or set(r) != {"bit_generator", "state", "has_uint32",
                                                 "uinteger"}:
            self.fail("rng", f"{brief(r)} is not a PCG64 state")
        if r["bit_generator"] != "PCG64":
            self.fail("rng.bit_generator", f"{brief(r['bit_generator'])}: not 'PCG64'")
        s = r["state"]
        if not isinstance(s, dict) or set(s) != {"state", "inc"}:
            self.fail("rng.state", f"{brief(s)} is not {{'state', 'inc'}}")
        self.int_("rng.state.state", s["state"], 0, _U128 - 1)
        self.int_("rng.state.inc", s["inc"], 0, _U128 - 1)
        self.int_("rng.has_uint32", r["has_uint32"], 0, 1)
        self.int_("rng.uinteger", r["uinteger"], 0, (1 << 32) - 1)
        return r

    def history(self, cfg: SearchOptions) -> list[tuple]:
        rows = self.list_("history", self.st["history"], min(cfg.generations,
                                                             GENERATIONS_MAX))
        out = []
        for i, g in enumerate(rows):
            f = f"history[{i}]"
            self.list_(f, g, 7, 7)
            out.append((self.int_(f + ".generation", g[0], i, i),
                        self.num(f + ".best", g[1]), self.num(f + ".median", g[2]),
                        self.int_(f + ".evaluated", g[3], 0, _COUNT_MAX),
                        self.num(f + ".mean_length", g[4], 0.0, 1e9),
                        self.int_(f + ".filled", g[5], 0, _COUNT_MAX),
                        self.num(f + ".seconds", g[6], 0.0, 1e12)))
        return out

    def counters(self, generations: int) -> dict:
        st = self.st
        return {"evaluated": self.int_("evaluated", st["evaluated"], 0, _COUNT_MAX),
                "children_made": self.int_("children_made", st["children_made"], 0, _COUNT_MAX),
                "seconds": self.num("seconds", st["seconds"], 0.0, 1e12),
                "improved_at": self.int_("improved_at", st["improved_at"], 0, generations),
                "restarts": self.int_("restarts", st["restarts"], 0, generations)}

    # ---- programs --------------------------------------------------------------------------
    def programs(self, genes: Genes, cfg: SearchOptions) -> Programs:
        return Programs(self, genes, cfg)

    def cache(self) -> dict[bytes, float]:
        c = self.st.get("cache")
        if c is None:
            return {}
        if not isinstance(c, dict) or set(c) != {"keys", "losses"}:
            self.fail("cache", f"{brief(c)} is not {{'keys', 'losses'}}")
        raw, losses = self._keyed("cache", c)
        if losses.dtype != np.float64 or losses.ndim != 1 or len(losses) > CACHE_MAX:
            self.fail("cache.losses", f"{losses.dtype} array of shape {losses.shape}, not "
                                      f"float64 of at most {CACHE_MAX:,}")
        if len(raw) != 16 * len(losses):
            self.fail("cache", f"{len(raw)} key bytes for {len(losses)} losses")
        if np.isnan(losses).any():
            self.fail("cache.losses", "a NaN loss (a run scores NaN as +inf)")
        return {raw[16 * i:16 * i + 16]: v for i, v in enumerate(losses.tolist())}

    def fits(self, progs: Programs) -> dict[bytes, tuple[list, float]]:
        rows = self.list_("fits", self.st.get("fits", []), FITS_SAVED)
        out = {}
        for i, r in enumerate(rows):
            f = f"fits[{i}]"
            self.list_(f, r, 3, 3)
            try:
                key = base64.b64decode(self.str_(f + ".key", r[0]), validate=True)
            except ValueError as e:
                self.fail(f + ".key", f"not base64 ({e})")
            out[key] = (progs.one(f + ".program", r[1]), self.num(f + ".loss", r[2]))
        return out

    def data(self, genes: Genes) -> dict:
        d = self.st["data"]
        need = {"X", "y", "loss", "names"}
        if not isinstance(d, dict) or not need <= set(d) <= need | {"evaluate", "build"}:
            self.fail("data", f"{brief(d)} is not {{'X', 'y', 'loss', 'names', 'evaluate', "
                              f"'build'}}")
        evaluate = d.get("evaluate", EVALUATE_BEFORE)
        if evaluate not in EVALUATE:
            self.fail("data.evaluate", f"{brief(evaluate)} is not one of "
                                       f"{', '.join(EVALUATE)}")
        build = d.get("build", BUILD_BEFORE)
        if not isinstance(build, str) or build not in BUILDS:
            self.fail("data.build", f"{brief(build)} is not one of {', '.join(BUILDS)}")
        want = "<f8" if genes.dtype == "f64" else "<f4"
        try:
            X, y = decode_array(d["X"], "data.X"), decode_array(d["y"], "data.y")
        except SearchError as e:
            self.fail("data", str(e))
        if X.dtype.str != want or y.dtype.str != want:
            self.fail("data", f"X is {X.dtype}, y {y.dtype}; the genes' dtype is {genes.dtype}")
        if X.ndim != 2 or y.ndim != 1 or X.shape[1] != len(genes.names):
            self.fail("data", f"X of shape {X.shape}, y of {y.shape}: X needs one column per "
                              f"input ({', '.join(genes.names)})")
        if d["names"] != list(genes.names):
            self.fail("data.names", f"{brief(d['names'])}: the genes' inputs are "
                                    f"{list(genes.names)}")
        return {"X": X, "y": y, "loss": self.str_("data.loss", d["loss"]),
                "names": genes.names, "evaluate": evaluate, "build": build}

    def _keyed(self, field: str, m: dict) -> tuple[bytes, np.ndarray]:
        """A table's key bytes (base64 text) and losses (an encoded array), decoded; a fault
        names ``field.keys`` or ``field`` once (a CheckpointError is not wrapped again)."""
        text = self.str_(field + ".keys", m["keys"])
        try:
            raw = base64.b64decode(text, validate=True)
        except ValueError as e:
            self.fail(field + ".keys", f"not base64 ({e})")
        try:
            losses = decode_array(m["losses"], "losses")
        except SearchError as e:
            self.fail(field, str(e))
        return raw, losses

    def islands(self, cfg: SearchOptions, population: int) -> list[int] | None:
        """The island sizes of a run of ``cfg.islands`` > 1 (None: split evenly, as the run
        does after a restart); each at least 1, summing to the population's size."""
        v = self.st.get("islands")
        if v is None:
            # a run saves none only with a whole population (made fresh: split evenly); a
            # smaller one's split is its islands' own, and a fresh even one would differ
            if cfg.islands > 1 and 0 < population < cfg.population:
                self.fail("islands", f"missing: a run of {cfg.islands} islands holding "
                                     f"{population} of its {cfg.population} programs saves "
                                     f"its island sizes")
            return None
        if cfg.islands < 2:
            self.fail("islands", f"{brief(v)} for a run of one island")
        if not (isinstance(v, list) and len(v) == cfg.islands
                and all(type(n) is int and n >= 1 for n in v) and sum(v) == population):
            self.fail("islands", f"{brief(v)} is not {cfg.islands} island sizes (ints >= 1) "
                                 f"summing to the population's {population}")
        # island i keeps at most its share of the population (keep-best's n; migrants replace)
        k, p = cfg.islands, cfg.population
        share = [p * (i + 1) // k - p * i // k for i in range(k)]
        over = [i for i, (n, m) in enumerate(zip(v, share)) if n > m]
        if over:
            self.fail("islands", f"{brief(v)}: island {over[0]} holds {v[over[0]]} programs, "
                                 f"more than its share {share[over[0]]} of the population "
                                 f"of {p} (shares {share})")
        return v

    def semantic(self) -> tuple[dict[bytes, float], int]:
        """Semantic dedup's table (output hash -> loss) and its count of duplicates found;
        empty for a checkpoint without one."""
        m = self.st.get("semantic")
        if m is None:
            return {}, 0
        if not isinstance(m, dict) or set(m) != {"keys", "losses", "hits"}:
            self.fail("semantic", f"{brief(m)} is not {{'keys', 'losses', 'hits'}}")
        raw, losses = self._keyed("semantic", m)
        if losses.dtype != np.float64 or losses.ndim != 1 or len(losses) > CACHE_MAX:
            self.fail("semantic.losses", f"{losses.dtype} array of shape {losses.shape}, not "
                                         f"float64 of at most {CACHE_MAX:,}")
        if len(raw) != 16 * len(losses):
            self.fail("semantic", f"{len(raw)} key bytes for {len(losses)} losses")
        if np.isnan(losses).any():
            self.fail("semantic.losses", "a NaN loss (a run scores NaN as +inf)")
        hits = self.int_("semantic.hits", m["hits"], 0, _COUNT_MAX)
        return {raw[16 * i:16 * i + 16]: v for i, v in enumerate(losses.tolist())}, hits

    def evolve(self) -> dict:
        e = self.st["evolve"]
        need = {"site", "select", "per_module"}
        if not isinstance(e, dict) or not need <= set(e) <= need | {"build"}:
            self.fail("evolve", f"{brief(e)} is not {{'site', 'select', 'per_module', "
                                f"'build'}}")
        build = e.get("build", BUILD_BEFORE)
        if build not in ("full", "fast"):
            self.fail("evolve.build", f"{brief(build)} is not 'full' or 'fast'")
        pm = e["per_module"]
        return {"site": self.str_("evolve.site", e["site"]),
                "select": self.str_("evolve.select", e["select"]),
                "per_module": None if pm is None else
                self.int_("evolve.per_module", pm, 1, PER_MODULE_MAX), "build": build}


class Programs:
    """Decodes a checkpoint's programs and checks each: made of the genes' pieces, no longer
    than the run makes them (``max_length``; a first program: ``init_length`` genes)."""

    def __init__(self, fields: Fields, genes: Genes, cfg: SearchOptions):
        self.f, self.genes = fields, genes
        # the op genes' words and the input genes' (weighted inputs: const, input, mul)
        words = [genes.op_words(n) for n in genes.ops] + [genes.input_words(genes.names[0])]
        self.instr = {op.word for w in words for op in w if op.kind in ("instr", "meta")}
        zero = genes.const(0.0)
        self.const_kind, self.const_tag = zero.kind, zero.word & 0xFFFF
        self.names = set(genes.names)
        first = first_lengths(cfg.init_length, len(genes.names))
        self.max_ops = max(cfg.max_length, first[1] * max(map(len, words)))

    def one(self, field: str, text: Any) -> list:
        f = self.f
        try:
            prog = decode_program(f.str_(field, text))
        except (sp.SerializationError, ValueError, TypeError) as e:
            f.fail(field, f"the program does not load ({e})")
        if len(prog) > self.max_ops:          # (a deletion can leave a program empty)
            f.fail(field, f"a program of {len(prog)} ops; this run makes at most "
                          f"{self.max_ops} (max_length, init_length)")
        for j, op in enumerate(prog):
            kind = op.kind
            if kind == "input":
                ok = op.name in self.names
            elif kind in ("const", "const64"):
                ok = kind == self.const_kind and op.word & 0xFFFF == self.const_tag
            else:
                ok = kind in ("instr", "meta") and op.word in self.instr
            if not ok:
                f.fail(field, f"op {j} ({op!r}) is not one of the genes' inputs, "
                              f"{self.genes.dtype} constants or ops "
                              f"({', '.join(self.genes.ops)})")
        return prog

    def row(self, field: str, r: Any) -> tuple[list, float, bool]:
        """A [program, loss, fitted] row."""
        self.f.list_(field, r, 3, 3)
        if type(r[2]) is not bool:
            self.f.fail(field + ".fitted", f"{brief(r[2])} is not true or false")
        return self.one(field + ".program", r[0]), self.f.num(field + ".loss", r[1]), r[2]

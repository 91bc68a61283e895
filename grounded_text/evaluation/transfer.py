"""SentEval transfer evaluation: a logistic regression on frozen sentence embeddings.

Protocols follow SentEval (Conneau & Kiela, LREC 2018; ``senteval/tools/validation.py``,
its scikit-learn branch), as used for Table 3 of Bordes et al., "Incorporating Visual
Semantics into Sentence Representations within a Grounded Space", EMNLP 2019:

* **MR, CR, SUBJ, MPQA** — ``InnerKFoldClassifier``: stratified k-fold cross-validation
  (k = 10, shuffled, seeded); inside each outer training fold an inner stratified
  k-fold CV chooses the inverse L2 strength C from ``CV_C_GRID`` = 2^-2 .. 2^3, the
  model is refitted on the whole outer training fold and scored on the held-out fold.
  Accuracy = mean over the k outer folds.
* **SST-2, SICK-E** — ``SplitClassifier``: one model per C in ``CV_C_GRID`` fitted on
  train; the C with the best dev accuracy is scored on test (never refitted on dev).
* **TREC, MRPC** — ``KFoldClassifier``: no dev set, so k-fold CV on train chooses C
  from ``KFOLD_C_GRID`` = 2^-1 .. 2^5; the model refitted on all of train is scored on
  test. MRPC also reports F1 of the paraphrase class.
* **Pair tasks** (MRPC, SICK-E, SNLI) use the features ``[u, v, |u − v|, u * v]``
  (``pair_features``; InferSent, Conneau et al. 2017, §3.1). SentEval's own MRPC and
  SICK-E code uses only ``[|u − v|, u * v]``: pass ``pair_feature_set="absdiff_prod"``
  for that variant.
* **SNLI** — SentEval trains on the SNLI training set, which is not part of this data:
  the task is reported as unavailable (never trained on dev or test). If
  ``SNLI/{s1,s2,labels}.train`` exist it is run like SST-2.

Classifier: ``sklearn.linear_model.LogisticRegression`` (L2, lbfgs, multinomial for
more than two classes, ``random_state=seed``), after ``sklearn.preprocessing.StandardScaler``
fitted on the training part only (inside a ``Pipeline``, so no statistics leak from
held-out folds; SentEval itself does not standardise, the optimum is the same model
family and standardising only makes lbfgs converge). Accuracies and F1 are in percent,
as SentEval and the papers report them.

An encoder is any callable ``list[str]`` (n) → float array [n, N]: a hub SavedModel from
``grounded_text.load``, or ``grounded_text.baselines.glove_mean_encoder()``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from grounded_text.data import senteval as se
from grounded_text.evaluation.encoders import EmbeddingCache, Encoder, cached
from grounded_text.evaluation.names import SENTEVAL_SEED, TASKS
from grounded_text.utils.extras import assert_installed

try:
    import sklearn
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import f1_score
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from threadpoolctl import threadpool_limits  # comes with scikit-learn
except ImportError:  # the eval extra: _needs_sklearn names it before a classifier is built
    sklearn = None

CV_C_GRID = tuple(2.0**t for t in range(-2, 4))  # SentEval InnerKFold/Split, sklearn branch
KFOLD_C_GRID = tuple(2.0**t for t in range(-1, 6))  # SentEval KFoldClassifier, sklearn branch
CV_TASKS = ("MR", "CR", "SUBJ", "MPQA")
_ALIASES = {"SST": "SST2", "SST-2": "SST2", "SICK-E": "SICKEntailment", "SICKE": "SICKEntailment"}

# Bordes et al. 2019, Table 3, SkipThought (T): accuracy %, MRPC as accuracy/F1. For context only.
BORDES_2019_SKIPTHOUGHT_T = {
    "MR": 75.9, "CR": 79.2, "SUBJ": 92.0, "MPQA": 86.7, "MRPC": (72.2, 80.2), "SST2": 81.8,
    "SICKEntailment": 81.1,
}


def _uv_absdiff_prod(u, v):
    return np.concatenate([u, v, np.abs(u - v), u * v], axis=1)


def _absdiff_prod(u, v):
    return np.concatenate([np.abs(u - v), u * v], axis=1)


PAIR_FEATURE_SETS = {"uv_absdiff_prod": _uv_absdiff_prod, "absdiff_prod": _absdiff_prod}


def pair_features(u, v, feature_set: str = "uv_absdiff_prod") -> np.ndarray:
    """Pair features of two embedding matrices (InferSent §3.1; SentEval pair tasks).

    Args:
      u, v: float [n, N] embeddings of the first and second sentences.
      feature_set: ``"uv_absdiff_prod"`` → [u, v, |u − v|, u * v], float64 [n, 4N];
        ``"absdiff_prod"`` → [|u − v|, u * v], float64 [n, 2N] (SentEval's MRPC/SICK-E code).

    Raises:
      ValueError: shapes differ or are not 2-D, or an unknown ``feature_set``.
    """
    u = np.asarray(u, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    if u.ndim != 2 or u.shape != v.shape:
        raise ValueError(f"pair_features: u {u.shape} and v {v.shape} must be equal [n, N] arrays.")
    if feature_set not in PAIR_FEATURE_SETS:
        raise ValueError(f"pair_features: feature_set must be one of {sorted(PAIR_FEATURE_SETS)}, got {feature_set!r}.")
    return PAIR_FEATURE_SETS[feature_set](u, v)


@dataclasses.dataclass(frozen=True)
class ClassifierConfig:
    """How the logistic regressions are fitted and selected.

    Attributes:
      seed: ``random_state`` of the folds and of ``LogisticRegression`` (SentEval: 1111).
      kfold: k of every (outer and inner) stratified k-fold (SentEval default 10;
        its "prototyping" configuration uses 5).
      max_iter: lbfgs iterations per fit.
      standardize: ``StandardScaler`` before the classifier (fitted on training data only).
      n_jobs: parallel fits in the inner grid searches (``GridSearchCV``).
      cv_grid: C values for MR/CR/SUBJ/MPQA, SST-2, SICK-E.
      kfold_grid: C values for TREC, MRPC.
      pair_feature_set: ``"uv_absdiff_prod"`` ([u, v, |u−v|, u*v]) or ``"absdiff_prod"``.
      blas_threads: BLAS threads during the fits (``threadpoolctl``); ``None`` leaves
        the library default. 1 (default) is much faster for these small lbfgs problems
        (multi-threaded BLAS spin-waits dominate: 0.1 s vs 3 ms per 300 x 50 fit on 2 cores).
    """

    seed: int = SENTEVAL_SEED
    kfold: int = 10
    max_iter: int = 1000
    standardize: bool = True
    n_jobs: int = 1
    cv_grid: tuple = CV_C_GRID
    kfold_grid: tuple = KFOLD_C_GRID
    pair_feature_set: str = "uv_absdiff_prod"
    blas_threads: int | None = 1

    def __post_init__(self):
        if self.kfold < 2:
            raise ValueError(f"ClassifierConfig: kfold must be >= 2, got {self.kfold}.")
        if not self.cv_grid or not self.kfold_grid or min(self.cv_grid + self.kfold_grid) <= 0:
            raise ValueError("ClassifierConfig: C grids must be non-empty and positive.")
        if self.pair_feature_set not in PAIR_FEATURE_SETS:
            raise ValueError(f"ClassifierConfig: pair_feature_set must be one of {sorted(PAIR_FEATURE_SETS)}.")

    def describe(self) -> str:
        scale = "StandardScaler + " if self.standardize else ""
        return f"{scale}sklearn LogisticRegression (L2, lbfgs, max_iter={self.max_iter}, random_state={self.seed})"


def make_classifier(C: float, config: ClassifierConfig = ClassifierConfig()):
    """A fresh ``Pipeline([StandardScaler], LogisticRegression(C))`` (see ``ClassifierConfig``).

    Raises:
      MissingExtraError (an ImportError): scikit-learn is not installed.
    """
    _needs_sklearn()
    clf = LogisticRegression(C=C, max_iter=config.max_iter, random_state=config.seed)
    return make_pipeline(StandardScaler(), clf) if config.standardize else make_pipeline(clf)


def _fitting(config: ClassifierConfig):
    """Context for the fits: BLAS thread limit, lbfgs convergence warnings silenced."""
    stack = contextlib.ExitStack()
    if config.blas_threads is not None:
        stack.enter_context(threadpool_limits(limits=config.blas_threads, user_api="blas"))
    stack.enter_context(warnings.catch_warnings())
    warnings.filterwarnings("ignore", message=".*lbfgs failed to converge.*")
    return stack


def _needs_sklearn() -> None:
    """The classifiers are scikit-learn's (the eval extra): a MissingExtraError names it."""
    assert_installed(sklearn, "sklearn", "SentEval transfer")


def _check_xy(X, y, name: str):
    """A classifier protocol's inputs as float64 [n, d] and [n]; first of all, scikit-learn is there."""
    _needs_sklearn()
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y)
    if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0]:
        raise ValueError(f"{name}: features {X.shape} and labels {y.shape} do not match ([n, d] and [n]).")
    if not np.isfinite(X).all():
        raise ValueError(f"{name}: features contain NaN or Inf.")
    return X, y


def _check_folds(y, k: int, name: str):
    classes, counts = np.unique(y, return_counts=True)
    if classes.size < 2:
        raise ValueError(f"{name}: needs at least 2 classes, got {classes.tolist()}.")
    if counts.min() < k:
        raise ValueError(
            f"{name}: class {classes[counts.argmin()]} has {counts.min()} examples, fewer than kfold={k} "
            "(use more examples or a smaller kfold)."
        )


def _grid_search(X, y, grid, config: ClassifierConfig, name: str):
    """Stratified k-fold CV over C (``GridSearchCV``, accuracy); refits on all of X."""
    _check_folds(y, config.kfold, name)
    pipe = make_classifier(1.0, config)
    search = GridSearchCV(
        pipe,
        {"logisticregression__C": list(grid)},
        scoring="accuracy",
        cv=StratifiedKFold(n_splits=config.kfold, shuffle=True, random_state=config.seed),
        n_jobs=config.n_jobs,
        refit=True,
    )
    with _fitting(config):
        search.fit(X, y)
    return search


def cross_validated_accuracy(X, y, config: ClassifierConfig = ClassifierConfig(), name: str = "cv") -> dict:
    """SentEval ``InnerKFoldClassifier``: nested stratified k-fold CV (MR, CR, SUBJ, MPQA).

    Args:
      X: float [n, d] features. y: int [n] labels.
      config: folds, seed, C grid (``config.cv_grid``).

    Returns:
      ``{"acc": mean outer-fold test accuracy (%), "devacc": mean inner-CV accuracy of
      the chosen C (%), "fold_acc": [k] (%), "C": [k] chosen C per fold, "n": n}``.

    Raises:
      ValueError: shapes disagree, non-finite features, fewer than 2 classes, or a
      class with fewer than ``kfold`` examples.
    """
    X, y = _check_xy(X, y, name)
    _check_folds(y, config.kfold, name)
    outer = StratifiedKFold(n_splits=config.kfold, shuffle=True, random_state=config.seed)
    accs, devaccs, Cs = [], [], []
    for train_idx, test_idx in outer.split(X, y):
        search = _grid_search(X[train_idx], y[train_idx], config.cv_grid, config, name)
        accs.append(100.0 * search.score(X[test_idx], y[test_idx]))
        devaccs.append(100.0 * search.best_score_)
        Cs.append(float(search.best_params_["logisticregression__C"]))
    return {"acc": float(np.mean(accs)), "devacc": float(np.mean(devaccs)), "fold_acc": [float(a) for a in accs],
            "C": Cs, "n": int(len(y))}


def train_cv_test(X_train, y_train, X_test, y_test, config: ClassifierConfig = ClassifierConfig(),
                  name: str = "kfold", f1: bool = False) -> dict:
    """SentEval ``KFoldClassifier`` (TREC, MRPC): C by k-fold CV on train, refit on train, test.

    Returns:
      ``{"acc": test accuracy (%), "devacc": best CV accuracy on train (%), "C": chosen C,
      "n_train", "n_test"}`` and ``"f1"`` (%, positive class 1, binary only) when ``f1``.
    """
    X_train, y_train = _check_xy(X_train, y_train, f"{name}/train")
    X_test, y_test = _check_xy(X_test, y_test, f"{name}/test")
    search = _grid_search(X_train, y_train, config.kfold_grid, config, name)
    yhat = search.predict(X_test)
    out = {"acc": 100.0 * float(np.mean(yhat == y_test)), "devacc": 100.0 * float(search.best_score_),
           "C": float(search.best_params_["logisticregression__C"]),
           "n_train": int(len(y_train)), "n_test": int(len(y_test))}
    if f1:
        out["f1"] = 100.0 * float(f1_score(y_test, yhat))
    return out


def train_dev_test(X_train, y_train, X_dev, y_dev, X_test, y_test, config: ClassifierConfig = ClassifierConfig(),
                   name: str = "split") -> dict:
    """SentEval ``SplitClassifier`` (SST-2, SICK-E): fit on train per C, pick C on dev, score test.

    Returns:
      ``{"acc": test accuracy (%), "devacc": dev accuracy of the chosen C (%), "C",
      "n_train", "n_dev", "n_test"}``.
    """
    X_train, y_train = _check_xy(X_train, y_train, f"{name}/train")
    X_dev, y_dev = _check_xy(X_dev, y_dev, f"{name}/dev")
    X_test, y_test = _check_xy(X_test, y_test, f"{name}/test")
    if np.unique(y_train).size < 2:
        raise ValueError(f"{name}/train: needs at least 2 classes.")
    best = None
    for C in config.cv_grid:
        clf = make_classifier(C, config)
        with _fitting(config):
            clf.fit(X_train, y_train)
        dev = 100.0 * clf.score(X_dev, y_dev)
        if best is None or dev > best[0]:  # first best wins, as argmax
            best = (dev, C, clf)
    dev, C, clf = best
    return {"acc": 100.0 * float(clf.score(X_test, y_test)), "devacc": float(dev), "C": float(C),
            "n_train": int(len(y_train)), "n_dev": int(len(y_dev)), "n_test": int(len(y_test))}


def _features(emb: EmbeddingCache, data: se.LabelledSentences, config: ClassifierConfig) -> np.ndarray:
    """A task's classifier inputs: the embeddings, or a pair task's pair features."""
    if data.is_pair:
        return pair_features(emb(data.sentences), emb(data.sentences2), config.pair_feature_set)
    return emb(data.sentences)


def subsample(data: se.LabelledSentences, max_examples: int | None, seed: int) -> se.LabelledSentences:
    """At most ``max_examples`` examples, a seeded random subset (original order kept).

    A random (not leading) subset, because several files list one class first.
    ``None`` or a value ≥ n returns ``data`` unchanged.
    """
    if max_examples is None or max_examples >= len(data):
        return data
    if max_examples < 1:
        raise ValueError(f"max_examples must be >= 1, got {max_examples}.")
    idx = np.sort(np.random.default_rng(seed).permutation(len(data))[:max_examples])
    return data.take(idx)


def canonical_task(name: str) -> str:
    """Task name as in ``TASKS`` (accepts SST, SST-2, SICK-E; case-insensitive).

    Raises:
      ValueError: unknown task.
    """
    key = _ALIASES.get(name.upper(), name).upper()
    for t in TASKS:
        if t.upper() == key:
            return t
    raise ValueError(f"Unknown transfer task {name!r}; choose from {list(TASKS)} (aliases {sorted(_ALIASES)}).")


def _splits_n(splits: dict) -> dict:
    return {f"n_{k}": len(v) for k, v in splits.items()}


def evaluate_task(
    encoder: Encoder | EmbeddingCache,
    task: str,
    senteval_dir: str | Path,
    *,
    sts_dir: str | Path | None = None,
    config: ClassifierConfig = ClassifierConfig(),
    max_examples: int | None = None,
) -> dict:
    """Runs one SentEval task (see module docstring for the protocols).

    Args:
      encoder: strings → float [n, N].
      task: a name in ``TASKS`` (or an alias).
      senteval_dir: the ``senteval/`` folder.
      sts_dir: folder holding ``SICK/`` (SICK-E); default ``senteval_dir/../sts``.
      config: classifier settings.
      max_examples: cap every split at this many examples (seeded random subset; for CI).

    Returns:
      A dict with ``task``, ``status`` (``"ok"`` or ``"unavailable"`` with ``reason``),
      ``protocol``, ``classifier``, ``acc`` (%) and the fields of the protocol
      function, ``n`` (examples scored), ``max_examples``, ``seconds`` (wall time,
      encoding included).

    Raises:
      ValueError: unknown task. FileNotFoundError: the task's files are missing.
    """
    task = canonical_task(task)
    emb = cached(encoder)
    senteval_dir = Path(senteval_dir)
    sts_dir = Path(sts_dir) if sts_dir is not None else senteval_dir.parent / "sts"
    t0 = time.perf_counter()
    cut = lambda d: subsample(d, max_examples, config.seed)  # noqa: E731
    base = {"task": task, "classifier": config.describe(), "max_examples": max_examples}
    if task in CV_TASKS:
        reader = {"MR": se.read_mr, "CR": se.read_cr, "SUBJ": se.read_subj, "MPQA": se.read_mpqa}[task]
        data = cut(reader(senteval_dir))
        res = cross_validated_accuracy(_features(emb, data, config), data.labels, config, task)
        protocol = (f"{config.kfold}-fold stratified CV; C in {_grid(config.cv_grid)} by inner "
                    f"{config.kfold}-fold CV on each training fold (SentEval InnerKFoldClassifier)")
    elif task in ("SST2", "SICKEntailment", "SNLI"):
        if task == "SST2":
            splits = se.read_sst2(senteval_dir)
        elif task == "SICKEntailment":
            splits = se.read_sick_e(sts_dir)
        else:
            splits = se.read_snli(senteval_dir)
            if "train" not in splits or "dev" not in splits or "test" not in splits:
                return {**base, "status": "unavailable", "acc": None, **_splits_n(splits),
                        "reason": ("SNLI training set not available (SNLI/s1.train, s2.train, labels.train "
                                   "missing); SentEval trains on it, and training on dev/test would not be "
                                   "an SNLI result."),
                        "protocol": "train / dev (C) / test", "seconds": time.perf_counter() - t0}
        splits = {k: cut(v) for k, v in splits.items()}
        X = {k: _features(emb, v, config) for k, v in splits.items()}
        res = train_dev_test(X["train"], splits["train"].labels, X["dev"], splits["dev"].labels,
                             X["test"], splits["test"].labels, config, task)
        protocol = f"train; C in {_grid(config.cv_grid)} chosen on dev; test (SentEval SplitClassifier)"
    else:  # TREC, MRPC
        reader = se.read_trec if task == "TREC" else se.read_mrpc
        splits = {k: cut(v) for k, v in reader(senteval_dir).items()}
        X = {k: _features(emb, v, config) for k, v in splits.items()}
        res = train_cv_test(X["train"], splits["train"].labels, X["test"], splits["test"].labels, config, task,
                            f1=(task == "MRPC"))
        protocol = (f"C in {_grid(config.kfold_grid)} by {config.kfold}-fold CV on train; refit on train; "
                    "test (SentEval KFoldClassifier)")
    if task in ("MRPC", "SICKEntailment", "SNLI"):
        protocol += f"; pair features {config.pair_feature_set}"
    n = res.get("n", res.get("n_test"))
    return {**base, "status": "ok", "protocol": protocol, **res, "n": n, "seconds": time.perf_counter() - t0}


def _grid(grid) -> str:
    exps = [np.log2(c) for c in grid]
    if all(float(e).is_integer() for e in exps) and exps == list(np.arange(exps[0], exps[-1] + 1)):
        return f"2^{int(exps[0])}..2^{int(exps[-1])}"
    return "{" + ", ".join(f"{c:g}" for c in grid) + "}"


def evaluate_transfer(
    encoder: Encoder,
    senteval_dir: str | Path,
    tasks: Sequence[str] | None = None,
    *,
    sts_dir: str | Path | None = None,
    config: ClassifierConfig = ClassifierConfig(),
    max_examples: int | None = None,
    log: Callable[[str], None] | None = None,
) -> dict:
    """The transfer report of an encoder: ``{task: evaluate_task(...)}`` in ``TASKS`` order.

    Args:
      tasks: names (or aliases) to run; default all of ``TASKS``.
      log: called with one line per finished task (e.g. ``print``).

    Raises:
      FileNotFoundError: ``senteval_dir`` does not exist. ValueError: unknown task.
    """
    _needs_sklearn()  # the classifiers: named before any task is read
    senteval_dir = Path(senteval_dir)
    if not senteval_dir.is_dir():
        raise FileNotFoundError(f"SentEval directory {str(senteval_dir)!r} does not exist.")
    wanted = [canonical_task(t) for t in (tasks or TASKS)]
    emb = cached(encoder)
    report = {}
    for task in TASKS:
        if task in wanted:
            report[task] = evaluate_task(emb, task, senteval_dir, sts_dir=sts_dir, config=config,
                                         max_examples=max_examples)
            if log:
                r = report[task]
                log(f"{task}: " + (f"acc {r['acc']:.2f} (n={r['n']}, {r['seconds']:.1f} s)"
                                   if r["status"] == "ok" else f"unavailable: {r['reason']}"))
    return report


def _fmt(x, nd=1) -> str:
    return "n/a" if x is None else f"{x:.{nd}f}"


def _n_text(r: dict) -> str:
    if "n_train" in r:
        parts = [str(r["n_train"])] + ([str(r["n_dev"])] if "n_dev" in r else []) + [str(r["n_test"])]
        return "/".join(parts)
    return str(r.get("n", ""))


def format_transfer_markdown(report: dict, title: str = "SentEval transfer (logistic regression)") -> str:
    """A Markdown table of one encoder's ``evaluate_transfer`` report (accuracy %, MRPC acc/F1)."""
    lines = [f"### {title}", "", "| task | n (train/dev/test or CV) | acc % | dev acc % | C | protocol |",
             "|---|---:|---:|---:|---|---|"]
    for task, r in report.items():
        if r["status"] != "ok":
            lines.append(f"| {task} | – | unavailable | – | – | {r['reason']} |")
            continue
        acc = _fmt(r["acc"]) + (f" / F1 {_fmt(r['f1'])}" if "f1" in r else "")
        C = r["C"] if not isinstance(r["C"], list) else "per fold: " + ",".join(f"{c:g}" for c in r["C"])
        lines.append(f"| {task} | {_n_text(r)} | {acc} | {_fmt(r['devacc'])} | {C} | {r['protocol']} |")
    return "\n".join(lines)


def _cell(r: dict | None) -> str:
    if r is None:
        return "–"
    if r["status"] != "ok":
        return "unavailable"
    return _fmt(r["acc"]) + (f"/{_fmt(r['f1'])}" if "f1" in r else "")


def format_comparison_markdown(reports: dict[str, dict], reference: bool = True) -> str:
    """Side-by-side transfer table: ``{model label: evaluate_transfer report}`` → Markdown.

    Cells are test accuracy % (MRPC: accuracy/F1). With ``reference``, a last column
    cites Bordes et al. 2019, Table 3, SkipThought (T), for context (other data and
    encoders: not a like-for-like comparison).
    """
    tasks = [t for t in TASKS if any(t in r for r in reports.values())]
    head = list(reports) + (["Bordes et al. 2019 T3: SkipThought (T)"] if reference else [])
    lines = ["| task | " + " | ".join(head) + " |", "|---|" + "---:|" * len(head)]
    for t in tasks:
        cells = [_cell(reports[m].get(t)) for m in reports]
        if reference:
            ref = BORDES_2019_SKIPTHOUGHT_T.get(t)
            cells.append("–" if ref is None else (f"{ref[0]}/{ref[1]}" if isinstance(ref, tuple) else f"{ref}"))
        lines.append(f"| {t} | " + " | ".join(cells) + " |")
    return "\n".join(lines)

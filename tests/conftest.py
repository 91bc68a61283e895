"""Shared fixtures.

Real data: ``$GROUNDED_TEXT_DATA`` or ``../shared/data`` beside the checkout. When
absent, tests that need it skip with the reason, except under CI (``CI=true``),
where a missing data path fails, so a green CI never means "everything skipped".
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest

REPO = Path(__file__).resolve().parents[1]


def _data_root() -> Path | None:
    env = os.environ.get("GROUNDED_TEXT_DATA")
    cand = Path(env) if env else REPO.parent / "shared" / "data"
    return cand if (cand / "flickr8k").is_dir() and (cand / "sts").is_dir() else None


def pytest_xdist_auto_num_workers(config) -> int:
    """``-n auto`` (setup.cfg): one worker per core, at most 4. Each worker imports its own
    TensorFlow (about 1.5 GB resident) and many tests start TensorFlow subprocesses, so more
    workers than cores only queue; ``$GROUNDED_TEXT_TEST_WORKERS`` overrides."""
    if os.environ.get("GROUNDED_TEXT_TEST_WORKERS"):
        return int(os.environ["GROUNDED_TEXT_TEST_WORKERS"])
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, 4))


@pytest.fixture(scope="session")
def data_dir() -> Path:
    root = _data_root()
    if root is None:
        msg = ("real data not found: set GROUNDED_TEXT_DATA or put shared/data beside the "
               "checkout (../shared/data)")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true but " + msg)
        pytest.skip(msg)
    return root


@pytest.fixture(scope="session")
def papers_dir() -> Path:
    """The folder of the papers' Markdown copies beside the data; a skip when absent, a failure
    under CI=true."""
    from grounded_text.papers.published import PAPER_SOURCES as PAPERS

    env = os.environ.get("GROUNDED_TEXT_DATA")
    root = (Path(env) if env else REPO.parent / "shared" / "data").parent / "papers"
    if not all((root / f"{name}.md").is_file() for name in PAPERS):
        msg = "the papers' Markdown copies were not found beside the data ($GROUNDED_TEXT_DATA/../papers)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true but " + msg)
        pytest.skip(msg)
    return root


@pytest.fixture(autouse=True)
def _reset_keras_policy():
    import keras

    yield
    keras.mixed_precision.set_global_policy("float32")


# ----------------------------------------------------------------------------- one export per session

TINY_CAPTIONS = ["A dog runs on the beach .", "A man rides a red bike .", "Two kids play in the snow", "a cat sleeps"]


@dataclass(frozen=True)
class TinyExport:
    """A trained VETE-BOW text tower and its TF Hub export (read-only: share, never modify)."""

    path: Path  # the SavedModel folder
    tower: Any  # the in-memory keras.Model that was exported
    dim: int  # N
    config: dict  # the run config written to assets/config.json
    metrics: dict  # the headline figures written to the model card


@pytest.fixture(scope="session")
def tiny_export(tmp_path_factory) -> TinyExport:
    """One exported tower for every test that needs "an export", whatever its weights: an export
    costs seconds of tracing and saving, so one per session instead of one per test module.
    Tests that must export a particular configuration (ensembles, pretrained encoders, killed
    exports) still export their own."""
    import keras
    import tensorflow as tf

    from grounded_text.config.schema import ModelConfig, TextConfig
    from grounded_text.layers import build_vocabulary
    from grounded_text.models import build_model
    from grounded_text.serving.export import export_text_tower

    keras.mixed_precision.set_global_policy("float32")
    dim = 16
    gm = build_model(ModelConfig(embedding_dim=dim), TextConfig(), build_vocabulary(TINY_CAPTIONS), feature_dim=6,
                     seed=0)
    gm.train_model.compile(optimizer=keras.optimizers.Adam(1e-2), jit_compile=False)
    x = {"caption": tf.constant(TINY_CAPTIONS), "image_features": tf.random.stateless_normal([4, 6], seed=[0, 1])}
    for _ in range(3):  # trained, so that the export is not its initial weights
        gm.train_model.train_on_batch(x)
    config = {"model": {"name": "vete_bow"}, "data": {"features": "efficientnet_lite0"}}
    metrics = {"STS-B test pearson": 0.5}
    path = export_text_tower(gm.text_tower, tmp_path_factory.mktemp("tiny_export") / "export", config, metrics)
    return TinyExport(Path(path), gm.text_tower, dim, config, metrics)

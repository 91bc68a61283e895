"""The Python API (grounded_text.load / encode / train / evaluate / presets)."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import grounded_text as gt
from grounded_text.config.schema import ConfigError

SENTENCES = ["a dog runs on the beach", "", "two kids play in the snow", "café 🐶 naïve", "a cat", "x y z", "dog"]


def test_import_loads_no_tensorflow():
    code = ("import sys, grounded_text as gt; assert len(gt.presets()) > 0; gt.Run; gt.models(); "
            "assert 'grounded_text.api' in sys.modules; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras', 'tensorflow_hub')))")
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"
    # -X importtime, as a user would check it: no TensorFlow line.
    assert "| grounded_text" in proc.stderr and "tensorflow" not in proc.stderr


def test_presets_lists_the_records_and_stays_callable():
    from grounded_text.papers.presets import PRESETS  # binds no module over the API function

    records = gt.presets()
    assert callable(gt.presets) and [r["name"] for r in records] == list(PRESETS)
    bow = next(r for r in records if r["name"] == "vete_bow")
    assert "Kurach" in bow["paper"] and bow["config"] == PRESETS["vete_bow"].config
    assert {"builder", "sources", "unsaid", "notes", "variant_of"} <= set(bow)
    assert "load" in dir(gt) and "encode" in dir(gt.TextEncoder)


@pytest.fixture(scope="module")
def reference(tiny_export):
    """What ``hub.load`` itself gives on the probe sentences, one call."""
    import tensorflow_hub as hub
    import tensorflow_text  # noqa: F401

    module = hub.load(str(tiny_export.path))
    return tiny_export.path, module(tf.constant(SENTENCES)).numpy()


def test_encode_matches_hub_load_for_every_input_kind(reference):
    path, expected = reference
    enc = gt.load(path)
    assert enc.dim == expected.shape[1] and enc.handle == str(path.resolve())
    one = enc.encode(SENTENCES[0])
    assert one.shape == (enc.dim,) and one.dtype == np.float32
    np.testing.assert_allclose(one, expected[0], atol=1e-6, rtol=0)
    for given in (SENTENCES, tuple(SENTENCES), np.array(SENTENCES), tf.constant(SENTENCES),
                  [s.encode("utf-8") for s in SENTENCES]):
        got = enc.encode(given)
        assert got.shape == expected.shape and got.dtype == np.float32, type(given)
        np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0)
    # Batching and padding do not change a row: 7 sentences in batches of 3 (3, 3, 1).
    np.testing.assert_allclose(enc.encode(SENTENCES, batch_size=3, show_progress_bar=True), expected, atol=1e-6,
                               rtol=0)
    np.testing.assert_allclose(enc(np.array(SENTENCES[0])), expected[0], atol=1e-6, rtol=0)
    assert enc.encode([]).shape == (0, enc.dim)


def test_encode_refuses_what_is_not_a_batch_of_sentences(reference):
    enc = gt.load(reference[0])
    with pytest.raises(TypeError, match="sentence 1 is a int"):
        enc.encode(["a dog", 3])
    with pytest.raises(TypeError, match="str or a list"):
        enc.encode(3)
    with pytest.raises(TypeError, match="dtype"):
        enc.encode(np.zeros(3))
    with pytest.raises(TypeError, match="dtype string"):
        enc.encode(tf.zeros([2]))
    with pytest.raises(ValueError, match="1-D"):
        enc.encode(np.array([["a", "b"]]))
    for bad in (0, -5, 2.0, True):
        with pytest.raises(ValueError, match="batch_size"):
            enc.encode(["a"], batch_size=bad)


def test_load_resolves_relative_paths_and_names_a_missing_model(reference, tmp_path, monkeypatch):
    path, expected = reference
    monkeypatch.chdir(path.parent)
    enc = gt.load(path.name)
    monkeypatch.chdir(tmp_path)  # the handle is absolute: still usable from elsewhere
    assert enc.handle == str(path.resolve())
    np.testing.assert_allclose(enc.encode(SENTENCES), expected, atol=1e-6, rtol=0)
    with pytest.raises(FileNotFoundError, match="no saved_model.pb"):
        gt.load(tmp_path)
    with pytest.raises(FileNotFoundError, match="not a SavedModel"):
        gt.load(tmp_path / "nowhere")


def test_train_overrides_by_field_name_or_dotted_path():
    from grounded_text.api import _config

    cfg = _config("vete_bow", {"epochs": 1, "max_train_images": 300, "train.learning_rate": 0.01})
    assert (cfg.model.name, cfg.train.epochs, cfg.data.max_train_images, cfg.train.learning_rate) == \
        ("vete_bow", 1, 300, 0.01)
    assert cfg.data.batch_size is None  # the preset's choice, filled when the trainer resolves it
    with pytest.raises(ConfigError, match="not a config field"):
        _config("vete_bow", {"epoch": 1})
    with pytest.raises(ConfigError, match="does not fit"):
        _config("vete_bow", {"epochs": "many"})
    ambiguous = [name for name, paths in __import__("grounded_text.api").api._field_paths().items()
                 if len(paths) > 1]
    if ambiguous:
        with pytest.raises(ConfigError, match="ambiguous"):
            _config("vete_bow", {ambiguous[0]: 1})
    with pytest.raises(ValueError, match="Unknown model"):
        _config("no_such_model", {})
    with pytest.raises(TypeError, match="preset name"):
        _config(3, {})


def test_evaluate_refuses_unknown_sections(reference):
    with pytest.raises(ValueError, match="unknown sections"):
        gt.evaluate(reference[0], data_dir=os.fspath(reference[0]), sections=("sts", "vibes"))


def _readme_api_snippet() -> str:
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme.split("## Python API", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


@pytest.mark.slow  # trains one epoch on 300 images and scores STS in fresh processes (about 1-2 min)
def test_the_readme_snippet_runs_and_evaluate_equals_the_cli(tmp_path, data_dir):
    import json

    code = _readme_api_snippet() + (
        "\nimport json\njson.dump(report, open('api_report.json', 'w'))"
        "\njson.dump({'export': str(run.export_dir), 'history': run.history}, open('run.json', 'w'))\n")
    env = {**os.environ, "GROUNDED_TEXT_DATA": str(data_dir), "TF_CPP_MIN_LOG_LEVEL": "3"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    # verbose=0: the snippet's three prints and nothing else on stdout.
    assert len(proc.stdout.strip().splitlines()) == 3, proc.stdout[-3000:]
    csv_lines = (tmp_path / "runs" / "api_vete_bow.csv").read_text().splitlines()
    assert csv_lines[0].startswith("epoch") and len(csv_lines) == 2  # the user's callback saw the epoch
    run = json.loads((tmp_path / "run.json").read_text())
    api = json.loads((tmp_path / "api_report.json").read_text())
    cli = subprocess.run([sys.executable, "-m", "grounded_text.evaluate", "--model", run["export"], "--sts-dir",
                          str(data_dir / "sts"), "--json", str(tmp_path / "cli.json")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert cli.returncode == 0, cli.stderr[-3000:]
    cli_report = json.loads((tmp_path / "cli.json").read_text())
    assert api["sts"].keys() == cli_report["sts"].keys() and api["sts"]
    years = [year for year in api["sts"] if "subsets" in api["sts"][year]]  # STS1x; STS-B and SICK below
    assert years
    for year in years:
        for subset, figures in api["sts"][year]["subsets"].items():
            want = cli_report["sts"][year]["subsets"][subset]
            assert figures["pearson"] == pytest.approx(want["pearson"], abs=1e-6), (year, subset)
            assert figures["spearman"] == pytest.approx(want["spearman"], abs=1e-6), (year, subset)
    for name in ("STSBenchmark", "SICK"):
        if name in api["sts"]:
            assert api["sts"][name]["test"]["pearson"] == pytest.approx(cli_report["sts"][name]["test"]["pearson"],
                                                                        abs=1e-6)

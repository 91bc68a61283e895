"""Quiet by default: no run of the package prints TensorFlow's C++ start-up lines (cuInit, absl,
CPU notices) or the pkg_resources warning; GROUNDED_TEXT_VERBOSE=1 / --verbose keeps them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from grounded_text.utils.quiet import NOISE, filtered_stderr

REPO = Path(__file__).resolve().parents[1]
NOISY = ("cuInit", "pkg_resources", "absl::InitializeLog", "cudart_stub", "cpu_feature_guard")


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "GROUNDED_TEXT_VERBOSE")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env.update(extra)
    return env


def test_the_filter_drops_the_start_up_lines_and_keeps_the_rest(capfd):
    with filtered_stderr():
        os.write(2, b"W0000 00:00:1.0 1 cudart_stub.cc:31] Could not find cuda drivers on your machine.\n")
        os.write(2, b"a real problem\n")
        os.write(2, b"E0000 00:00:1.0 1 cuda_platform.cc:52] failed call to cuInit: INTERNAL\n")
    assert capfd.readouterr().err == "a real problem\n"
    with pytest.raises(RuntimeError), filtered_stderr():
        os.write(2, b"kept when the block fails\n")
        raise RuntimeError
    assert capfd.readouterr().err == "kept when the block fails\n"
    assert NOISE.search("WARNING: All log messages before absl::InitializeLog() is called are written to STDERR")


@pytest.mark.slow
def test_loading_and_encoding_print_nothing_but_the_result():
    code = "import grounded_text as gt; print(gt.load('vete_bow_flickr8k').encode(['a dog runs']).shape)"
    # A warning worded as the one the quiet mode ignores (tensorflow_hub's), raised here rather than
    # left to another package: whether tensorflow_hub's appears depends on the installed setuptools.
    planted = "; import warnings; warnings.warn('pkg_resources is deprecated (planted)', UserWarning)"
    quiet = subprocess.run([sys.executable, "-c", code + planted], capture_output=True, text=True, env=_env(),
                           timeout=300, cwd=REPO.parent)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout == "(1, 128)\n"
    assert not [word for word in NOISY if word in quiet.stderr], quiet.stderr
    # Verbose, the package hides nothing: TensorFlow's log level is left unset, the warning is printed.
    level = "; import os; print(os.environ.get('TF_CPP_MIN_LOG_LEVEL'))"
    loud = subprocess.run([sys.executable, "-c", code + planted + level], capture_output=True, text=True,
                          timeout=300, env=_env(GROUNDED_TEXT_VERBOSE="1"), cwd=REPO.parent)
    assert loud.returncode == 0, loud.stderr
    assert loud.stdout == "(1, 128)\nNone\n"
    assert "pkg_resources is deprecated (planted)" in loud.stderr


def test_a_look_up_of_tensorflow_before_its_import_keeps_the_start_up_quiet():
    # transformers, sentence-transformers and mteb ask importlib.util.find_spec("tensorflow")
    # before anything imports it; the import that follows is still filtered.
    code = ("import importlib.util, sys, grounded_text; assert importlib.util.find_spec('tensorflow'); "
            "import tensorflow; print(any(type(f).__name__ == '_QuietTensorFlowImport' for f in sys.meta_path))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=300,
                         cwd=REPO.parent)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "False\n"  # the finder is gone once TensorFlow is imported
    assert not [word for word in NOISY if word in out.stderr], out.stderr


def test_verbose_flag_undoes_the_quiet_start_up():
    # grounded-text --verbose calls keep_startup_messages before the subcommand imports TensorFlow.
    code = ("import os, grounded_text; assert os.environ.get('TF_CPP_MIN_LOG_LEVEL') == '3'; "
            "from grounded_text.utils.quiet import keep_startup_messages; keep_startup_messages(); "
            "print(os.environ.get('TF_CPP_MIN_LOG_LEVEL'), os.environ.get('GROUNDED_TEXT_VERBOSE'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["None", "1"]
    # A level the user set is theirs: kept.
    out = subprocess.run([sys.executable, "-c", code.replace("== '3'", "== '1'")], capture_output=True, text=True,
                         env=_env(TF_CPP_MIN_LOG_LEVEL="1"), timeout=60)
    assert out.stdout.split() == ["1", "1"], out.stderr


def test_the_packages_warnings_print_as_one_line_through_the_api():
    # The package's own warning (an int8 encode's ranges from 3 vectors, TensorFlow-free), then
    # one of the program's: only the first is the package's to format.
    code = ("import warnings, numpy as np, grounded_text; from grounded_text.serving.quantize import convert; "
            "convert(np.ones((3, 4), np.float32), 'int8'); warnings.warn('theirs', UserWarning)")
    ours = "int8 ranges computed from 3 embeddings; pass calibration_embeddings= (at least 100 rows) for stable ones."
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stderr.splitlines() == [f"warning: {ours}", "<string>:1: UserWarning: theirs"], out.stderr
    # Verbose, Python's own format for both (the file and line of the package's warning).
    loud = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env=_env(GROUNDED_TEXT_VERBOSE="1"))
    assert f"GroundedTextWarning: {ours}" in loud.stderr and f"warning: {ours}" not in loud.stderr, loud.stderr


def _console_problems(text: str) -> list[str]:
    """The lines of a command's output that a newcomer would read as trouble: the export's
    staging folder, an absolute site-packages path, an absl line, a warning's echoed source
    line or class name, and any escape code, carriage return or backspace (a log file's)."""
    python_warning = re.compile(r":\d+: \w*Warning: ")  # "FILE:LINE: UserWarning: ...", then the source
    bad = [line for line in text.splitlines()
           if ".tmp-" in line or "site-packages" in line or "absl" in line or python_warning.search(line)]
    return bad + [repr(c) for c in ("\x1b", "\r", "\b") if c in text]


@pytest.mark.slow
def test_train_evaluate_and_features_print_a_quiet_console(data_dir, tmp_path):
    from PIL import Image

    photos = tmp_path / "photos"
    photos.mkdir()
    for i in range(3):
        Image.new("RGB", (64, 48), (80 * i, 100, 50)).save(photos / f"p{i}.jpg")
    env = _env(GROUNDED_TEXT_DATA=str(data_dir), CUDA_VISIBLE_DEVICES="")
    commands = {
        # the default verbosity, the end-of-run STS scoring, the export: all a user sees
        "train": ["grounded_text.train", "--data-dir", str(data_dir), "--output-dir", "run", "--epochs", "2",
                  "--max-train-images", "64", "--max-dev-images", "32", "--embedding-dim", "16", "--all-captions",
                  "--batch-size", "32", "--steps-per-execution", "2"],
        "evaluate": ["grounded_text.evaluate", "--model", "run/export", "--years", "STS13", "STS16"],
        "features": ["grounded_text.features", "--images", "photos", "--out", "photos.npz"],
    }
    for name, args in commands.items():
        out = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, env=env, timeout=600,
                             cwd=tmp_path)
        assert out.returncode == 0, f"{name}: {out.stderr[-3000:]}"
        assert _console_problems(out.stderr) == [], f"{name} stderr:\n{out.stderr}"
        assert _console_problems(out.stdout) == [], f"{name} stdout:\n{out.stdout[-3000:]}"
        warnings_seen = [line for line in out.stderr.splitlines() if line.startswith("warning: ")]
        if name == "train":  # a warning is still said, on one line (the caption without features)
            assert any("Dropped" in line for line in warnings_seen), out.stderr
        if name == "evaluate":  # STS13's SMT subset has no input file in the data release
            assert any("STS13: skipping subset 'SMT'" in line for line in warnings_seen), out.stderr

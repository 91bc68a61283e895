"""The package as users get it: a wheel with the search spaces inside, one ``grounded-text``
command, and command lines whose ``--help`` and flag errors never wait for TensorFlow."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grounded_text import cli
from grounded_text.config import choices

# Its tests share a module-scoped fixture: one pytest-xdist worker builds it once (setup.cfg).
pytestmark = pytest.mark.xdist_group("test_packaging")

REPO = Path(__file__).resolve().parents[1]
MODULES = ["train", "evaluate", "tune", "features", "prepare", "export", "benchmark", "reproduce",
           "ablation", "data.download", "search", "photos.annotate"]


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def _imported(stderr: str) -> set[str]:
    """Top-level module names in ``python -X importtime`` output."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


@pytest.mark.parametrize("module", MODULES)
def test_help_does_not_import_tensorflow(module, tmp_path):
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", f"grounded_text.{module}", "--help"],
                          capture_output=True, text=True, cwd=tmp_path, env=_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "usage:" in proc.stdout
    imported = _imported(proc.stderr)
    assert "grounded_text" in imported  # the check sees the package's imports at all
    assert not imported & {"tensorflow", "keras", "tensorflow_text", "keras_tuner", "scipy"}


@pytest.mark.parametrize("argv", [
    ["train", "--output-dir", "x", "--model", "no_such_preset"],
    ["train", "--output-dir", "x", "--epochs", "0"],
    ["evaluate", "--batch-size", "many"],
    ["tune", "--trials", "0"],
    ["tune", "--space", "vete"],  # --directory is needed unless --show-space
    ["export", "--preset", "p"],
    ["features", "--images", "d"],
    ["search", "--model", "vete_bow_flickr8k", "--images", "no_such_folder", "a dog"],
    ["search", "--model", "vete_bow_flickr8k", "--images", ".", "--like", "no_such_photo.jpg"],
    ["annotate", "--model", "vete_bow_flickr8k", "--images", "no_such_folder", "--sentences", "s.txt"],
])
def test_flag_errors_exit_2_without_tensorflow(argv, tmp_path):
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "grounded_text.cli", *argv],
                          capture_output=True, text=True, cwd=tmp_path, env=_env(), timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "error:" in proc.stderr
    assert "tensorflow" not in _imported(proc.stderr)


def test_cli_dispatch_and_usage_errors(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["no-such-command"])
    assert e.value.code == 2 and "invalid choice" in capsys.readouterr().err
    assert cli.main(["data", "unpack"]) == 2
    assert "unknown data action 'unpack'" in capsys.readouterr().err
    assert cli.main(["data", "list"]) == 0
    assert "stsb" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0
    assert set(cli.SUBCOMMANDS) == {"train", "evaluate", "tune", "features", "prepare", "export", "benchmark",
                                    "reproduce", "ablation", "data", "search", "annotate"}
    for module, _ in cli.SUBCOMMANDS.values():  # each delegates to an existing main(argv)
        assert callable(getattr(__import__(module, fromlist=["main"]), "main"))


def test_light_choices_match_the_lists_the_modules_check():
    from grounded_text.vision.networks import NETWORK_NAMES

    assert choices.NETWORK_NAMES == tuple(NETWORK_NAMES)


def test_the_checkout_reads_its_own_tuner_folder(monkeypatch):
    from grounded_text.tuning.space import REPO_TUNER_DIR, tuner_dir

    if Path(cli.__file__).resolve().parent != REPO / "grounded_text":
        pytest.skip("grounded_text is installed from a wheel here (CI's py312 job), not run from the checkout")
    monkeypatch.delenv("GROUNDED_TEXT_TUNER_DIR", raising=False)
    assert tuner_dir() == REPO_TUNER_DIR == REPO / "tuner"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """Builds the wheel from this checkout, offline (no build isolation, so with the installed
    setuptools: an older one than pyproject's build requirement writes older metadata)."""
    pytest.importorskip("setuptools", minversion="77",
                        reason="the wheel is built without isolation and pyproject.toml needs setuptools>=77")
    pytest.importorskip("wheel")
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                           "-w", str(out), str(REPO)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    wheels = list(out.glob("grounded_text-*.whl"))
    assert len(wheels) == 1
    return wheels[0]


def test_the_wheel_carries_the_search_spaces_and_the_command(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        entry_points = next(z.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
        metadata = next(z.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    shipped = {Path(n).name for n in names if n.startswith("grounded_text/tuner/")}
    in_checkout = {p.name for p in (REPO / "tuner").glob("*.toml")}
    assert in_checkout and in_checkout <= shipped
    assert "grounded-text = grounded_text.cli:main" in entry_points
    assert "Requires-Python: <3.14,>=3.11" in metadata
    assert "Requires-Dist: tensorflow<2.22,>=2.20" in metadata
    # tensorflow-hub imports pkg_resources: a fresh Python 3.12 venv must get a setuptools with it.
    assert "Requires-Dist: setuptools<81,>=64" in metadata
    # Evaluation, tuning and image-data packages are extras, not the core.
    assert 'Requires-Dist: keras-tuner<1.5,>=1.4.8; extra == "tune"' in metadata
    assert 'Requires-Dist: gensim>=4.3; extra == "eval"' in metadata
    # MTEB brings PyTorch: its own extra, in no other (all and test included).
    mteb = [line for line in metadata.splitlines() if line.startswith("Requires-Dist: mteb")]
    assert mteb == ['Requires-Dist: mteb<3,>=2.0; extra == "mteb"'], mteb
    assert not [line for line in metadata.splitlines() if "mteb" in line.split(";")[0] and "grounded" in line]
    assert not [line for line in metadata.splitlines() if line.startswith("Requires-Dist: scikit-learn")
                and "extra ==" not in line]
    assert not any(n.startswith(("tests/", "tuner/")) for n in names)


def test_the_wheel_carries_the_shipped_models_and_the_download_manifest(wheel):
    """Every file of each shipped model (both towers, card, record) is package data, within the
    budget per export; the release manifest of the downloads too."""
    from grounded_text import shipped
    from grounded_text.experiments.shipped import MAX_EXPORT_BYTES

    with zipfile.ZipFile(wheel) as z:
        infos = {i.filename: i for i in z.infolist()}
    assert "grounded_text/data/download/manifest.json" in infos
    assert shipped.names()
    for name in shipped.names():
        folder = shipped.SHIPPED_DIR / name
        files = {p.relative_to(shipped.SHIPPED_DIR.parent.parent).as_posix()
                 for p in folder.rglob("*") if p.is_file()}
        assert files <= set(infos), sorted(files - set(infos))
        assert f"grounded_text/shipped/{name}/export/saved_model.pb" in files
        for part in ("export", "image_export"):
            assert sum(infos[f].compress_size for f in files if f"/{name}/{part}/" in f) <= MAX_EXPORT_BYTES


#: What NOTICE must say: the shipped Lite0 weights' licence and source, and the terms of the
#: Flickr8k data the shipped models are trained on.
NOTICE_PHRASES = ("EfficientNet-Lite0", "Apache License, Version 2.0", "efficientnet_lite0_imagenet.weights.h5",
                  "github.com/tensorflow/tpu", "Flickr8k", "research use only", "Hockenmaier 2013",
                  "(c) their Flickr owners", "SICK", "CC BY-NC-SA 3.0", "STS Benchmark", "GloVe")


def test_the_licence_and_the_notice_are_at_the_root():
    licence = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert licence.lstrip().startswith("Apache License\n") and "Version 2.0, January 2004" in licence
    assert "END OF TERMS AND CONDITIONS" in licence and "APPENDIX: How to apply the Apache License" in licence
    notice = (REPO / "NOTICE").read_text(encoding="utf-8")
    missing = [p for p in NOTICE_PHRASES if p not in " ".join(notice.split())]
    assert not missing, missing
    # the shipped models' own records give the same terms
    from grounded_text import shipped

    for record in shipped.models():
        assert record["terms"].startswith("research use only") and "research use only" in record["licence"]
        assert record["name"] in notice


def test_the_wheel_and_its_metadata_carry_the_licence_and_the_notice(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        # setuptools writes them under .dist-info/licenses/ (PEP 639), older ones at .dist-info/
        texts = {Path(n).name: z.read(n).decode() for n in names
                 if ".dist-info/" in n and Path(n).name in ("LICENSE", "NOTICE")}
        metadata = next(z.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    assert texts["LICENSE"] == (REPO / "LICENSE").read_text(encoding="utf-8")
    assert texts["NOTICE"] == (REPO / "NOTICE").read_text(encoding="utf-8")
    assert "License-Expression: Apache-2.0" in metadata
    assert "License-File: LICENSE" in metadata and "License-File: NOTICE" in metadata


def test_an_installed_wheel_finds_its_search_spaces_away_from_the_checkout(wheel, tmp_path):
    target = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target",
                           str(target), str(wheel)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GROUNDED_TEXT_TUNER_DIR")}
    env["PYTHONPATH"] = str(target)
    code = ("import grounded_text, sys; from grounded_text.tuning.space import tuner_dir, load_space;"
            "print(grounded_text.__file__); print(tuner_dir());"
            "s = load_space('vete', 'vete_bow'); print(s.model, len(s.hparams));"
            "print('tensorflow' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    package_file, folder, space, tf_loaded = proc.stdout.split("\n")[:4]
    assert package_file.startswith(str(target))
    assert folder == str(target / "grounded_text" / "tuner")
    assert space.startswith("vete_bow ") and int(space.split()[1]) > 0
    assert tf_loaded == "False"


def test_the_notebook_keeps_a_preinstalled_tensorflow_of_our_range():
    import configparser
    import json
    import re

    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    spec = next(line.strip() for line in cfg["options"]["install_requires"].splitlines()
                if line.strip().startswith("tensorflow>="))
    low, high = re.fullmatch(r"tensorflow>=2\.(\d+),<2\.(\d+)", spec).groups()
    cells = json.loads((REPO / "colab" / "grounded_text_colab.ipynb").read_text())["cells"]
    install = next("".join(c["source"]) for c in cells if "SUPPORTED_TF" in "".join(c["source"]))
    supported = re.search(r"SUPPORTED_TF = (\(.*\))\n", install).group(1)
    assert eval(supported) == tuple((2, m) for m in range(int(low), int(high)))  # noqa: S307 (our own file)

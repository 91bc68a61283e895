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

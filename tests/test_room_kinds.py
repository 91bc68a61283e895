"""The package's two kinds of folders: light ones (utils, config, papers, reporting, the shipped
models' index) load without TensorFlow, Keras, tensorflow-text, keras-hub, matplotlib or PyTorch,
so that ``import grounded_text``, ``gt.models()`` and the commands' ``--help`` stay quick; every
other folder imports what it needs at the top, and each of its modules loads on its own."""

import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import grounded_text

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("tensorflow", "keras", "tensorflow_text", "keras_hub", "matplotlib", "torch")
LIGHT_ROOMS = ("utils", "config", "papers", "reporting")
HEAVY_ROOMS = ("data", "vision", "layers", "losses", "models", "baselines", "evaluation", "serving", "photos",
               "training", "tuning", "experiments", "benchmarks")


def _modules(room: str) -> list[str]:
    package = f"grounded_text.{room}"
    folder = Path(grounded_text.__file__).parent / room
    found = [package] + [m.name for m in pkgutil.walk_packages([str(folder)], prefix=f"{package}.")]
    return [m for m in found if not m.endswith(".__main__")]  # a __main__ runs its command


LIGHT_MODULES = [m for room in LIGHT_ROOMS for m in _modules(room)] + ["grounded_text.shipped"]

# Each module is imported alone, in a fresh interpreter: what it pulls in is its own doing.
_PROBE = """
import json, subprocess, sys
heavy, out = json.loads(sys.argv[1]), {}
for name in json.loads(sys.argv[2]):
    code = f"import sys, {name}; print([h for h in {heavy!r} if h in sys.modules])"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    out[name] = proc.stdout.strip() if proc.returncode == 0 else "error: " + proc.stderr.strip()[-500:]
print(json.dumps(out))
"""


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}


@pytest.fixture(scope="module")
def light_report() -> dict:
    proc = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(HEAVY), json.dumps(LIGHT_MODULES)],
                          capture_output=True, text=True, env=_env(), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.mark.parametrize("module", LIGHT_MODULES)
def test_a_light_module_loads_without_heavy_packages(light_report, module):
    assert light_report[module] == "[]", f"{module} loads {light_report[module]}"


@pytest.mark.slow
def test_every_module_of_the_heavy_rooms_imports_on_its_own():
    modules = [m for room in HEAVY_ROOMS for m in _modules(room)]
    code = ("import importlib, json, sys\nbad = {}\nfor name in json.loads(sys.argv[1]):\n"
            "    try:\n        importlib.import_module(name)\n"
            "    except Exception as e:\n        bad[name] = f'{type(e).__name__}: {e}'\nprint(json.dumps(bad))")
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(modules)], capture_output=True, text=True,
                          env=_env(), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {}

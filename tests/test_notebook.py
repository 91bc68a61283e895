"""The Colab notebook runs top to bottom with its defaults (CI executes it, so that it cannot
silently rot).

Executed with papermill from an empty data folder, with no notebook parameter changed except the
two paths that depend on the machine (``DATA_ROOT``, ``RUNS_ROOT``). What stands in for the
internet comes from the environment, as on any offline machine: ``GROUNDED_TEXT_DOWNLOAD_BASE``
points the notebook's ``grounded-text data download`` at a 127.0.0.1 mirror of a real slice of
the shared data (``flickr_mirror``: a few hundred real Flickr8k photos and captions, the real
STS/SICK archives; ``GROUNDED_TEXT_DOWNLOAD_SAMPLE=1`` accepts the sample), and ``PYTHONPATH``
lets the kernel import this checkout (so the install cell's "auto" installs nothing). The CNN is
the real one: efficientnet_lite0's ImageNet weights ship in the package. Without a GPU the notebook
picks its CPU budget: it downloads, searches the photos by a sentence with the shipped model,
extracts features of the downloaded photos, trains one epoch on them, evaluates with plots, and
encodes with ``grounded_text.load`` of the export.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from flickr_mirror import N_DEV, N_TEST, N_TRAIN, LocalServer, Mirror, build_mirror

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "colab" / "grounded_text_colab.ipynb"


def test_notebook_is_valid_and_has_a_parameters_cell():
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1
    # Outputs are not committed: the notebook is run fresh (Colab, CI).
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
    # The defaults are the Colab path: Flickr8k downloaded, features of its photos, the budget by device.
    params = tagged[0].source
    for line in ('PACKAGE_SOURCE = "auto"', 'USE_DRIVE = True', 'DATA_ROOT = "auto"', 'RUNS_ROOT = "auto"',
                 'DATA_SOURCE = "flickr8k"', 'CNN = "efficientnet_lite0"', "RETRAIN = False",
                 'WEIGHTS = os.environ.get("FEATURE_WEIGHTS") or "imagenet"', "TRAIN_FEATURES = None",
                 'DOWNLOAD_MIRROR = os.environ.get("GROUNDED_TEXT_DOWNLOAD_BASE")', 'BUDGET = "auto"'):
        assert line in params, line


def _outputs(cell: dict) -> str:
    return "\n".join("".join(o.get("text", "")) if o.get("output_type") == "stream" else json.dumps(o.get("data", {}))
                     for o in cell.get("outputs", []))


@pytest.mark.slow
def test_notebook_runs_with_its_defaults_from_an_empty_data_folder(data_dir, tmp_path, monkeypatch):
    papermill = pytest.importorskip("papermill")
    photos = build_mirror(data_dir, tmp_path / "mirror")
    empty = tmp_path / "data"
    empty.mkdir()
    work = tmp_path / "work"
    monkeypatch.setenv("GROUNDED_TEXT_DOWNLOAD_SAMPLE", "1")
    monkeypatch.delenv("FEATURE_WEIGHTS", raising=False)
    # The kernel imports this checkout's package even where it is not pip-installed.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    env_before = os.environ.get("GROUNDED_TEXT_DATA")
    mirror = Mirror(tmp_path / "mirror")
    monkeypatch.setenv("GROUNDED_TEXT_DOWNLOAD_BASE", mirror.url)
    out = tmp_path / "executed.ipynb"
    start = time.perf_counter()
    try:
        papermill.execute_notebook(str(NOTEBOOK), str(out),
                                   parameters={"DATA_ROOT": str(empty), "RUNS_ROOT": str(work)},
                                   cwd=str(NOTEBOOK.parent), kernel_name="python3", progress_bar=False,
                                   log_output=False)
    finally:
        mirror.close()
    print(f"notebook: {time.perf_counter() - start:.0f} s")
    assert os.environ.get("GROUNDED_TEXT_DATA") == env_before  # the kernel is another process

    cells = [c for c in json.loads(out.read_text())["cells"] if c["cell_type"] == "code"]
    text = "\n".join(_outputs(c) for c in cells)
    assert "grounded_text is already importable: not installing" in text
    # The first encode is a shipped model's, before any data or training.
    first = next(i for i, c in enumerate(cells) if "embeddings" in _outputs(c))
    assert "shipped model vete_bow_flickr8k: embeddings (3, 128) float32" in _outputs(cells[first])
    assert first < next(i for i, c in enumerate(cells) if "budget: " in _outputs(c))
    assert "| not on Google Drive" in text  # not on Colab: /content or the given roots
    assert "budget: " in text
    # Downloaded: the served photos and captions, the STS sets.
    assert sorted(p.name for p in (empty / "flickr8k" / "images").glob("*.jpg")) == photos
    assert f"photos on disk: {len(photos)}" in text
    for folder in ("STS12-en-test", "STS13-en-test", "STS16-en-test", "STSBenchmark", "SICK"):
        assert any((empty / "sts" / folder).iterdir()), folder
    # Searched: every downloaded photo indexed by the shipped model, six best shown as a grid.
    assert f"Index: {len(photos)} photos ({len(photos)} encoded, 0 reused)" in text
    assert (work / "search.png").stat().st_size > 10_000
    # Extracted: every downloaded photo (fewer than the CPU budget's 400), by efficientnet_lite0.
    store_path = work / "features_efficientnet_lite0_1crop.npz"
    assert f"wrote {len(photos)} image(s)" in text
    with np.load(store_path) as store:
        assert sorted(store["ids"].tolist()) == photos
        assert store["features"].shape == (len(photos), 1280) and np.isfinite(store["features"]).all()
    # Trained on those features: the served train split (160 photos), validated on its dev split.
    metrics = json.loads((work / "run_vete_bow" / "metrics.json").read_text())
    assert Path(metrics["config"]["data"]["features"]) == store_path
    assert metrics["config"]["data"]["dataset"] == "flickr8k"
    assert metrics["data"]["train_images"] == N_TRAIN
    assert metrics["data"]["dev_pairs"] == 5 * N_DEV
    assert f"trained on features: {store_path}" in text
    # Evaluated: the curves and the t-SNE inline; the figures once each, as rendered tables, rounded.
    assert text.count("image/png") >= 3  # the search grid, the curves, the t-SNE
    markdown = "\n".join("".join(o["data"]["text/markdown"]) for c in cells for o in c.get("outputs", [])
                         if "text/markdown" in o.get("data", {}))
    assert "| `vete_bow_flickr8k` | 128 | " in markdown and "0.761 [0.729, 0.789]" in markdown  # the shipped models
    assert markdown.count("| set | pairs | Pearson r | Spearman ρ |") == 1 and "| STS16 mean of 5 | " in markdown
    assert "| set | subset | n | Pearson r" not in text  # the trainer's raw table is not printed too
    assert "STS headline" not in text
    assert f"Retrieval among {N_TEST} test photos" in markdown
    assert f"| caption→image | {5 * N_TEST} | " in markdown and f"| image→caption | {N_TEST} | " in markdown
    streams = "\n".join("".join(o.get("text", "")) for c in cells for o in c.get("outputs", [])
                        if o.get("output_type") == "stream")
    assert not re.search(r"\d\.\d{7,}", streams), "a figure printed with all its digits"
    assert "evaluation" not in metrics  # scored once, by gt.evaluate in the notebook
    # The last cell: grounded_text.load(export).encode of 4 sentences.
    assert "embeddings (4, 128) float32" in _outputs(cells[-1])
    assert (work / "run_vete_bow" / "export" / "saved_model.pb").is_file()


#: A kernel that cannot import grounded_text (an editable install's finder and the checkout's
#: folder are dropped, an installed copy hidden): a fresh Colab runtime, where it is not installed.
_FRESH_KERNEL = (
    "import sys\n"
    "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in (getattr(f, '__module__', '') or '')]\n"
    "sys.path_hooks[:] = [h for h in sys.path_hooks if 'Editable' not in repr(h)]\n"
    "sys.path_importer_cache.clear()\n"
    # the checkout's folders go, the environment's do not (CI's virtualenv lives inside the checkout)
    "sys.path[:] = [p for p in sys.path if p.startswith(sys.prefix) or not p.startswith({repo!r})]\n"
    # and a package installed into that environment (CI's wheel job) is hidden too: find_spec
    # answers None and an import fails, as where it was never installed
    "sys.modules['grounded_text'] = None\n"
    "from ipykernel.kernelapp import launch_new_instance\n"
    "launch_new_instance()\n")


@pytest.mark.slow
def test_a_fresh_runtime_gets_one_line_of_install_advice_and_no_traceback(tmp_path, monkeypatch):
    """Run all where the package is not installed (no network but a local index that has no
    grounded_text): the install cell says in one line where to install it from (a wheel or a
    repository URL that the user gives: it is not on PyPI, so it does not try), every later cell
    does nothing, and the run ends without an error."""
    papermill = pytest.importorskip("papermill")

    class NoPackages(http.server.BaseHTTPRequestHandler):  # an index without the distribution
        def do_GET(self):
            self.send_error(404)

        def log_message(self, *args):
            pass

    server = LocalServer(NoPackages)
    kernels = tmp_path / "jupyter" / "kernels" / "fresh"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-c", _FRESH_KERNEL.format(repo=str(REPO)), "-f", "{connection_file}"],
        "display_name": "fresh runtime", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.delenv("PYTHONPATH", raising=False)
    for key, value in {"PIP_INDEX_URL": server.url + "/simple", "PIP_EXTRA_INDEX_URL": "", "PIP_FIND_LINKS": "",
                       "PIP_CONFIG_FILE": os.devnull, "PIP_NO_CACHE_DIR": "1",
                       "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                       # into a folder of its own: pip then ignores this environment's own install
                       "PIP_TARGET": str(tmp_path / "site")}.items():
        monkeypatch.setenv(key, value)
    colab = tmp_path / "content"  # outside the checkout, as on Colab
    colab.mkdir()
    notebook = colab / NOTEBOOK.name
    notebook.write_text(NOTEBOOK.read_text())
    out = tmp_path / "executed.ipynb"
    try:
        papermill.execute_notebook(str(notebook), str(out), parameters={"DATA_ROOT": str(tmp_path / "data"),
                                                                         "RUNS_ROOT": str(tmp_path / "runs")},
                                   cwd=str(colab), kernel_name="fresh", progress_bar=False, log_output=False)
    finally:
        server.close()
    cells = [c for c in json.loads(out.read_text())["cells"] if c["cell_type"] == "code"]
    assert not [o for c in cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    install = next(c for c in cells if "grounded_text install cell" in "".join(c["source"]))
    lines = [line for line in _outputs(install).splitlines() if line.strip()]
    assert len(lines) == 1, "\n".join(lines)  # no pip install of a name that is not published
    advice = lines[0]
    assert advice.startswith("grounded_text is not installed here and is not on PyPI: set PACKAGE_SOURCE")
    assert '"upload"' in advice and '"grounded_text[all] @ git+URL"' in advice and "Traceback" not in advice
    assert "OWNER" not in "".join(install["source"]) + advice  # no placeholder presented as a real URL
    later = cells[cells.index(install) + 1:]
    assert later and all(not c.get("outputs") for c in later)  # skipped: nothing printed, nothing failed
    assert not (tmp_path / "data").exists() and not (tmp_path / "runs").exists()

"""The Colab notebook runs top to bottom on CPU against the real data (CI executes it, so that it
cannot silently rot).

Executed with papermill, the parameter cell's small CPU budget injected: extraction of a
few real photos with random CNN weights (no internet here), one epoch of VETE-BOW on a
slice of the precomputed real features, STS evaluation, retrieval, plots, export and a
``hub.load`` of the export. The last cell asserts the embeddings' dtype, shape and
finiteness; the test also reads the executed notebook back and checks the outputs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

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


@pytest.mark.slow
def test_notebook_runs_on_cpu_and_ends_with_hub_load(data_dir, tmp_path, monkeypatch):
    papermill = pytest.importorskip("papermill")
    out = tmp_path / "executed.ipynb"
    work = tmp_path / "work"
    params = {
        "INSTALL": False,
        "DATA_DIR": str(data_dir),
        "WORK_DIR": str(work),
        "DATA_SOURCE": "flickr8k",
        "CNN": "efficientnet_b0",
        "CROPS": 1,
        "WEIGHTS": "none",
        "MAX_EXTRACT_IMAGES": 8,
        "EXTRACT_BATCH_SIZE": 8,
        "TRAIN_FEATURES": "efficientnet_lite0",
        "MODEL": "vete_bow",
        "EPOCHS": 1,
        "BATCH_SIZE": 64,
        "MAX_TRAIN_IMAGES": 300,
        "MAX_DEV_IMAGES": 100,
        "MIXED_PRECISION": None,
        # The data cell runs `grounded-text data download` on what the data folder already
        # holds (kept, nothing fetched); the mirror is a closed port, so a fetch would fail at once.
        "DOWNLOAD_DATA": ["sts12", "sts13", "sts16", "stsb", "sick"],
        "DOWNLOAD_MIRROR": "http://127.0.0.1:9",
    }
    # The kernel imports this checkout's package even where it is not pip-installed.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    env_before = os.environ.get("GROUNDED_TEXT_DATA")
    papermill.execute_notebook(str(NOTEBOOK), str(out), parameters=params, cwd=str(NOTEBOOK.parent),
                               kernel_name="python3", progress_bar=False, log_output=False)
    assert os.environ.get("GROUNDED_TEXT_DATA") == env_before  # the kernel is another process

    executed = json.loads(out.read_text())
    text = "\n".join(
        "".join(o.get("text", "")) if o.get("output_type") == "stream" else json.dumps(o.get("data", {}))
        for c in executed["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])
    )
    assert "wrote 8 image(s)" in text  # the extractor ran on 8 real photos
    assert "image/png" in text  # plots inline
    assert "embeddings (4, 128) float32" in text  # hub.load of the export, last cell
    # What the notebook wrote: the feature store, the run and its TF Hub export.
    assert (work / "features_efficientnet_b0_1crop.npz").is_file()
    assert (work / "run_vete_bow" / "export" / "saved_model.pb").is_file()
    metrics = json.loads((work / "run_vete_bow" / "metrics.json").read_text())
    assert metrics["data"]["train_images"] == 300
    assert metrics["evaluation"]["headline"]

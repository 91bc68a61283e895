"""Export → reload in a fresh process, and the odd inputs of the exported tower."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

# Its tests share a module-scoped fixture: one pytest-xdist worker builds it once (setup.cfg).
pytestmark = pytest.mark.xdist_group("test_export")

PROBE = ["a dog runs on the beach", "", "   ", "zebra unicorn", "café 🐶 naïve", " ".join(["dog"] * 10000)]
# The export keeps the first 512 words of a longer sentence (its input limits): the Keras
# tower's output on that prefix is what the 10,000-word probe must give.
PROBE_AS_EXPORTED = PROBE[:-1] + [" ".join(["dog"] * 512)]


@pytest.fixture(scope="module")
def exported(tiny_export):
    """The session's exported tower and what the in-memory tower gives on the probe."""
    return tiny_export.path, tiny_export.tower(tf.constant(PROBE_AS_EXPORTED)).numpy()


def test_export_layout(exported):
    path, _ = exported
    assert (path / "saved_model.pb").is_file()
    assert (path / "assets" / "vocab.txt").read_text().splitlines()[:2] == ["<S>", "</S>"]
    assert json.loads((path / "assets" / "config.json").read_text())["model"]["name"] == "vete_bow"


# A fresh TensorFlow process (its start-up and hub.load: about 20 s on a quiet 2-core machine).
@pytest.mark.slow
def test_reload_in_fresh_process_equals_in_memory_tower(exported, tmp_path):
    path, expected = exported
    script = textwrap.dedent(
        f"""
        import json, sys
        import numpy as np, tensorflow as tf, tensorflow_text, tensorflow_hub as hub
        m = hub.load({str(path)!r})
        out = m(tf.constant({PROBE!r}))
        empty = m(tf.constant([], dtype=tf.string))
        sig = m.signatures["serving_default"](sentences=tf.constant(["a dog"]))["embeddings"]
        np.save({str(tmp_path / "got.npy")!r}, out.numpy())
        print(json.dumps({{"dtype": out.dtype.name, "shape": out.shape.as_list(),
                           "empty": empty.shape.as_list(), "sig": sig.shape.as_list()}}))
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert info == {"dtype": "float32", "shape": [len(PROBE), 16], "empty": [0, 16], "sig": [1, 16]}
    got = np.load(tmp_path / "got.npy")
    np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0)
    assert np.isfinite(got).all()
    # Boundary tokens (default): every input, even "" and whitespace, has unit norm.
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)

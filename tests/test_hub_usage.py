"""The exported text tower used three ways in a fresh process, and its odd inputs: the TF Hub
reusable-SavedModel API that downstream projects rely on.

The three uses run in one fresh process (one TensorFlow start-up instead of three, about 10 s
each on a 2-core machine), in the order a consumer without grounded_text would meet them:
``hub.load`` and the tf_keras ``hub.KerasLayer`` before anything imports grounded_text, then the
Keras 3 ``HubTextEmbedding``. Each use is caught separately, so one failing use fails its own
test and not the others.
"""

import json
import subprocess
import sys

import pytest

from grounded_text.serving.model_card import MODEL_CARD

# Its tests share a module-scoped fixture: one pytest-xdist worker builds it once (setup.cfg).
pytestmark = pytest.mark.xdist_group("test_hub_usage")


@pytest.fixture(scope="module")
def export_dir(tiny_export):
    # The session's export: VETE-BOW, N = 16, one embedding variable, features efficientnet_lite0,
    # "STS-B test pearson" 0.5 on its model card.
    assert tiny_export.dim == 16
    return tiny_export.path


SCRIPT = """
import json, sys, traceback
import numpy as np, tensorflow as tf, tensorflow_text, tensorflow_hub as hub

EXPORT = sys.argv[1]


def hub_load():
    m = hub.load(EXPORT)
    cases = {
        "one": ["a dog"], "empty_batch": [], "empty_strings": ["", ""], "whitespace": ["   ", "\\t\\n"],
        "non_ascii": ["café 🐶 naïve 日本語 😀😀", "Ünïcödé"], "long": [" ".join(["dog"] * 10000)],
        "many": ["a dog runs %d" % i for i in range(100000)],
    }
    out = {}
    for name, texts in cases.items():
        e = m(tf.constant(texts, dtype=tf.string)).numpy()
        out[name] = [list(e.shape), e.dtype.name, bool(np.isfinite(e).all())]
    a = m(tf.constant(["a dog"]), training=False).numpy()
    b = m(tf.constant(["a dog"]), training=True).numpy()
    sig = m.signatures["serving_default"](sentences=tf.constant(["a dog"]))["embeddings"].numpy()
    out["training_equal"] = bool(np.allclose(a, b)) and bool(np.allclose(a, sig))
    out["variables"] = [len(m.variables), len(m.trainable_variables), len(m.regularization_losses)]
    return out


def tf_keras_layer():
    import tf_keras

    layer = hub.KerasLayer(EXPORT, trainable=True)
    model = tf_keras.Sequential([tf_keras.layers.InputLayer(input_shape=(), dtype=tf.string), layer,
                                 tf_keras.layers.Dense(1)])
    model.compile(optimizer=tf_keras.optimizers.SGD(1.0), loss="mse")
    before = [v.numpy().copy() for v in layer.trainable_weights]
    model.fit(tf.constant(["a dog runs", "a cat"]), np.array([[1.0], [-1.0]]), epochs=1, verbose=0)
    delta = max(float(np.abs(b - v.numpy()).max()) for b, v in zip(before, layer.trainable_weights))
    return {"n_trainable": len(layer.trainable_weights), "delta": delta}


def keras3_layer():
    import keras
    from grounded_text.layers.hub_text_embedding import HubTextEmbedding

    layer = HubTextEmbedding(EXPORT, trainable=True)
    ref = hub.load(EXPORT)(tf.constant(["a dog runs"])).numpy()
    same = bool(np.allclose(layer(tf.constant(["a dog runs"])).numpy(), ref, atol=1e-6))
    inp = keras.Input(shape=(), dtype="string")
    model = keras.Model(inp, keras.layers.Dense(1)(layer(inp)))
    model.compile(optimizer=keras.optimizers.SGD(1.0), loss="mse")
    before = layer(tf.constant(["a dog runs"])).numpy()
    model.fit(tf.constant(["a dog runs", "a cat"]), np.array([[1.0], [-1.0]]), epochs=1, verbose=0)
    after = layer(tf.constant(["a dog runs"])).numpy()
    frozen = HubTextEmbedding(EXPORT, trainable=False)
    return {"same": same, "changed": float(np.abs(after - before).max()), "out_dim": layer.output_dim,
            "frozen_trainable": len(frozen.trainable_weights)}


results = {}
for use in (hub_load, tf_keras_layer, keras3_layer):
    try:
        results[use.__name__] = use()
    except Exception:
        results[use.__name__] = {"error": traceback.format_exc()[-4000:]}
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def used(export_dir):
    """What each of the three uses of the export gave in one fresh process."""
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(export_dir)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def result(used, use):
    info = used[use]
    assert "error" not in info, info["error"]
    return info


def test_model_card_metadata(export_dir):
    card = (export_dir / MODEL_CARD).read_text()
    for line in ("<!-- module-type: text-embedding -->", "<!-- fine-tunable: true -->",
                 "<!-- format: saved_model_2 -->", "<!-- dataset: flickr8k -->"):
        assert line in card
    assert "network-architecture: vete_bow" in card
    assert "| STS-B test pearson | 0.5000 |" in card


# The fresh TensorFlow process of the three uses (fixture `used`), 100,000 sentences, two fits.
@pytest.mark.slow
def test_hub_load_reusable_api_and_odd_inputs(used):
    info = result(used, "hub_load")
    n = 16
    assert info["one"] == [[1, n], "float32", True]
    assert info["empty_batch"] == [[0, n], "float32", True]
    assert info["empty_strings"] == [[2, n], "float32", True]
    assert info["whitespace"] == [[2, n], "float32", True]
    assert info["non_ascii"] == [[2, n], "float32", True]
    assert info["long"] == [[1, n], "float32", True]
    assert info["many"] == [[100000, n], "float32", True]
    assert info["training_equal"]  # BOW has no dropout: training=True traced and identical
    assert info["variables"] == [1, 1, 0]


# Shares the fresh process of `used` (slow with it).
@pytest.mark.slow
def test_hub_keras_layer_in_tf_keras_fine_tunes(used):
    info = result(used, "tf_keras_layer")
    assert info["n_trainable"] == 1 and info["delta"] > 0


# Shares the fresh process of `used` (slow with it).
@pytest.mark.slow
def test_keras3_hub_layer_fine_tunes_and_matches_hub_load(used):
    info = result(used, "keras3_layer")
    assert info["same"] and info["changed"] > 0
    assert info["out_dim"] == 16 and info["frozen_trainable"] == 0

"""The Keras 3 layer around an export: NumPy strings in fit (object arrays), save, and reload in a fresh process
from another working directory after ``import grounded_text``, refused under safe mode."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

RELOAD = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import grounded_text  # registers the layer once Keras is imported
    import keras

    path, sentences = sys.argv[1], json.loads(sys.argv[2])
    try:
        keras.saving.load_model(path)
        refused = None
    except ValueError as e:
        refused = str(e)
    model = keras.saving.load_model(path, safe_mode=False)
    print(json.dumps({"refused": refused, "out": model.predict(np.array(sentences, dtype=object), verbose=0).tolist()}))
    """
)


@pytest.mark.slow  # a fresh TensorFlow process (about 20 s)
def test_saved_model_reloads_in_a_fresh_process_from_another_directory(tiny_export, tmp_path, monkeypatch):
    import keras

    from grounded_text.layers.hub_text_embedding import HubTextEmbedding

    sentences = ["a dog runs", "a cat sleeps on the sofa", ""]
    monkeypatch.chdir(tiny_export.path.parent)
    layer = HubTextEmbedding(tiny_export.path.name, trainable=True)  # a relative path, stored absolute
    assert layer.handle == str(tiny_export.path.resolve())
    inp = keras.Input(shape=(), dtype="string")
    model = keras.Model(inp, keras.layers.Dense(1)(layer(inp)))
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    # NumPy strings reach fit as an object array (Keras 3.15's array adapter rejects the
    # fixed-width <U / S dtypes before any layer runs).
    x = np.array(sentences, dtype=object)
    before = model.predict(x, verbose=0)
    history = model.fit(x, np.array([[1.0], [-1.0], [0.0]]), epochs=2, batch_size=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    expected = model.predict(x, verbose=0)
    assert np.abs(expected - before).max() > 0  # it trained
    saved = tmp_path / "model.keras"
    model.save(saved)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = subprocess.run([sys.executable, "-c", RELOAD, str(saved), json.dumps(sentences)], cwd=elsewhere,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["refused"] and "safe_mode=False" in got["refused"] and "SavedModel" in got["refused"]
    np.testing.assert_allclose(np.array(got["out"]), expected, atol=1e-5, rtol=0)


def test_from_config_refuses_under_safe_mode(tiny_export):
    import keras

    from grounded_text.layers.hub_text_embedding import HubTextEmbedding

    config = HubTextEmbedding(tiny_export.path).get_config()
    with pytest.raises(ValueError, match="safe_mode=False"):
        HubTextEmbedding.from_config(config)
    assert HubTextEmbedding.from_config(config, safe_mode=False).output_dim == tiny_export.dim
    with keras.saving.custom_object_scope({}), pytest.raises(ValueError, match="arbitrary code"):
        keras.layers.deserialize(keras.layers.serialize(HubTextEmbedding(tiny_export.path)))

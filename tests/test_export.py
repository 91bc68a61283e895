"""Export → reload in a fresh process, and the odd inputs of the exported tower."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

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
    # Row by row to 1e-6, but the 512-word probe: a float32 sum of 512 word vectors, whose
    # order of accumulation another process's thread pool may change (seen: 1.04e-6).
    np.testing.assert_allclose(got[:-1], expected[:-1], atol=1e-6, rtol=0)
    np.testing.assert_allclose(got[-1], expected[-1], atol=5e-6, rtol=0)
    assert np.isfinite(got).all()
    # Boundary tokens (default): every input, even "" and whitespace, has unit norm.
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


# --- The export command's bad paths: one "error: ..." line naming the input, exit status 2 ---


def _bad_export_paths(tmp_path):
    preset = tmp_path / "preset"
    preset.mkdir()
    (tmp_path / "a_file").write_text("")
    return {
        "missing preset": (["--preset", "/nonexistent", "--output-dir", str(tmp_path / "out")], "/nonexistent"),
        "preset is a file": (["--preset", str(tmp_path / "a_file"), "--output-dir", str(tmp_path / "out")],
                             str(tmp_path / "a_file")),
        "output is a file": (["--preset", str(preset), "--output-dir", str(tmp_path / "a_file")],
                             str(tmp_path / "a_file")),
        "output under a file": (["--preset", str(preset), "--output-dir", str(tmp_path / "a_file" / "out")],
                                str(tmp_path / "a_file")),
        # /proc takes no new folder, even from root (for whom a chmod 555 folder is writable).
        "output not writable": (["--preset", str(preset), "--output-dir", "/proc/no_such_folder/export"], "/proc"),
    }


@pytest.mark.parametrize("case", ["missing preset", "preset is a file", "output is a file", "output under a file",
                                  "output not writable"])
@pytest.mark.parametrize("entry", ["grounded-text export", "python -m grounded_text.export"])
def test_export_command_rejects_bad_paths_with_one_error_line(case, entry, tmp_path, capsys):
    if case == "output not writable" and not Path("/proc/self").is_dir():
        pytest.skip("needs /proc")
    from grounded_text import cli, export

    argv, named = _bad_export_paths(tmp_path)[case]
    rc = cli.main(["export", *argv]) if entry == "grounded-text export" else export.main(argv)
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert err.startswith("error: ") and len(err.splitlines()) == 1 and named in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_export_command_rejects_a_read_only_output_folder(tmp_path, capsys):
    from grounded_text import cli

    (tmp_path / "preset").mkdir()
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro").chmod(0o555)
    try:
        rc = cli.main(["export", "--preset", str(tmp_path / "preset"), "--output-dir", str(tmp_path / "ro" / "out")])
    finally:
        (tmp_path / "ro").chmod(0o755)
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ") and str(tmp_path / "ro") in err


def test_export_command_in_a_fresh_process_exits_2_without_a_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "grounded_text.cli", "export", "--preset", "/nonexistent",
                           "--output-dir", str(tmp_path / "out")], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[1])
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.startswith("error: --preset '/nonexistent' does not exist") and "Traceback" not in proc.stderr


def test_export_into_a_file_fails_before_tracing_and_leaves_the_file(tmp_path, tiny_export):
    from grounded_text.serving.export import export_text_tower

    (tmp_path / "export").write_text("not a folder")
    with pytest.raises(NotADirectoryError, match="exists and is not a folder"):
        export_text_tower(tiny_export.tower, tmp_path / "export")
    assert (tmp_path / "export").read_text() == "not a folder"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]

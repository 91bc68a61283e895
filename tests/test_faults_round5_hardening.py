"""Hardening of the fifth probe round (docs/reliability.md): planted links, paths outside their
folder, storage and permission failures, signals to a command and its child, and inputs that are
not what they claim. Each case gives one ``error: ...`` line (exit status 2) or a documented
result, never a traceback; each test fails on the code before its fix.

Every case builds its own small input in a temporary folder; no real data is needed.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


def _env(**extra) -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": "",
            **extra}


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


# ============================================================================ run folders: links, storage, permissions


def _interrupted_run(out: Path) -> dict:
    """A run folder holding an interrupted run (state ``interrupted``, epoch 1 of 3 committed)."""
    from grounded_text.config.schema import ExperimentConfig
    from grounded_text.training.run_state import write_state

    config = ExperimentConfig().to_dict()
    (out / "resume").mkdir(parents=True)
    (out / "resume" / "epoch-0001.weights.h5").write_bytes(b"weights")
    (out / "checkpoints").mkdir()
    (out / "logs").mkdir()
    write_state(out, {"version": 1, "status": "interrupted", "config": config, "epochs": 3, "epochs_done": 1,
                      "checkpoint": "resume/epoch-0001.weights.h5",
                      "best": {"monitor": "val_loss", "mode": "min", "value": None, "epoch": None,
                               "checkpoint": None}})
    return config


@pytest.mark.parametrize("planted", ["logs", "checkpoints", "logs/train", "checkpoints/best.weights.h5",
                                     "dangling checkpoints"])
def test_resume_refuses_planted_links_out_of_the_run_folder(tmp_path, planted):
    from grounded_text.training.run_dir import check_run_dir
    from grounded_text.training.run_errors import RunDirError

    out = tmp_path / "run"
    config = _interrupted_run(out)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    name = planted.removeprefix("dangling ")
    link = out / name
    if link.is_dir():
        link.rmdir()
    link.symlink_to(tmp_path / "nowhere" if planted.startswith("dangling") else elsewhere)
    with pytest.raises(RunDirError, match=r"^--resume: .* is a symbolic link to .*, outside the run directory") as info:
        check_run_dir(out, config, resume=True, overwrite=False)
    assert name in str(info.value) and "\n" not in str(info.value)
    assert list(elsewhere.iterdir()) == []
    # A link that stays inside the run folder is no escape; --overwrite removes the link unfollowed.
    link.unlink()
    link.symlink_to(out / "resume")
    assert check_run_dir(out, config, resume=True, overwrite=False)["epochs_done"] == 1
    assert check_run_dir(out, config, resume=False, overwrite=True) is None


def test_a_fresh_run_refuses_a_dangling_planted_link(tmp_path):
    from grounded_text.config.schema import ExperimentConfig
    from grounded_text.training.run_dir import check_run_dir
    from grounded_text.training.run_errors import RunDirError

    out = tmp_path / "run"
    out.mkdir()
    (out / "logs").symlink_to(tmp_path / "not-yet")  # not a run entry that exists: the folder looks empty
    with pytest.raises(RunDirError, match=r"^--output-dir: .*logs' is a symbolic link"):
        check_run_dir(out, ExperimentConfig().to_dict(), resume=False, overwrite=False)


def test_resume_removes_stale_staged_state_files(tmp_path):
    from grounded_text.training.run_dir import check_run_dir

    out = tmp_path / "run"
    config = _interrupted_run(out)
    stale = [out / ".run_state.json.tmp-0123456789abcdef",
             out / "resume" / ".epoch-0002.weights.h5.tmp-fedcba9876543210.weights.h5"]
    for path in stale:
        path.write_text("{")
    mine = out / ".run_state.json.tmp-notes"  # not a staged name: a user's file stays
    mine.write_text("mine")
    assert check_run_dir(out, config, resume=True, overwrite=False)["epochs_done"] == 1
    assert not any(p.exists() for p in stale) and mine.read_text() == "mine"


@pytest.mark.parametrize("raised", [
    OSError(errno.EFBIG, "File too large", "/r/x.h5"),
    RuntimeError("Can't write data (file write failed: time = Thu Jan  1 00:00:00 2026\n, filename = '/r/x.h5', "
                 "file descriptor = 7, errno = 27, error message = 'File too large', buf = 0x1, total write size = "
                 "8, bytes this sub-write = 8, bytes actually written = 18446744073709551615, offset = 0)"),
])
def test_a_file_size_limit_is_a_storage_error(tmp_path, raised):
    from grounded_text.training.run_errors import StorageFull
    from grounded_text.training.run_lock import guard_run
    from grounded_text.training.storage_errors import storage_error

    assert storage_error(raised)[:2] == (errno.EFBIG, "/r/x.h5")
    with pytest.raises(StorageFull, match=r"^file-size limit \(ulimit -f\) exceeded writing in '.*run' "
                                          r"\(/r/x.h5\): .*raise the file-size limit \(ulimit -f\)") as info:
        with guard_run(tmp_path / "run"):
            raise raised
    assert "\n" not in str(info.value)


def test_a_real_file_size_limit_on_an_hdf5_write_gives_one_line(tmp_path):
    """``ulimit -f``: Python ignores SIGXFSZ, so the write fails with EFBIG inside HDF5."""
    script = textwrap.dedent(f"""
        import resource, sys
        import h5py, numpy as np
        from grounded_text.training.run_errors import StorageFull
        from grounded_text.training.run_lock import guard_run
        resource.setrlimit(resource.RLIMIT_FSIZE, (65536, 65536))
        try:
            with guard_run({str(tmp_path / "run")!r}):
                with h5py.File({str(tmp_path / "run" / "big.h5")!r}, "w") as f:
                    f["x"] = np.ones(1 << 20, np.float32)
        except StorageFull as e:
            print("error:", e, file=sys.stderr)
            sys.stderr.flush()
            import os
            os._exit(2)
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert _one_error_line(proc.stderr).startswith("error: file-size limit (ulimit -f) exceeded writing in ")


def test_h5py_destructor_echoes_of_a_storage_failure_are_not_printed(tmp_path, monkeypatch):
    """A failed HDF5 write fails again when h5py frees its objects; Python would print those
    with tracebacks around the one storage line. Other unraisable errors are still reported."""
    from types import SimpleNamespace

    from grounded_text.training.run_errors import StorageFull
    from grounded_text.training.run_lock import guard_run

    seen = []
    monkeypatch.setattr(sys, "unraisablehook", seen.append)
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)  # restored after the test
    out = tmp_path / "run"
    echo = RuntimeError(f"Can't decrement id ref count (file write failed: filename = '{out}/checkpoints/b.h5', "
                        "errno = 27, error message = 'File too large')")

    def unraisable(exc, where):
        return SimpleNamespace(exc_type=type(exc), exc_value=exc, exc_traceback=None, err_msg=None, object=where)

    with guard_run(out):
        other = unraisable(KeyError("x"), "h5py._objects.ObjectID.__dealloc__")
        sys.unraisablehook(other)
    assert seen == [other] and sys.unraisablehook == seen.append  # restored after a run without failure
    with pytest.raises(StorageFull):
        with guard_run(out):
            sys.unraisablehook(unraisable(echo, "h5py._objects.ObjectID.__dealloc__"))
            raise echo
    sys.unraisablehook(unraisable(echo, "h5py._objects.ObjectID.__dealloc__"))  # freed later: still quiet
    foreign = unraisable(echo, "some other object")
    sys.unraisablehook(foreign)
    assert seen == [other, foreign]


def test_a_run_folder_made_unwritable_mid_run_gives_one_line(tmp_path):
    from grounded_text.training.run_errors import StorageFull, is_usage_error
    from grounded_text.training.run_lock import guard_run
    from grounded_text.training.run_state import write_state

    out = tmp_path / "run"
    # root may write anywhere, so the refusal is raised as the file system would.
    with pytest.raises(StorageFull, match=r"^permission denied writing in '.*run' \(.*best.weights.h5\): "
                                          r"nothing of this run was saved; make the run directory writable") as info:
        with guard_run(out):
            raise PermissionError(errno.EACCES, "Permission denied", str(out / "checkpoints" / "best.weights.h5"))
    assert is_usage_error(info.value)
    out.mkdir(exist_ok=True)
    write_state(out, {"version": 1, "status": "running", "epochs": 3, "epochs_done": 1})
    h5 = RuntimeError(f"Unable to synchronously create file (unable to open file: name = '{out}/resume/x.h5', "
                      "errno = 13, error message = 'Permission denied', flags = 13, o_flags = 242)")
    with pytest.raises(StorageFull, match=r"keeps epoch 1 of 3; make the run directory writable again, then continue "
                                          r"with --resume\.$"):
        with guard_run(out):
            raise h5
    # A permission error elsewhere (the data, a cache) is not the run folder's: it keeps its own message.
    with pytest.raises(PermissionError):
        with guard_run(out):
            raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "data" / "f.npz"))


# ============================================================================ prepare: image paths stay in --images


def _coco(tmp_path: Path, file_name: str) -> Path:
    path = tmp_path / "captions_train2014.json"
    path.write_text(json.dumps({"images": [{"id": 1, "file_name": file_name}],
                                "annotations": [{"image_id": 1, "id": 10, "caption": "a dog runs"}]}))
    return path


@pytest.mark.parametrize("file_name", ["../../../../etc/passwd", "/etc/passwd"])
def test_prepare_coco_json_refuses_a_file_name_outside_the_image_folder(tmp_path, capsys, file_name):
    from grounded_text import prepare

    images = tmp_path / "images"
    images.mkdir()
    rc = prepare.main(["--source", "coco_json", "--captions", str(_coco(tmp_path, file_name)), "--images",
                       str(images), "--out", str(tmp_path / "out"), "--cnn", "efficientnet_b0", "--weights", "none"])
    assert rc == 2
    line = _one_error_line(capsys.readouterr().err)
    assert repr(file_name) in line and "inside the image folder" in line
    assert not (tmp_path / "out" / "features.npz").exists()


def test_a_karpathy_filepath_outside_the_image_folder_is_refused(tmp_path):
    from grounded_text.data.sources import karpathy_source

    images = tmp_path / "images"
    images.mkdir()
    split = tmp_path / "dataset_coco.json"
    split.write_text(json.dumps({"images": [{"filename": "passwd", "filepath": "../../../../etc", "split": "train",
                                             "sentences": [{"raw": "a dog runs"}]}]}))
    source = karpathy_source(split, images)
    with pytest.raises(ValueError, match=r"names '\.\./\.\./\.\./\.\./etc/passwd', not a file inside the image folder"):
        source.image_path("passwd")


# ============================================================================ signals: a command and its training child

# The child reports its pid, then waits; on SIGINT it says so and ends as the trainer does (130).
_CHILD = ("import os, signal, sys, time\n"
          "signal.signal(signal.SIGINT, lambda *a: (print('child interrupted', flush=True), os._exit(130)))\n"
          "print(os.getpid(), flush=True)\n"
          "time.sleep(300)\n")
_PARENT = textwrap.dedent("""
    import signal, sys
    from grounded_text.utils.children import run_child
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as from a terminal, even under nohup
    try:
        run_child([sys.executable, "-c", sys.argv[1]])
    except KeyboardInterrupt:
        print("parent interrupted", file=sys.stderr)
        sys.exit(130)
""")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


def _start_parent(tmp_path):
    """The parent, with no terminal (so a SIGINT to it is its alone), and its child's pid."""
    import time

    out = tmp_path / "out"
    with open(out, "w") as f:
        parent = subprocess.Popen([sys.executable, "-c", _PARENT, _CHILD], stdin=subprocess.DEVNULL, stdout=f,
                                  stderr=subprocess.PIPE, text=True, env=_env(), start_new_session=True)
    for _ in range(600):
        if out.read_text().strip():
            return parent, int(out.read_text().split()[0]), out
        time.sleep(0.05)
    parent.kill()
    raise AssertionError("the child never started")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX signals, /proc")
def test_a_sigint_to_the_parent_alone_reaches_its_child_at_once(tmp_path):
    import signal
    import time

    parent, child, out = _start_parent(tmp_path)
    try:
        start = time.monotonic()
        parent.send_signal(signal.SIGINT)
        assert parent.wait(timeout=20) == 130
        assert time.monotonic() - start < 10  # not the 60 s grace: the child was told
        assert "child interrupted" in out.read_text() and not _alive(child)
        assert parent.stderr.read().strip() == "parent interrupted"
    finally:
        for pid in (parent.pid, child):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG")
def test_a_killed_parent_leaves_no_child_behind(tmp_path):
    import signal
    import time

    parent, child, _ = _start_parent(tmp_path)
    try:
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=20)
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), "the child outlived its killed parent"
    finally:
        if _alive(child):
            os.kill(child, signal.SIGKILL)


def test_ablation_interrupted_prints_one_line_and_exits_130(tmp_path, capsys, monkeypatch):
    from grounded_text import ablation
    from grounded_text.experiments import studies

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt  # what run_child raises once the training child has ended

    monkeypatch.setattr(studies, "run_study", interrupted)
    study = sorted(ablation.STUDIES)[0]
    try:
        rc = ablation.main([study, "--output-dir", str(tmp_path / "out"), "--data-dir", str(tmp_path)])
    except KeyboardInterrupt:
        pytest.fail("the interruption escaped as a traceback")
    assert rc == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("interrupted: ") and "same command continues" in err[0], err


# ============================================================================ features: Ctrl-C and a planted parts link


def test_features_interrupted_prints_one_line_and_exits_130(tmp_path, capsys, monkeypatch):
    from grounded_text import features
    from grounded_text.vision import extractor

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(extractor, "extract_features", interrupted)
    images = tmp_path / "imgs"
    images.mkdir()
    (images / "a.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    try:
        rc = features.main(["--images", str(images), "--out", str(tmp_path / "s.npz"), "--cnn", "efficientnet_b0",
                            "--weights", "none", "--no-progress"])
    except KeyboardInterrupt:
        pytest.fail("the interruption escaped as a traceback")
    assert rc == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("interrupted: ") and "resumes" in err[0], err


@pytest.mark.parametrize("kind", ["symlink", "file"])
def test_a_planted_parts_link_is_refused_before_anything_is_written(tmp_path, kind):
    from grounded_text.vision.sinks import NpzFeatureSink

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "s.npz"
    parts = tmp_path / "s.npz.parts"
    if kind == "symlink":
        parts.symlink_to(elsewhere)
    else:
        parts.write_text("not a folder")
    with pytest.raises(ValueError, match=r"s\.npz\.parts' is a symbolic link or not a folder"):
        NpzFeatureSink(out, provenance=None).append(["a.png"], np.ones((1, 4)))
    assert list(elsewhere.iterdir()) == [] and not out.exists()


# ============================================================ data: overflowing features, stores, spaces, STS


def _flickr(root: Path, rows) -> Path:
    text = root / "flickr8k" / "Flickr8k_text"
    text.mkdir(parents=True)
    (text / "Flickr8k.token.txt").write_text("a.jpg#0\ta dog\nb.jpg#0\ta cat\nc.jpg#0\ta car\n")
    for split, ids in (("train", "a.jpg\nb.jpg\n"), ("dev", "c.jpg\n"), ("test", "")):
        (text / f"Flickr_8k.{split}Images.txt").write_text(ids)
    (root / "flickr8k" / "features").mkdir()
    np.savez(root / "flickr8k" / "features" / "f.npz", ids=np.array(["a.jpg", "b.jpg", "c.jpg"]),
             features=np.asarray(rows, np.float32))
    return root


def test_overflowing_image_features_are_a_data_error_naming_the_file(tmp_path):
    from grounded_text.config.schema import DataConfig
    from grounded_text.training.preparation import _data

    rows = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    rows[1] = 3e38  # finite in float32; any square of it is not
    root = _flickr(tmp_path, rows)
    with pytest.raises(ValueError, match=r"f\.npz: 1 of the 2 training images have features of magnitude up to "
                                         r"3e\+38") as info:
        _data(DataConfig(features="f", batch_size=2, one_caption_per_image=False, sampler="random",
                         bucket_by_length=False), root)
    assert "learning rate" not in str(info.value) and "\n" not in str(info.value)
    rows[1], rows[2] = 1.0, -3e38  # the dev image: its scores would be NaN
    _flickr(tmp_path / "dev", rows)
    with pytest.raises(ValueError, match=r"1 of the 1 dev images have features of magnitude up to 3e\+38"):
        _data(DataConfig(features="f", batch_size=2, one_caption_per_image=False, sampler="random",
                         bucket_by_length=False), tmp_path / "dev")


@pytest.mark.parametrize("value", [10**21, 10**8])
def test_an_absurd_embedding_dim_is_refused_by_the_config_check(tmp_path, capsys, value):
    import grounded_text as gt
    from grounded_text.config.schema import MAX_EMBEDDING_DIM, ConfigError
    from grounded_text.train import main

    assert main(["--output-dir", str(tmp_path / "run"), "--data-dir", str(tmp_path), "--set",
                 f"model.embedding_dim={value}"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert f"model.embedding_dim must be an integer from 1 to {MAX_EMBEDDING_DIM}, got {value}" in line
    with pytest.raises(ConfigError, match=rf"model.embedding_dim must be an integer from 1 to {MAX_EMBEDDING_DIM}"):
        gt.train("vete_bow", output_dir=tmp_path / "run", data_dir=tmp_path, embedding_dim=value)
    assert not (tmp_path / "run").exists()


def test_a_count_beyond_32_bits_is_refused_naming_the_field(tmp_path, capsys):
    from grounded_text.train import main

    assert main(["--output-dir", str(tmp_path / "run"), "--data-dir", str(tmp_path), "--set",
                 "train.epochs=1000000000000000000000"]) == 2
    assert "train.epochs must be at most 2147483647" in _one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize("dim, dtype", [(8, "float16"), (3, "float32")])
def test_a_streaming_store_whose_manifest_dim_disagrees_with_its_rows_is_refused_at_open(tmp_path, dim, dtype):
    from grounded_text.data.features import open_feature_store
    from grounded_text.data.store_writer import write_feature_store
    from grounded_text.data.streaming import MANIFEST

    store = write_feature_store(tmp_path / "store", ["a.jpg", "b.jpg", "c.jpg"],
                                np.arange(12, dtype=np.float32).reshape(3, 4), dtype="float16", rows_per_shard=2)
    assert open_feature_store(store).dim == 4
    manifest = json.loads((store / MANIFEST).read_text())
    (store / MANIFEST).write_text(json.dumps({**manifest, "dim": dim, "dtype": dtype}))
    with pytest.raises(ValueError, match=rf"manifest.json says dim={dim} \({dtype}: \d+ bytes a row\), but the rows "
                                         r"of shard 'shard-00000.tfrecord' hold 8 bytes") as info:
        open_feature_store(store)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("text, named", [
    ('[hp.lr]\nfield = "train.learning_rate"\ntype = "float"\nmin = "a"\nmax = 1e-2\n', r"\[hp.lr\]: min must be a "
                                                                                        r"number, got 'a'"),
    ('[hp.lr]\nfield = "train.learning_rate"\ntype = "float"\nmin = 1e-4\nmax = [1]\n', r"max must be a number"),
    ('[hp.lr]\nfield = "train.learning_rate"\ntype = "float"\nmin = 1e-4\nmax = 1e-2\ndefault = "x"\n',
     r"default must be a number, got 'x'"),
    ('[hp.dim]\nfield = "model.embedding_dim"\ntype = "int"\nmin = 1.5\nmax = 8\n', r"min must be an integer, got 1.5"),
    ('[hp.lr]\nfield = "train.learning_rate"\ntype = "choice"\nvalues = 5\n', r"values must be a list, got 5"),
    ('[hp.lr]\nfield = 3\ntype = "fixed"\ndefault = 1\n', r"field must be a string, got 3"),
    ("hp = 5\n", r"hp must be a table"),
    ("[hp]\nlr = 5\n", r"\[hp.lr\]: must be a table"),
    ("extends = 5\n", r"extends must be the path of another space file .* got 5"),
    ('extends = "missing.toml"\n', r"extends = 'missing.toml': no such file"),
])
def test_a_search_space_with_values_of_the_wrong_type_is_refused_in_one_line(tmp_path, text, named):
    from grounded_text.tuning.space import SpaceError, load_space

    space = tmp_path / "mine.toml"
    space.write_text(text + "[models.vete_bow.fixed]\n")
    with pytest.raises(SpaceError, match=named) as info:
        load_space(space, "vete_bow")
    assert "\n" not in str(info.value) and str(space) in str(info.value)


@pytest.mark.parametrize("encoding, named", [
    ("utf-16", r"is UTF-16 text \(it starts with a UTF-16 byte-order mark\)"),
    ("utf-16-le", r"holds NUL bytes \(the first at byte 1; UTF-16 text without a byte-order mark\?\)"),
    ("utf-32", r"is UTF-32 text"),
])
def test_an_sts_input_saved_as_utf16_is_named_as_an_encoding_problem(tmp_path, encoding, named):
    from grounded_text.data.sts import read_sts_year

    year = tmp_path / "STS16-en-test"
    year.mkdir()
    (year / "STS2016.input.news.txt").write_bytes("a dog\ta hound\na cat\ta car\n".encode(encoding))
    (year / "STS2016.gs.news.txt").write_text("4.0\n1.0\n")
    with pytest.raises(ValueError, match=r"STS2016\.input\.news\.txt: the file " + named) as info:
        read_sts_year(year)
    message = str(info.value)
    assert "line" not in message and "\n" not in message and "iconv" in message
    (year / "STS2016.input.news.txt").write_text("a dog\ta hound\na cat\ta car\n")  # the same text as UTF-8
    assert [len(p) for p in read_sts_year(year).values()] == [2]

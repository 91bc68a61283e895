"""Photo search: the index folder keeps its writes inside itself, a damaged index file of any kind
is rebuilt, every failure of ``search`` is one ``error:`` line, file names stay one line of valid
text, and the results are never lost to a contact sheet that cannot be written.

Each test fails on the code before its fix (writes and deletions through a planted link,
``tokenize.TokenError`` tracebacks, tracebacks with rc 1, raw bytes and split lines, results lost)."""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest

from grounded_text import search
from grounded_text.data.features import check_npz_members, load_npz_features
from grounded_text.photos import index as image_index_lib
from grounded_text.photos.index import INDEX_FILE, LOCK_FILE, PARTS_DIR, ImageIndex, IndexLinkError

QUERY = "a dog runs on the grass"
DIM = 8


class Stub:
    """A model with an image tower, without TensorFlow: each photo's vector is its mean colour
    spread over ``DIM`` columns, each sentence's the first letters' codes."""

    image_fingerprint = "0123456789abcdef"
    dim = DIM

    def encode_images(self, arrays, **kwargs):
        rows = np.array([[float(a[..., c % 3].mean()) + c for c in range(DIM)] for a in arrays], np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    def encode(self, sentences, **kwargs):
        rows = np.array([[ord(s[c % len(s)]) for c in range(DIM)] for s in sentences], np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.fixture
def photos(data_dir, tmp_path) -> Path:
    folder = tmp_path / "photos"
    folder.mkdir()
    for src in sorted((data_dir / "flickr8k" / "images").glob("*.jpg"))[:4]:
        shutil.copy2(src, folder / src.name)
    return folder


@pytest.fixture
def stub(monkeypatch):
    """``gt.load`` answers with a ``Stub``: the CLI runs without a network."""
    import grounded_text as gt

    model = Stub()
    monkeypatch.setattr(gt, "load", lambda *args, **kwargs: model)
    return model


def _one_error(capsys) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def _tree(folder: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


# -- links in the index folder


@pytest.mark.parametrize("name", [PARTS_DIR, LOCK_FILE, INDEX_FILE, "part link"])
def test_a_planted_link_in_the_index_folder_writes_and_deletes_nothing_outside(photos, tmp_path, capsys, stub,
                                                                                 name):
    outside = tmp_path / "outside"
    outside.mkdir()
    for k in range(2):  # the user's own files, of the names the merge removes
        np.savez(outside / f"part-00000{k}.npz", mine=np.arange(k + 3))
    before = _tree(outside)
    index = ImageIndex(photos, stub, index_dir=tmp_path / "idx", batch_size=2)
    index.index_dir.mkdir(parents=True)
    if name == PARTS_DIR:
        (index.index_dir / PARTS_DIR).symlink_to(outside)
    elif name == LOCK_FILE:  # dangling: following it would create its target
        (index.index_dir / LOCK_FILE).symlink_to(outside / "created-by-lock")
    elif name == INDEX_FILE:
        (index.index_dir / INDEX_FILE).symlink_to(outside / "part-000000.npz")
    else:  # a part file that is a link to a user's file
        (index.index_dir / PARTS_DIR).mkdir()
        (index.index_dir / PARTS_DIR / "part-000000.npz").symlink_to(outside / "part-000001.npz")
    with pytest.raises(IndexLinkError, match="symbolic link"):
        index.update(show_progress_bar=False)
    assert _tree(outside) == before
    assert search.main(["--model", "vete_bow_flickr8k", "--images", str(photos), QUERY, "--index",
                        str(tmp_path / "idx"), "--batch-size", "2", "--no-progress"]) == 2
    assert "symbolic link" in _one_error(capsys)
    assert _tree(outside) == before


def test_a_lock_file_with_a_second_hard_link_is_refused(photos, tmp_path, stub):
    index = ImageIndex(photos, stub, index_dir=tmp_path / "idx")
    index.index_dir.mkdir(parents=True)
    elsewhere = tmp_path / "user.txt"
    elsewhere.write_text("mine")
    os.link(elsewhere, index.index_dir / LOCK_FILE)
    with pytest.raises(IndexLinkError, match="not a plain file"):
        index.update(show_progress_bar=False)
    assert elsewhere.read_text() == "mine"


# -- an .npy header that breaks NumPy's header parser


def _break_header(path: Path, member: str) -> None:
    """Turns ``'shape': (`` of ``member``'s ``.npy`` header into ``'shape': ((`` (same length, the
    zip's checksums written anew, so that only the header is damaged): NumPy's parser of old
    headers then raises ``tokenize.TokenError``."""
    with zipfile.ZipFile(path) as z:
        members = {name: z.read(name) for name in z.namelist()}
    data = bytearray(members[member])
    at = data.find(b"'shape': (")
    assert 0 < at < 128
    data[at + 10] = ord("(")
    members[member] = bytes(data)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, value in members.items():
            z.writestr(name, value)


def test_a_broken_npy_header_is_a_value_error_for_stores_and_the_index(photos, tmp_path, capsys, stub):
    store = tmp_path / "store.npz"
    np.savez(store, ids=np.array([f"im{i}.jpg" for i in range(500)]), features=np.ones((500, 30), np.float32))
    _break_header(store, "features.npy")
    with pytest.raises(ValueError, match="no valid .npy header"):
        check_npz_members(store)
    with pytest.raises(ValueError, match="features.npy"):
        load_npz_features(store)
    from grounded_text.vision.sinks import NpzFeatureSink

    with pytest.raises(ValueError, match="no valid .npy header"):
        NpzFeatureSink(store)

    argv = ["--model", "vete_bow_flickr8k", "--images", str(photos), QUERY, "--index", str(tmp_path / "idx"),
            "--no-progress"]
    assert search.main(argv) == 0
    capsys.readouterr()
    (index_file,) = (tmp_path / "idx").glob(f"*/{INDEX_FILE}")
    _break_header(index_file, "embeddings.npy")
    for _ in range(2):  # discarded and rebuilt, then reused
        assert search.main(argv) == 0
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err and len(captured.out.splitlines()) == 1 + 4 + 1
    assert "ignored an unreadable index file" not in captured.err
    assert "0 encoded, 4 reused" in captured.out


# -- one error line


def test_a_query_that_is_not_utf8_is_one_error_line(photos, tmp_path, capsys):
    query = os.fsdecode(b"a dog \xff runs")  # as the command line hands over such a byte
    assert search.main(["--model", "vete_bow_flickr8k", "--images", str(photos), query, "--index",
                        str(tmp_path / "idx")]) == 2
    line = _one_error(capsys)
    assert "not valid UTF-8" in line and "byte 0xff at position 6" in line


def test_damaged_lite0_weights_are_one_error_line(photos, tmp_path, capsys, monkeypatch):
    from grounded_text.vision import lite0, networks

    damaged = tmp_path / "lite0.weights.h5"
    data = bytearray(lite0.WEIGHTS_FILE.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))
    check = lite0.check_weights_file
    monkeypatch.setattr(networks.lite0, "check_weights_file", lambda path, *a: check(damaged, *a))
    assert search.main(["--model", "vete_bow_flickr8k", "--images", str(photos), QUERY, "--index",
                        str(tmp_path / "idx"), "--no-progress"]) == 2
    line = _one_error(capsys)
    assert "EfficientNet-Lite0 weights" in line and "damaged" in line


def _model_with_tower(tmp_path, width: int) -> Path:
    """A copy of the shipped BOW model whose image tower maps Lite0 features to ``width`` columns."""
    import keras

    from grounded_text import shipped
    from grounded_text.data.provenance import lite0_provenance
    from grounded_text.serving.export import export_image_tower

    model = tmp_path / "model"
    shutil.copytree(shipped.export_dir("vete_bow_flickr8k"), model / "export")
    inputs = keras.Input((1280,))
    tower = keras.Model(inputs, keras.layers.Dense(width)(inputs))
    export_image_tower(tower, model / "image_export", {}, image_features=lite0_provenance())
    return model / "export"


def test_an_image_tower_of_another_width_is_one_error_line(photos, tmp_path, capsys):
    export = _model_with_tower(tmp_path, 64)  # the text tower is 128-d
    assert search.main(["--model", str(export), "--images", str(photos), QUERY, "--index", str(tmp_path / "idx"),
                        "--no-progress"]) == 2
    line = _one_error(capsys)
    assert "128-d" in line and "64-d" in line


def test_an_index_of_another_width_is_one_error_line(photos, tmp_path, capsys, stub, monkeypatch):
    argv = ["--model", "vete_bow_flickr8k", "--images", str(photos), QUERY, "--index", str(tmp_path / "idx"),
            "--no-progress"]
    assert search.main(argv) == 0
    capsys.readouterr()
    monkeypatch.setattr(Stub, "encode", lambda self, s, **kw: np.ones((len(s), DIM + 2), np.float32) / 10 ** .5)
    assert search.main(argv) == 2
    assert f"{DIM + 2}-d" in _one_error(capsys)


# -- file names


def test_names_that_are_not_utf8_or_hold_a_newline_stay_one_line_of_text(photos, tmp_path, capsys, stub):
    first, second = sorted(photos.iterdir())[:2]
    odd = os.fsdecode(os.fsencode(str(photos)) + b"/caf\xe9.jpg")
    first.rename(odd)
    second.rename(photos / "two\nlines.jpg")
    argv = ["--model", "vete_bow_flickr8k", "--images", str(photos), QUERY, "--index", str(tmp_path / "idx"),
            "--top-k", "4", "--no-progress"]
    assert search.main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 + 4 + 1
    rows = out[1:5]
    assert any(r.endswith("/caf\\xe9.jpg'") for r in rows), rows
    assert any(r.endswith("/two\\nlines.jpg'") for r in rows), rows
    assert all(r.split(maxsplit=2)[2].isprintable() for r in rows)

    assert search.main([*argv, "--json"]) == 0
    text = capsys.readouterr().out
    text.encode("utf-8")  # no lone surrogate in the JSON
    results = json.loads(text)["results"]
    by_hex = [r for r in results if "path_hex" in r]
    assert len(by_hex) == 1 and os.fsdecode(bytes.fromhex(by_hex[0]["path_hex"])) == odd
    assert by_hex[0]["path"].endswith("/caf\\xe9.jpg")
    assert any(r["path"] == str(photos / "two\nlines.jpg") for r in results)


def test_features_sets_aside_a_name_that_is_not_utf8_by_name(photos, capsys):
    from grounded_text.vision.extractor import list_image_files

    good = sorted(p.name for p in photos.iterdir())
    bad = os.fsdecode(b"\xffbad.jpg")
    shutil.copy2(photos / good[0], os.path.join(str(photos), bad))
    pairs = list_image_files(photos)
    assert [name for name, _ in pairs] == good
    err = capsys.readouterr().err
    assert "\\xffbad.jpg" in err and "not valid UTF-8" in err


# -- the contact sheet


def test_save_into_missing_folders_writes_the_sheet_and_a_failed_save_keeps_the_results(photos, tmp_path, capsys,
                                                                                        stub, monkeypatch):
    grid = tmp_path / "missing" / "sub" / "grid.png"
    argv = ["--model", "vete_bow_flickr8k", "--images", str(photos), QUERY, "--index", str(tmp_path / "idx"),
            "--no-progress"]
    assert search.main([*argv, "--save", str(grid)]) == 0
    assert grid.is_file() and grid.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = capsys.readouterr().out.splitlines()
    assert len([r for r in out if r.strip()[:1].isdigit()]) == 4 and out[-2] == f"Grid: {grid}"

    from grounded_text.photos import contact_sheet

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(contact_sheet, "save_grid", full)
    assert search.main([*argv, "--save", str(tmp_path / "g.png")]) == 2
    captured = capsys.readouterr()
    rows = [r for r in captured.out.splitlines() if r.strip()[:1].isdigit()]
    assert len(rows) == 4 and all(Path(r.split(maxsplit=2)[2]).is_file() for r in rows)
    err = [line for line in captured.err.splitlines() if line.strip()]
    assert len(err) == 1 and "No space left" in err[0] and "results above" in err[0]

    assert search.main([*argv, "--save", str(tmp_path)]) == 2
    line = _one_error(capsys)
    assert "is a folder" in line and "Pillow" not in line


def test_the_stub_matches_the_index_cosines(photos, tmp_path):
    """The stub's search is the cosine of its vectors (so the tests above search for real)."""
    model = Stub()
    index = ImageIndex(photos, model, index_dir=tmp_path / "idx")
    hits = index.search(QUERY, top_k=4)
    from grounded_text.serving.images import read_image

    want = model.encode([QUERY]) @ model.encode_images([read_image(h.path) for h in hits]).T
    np.testing.assert_allclose([h.cosine for h in hits], want[0], atol=1e-6)
    assert image_index_lib.INDEX_FILE in os.listdir(index.index_dir)

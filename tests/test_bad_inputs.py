"""Bad inputs on the data / evaluation / features side: each fails with a clear message
naming the input (``error: ...`` and exit status 2 on the CLI) or has a documented result;
nothing is silently mis-paired, decoded at any size, or lost.

Every case builds its own small input in a temporary folder (no real data needed), and
checks against values known by construction (NumPy / SciPy references).
"""

from __future__ import annotations

import importlib
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from grounded_text.data.features import check_npz_members, load_npz_features
from grounded_text.data.sts import read_sick, read_sts_benchmark, read_sts_subset, read_sts_year

# --------------------------------------------------------------------------- GIF builder


def _lzw_constant(pixels: int, colour: int, min_code: int = 2) -> bytes:
    """GIF LZW data of ``pixels`` pixels of one colour index, in closed form: on a constant
    run every code adds the run one pixel longer than the last, so a 400-million-pixel frame
    takes about 200,000 codes (about 280 KB) and no dictionary is needed to write it."""
    clear, eoi = 1 << min_code, (1 << min_code) + 1
    codes, left, width = [], pixels, min_code + 1
    while left > 0:
        codes.append((clear, width))  # read at the width in force; then the decoder resets it
        width, i = min_code + 1, 0
        while left > 0 and i < 4000:  # clear well before the 4096-entry table is full
            run = min(i + 1, left)
            codes.append((colour if run == 1 else eoi - 1 + run, width))
            left -= run
            if i >= 1 and eoi + 1 + i == 1 << width and width < 12:  # where the decoder widens
                width += 1
            i += 1
    codes.append((eoi, width))
    acc = nbits = 0
    out = bytearray()
    for code, w in codes:
        acc |= code << nbits
        nbits += w
        while nbits >= 8:
            out.append(acc & 255)
            acc >>= 8
            nbits -= 8
    if nbits:
        out.append(acc & 255)
    blocks = bytearray([min_code])
    for k in range(0, len(out), 255):
        blocks += bytes([len(out[k:k + 255])]) + out[k:k + 255]
    return bytes(blocks + b"\x00")


def constant_gif(screen_hw, frames) -> bytes:
    """GIF89a: a logical screen of ``screen_hw`` (height, width), a 4-colour global table
    (black, red, green, blue) and one frame per ``(height, width, colour index)`` at (0, 0)."""
    h, w = screen_hw
    out = bytearray(b"GIF89a" + w.to_bytes(2, "little") + h.to_bytes(2, "little") + bytes([0x81, 0, 0]))
    out += bytes([0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255])
    for fh, fw, colour in frames:
        out += b"\x2c" + bytes(4) + fw.to_bytes(2, "little") + fh.to_bytes(2, "little") + b"\x00"
        out += _lzw_constant(fh * fw, colour)
    return bytes(out + b"\x3b")


# --------------------------------------------------------------------------- 1. GIF bombs


def test_gif_builder_is_a_valid_gif():
    tf = pytest.importorskip("tensorflow")
    gif = constant_gif((300, 200), [(300, 200, 1), (300, 200, 3)])  # > one LZW table per frame: no
    frames = tf.io.decode_gif(gif).numpy()
    assert frames.shape == (2, 300, 200, 3)
    np.testing.assert_array_equal(frames[0].reshape(-1, 3), np.tile([255, 0, 0], (60000, 1)))
    np.testing.assert_array_equal(frames[1].reshape(-1, 3), np.tile([0, 0, 255], (60000, 1)))
    big = tf.io.decode_gif(constant_gif((3000, 3000), [(3000, 3000, 2)])).numpy()  # two LZW clears
    assert big.shape == (1, 3000, 3000, 3) and (big[..., 1] == 255).all() and (big[..., ::2] == 0).all()


def test_gif_frame_larger_than_its_screen_is_refused_before_decoding():
    tf = pytest.importorskip("tensorflow")
    from grounded_text.vision import crops

    bomb = constant_gif((16, 16), [(20000, 20000, 1)])
    assert len(bomb) < 400_000  # 400 million pixels in under 400 KB
    assert crops.header_size(tf.constant(bomb)).numpy().tolist() == [16, 16]  # what the old guard saw
    cut, hw = crops.gif_first_frame(bomb)
    assert hw == (20000, 20000)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"GIF frame is 20000x20000 = 400000000 pixels"):
        crops.decode_rgb(tf.constant(bomb))
    # A small frame under a small limit: refused by its frame size, its screen passes.
    gif = constant_gif((16, 16), [(200, 200, 1)])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"GIF frame is 200x200 = 40000 pixels"):
        crops.decode_rgb(tf.constant(gif), max_pixels=10_000)
    np.testing.assert_array_equal(crops.decode_rgb(tf.constant(gif), max_pixels=None).numpy(),
                                  tf.io.decode_gif(gif)[0].numpy())  # no limit: decoded as before


def test_gif_only_first_frame_is_decoded_and_equals_frame_zero():
    tf = pytest.importorskip("tensorflow")
    from grounded_text.vision import crops

    gif = constant_gif((30, 20), [(30, 20, 1), (30, 20, 2), (9000, 9000, 3)])  # a big frame later
    cut, hw = crops.gif_first_frame(gif)
    assert hw == (30, 20) and len(cut) < len(gif) and cut.endswith(b"\x3b")
    assert tf.io.decode_gif(cut).shape == (1, 30, 20, 3)
    reference = tf.io.decode_gif(constant_gif((30, 20), [(30, 20, 1), (30, 20, 2)]))[0].numpy()
    np.testing.assert_array_equal(crops.decode_rgb(tf.constant(gif)).numpy(), reference)
    # Inside tf.data too (the extractor's graph), and other formats pass untouched.
    png = tf.io.encode_png(tf.fill([5, 7, 3], tf.constant(9, tf.uint8)))
    ds = tf.data.Dataset.from_tensor_slices([gif, png.numpy()]).map(lambda b: crops.decode_rgb(b))
    out = list(ds.as_numpy_iterator())
    np.testing.assert_array_equal(out[0], reference)
    assert out[1].shape == (5, 7, 3) and (out[1] == 9).all()
    assert crops.gif_first_frame(b"\x89PNG....") == (b"\x89PNG....", (0, 0))
    assert crops.gif_first_frame(b"GIF89a\x01\x00")[1] == (0, 0)  # truncated: left to the decoder


class _TinyNetwork:
    """Stands in for a FeatureNetwork: mean colour of the view (no CNN to build)."""

    input_size = 8
    dim = 3

    def __init__(self, cnn, weights=None, mixed_precision=False):
        from grounded_text.vision.networks import get_spec

        self.spec = get_spec(cnn)

    def __call__(self, views):
        import tensorflow as tf

        return tf.reduce_mean(views, axis=[1, 2])


def test_features_cli_reports_the_gif_bomb_and_keeps_the_rest(tmp_path, capsys, monkeypatch):
    pytest.importorskip("tensorflow")
    from grounded_text import features as cli
    from grounded_text.vision import extractor

    monkeypatch.setattr(extractor, "FeatureNetwork", _TinyNetwork)
    folder = tmp_path / "imgs"
    folder.mkdir()
    (folder / "bomb.gif").write_bytes(constant_gif((16, 16), [(20000, 20000, 1)]))
    (folder / "red.gif").write_bytes(constant_gif((16, 16), [(16, 16, 1), (16, 16, 2)]))
    out = tmp_path / "s.npz"
    rc = cli.main(["--images", str(folder), "--out", str(out), "--cnn", "efficientnet_b0",
                   "--weights", "none", "--no-progress"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert "FAILED bomb.gif: GIF frame is 20000x20000" in captured.err
    store = load_npz_features(out)
    assert store.ids.tolist() == ["red.gif"]
    np.testing.assert_allclose(store.features, [[255.0, 0.0, 0.0]], atol=1e-3)  # frame 0 only: red


# --------------------------------------------------------------------------- 8. unwritable --out


def test_features_out_unwritable_is_an_error_before_any_work(tmp_path, capsys, monkeypatch):
    pytest.importorskip("tensorflow")
    from grounded_text import features as cli
    from grounded_text.vision import extractor

    def no_network(*args, **kwargs):
        raise AssertionError("the network was built before --out was checked")

    monkeypatch.setattr(extractor, "FeatureNetwork", no_network)
    folder = tmp_path / "imgs"
    folder.mkdir()
    (folder / "red.gif").write_bytes(constant_gif((4, 4), [(4, 4, 1)]))
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "dir.npz").mkdir()
    cases = [(tmp_path / "a_file" / "s.npz", "is not a folder"), (tmp_path / "dir.npz", "is a folder")]
    if Path("/sys").is_dir():
        try:
            with tempfile.NamedTemporaryFile(dir="/sys"):
                pass
        except OSError:  # read-only here, as for a read-only mount
            cases.append((Path("/sys/grounded_text_test/s.npz"), "cannot write in '/sys'"))
    for out, why in cases:
        rc = cli.main(["--images", str(folder), "--out", str(out), "--weights", "none", "--no-progress"])
        err = capsys.readouterr().err
        assert rc == 2 and err.startswith("error: --out") and why in err and str(out) in err, err

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkdtemp", refuse)  # the write probe of the --out check
    out = tmp_path / "new" / "s.npz"
    assert cli.main(["--images", str(folder), "--out", str(out), "--weights", "none", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"cannot write in {str(tmp_path)!r} (Permission denied)" in err
    assert not (tmp_path / "new").exists()  # nothing created


# --------------------------------------------------------------------------- 7. forged npz headers


def _npz_with_member(path: Path, header: dict, data: bytes, ids=("a", "b")) -> None:
    import io

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, header)
    ids_buf = io.BytesIO()
    np.save(ids_buf, np.array(ids))
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("ids.npy", ids_buf.getvalue())
        z.writestr("features.npy", buf.getvalue() + data)


def test_npz_with_a_forged_shape_is_refused_before_loading(tmp_path):
    huge = tmp_path / "huge.npz"
    _npz_with_member(huge, {"descr": "<f4", "fortran_order": False, "shape": (300_000_000_000, 1280)},
                     bytes(32))
    with pytest.raises(ValueError, match=r"huge\.npz: member 'features\.npy' declares shape "
                                         r"\(300000000000, 1280\) float32 \(1,536,000,000,000,000 bytes\) "
                                         r"but holds 32 bytes"):
        load_npz_features(huge)
    moderate = tmp_path / "moderate.npz"  # 2x4 float32 declared 3x4
    _npz_with_member(moderate, {"descr": "<f4", "fortran_order": False, "shape": (3, 4)},
                     np.ones((2, 4), "<f4").tobytes())
    with pytest.raises(ValueError, match=r"moderate\.npz: member 'features\.npy' declares shape \(3, 4\) "
                                         r"float32 \(48 bytes\) but holds 32 bytes") as exc:
        load_npz_features(moderate)
    assert "pickle" not in str(exc.value)
    objects = tmp_path / "objects.npz"
    np.savez(objects, ids=np.array(["a"]), features=np.array([[{"x": 1}]], dtype=object))
    with pytest.raises(ValueError, match=r"objects\.npz: member 'features\.npy' holds Python objects"):
        load_npz_features(objects)
    junk = tmp_path / "junk.npz"
    with zipfile.ZipFile(junk, "w") as z:
        z.writestr("ids.npy", b"not an npy header at all")
    with pytest.raises(ValueError, match=r"junk\.npz: member 'ids\.npy' has no valid \.npy header"):
        load_npz_features(junk)
    with pytest.raises(ValueError, match="not a readable .npz"):
        (tmp_path / "text.npz").write_text("hello")
        load_npz_features(tmp_path / "text.npz")


def test_good_npz_headers_pass_and_match_numpy(tmp_path):
    feats = np.arange(12, dtype=np.float32).reshape(3, 4)
    for save in (np.savez, np.savez_compressed):
        path = tmp_path / f"{save.__name__}.npz"
        save(path, ids=np.array(["a", "b", "c"]), features=feats)
        found = check_npz_members(path)
        assert found["features"] == ((3, 4), np.dtype("<f4")) and found["ids"][0] == (3,)
        store = load_npz_features(path)
        np.testing.assert_array_equal(store.features, feats)
    empty = tmp_path / "empty_rows.npz"
    np.savez(empty, ids=np.array([], dtype=str), features=np.zeros((0, 4), np.float32))
    assert check_npz_members(empty)["features"][0] == (0, 4)


def test_feature_sink_refuses_a_forged_part(tmp_path):
    from grounded_text.vision.sinks import NpzFeatureSink

    store = tmp_path / "s.npz"
    _npz_with_member(store, {"descr": "<f4", "fortran_order": False, "shape": (10**12, 2)}, bytes(16))
    with pytest.raises(ValueError, match=r"s\.npz: member 'features\.npy' declares shape"):
        NpzFeatureSink(store)


# --------------------------------------------------------------------------- 2-5. STS files


def _subset(folder: Path, name: str, inputs: str | bytes, gold: str | bytes) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    ip, gp = folder / f"STS.input.{name}.txt", folder / f"STS.gs.{name}.txt"
    ip.write_bytes(inputs if isinstance(inputs, bytes) else inputs.encode("utf-8"))
    gp.write_bytes(gold if isinstance(gold, bytes) else gold.encode("utf-8"))
    return ip, gp


@pytest.mark.parametrize("brk", ["\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e"])
def test_sts_line_breaks_inside_a_sentence_keep_the_pairing(tmp_path, brk):
    s1 = [f"s{i} one" for i in range(6)]
    s2 = [f"s{i} two" for i in range(6)]
    s1[1] = f"s1 one{brk}still one"
    gold = [0.0, 1.0, 2.5, 5.0, 3.0, 4.0]
    ip, gp = _subset(tmp_path / "STS99-en-test", "toy",
                     "".join(f"{a}\t{b}\n" for a, b in zip(s1, s2)),
                     "".join(f"{g}\n" for g in gold) + "\n")  # a trailing blank line in the gold file
    pairs = read_sts_subset(ip, gp)
    assert pairs.sentences1 == s1 and pairs.sentences2 == s2
    np.testing.assert_array_equal(pairs.scores, gold)


def test_sts_trailing_blank_lines_and_crlf(tmp_path):
    folder = tmp_path / "STS99-en-test"
    # Blank gold lines facing pairs at the end: not scored (STS 2016 ends so); an extra
    # blank line at the end of the input file is no pair; \r\n line ends.
    ip, gp = _subset(folder, "a", "a\tb\r\nc\td\r\ne\tf\r\n\r\n", "1\r\n\r\n\r\n")
    pairs = read_sts_subset(ip, gp)
    assert (pairs.sentences1, pairs.sentences2, pairs.scores.tolist()) == (["a"], ["b"], [1.0])
    ip, gp = _subset(folder, "b", "a\tb\nc\td", "1\n2\n\n\n")  # no final newline; blank gold tail
    assert read_sts_subset(ip, gp).scores.tolist() == [1.0, 2.0]


def test_sts_count_mismatch_names_both_files_and_their_file_line_counts(tmp_path):
    folder = tmp_path / "STS99-en-test"
    # Three file lines, one with a U+2028 (str.splitlines would count four).
    ip, gp = _subset(folder, "toy", "a\tb\nc\u2028x\td\ne\tf\n", "1\n2\n3\n4\n")
    with pytest.raises(ValueError) as exc:
        read_sts_subset(ip, gp)
    msg = str(exc.value)
    assert f"{ip} has 3 lines but {gp} has 4" in msg
    ip, gp = _subset(folder, "short", "a\tb\nc\td\ne\tf\n", "1\n\n")
    with pytest.raises(ValueError, match=r"has 3 lines but .*STS\.gs\.short\.txt has 2"):
        read_sts_subset(ip, gp)


def test_sts_mispairing_reproduction_gives_the_right_pearson(tmp_path):
    """The reported fault: one U+2028 plus a trailing blank gold line shifted every later
    pair. Here the correlation must equal SciPy's on the true pairing."""
    from grounded_text.evaluation.sts import evaluate_sts

    rng = np.random.default_rng(0)
    n = 40
    angles = rng.uniform(0, np.pi, n)
    vecs = {}
    lines, golds = [], []
    for i in range(n):
        a, b = f"left {i}", f"right {i}"
        if i == 3:
            a = "left\u20283"
        vecs[a], vecs[b] = [1.0, 0.0], [np.cos(angles[i]), np.sin(angles[i])]
        lines.append(f"{a}\t{b}\n")
        golds.append(round(float(rng.uniform(0, 5)), 2))
    _subset(tmp_path / "STS99-en-test", "toy", "".join(lines), "".join(f"{g}\n" for g in golds) + "\n")
    report = evaluate_sts(lambda s: np.array([vecs[x] for x in s], np.float32), tmp_path)
    expected = stats.pearsonr(np.cos(angles), golds)[0]
    assert report["STS99"]["subsets"]["toy"]["n"] == n
    assert report["STS99"]["subsets"]["toy"]["pearson"] == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("bad", ["1e300", "-0.5", "5.01", "nan", "inf", "-inf"])
def test_sts_gold_outside_its_scale_is_refused_with_file_and_line(tmp_path, bad):
    ip, gp = _subset(tmp_path / "STS99-en-test", "toy", "a\tb\nc\td\n", f"5\n{bad}\n")
    why = r"(outside the scale 0\.\.5|not a finite number)"
    with pytest.raises(ValueError, match=rf"STS\.gs\.toy\.txt:2: gold score '{bad}' is {why}"):
        read_sts_subset(ip, gp)


def test_sts_b_and_sick_scores_outside_their_scales(tmp_path):
    (tmp_path / "STSBenchmark").mkdir()
    row = "main-captions\tMSRvid\t2012test\t0001\t{}\tA man.\tA woman.\n"
    (tmp_path / "STSBenchmark" / "sts-test.csv").write_text(row.format("5.0") + row.format("1e300"))
    with pytest.raises(ValueError, match=r"sts-test\.csv:2: score '1e300' is outside the scale 0\.\.5"):
        read_sts_benchmark(tmp_path, "test")
    (tmp_path / "SICK").mkdir()
    head = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
    (tmp_path / "SICK" / "SICK_test_annotated.txt").write_text(head + "1\tA\tB\t1.0\tNEUTRAL\n2\tA\tC\t0.5\tNEUTRAL\n")
    with pytest.raises(ValueError, match=r"SICK_test_annotated\.txt:3: relatedness_score '0\.5' is outside the "
                                         r"scale 1\.\.5"):
        read_sick(tmp_path, "test")


def test_empty_sts_subset_is_skipped_and_recorded(tmp_path):
    from grounded_text.evaluation.sts import evaluate_sts, format_markdown

    folder = tmp_path / "STS99-en-test"
    _subset(folder, "empty", "", "")
    _subset(folder, "unscored", "a\tb\nc\td\n", "\n\n")
    _subset(folder, "toy", "a\tb\na\tc\na\td\n", "5\n2.5\n0\n")
    vec = {"a": [1.0, 0.0], "b": [1.0, 0.1], "c": [1.0, 1.0], "d": [0.0, 1.0]}
    with pytest.warns(UserWarning, match="skipping subset 'empty'"):
        report = evaluate_sts(lambda s: np.array([vec[x] for x in s]), tmp_path)
    year = report["STS99"]
    assert list(year["subsets"]) == ["toy"] and sorted(year["skipped"]) == ["empty", "unscored"]
    assert str(folder / "STS.input.empty.txt") in year["skipped"]["empty"]
    assert "| STS99 | empty | 0 | skipped |" in format_markdown(report)
    skipped: dict = {}
    with pytest.warns(UserWarning):
        assert list(read_sts_year(folder, skipped)) == ["toy"]
    assert sorted(skipped) == ["empty", "unscored"]


def test_header_only_sick_and_empty_sts_b_name_their_file(tmp_path):
    (tmp_path / "SICK").mkdir()
    sick = tmp_path / "SICK" / "SICK_test_annotated.txt"
    sick.write_text("pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n")
    with pytest.raises(ValueError, match=rf"{sick}: no sentence pairs after the header"):
        read_sick(tmp_path, "test")
    (tmp_path / "STSBenchmark").mkdir()
    stsb = tmp_path / "STSBenchmark" / "sts-test.csv"
    stsb.write_text("\n")
    with pytest.raises(ValueError, match=rf"{stsb}: no sentence pairs"):
        read_sts_benchmark(tmp_path, "test")


def test_sts_paths_that_are_folders_are_named(tmp_path):
    folder = tmp_path / "STS99-en-test"
    _subset(folder, "toy", "a\tb\n", "1\n")
    (folder / "STS.gs.dir.txt").mkdir()
    (folder / "STS.input.dir.txt").write_text("a\tb\n")
    with pytest.raises(ValueError, match=rf"{folder / 'STS.gs.dir.txt'}: expected a text file, but it is a folder"):
        read_sts_year(folder)
    (folder / "STS.gs.dir.txt").rmdir()
    (folder / "STS.input.dir.txt").unlink()
    (folder / "STS.input.dir2.txt").mkdir()
    (folder / "STS.gs.dir2.txt").write_text("1\n")
    with pytest.raises(ValueError, match=r"STS\.input\.dir2\.txt: expected a text file, but it is a folder"):
        read_sts_year(folder)
    (tmp_path / "SICK" / "SICK_test_annotated.txt").mkdir(parents=True)
    with pytest.raises(ValueError, match=r"SICK_test_annotated\.txt: expected a text file, but it is a folder"):
        read_sick(tmp_path, "test")


# --------------------------------------------------------------------------- evaluate CLI


@pytest.fixture
def toy_cli(tmp_path, monkeypatch):
    """The evaluate CLI with a toy encoder in place of a SavedModel."""
    cli = importlib.import_module("grounded_text.evaluate")  # the command (gt.evaluate is the API's)
    from grounded_text.serving import loader as serving_loader

    vec = {"a": [1.0, 0.0], "b": [1.0, 0.1], "c": [1.0, 1.0], "d": [0.0, 1.0]}
    monkeypatch.setattr(serving_loader, "load", lambda path, batch_size=512, sentence_end=None: (
        lambda s: np.array([vec[x] for x in s], np.float32)))
    _subset(tmp_path / "STS12-en-test", "toy", "a\tb\na\tc\na\td\n", "5\n2.5\n0\n")
    _subset(tmp_path / "STS16-en-test", "toy", "a\tb\na\tc\na\td\n", "5\n2.5\n0\n")

    def run(*args):
        return cli.main(["--model", "toy", "--sts-dir", str(tmp_path), *args])

    return run, tmp_path


def test_evaluate_cli_folder_as_gold_file_is_an_error(toy_cli, capsys):
    run, root = toy_cli
    assert run() == 0
    capsys.readouterr()
    (root / "STS16-en-test" / "STS.gs.dir.txt").mkdir()
    (root / "STS16-en-test" / "STS.input.dir.txt").write_text("a\tb\n")
    assert run() == 2
    err = capsys.readouterr().err
    # The model's sentence-end rule is said first (every scoring command says it), then one error line.
    assert err.splitlines()[0].startswith("sentence ends of toy: none")
    assert err.splitlines()[-1].startswith("error: ") and str(root / "STS16-en-test" / "STS.gs.dir.txt") in err


def test_evaluate_cli_header_only_sick_is_an_error_naming_it(toy_cli, capsys):
    run, root = toy_cli
    (root / "SICK").mkdir()
    (root / "SICK" / "SICK_test_annotated.txt").write_text("pair_ID\tsentence_A\tsentence_B\trelatedness_score\n")
    assert run() == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith("error: ") and "SICK_test_annotated.txt: no sentence pairs" in err


@pytest.mark.parametrize("args, why", [
    (["--batch-size", "0"], "argument --batch-size: must be an integer >= 1, got 0"),
    (["--batch-size", "-5"], "argument --batch-size: must be an integer >= 1, got -5"),
    (["--batch-size", "x"], "argument --batch-size: expected an integer, got 'x'"),
    (["--years", "STS99"], "--years: no STS99-en-test folder under"),
    (["--years", "STS12", "STS15"], "(years found: STS12, STS16)"),
    (["--years"], "--years: give at least one year"),
])
def test_evaluate_cli_bad_flags_are_argparse_errors(toy_cli, capsys, args, why):
    run, _ = toy_cli
    with pytest.raises(SystemExit) as exc:
        run(*args)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "error:" in err and why in err, err


def test_evaluate_cli_known_years_still_score(toy_cli, capsys):
    run, _ = toy_cli
    assert run("--years", "STS16", "--batch-size", "1") == 0
    out = capsys.readouterr().out
    assert "| STS16 | toy | 3 |" in out and "STS12" not in out.split("{")[0]


def test_senteval_parallel_snli_files_keep_their_pairing(tmp_path):
    from grounded_text.data.senteval import read_snli

    snli = tmp_path / "SNLI"
    snli.mkdir()
    (snli / "s1.dev").write_text("A man\u2028walks .\nA dog\x0csits .\n", encoding="utf-8")
    (snli / "s2.dev").write_text("A person moves .\r\nA cat runs .\r\n", encoding="utf-8")
    (snli / "labels.dev").write_text("entailment\ncontradiction\n")
    dev = read_snli(tmp_path)["dev"]
    assert len(dev.labels) == 2 and dev.sentences2 == ["A person moves .", "A cat runs ."]
    assert dev.sentences == ["A man walks .", "A dog sits ."]
    assert dev.labels.tolist() == [0, 2]  # SNLI_CLASSES: entailment, neutral, contradiction


def test_a_missing_feature_file_names_the_command_that_makes_it(tmp_path):
    from grounded_text.data.features import resolve_features_path

    with pytest.raises(FileNotFoundError) as e:
        resolve_features_path(tmp_path, "resnet50")
    images, out = tmp_path / "flickr8k" / "images", tmp_path / "flickr8k" / "features" / "resnet50.npz"
    assert f"Make it with: grounded-text features --images {images} --out {out} --cnn resnet50" in str(e.value)
    with pytest.raises(FileNotFoundError, match="'mobilenet_v1_075' is not a network that grounded-text features "
                                                "builds .*--cnn efficientnet_b0, then train with --features "
                                                "efficientnet_b0"):
        resolve_features_path(tmp_path, "mobilenet_v1_075")

"""Crash-safe writes (grounded_text.utils.durable): atomic single files that never follow a planted
symlink and leave no temp file behind, and the folder swap of every export."""

import os
import stat

import pytest

from grounded_text.utils import durable
from grounded_text.utils.durable import (
    atomic_write,
    check_writable_target,
    install_dir,
    old_sibling,
    recover_export,
    staging_dir,
)


def _write(data: bytes):
    return lambda f: f.write(data)


def test_atomic_write_replaces_the_file_with_the_umask_mode_and_leaves_no_temp_file(tmp_path):
    path = tmp_path / "card.md"
    path.write_bytes(b"old")
    atomic_write(path, _write(b"new"))
    assert path.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["card.md"]
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask  # as open(path, "wb") would create it


def test_a_symlink_planted_at_the_old_predictable_temp_name_is_not_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    path = tmp_path / "out" / "metrics.json"
    path.parent.mkdir()
    # The name the previous version wrote through: .<name>.tmp-<pid>.
    (path.parent / f".{path.name}.tmp-{os.getpid()}").symlink_to(victim)
    atomic_write(path, _write(b"{}"))
    assert path.read_bytes() == b"{}" and not path.is_symlink()
    assert victim.read_bytes() == b"precious"


def test_temp_names_are_unpredictable_and_a_planted_one_makes_the_write_fail_not_follow(tmp_path, monkeypatch):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    path = tmp_path / "state.json"
    names = set()
    real_open = os.open

    def spy(name, *args, **kwargs):
        names.add(os.path.basename(name))
        return real_open(name, *args, **kwargs)

    monkeypatch.setattr(durable.os, "open", spy)
    for _ in range(3):
        atomic_write(path, _write(b"x"))
    temp_names = {n for n in names if n.startswith(".state.json.tmp-")}
    assert len(temp_names) == 3  # a fresh random name each time
    # An attacker who could guess the name: a symlink there makes the open fail (O_EXCL).
    monkeypatch.setattr(durable.secrets, "token_hex", lambda n: "0" * (2 * n))
    (tmp_path / f".state.json.tmp-{'0' * 16}").symlink_to(victim)
    with pytest.raises(FileExistsError, match="no free temp name"):
        atomic_write(path, _write(b"evil"))
    assert victim.read_bytes() == b"precious" and path.read_bytes() == b"x"


def test_a_failed_write_removes_its_temp_file_and_keeps_the_old_file(tmp_path):
    path = tmp_path / "features.npz"
    path.write_bytes(b"old")

    def fails(f):
        f.write(b"half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        atomic_write(path, fails)
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["features.npz"]


def _saved_model(folder, text):
    (folder / "saved_model.pb").write_text(text)
    return folder


def test_install_dir_swaps_folders_and_recover_export_finishes_a_cut_swap(tmp_path):
    target = tmp_path / "export"
    install_dir(_saved_model(staging_dir(target), "v1"), target)
    install_dir(_saved_model(staging_dir(target), "v2"), target)
    assert (target / "saved_model.pb").read_text() == "v2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]
    # A crash between the two renames: only .export.old is left; recovery renames it back.
    os.replace(target, old_sibling(target))
    assert recover_export(target) == target
    assert (target / "saved_model.pb").read_text() == "v2" and not old_sibling(target).exists()


def test_staging_dir_removes_stale_folders_but_never_follows_a_planted_symlink(tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text("precious")
    target = tmp_path / "runs" / "export"
    target.parent.mkdir()
    (target.parent / ".export.tmp-1").mkdir()  # a dead writer's
    (target.parent / ".export.tmp-2").symlink_to(victim)
    staged = staging_dir(target)
    assert staged.is_dir() and not any(staged.iterdir())
    assert sorted(p.name for p in target.parent.iterdir()) == [staged.name]
    assert (victim / "keep.txt").read_text() == "precious"


def test_check_writable_target_names_a_file_or_an_unwritable_place(tmp_path):
    (tmp_path / "a_file").write_text("")
    assert check_writable_target(tmp_path / "new" / "export") == tmp_path / "new" / "export"
    with pytest.raises(NotADirectoryError, match="a_file.*is not a folder"):
        check_writable_target(tmp_path / "a_file")
    with pytest.raises(NotADirectoryError, match="a_file.*is not a folder"):
        check_writable_target(tmp_path / "a_file" / "export")
    if os.path.isdir("/proc/self"):  # no folder can be made there, even by root
        with pytest.raises(PermissionError, match="cannot write in '/proc'"):
            check_writable_target("/proc/no_such_folder/export")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes into read-only folders")
def test_check_writable_target_refuses_a_read_only_folder(tmp_path):
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro").chmod(0o555)
    try:
        with pytest.raises(PermissionError, match="cannot write"):
            check_writable_target(tmp_path / "ro" / "export")
    finally:
        (tmp_path / "ro").chmod(0o755)


def test_atomic_save_stages_a_path_with_the_suffix_and_cleans_up_a_failed_save(tmp_path):
    from grounded_text.utils.durable import atomic_save

    path = tmp_path / "epoch-0001.weights.h5"
    path.write_bytes(b"old")
    seen = []

    def failing(tmp):
        seen.append(tmp)
        tmp.write_bytes(b"torn")
        raise OSError(28, "No space left on device", str(tmp))

    with pytest.raises(OSError, match="No space left"):
        atomic_save(path, failing, ".weights.h5")
    assert path.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == [path.name]
    assert seen[0].name.startswith(f".{path.name}.tmp-") and seen[0].name.endswith(".weights.h5")
    atomic_save(path, lambda tmp: tmp.write_bytes(b"new"), ".weights.h5")
    assert path.read_bytes() == b"new" and sorted(p.name for p in tmp_path.iterdir()) == [path.name]

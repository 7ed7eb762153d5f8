"""Small data sets shipped with the package (so demos need no download)."""

from __future__ import annotations

from importlib import resources

import numpy as np

__all__ = ["load_digits14"]


def load_digits14() -> dict[str, np.ndarray]:
    """2,000 train / 500 test binary 14x14 digit images as float32 arrays of shape (N, 196).

    Derived from the fixed binarized MNIST (Larochelle & Murray 2011) by 2x2
    max-pooling; see ``ugm_infer/data/README.md``.
    """
    with resources.files("ugm_infer").joinpath("data/digits14.npz").open("rb") as f:
        packed = np.load(f)
        return {k: np.unpackbits(packed[k], axis=1, count=196).astype(np.float32) for k in ("train", "test")}

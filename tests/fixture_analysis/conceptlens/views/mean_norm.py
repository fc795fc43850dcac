"""The Mean norm page: each checkpoint's mean feature norm (the `mean_norm` analysis).

A fixture, not part of the product (tests/test_contracts.py)."""

from __future__ import annotations

import pandas as pd


def datasets(db) -> pd.DataFrame:
    """Datasets with a checkpoint whose mean norm is computed; column dataset."""
    return db.query(
        """SELECT DISTINCT c.dataset FROM mean_norms m JOIN checkpoints c USING (checkpoint_id)
        ORDER BY c.dataset"""
    )


def norms(db, dataset: str) -> pd.DataFrame:
    """One row per checkpoint of `dataset`: checkpoint_id, n_images, mean_norm and its interval."""
    return db.query(
        """SELECT m.checkpoint_id, m.n_images, m.mean_norm, m.mean_norm_lo, m.mean_norm_hi
        FROM mean_norms m JOIN checkpoints c USING (checkpoint_id)
        WHERE c.dataset = $ds ORDER BY m.checkpoint_id""",
        {"ds": dataset},
    )

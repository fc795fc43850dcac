"""Embeddings inferred from behaviour: the psychological embedding of similarity judgments
(`psych`, roads2021)."""

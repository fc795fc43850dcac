"""The one root of the errors ConceptLens reports to a user (the CLI prints them as one line)."""


class ConceptLensError(Exception):
    """Bad input or a workspace that cannot be used; the message names the file, table,
    column or option."""

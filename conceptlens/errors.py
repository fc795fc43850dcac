"""The one root of the errors ConceptLens reports to a user (the CLI prints them as one line)."""


class ConceptLensError(Exception):
    """Bad input or a workspace that cannot be used; the message names the file, table,
    column or option."""


class SelectionError(ConceptLensError, ValueError):
    """A selection of images that names nothing, images the workspace (or a checkpoint) does
    not have, or cannot be saved or read; the message names the parameter."""

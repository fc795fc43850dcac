"""Analyses that read a workspace and write derived tables into it."""


def registered():
    """Every analysis of the registry (a tuple of `Analysis`), in the order they are listed."""
    from .registry import ANALYSES

    return ANALYSES


def __getattr__(name: str):
    # Until the registry is split (base.py / runner.py / cli.py), `runner` is the registry.
    if name == "runner":
        from . import registry

        return registry
    raise AttributeError(name)

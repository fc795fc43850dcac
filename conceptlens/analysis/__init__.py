"""Analyses that read a workspace and write derived tables into it."""

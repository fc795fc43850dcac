"""Figures as functions of workspace data: pages show them, papers export them."""

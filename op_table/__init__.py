"""Declarative operator test table: every symbolic, every seed operator, every form."""

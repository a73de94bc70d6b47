"""Renderers of run results: terminal lines and Markdown from the JSON dicts of Verifications.

A front-end layer: imports the API and below; the CLI and the pytest plugin render through it.
"""

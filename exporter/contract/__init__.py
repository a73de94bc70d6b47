"""The exporter's torch-free contract with whoever reads its models (the harness, users): the
`roundtrip.*` metadata keys (keys), the skeleton format (skeleton), atomic file writes
(fileio), and the readers of the records a model carries (metadata: dropped checks, renamed
values; static_axes: axes declared dynamic but exported static). Importing it never imports
torch; the pipeline stages build on it."""

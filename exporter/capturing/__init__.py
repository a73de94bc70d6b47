"""The capture stage: torch.export under the strategy ladder (trace), dynamic axes the model
fixes (specialise), the local rewrites that replace a second trace (functionalize), capture
rules for library code (rules/), and what the program's signature says (signature).

The public entry point is `exporter.capture` (exporter.api): the ops it keeps whole are the ones
the translate stage's registry knows, which this stage does not import."""

"""The write stage: the Graph as a ModelProto skeleton (serialize), model files and external data
written straight from the weights (external_data), and the readable printout (printer)."""

"""The device library (every device table the harness knows, with its provenance) and the evidence it gives a
device the harness has not seen (harness.library.transfer)."""

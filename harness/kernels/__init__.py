"""Kernels: the kernel tables `harness probe` writes for a device, the designed single-kernel graphs it times, and
what the kernel predictor reads from them."""

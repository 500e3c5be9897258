"""Profile ML models under an edge device's CPU and memory limits."""

__version__ = "0.1.0"

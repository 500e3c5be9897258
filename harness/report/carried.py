"""What a calibration says of the library devices that carry its predictions: the line `regress`, `predict` and the
report print (the calibration itself returns the figures: Calibration.library_devices)."""

from __future__ import annotations

from harness.calibration.calibrate import Calibration


def library_note(calibration: Calibration) -> str:
    """Which library devices carry the predictions and how alike they are to the device (empty when the chosen fit
    reads none)."""
    devices = calibration.library_devices()
    if not devices:
        return ""
    shown = ", ".join(f"{d['device']} (power {d['exponent']:.2f}, r {d['r']:.2f})" for d in devices[:3])
    more = f" and {len(devices) - 3} more" if len(devices) > 3 else ""
    return (f"library devices carrying it: {shown}{more}; r is how alike their log latencies are to the device's "
            "on the calibration models")

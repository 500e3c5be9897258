"""What a calibration says of the evidence that carries its predictions beside the harness value, the library devices
or the device's kernel table: the line `regress`, `predict` and the report print (the calibration itself returns the
figures: Calibration.library_devices, Calibration.kernel_table)."""

from __future__ import annotations

from harness.calibration.calibrate import Calibration


def carried_note(calibration: Calibration) -> str:
    """Which library devices, or which kernel table, carry the predictions (empty when the chosen fit reads neither):
    for library devices, how alike they are to the device."""
    if calibration.model.name == "kernels" and calibration.kernel_table:
        return (f"kernel table {calibration.kernel_table} carrying it: its prediction of each model from the graph, "
                "the model's family left out of the table (harness probe)")
    devices = calibration.library_devices()
    if not devices:
        return ""
    shown = ", ".join(f"{d['device']} (power {d['exponent']:.2f}, r {d['r']:.2f})" for d in devices[:3])
    more = f" and {len(devices) - 3} more" if len(devices) > 3 else ""
    return (f"library devices carrying it: {shown}{more}; r is how alike their log latencies are to the device's "
            "on the calibration models")

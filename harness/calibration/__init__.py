"""Desktop to device: the candidate fits (fits), their held-out figures and the automatic choice (choice), the
paired points (points), the OLS reference line (line), the calibration of a device's metrics against the
harness's (calibrate), and which model to measure next (suggest)."""

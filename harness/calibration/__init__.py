"""Desktop to device: the candidate fits (fits), their held-out figures and the automatic choice (choice), the
paired points (points), the OLS reference line (line), where the calibration models reach and how much wider a
prediction beyond them is (reach), the calibration of a device's metrics against the harness's (calibrate), which
model to measure next (suggest), and how the held-out share grows with the models measured (few_shot)."""

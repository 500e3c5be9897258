"""The device side: on-device measurements imported into the results directory, one table per device, from a
device CSV (device_csv) or a device tool's log (log_formats: tflite_benchmark, ort_perf_test, jetson, dumpsys),
repeats combined (repeats), per-op profiles kept (op_profiles), stored by the importer and read back (data)."""

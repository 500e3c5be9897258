"""The device side: on-device measurements imported into the results directory, one table per device."""

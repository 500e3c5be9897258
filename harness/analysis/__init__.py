"""From stored runs to numbers: summaries, CIs and the thresholds every test shares (stats, stdlib only), rank
agreement with exact p-values (correlation), the pair tests (pair_tests), one value per run and metric (run_values),
rankings with ties (ranking), the regression gate between two sessions (regression_gate), per-operator tables
(per_op, op_deltas) and beside a device's (op_kinds, device_ops), and which runs belong to a named model
(model_runs)."""

"""From stored runs to numbers: summaries, CIs and the thresholds every test shares (stats, stdlib only), rank
agreement with exact p-values (correlation), one value per run and metric (run_values), rankings
with ties (ranking), per-operator tables (per_op, op_deltas), and which runs belong to a named model (model_runs)."""

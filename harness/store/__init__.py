"""Results on disk: one crash-safe directory per session (append-only runs.jsonl, atomic summaries), and the
step-by-step migration of older stored files (migrations)."""

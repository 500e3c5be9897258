"""The harness as a library (harness.profile, predict, rank, compare, Session): calls that mirror the CLI and return
typed results. The CLI's commands call them and print; `import harness` names them without loading them."""

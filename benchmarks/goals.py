"""Every goal of the benchmarks in one table, met or missed with the reason, from results/bench/<name>.json.

    .venv/bin/python benchmarks/goals.py sampling_overhead peak_fidelity overhead latency cpu_limits noise_floor
"""

from __future__ import annotations

import argparse
import json

from _common import OUT_DIR, print_table, write_json

VERDICTS = {True: "met", False: "MISSED", None: "info"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("benchmarks", nargs="+", help="names of the benchmarks whose JSON to read")
    args = parser.parse_args()
    rows = []
    for name in args.benchmarks:
        path = OUT_DIR / f"{name}.json"
        if not path.exists():
            raise SystemExit(f"{path} does not exist: run benchmarks/{name}.py first")
        report = json.loads(path.read_text())
        rows += [{"benchmark": name, "goal": goal["name"], "target": goal["target"], "measured": goal["measured"],
                  "verdict": VERDICTS[goal["met"]], "note": goal["note"]} for goal in report["goals"]]
    print_table("Goals", rows)
    write_json(OUT_DIR / "goals.json", rows)
    print(json.dumps({"written": str(OUT_DIR / "goals.json")}))


if __name__ == "__main__":
    main()

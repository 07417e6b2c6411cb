"""How well do the hints name the planted mistakes? A table, per lesson.

    python tests/planted/report.py                      # this checkout's graders
    python tests/planted/report.py --root /path/to/old  # another checkout's (e.g. before a change)
    python tests/planted/report.py --seed 7 --json out.json

For every planted bug (tests/planted/lNN.py) it grades the reference notebook with the bug
and reports: the share of bugs whose first hint on their exercise names the planted
mistake, and the average number of hints per exercise that lost points. A first hint names
the mistake when its mistake id is the planted one (graders with ids), or, for graders
without ids, when it matches the pattern of ``planted.names.NAMES``. The bugs of another
checkout are matched to this checkout's mistake ids by lesson and description.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def dump(seed: int) -> list[dict]:
    """Grade every planted bug of the checkout on sys.path; one record per bug."""
    import torch

    torch.set_num_threads(1)
    from support import solution_path

    from grader.check.engine import grade_in_process
    from planted import modules

    records = []
    for module in modules():
        base = json.loads(solution_path(module.LESSON).read_text(encoding="utf-8"))
        for cell in base["cells"]:
            cell["source"] = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        for bug in module.BUGS:
            try:
                report = grade_in_process(bug.apply(base), module.LESSON, seed=seed)
            except TypeError:  # graders from before hidden inputs had seeds
                report = grade_in_process(bug.apply(base), module.LESSON)
            hints = {}
            for e in report.exercises:
                if e.points < e.max_points:
                    shown = e.hints if hasattr(e, "hints") else list(dict.fromkeys(e.failures))
                    hints[e.name] = [[str(h), getattr(h, "mistake", None)] for h in shown]
            target = {e.name: e for e in report.exercises}[bug.exercise]
            records.append({"lesson": module.LESSON, "exercise": bug.exercise, "bug": bug.description,
                            "mistake": getattr(bug, "mistake", None), "points": target.points,
                            "max_points": target.max_points, "hints": hints})
    return records


def from_root(root: Path, seed: int) -> list[dict]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), str(root / "tests")]))
    out = subprocess.run([sys.executable, __file__, "--dump-only", "--seed", str(seed)], cwd=root,
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def mistake_ids() -> dict[tuple[str, str], str]:
    from planted import modules

    return {(m.LESSON, b.description): b.mistake for m in modules() for b in m.BUGS}


def summarise(records: list[dict]) -> dict[str, dict]:
    from planted.names import NAMES

    ids = mistake_ids()
    rows: dict[str, dict] = defaultdict(lambda: {"bugs": 0, "named_by_id": 0, "named_by_words": 0,
                                                 "failing": 0, "hints": 0, "unknown": 0})
    for r in records:
        for key in (r["lesson"], "all"):
            row = rows[key]
            mistake = r["mistake"] or ids.get((r["lesson"], r["bug"]))
            hints = r["hints"].get(r["exercise"], [])
            row["bugs"] += 1
            if mistake is None:
                row["unknown"] += 1
            elif hints:
                text, hint_id = hints[0]
                row["named_by_id"] += hint_id == mistake
                row["named_by_words"] += bool(re.search(NAMES[mistake], text, re.IGNORECASE))
            for shown in r["hints"].values():
                row["failing"] += 1
                row["hints"] += len(shown)
    return dict(rows)


def table(rows: dict[str, dict], title: str) -> str:
    lines = [title, f"{'lesson':34} {'bugs':>5} {'first hint names it':>20} {'(by words)':>11} "
                    f"{'hints per failing exercise':>27}"]
    for lesson in sorted(k for k in rows if k != "all") + ["all"]:
        r = rows[lesson]
        by_id = f"{r['named_by_id']}/{r['bugs']}" if r["named_by_id"] else "-"
        words = f"{r['named_by_words']}/{r['bugs']}"
        per = r["hints"] / r["failing"] if r["failing"] else 0.0
        lines.append(f"{lesson:34} {r['bugs']:>5} {by_id:>20} {words:>11} {per:>27.2f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, help="grade with another checkout's graders and bugs")
    parser.add_argument("--seed", type=int, default=20260101)
    parser.add_argument("--json", type=Path, help="also write the per-bug records here")
    parser.add_argument("--dump-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.dump_only:
        print(json.dumps(dump(args.seed)))
        return
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    records = from_root(args.root.resolve(), args.seed) if args.root else dump(args.seed)
    if args.json:
        args.json.write_text(json.dumps(records, ensure_ascii=False, indent=1), encoding="utf-8")
    print(table(summarise(records), f"Planted bugs of {args.root or ROOT} (seed {args.seed})"))


if __name__ == "__main__":
    main()

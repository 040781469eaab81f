"""Run one built-in post-step in its own process:
`python -m harness.judge.poststeps NAME RUN OUT`."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

from harness.judge.poststeps import BUILTINS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.judge.poststeps")
    parser.add_argument("name", choices=sorted(BUILTINS))
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--options", default="{}", help="JSON object of options")
    args = parser.parse_args(argv)
    try:
        options = json.loads(args.options)
    except json.JSONDecodeError as e:
        print(f"post-step {args.name}: --options is not JSON: {e}", file=sys.stderr)
        return 2
    module = importlib.import_module(BUILTINS[args.name])
    args.out_dir.mkdir(parents=True, exist_ok=True)
    return int(module.run(args.run_dir, args.out_dir, options))


if __name__ == "__main__":
    sys.exit(main())

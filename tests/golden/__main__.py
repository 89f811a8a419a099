"""python -m tests.golden [--update]: check (or rewrite) the golden files of generated code."""

import sys

from tests.golden import differences, update

if __name__ == "__main__":
    if "--update" in sys.argv[1:]:
        written = update()
        print("\n".join(f"wrote tests/golden/{n}" for n in written) or "golden files already up to date")
        sys.exit(0)
    diffs = differences()
    for diff in diffs.values():
        sys.stdout.write(diff)
    print(f"{len(diffs)} golden file(s) differ; after an intended change run `python -m tests.golden --update`"
          if diffs else "golden files match")
    sys.exit(1 if diffs else 0)

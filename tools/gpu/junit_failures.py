"""The failed tests of a JUnit XML file, as pytest node ids.

    python tools/gpu/junit_failures.py list JUNIT            one id per line
    python tools/gpu/junit_failures.py compare JUNIT KNOWN   how many also fail in KNOWN, and the others

KNOWN is a list made by `list` (lines starting with # are comments): run_checks.sh compares the GPU
machine's failures with those of the same tests on the CPU under the GPU image's torch, so that
what is left is what the GPU run itself broke.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path


def failed_tests(junit: Path) -> set[str]:
    """Node ids of the test cases that failed or errored (a collection error: the module's id)."""
    failed = set()
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        if case.find("failure") is None and case.find("error") is None:
            continue
        classname, name = case.get("classname", ""), case.get("name", "")
        if not classname:  # a module that failed to collect: name is its dotted path
            failed.add(name.replace(".", "/") + ".py")
            continue
        parts = classname.split(".")
        # tests.test_mod -> tests/test_mod.py; tests.test_mod.TestClass -> tests/test_mod.py::TestClass
        split = next((i for i, part in enumerate(parts) if part[:1].isupper()), len(parts))
        node = "/".join(parts[:split]) + ".py" + "".join(f"::{part}" for part in parts[split:])
        failed.add(f"{node}::{name}")
    return failed


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "list":
        print("\n".join(sorted(failed_tests(Path(argv[1])))))
        return 0
    if len(argv) == 3 and argv[0] == "compare":
        try:
            failed = failed_tests(Path(argv[1]))
        except (OSError, ElementTree.ParseError) as error:
            print(f"no JUnit results to compare ({error})")
            return 1
        known = {line.strip() for line in Path(argv[2]).read_text().splitlines()
                 if line.strip() and not line.startswith("#")}
        beyond = sorted(failed - known)
        print(f"{len(failed)} failed or errored; {len(failed) - len(beyond)} of them fail on the CPU too under "
              f"the image's torch ({argv[2]}); {len(beyond)} others{':' if beyond else ''}")
        for name in beyond:
            print(f"  {name}")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

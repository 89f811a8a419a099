"""Generated code against the golden files in tests/golden/ (regenerate: python -m tests.golden --update)."""

import pytest

from tests.golden import CASES, differences


def test_generated_code_matches_the_golden_files():
    diffs = differences()
    assert not diffs, (f"{len(diffs)} golden file(s) changed; if intended, run `python -m tests.golden --update` "
                       "and commit the reviewed diff:\n" + "\n".join(diffs.values())[:20000])


def test_every_case_renders_its_loop_ir_and_source():
    assert len(CASES) >= 4


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_code_is_deterministic(case):
    assert CASES[case]() == CASES[case](), "two renderings of one case differ (unstable names or ordering)"

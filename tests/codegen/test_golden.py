"""Generated code against the golden files in tests/golden/ (regenerate: python -m tests.golden --update)."""

import pytest

from tests.golden import CASES, differences


def test_generated_code_matches_the_golden_files():
    diffs = differences()
    assert not diffs, (f"{len(diffs)} golden file(s) changed; if intended, run `python -m tests.golden --update` "
                       "and commit the reviewed diff:\n" + "\n".join(diffs.values())[:20000])


def test_every_case_renders_its_loop_ir_and_source():
    for case, render in CASES.items():
        files = render()
        assert files["ir"].startswith("func ") and len(files) >= 2, case
        assert all("void" in text or "__kernel" in text for key, text in files.items() if key != "ir"), case


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_code_is_deterministic(case):
    assert CASES[case]() == CASES[case](), "two renderings of one case differ (unstable names or ordering)"

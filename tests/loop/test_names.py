"""loop/names.py: fresh names are deterministic, so replays regenerate them."""

from tilegraph.loop.names import fresh_name


def test_fresh_names():
    assert fresh_name("i", []) == "i"
    assert fresh_name("i", ["i"]) == "i_1"
    assert fresh_name("i", {"i", "i_1", "i_2"}) == "i_3"

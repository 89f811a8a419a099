import re

from tilegraph.codegen.names import NameTable, sanitize

IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def test_hostile_name_becomes_a_plain_identifier():
    ident = NameTable().get("buffer", 'my-tensor; system("x")')
    assert IDENT.match(ident)
    assert ident.startswith("b_")


def test_names_are_stable_and_unique_after_sanitising():
    table = NameTable()
    a = table.get("buffer", "a-b")
    b = table.get("buffer", "a_b")
    assert a != b
    assert table.get("buffer", "a-b") == a
    assert table.get("var", "a-b") != a


def test_keywords_and_empty_names_are_prefixed():
    table = NameTable()
    assert table.get("var", "int") == "x_int"
    assert IDENT.match(table.get("var", ""))
    assert sanitize("9lives") == "9lives" and IDENT.match(table.get("var", "9lives"))

from tilegraph.codegen.writer import CodeWriter


def test_blocks_indent_and_close():
    w = CodeWriter()
    with w.block("for (;;)"):
        w.line("x += 1;")
        w.raw("#pragma once")
    assert w.text() == "for (;;) {\n  x += 1;\n#pragma once\n}\n"

"""`tilegraph compile` / `tilegraph run`: results on stdout, every bad input one line with exit code 2."""

import json

import numpy as np
import pytest

from tilegraph.cli.main import main

pytestmark = pytest.mark.needs_cc
onnx = pytest.importorskip("onnx")


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "w")])
    path = tmp_path_factory.mktemp("cli") / "mlp.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    return path


def test_compile_then_run_the_saved_model(mlp, tmp_path, capsys):
    out_dir = tmp_path / "mlp.tg"
    assert main(["compile", str(mlp), "-o", str(out_dir), "--json", "--orchestration", "greedy"]) == 0
    described = json.loads(capsys.readouterr().out)
    assert described["kernels"] == 1 and described["output"] == str(out_dir)  # matmul + relu: one fused kernel
    x = np.random.default_rng(1).standard_normal((2, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    assert main(["run", str(out_dir), "--input", f"x={tmp_path / 'x.npy'}", "--output", str(tmp_path / "outs"),
                 "--bench", "--time", "0.2"]) == 0
    assert "tilegraph:" in capsys.readouterr().out
    assert main(["run", str(mlp), "--vs", "onnxruntime", "--bench", "--time", "0.2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["onnxruntime_relative_error"] < 1e-5 and report["latency_s"]["tilegraph"] > 0
    weight = onnx.numpy_helper.to_array(onnx.load(str(mlp)).graph.initializer[0])
    np.testing.assert_allclose(np.load(tmp_path / "outs" / "y.npy"), np.maximum(x @ weight, 0), rtol=1e-5, atol=1e-6)


def test_run_against_openvino(mlp, capsys):
    pytest.importorskip("openvino")
    assert main(["run", str(mlp), "--vs", "openvino", "--bench", "--time", "0.2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["openvino_relative_error"] < 1e-5 and report["latency_s"]["openvino"] > 0


@pytest.mark.parametrize("argv,message", [
    (["compile", "missing.onnx"], "no such file"),
    (["run", "{mlp}", "--input", "nope=x.npy"], "the model's inputs are x"),
    (["run", "{mlp}", "--input", "x"], "expected NAME=FILE.npy"),
    (["run", "{mlp}", "--input", "x={bad}"], "cannot read a .npy array"),
    (["run", "{mlp}", "--input", "x={wrong_shape}"], "has shape (3, 8)"),
    (["run", "{mlp}", "--vs", "tvm"], "unknown peer"),
    (["run", "{mlp}", "--vs", "torch"], "needs the model's PyTorch definition"),
    (["compile", "{garbage}"], "not a readable ONNX model"),
    (["compile", "{mlp}", "-o", "/proc/nope/m.tg"], "cannot write"),
    (["compile", "{mlp}", "--time", "-5"], "finite number of seconds >= 0"),
    (["compile", "{mlp}", "--time", "nan"], "finite number of seconds >= 0"),
    (["compile", "{mlp}", "--time", "inf"], "finite number of seconds >= 0"),
    (["run", "{mlp}", "--bench", "--time", "inf"], "positive finite number"),
    (["run", "{mlp}", "--input", "x={x}", "--input", "x={x}"], "given twice"),
    (["run", "{mlp}", "--input", "x={empty}"], "cannot read a .npy array"),
    (["compile", "{mlp}", "--trials", "-1"], "--trials"),
])
def test_bad_input_is_one_line_and_exit_2(mlp, tmp_path, capsys, argv, message):
    (tmp_path / "bad.npy").write_bytes(b"not numpy")
    (tmp_path / "empty.npy").write_bytes(b"")
    np.save(tmp_path / "x.npy", np.zeros((2, 8), np.float32))
    np.save(tmp_path / "wrong.npy", np.zeros((3, 8), np.float32))
    (tmp_path / "garbage.onnx").write_bytes(b"\x00\x01garbage" * 7)
    argv = [a.format(mlp=mlp, bad=tmp_path / "bad.npy", wrong_shape=tmp_path / "wrong.npy",
                     garbage=tmp_path / "garbage.onnx", empty=tmp_path / "empty.npy", x=tmp_path / "x.npy")
            for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("tilegraph: error: ") and message in err and err.count("\n") == 1


def test_no_fuse_compiles_one_kernel_per_node(mlp, tmp_path, capsys):
    assert main(["compile", str(mlp), "-o", str(tmp_path / "unfused.tg"), "--no-fuse", "--json"]) == 0
    described = json.loads(capsys.readouterr().out)
    assert described["kernels"] == 2 and described["fused_groups"] == 0 and described["fallbacks"] == []


def test_orchestration_choice_and_report(mlp, tmp_path, capsys):
    assert main(["compile", str(mlp), "-o", str(tmp_path / "g.tg"), "--orchestration", "greedy", "--json"]) == 0
    greedy = json.loads(capsys.readouterr().out)
    assert greedy["orchestration"] == "greedy" and "blp_candidates" not in greedy
    assert main(["compile", str(mlp), "-o", str(tmp_path / "b.tg"), "--orchestration", "blp", "--json"]) == 0
    blp = json.loads(capsys.readouterr().out)
    assert blp["orchestration"] == "blp" and blp["blp_candidates"] >= greedy["kernel_launches"]
    assert blp["blp_measured_sum_s"] <= blp["greedy_measured_sum_s"] * (1 + 1e-9)
    assert blp["blp_failed"] == 0 and blp["blp_measured_now"] >= 0
    assert main(["compile", str(mlp), "-o", str(tmp_path / "b.tg"), "--orchestration", "best"]) == 2
    assert "invalid choice: 'best'" in capsys.readouterr().err


def test_compile_with_a_budget_prints_progress_and_the_task_table(mlp, tmp_path, capsys):
    db = str(tmp_path / "t.db")
    assert main(["compile", str(mlp), "-o", str(tmp_path / "t.tg"), "--trials", "6", "--db", db]) == 0
    out, err = capsys.readouterr()
    assert "1/1 tasks" in err and "measured" in err  # the progress, one line per slice off a terminal
    head = next(line for line in out.splitlines() if line.startswith("task"))
    for column in ("occ", "share", "before ms", "after ms", "GFLOP/s", "% peak", "meas", "torch ms"):
        assert column in head
    assert "matmul 2x8 . 8x4" in out and "6 measured now" in out
    # a rerun with the same database continues: nothing is measured again, one JSON line per task + the model
    assert main(["compile", str(mlp), "-o", str(tmp_path / "t.tg"), "--trials", "6", "--db", db, "--json",
                 "--no-vendor"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    (task,) = [line["task"] for line in lines[:-1]]
    assert task["occurrences"] == 1 and task["measured"] == 6 and task["measured_now"] == 0
    assert task["after_s"] <= task["before_s"] and task["vendor_s"] is None
    assert lines[-1]["tuning"]["measured_now"] == 0 and lines[-1]["tuned_kernels"] == 1


def _model(tmp_path, nodes, outputs, name="m.onnx", inputs=(("x", [2, 3]),)):
    from onnx import TensorProto, helper

    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                              [helper.make_tensor_value_info(o, t, None) for o, t in outputs])
    path = tmp_path / name
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9), str(path))
    return path


def test_outputs_with_clashing_names_get_distinct_files(tmp_path, capsys):
    from onnx import TensorProto, helper

    names = ["a/b", "a_b", "..", "/etc/passwd"]
    nodes = [helper.make_node(op, ["x"], [n]) for op, n in zip(("Relu", "Neg", "Abs", "Sigmoid"), names)]
    path = _model(tmp_path, nodes, [(n, TensorProto.FLOAT) for n in names])
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    assert main(["run", str(path), "--input", f"x={tmp_path / 'x.npy'}", "--output", str(tmp_path / "outs")]) == 0
    files = sorted(p.name for p in (tmp_path / "outs").iterdir())
    assert len(files) == 4 and all("/" not in f and not f.startswith(".") for f in files)
    from tilegraph.cli.models import output_file_name

    want = {"a/b": np.maximum(x, 0), "a_b": -x, "..": np.abs(x), "/etc/passwd": 1 / (1 + np.exp(-x))}
    for name, value in want.items():
        np.testing.assert_allclose(np.load(tmp_path / "outs" / output_file_name(name)), value, rtol=1e-6, atol=1e-6)


def test_vs_onnxruntime_with_a_bool_output_and_nonfinite_values(tmp_path, capsys):
    from onnx import TensorProto, helper

    from tilegraph.cli.models import output_difference

    zero = helper.make_node("Constant", [], ["zero"], value=helper.make_tensor("z", TensorProto.FLOAT, [], [0.0]))
    path = _model(tmp_path, [zero, helper.make_node("Greater", ["x", "zero"], ["positive"])],
                  [("positive", TensorProto.BOOL)])
    assert main(["run", str(path), "--vs", "onnxruntime", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["onnxruntime_relative_error"] == 0 and report["onnxruntime_nonfinite_mismatches"] == 0
    nan, inf = float("nan"), float("inf")
    assert output_difference(np.array([1.0, nan, inf]), np.array([1.0, nan, inf])) == (0.0, 0)
    assert output_difference(np.array([1.0, nan, 2.0]), np.array([1.0, 0.3, 2.0])) == (0.0, 1)
    assert output_difference(np.array([1.0, 2.0]), np.array([1.0, 4.0])) == (0.5, 0)


def test_symbolic_extents_from_the_command_line(tmp_path, capsys):
    from onnx import TensorProto, helper

    path = _model(tmp_path, [helper.make_node("Relu", ["x"], ["y"])], [("y", TensorProto.FLOAT)],
                  inputs=(("x", ["batch", 3]),))
    assert main(["compile", str(path), "-o", str(tmp_path / "m.tg")]) == 2
    assert "--input-shape x=D0,D1" in capsys.readouterr().err
    assert main(["compile", str(path), "-o", str(tmp_path / "m.tg"), "--input-shape", "x=4,3", "--json"]) == 0
    capsys.readouterr()
    assert main(["run", str(path), "--input-shape", "x=2,3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["outputs"]["y"] == [2, 3]
    assert main(["run", str(path), "--input-shape", "x=two"]) == 2
    np.savez(tmp_path / "both.npz", a=np.zeros(3), b=np.zeros(3))
    assert main(["run", str(tmp_path / "m.tg"), "--input", f"x={tmp_path / 'both.npz'}"]) == 2
    assert ".npz archive" in capsys.readouterr().err
    assert main(["compile", str(path), "-o", str(tmp_path / "n.tg"), "--input-shape", "x=4,3",
                 "--db", str(tmp_path / "new.db")]) == 0  # a database that does not exist yet: nothing to read


def test_an_embedding_runs_on_valid_random_ids_and_refuses_bad_ones(tmp_path, capsys):
    from onnx import TensorProto, helper, numpy_helper

    table = numpy_helper.from_array(np.arange(40, dtype=np.float32).reshape(10, 4), "E")
    graph = helper.make_graph([helper.make_node("Gather", ["E", "ids"], ["y"])], "emb",
                              [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [table])
    path = tmp_path / "emb.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9), str(path))
    assert main(["run", str(path), "--vs", "onnxruntime", "--json"]) == 0  # random ids stay below 10 rows
    assert json.loads(capsys.readouterr().out)["onnxruntime_relative_error"] == 0
    np.save(tmp_path / "ids.npy", np.array([[1, 2, 30, 0, 0, 0]], np.int64))
    assert main(["run", str(path), "--input", f"ids={tmp_path / 'ids.npy'}", "--vs", "onnxruntime"]) == 2
    err = capsys.readouterr().err
    assert "index 30 is out of range" in err and err.count("\n") == 1


def test_inputs_that_decide_shapes_are_bound_with_value(tmp_path, capsys):
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)], "m",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4, 5]),
                               helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = tmp_path / "r.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9), str(path))
    assert main(["run", str(path)]) == 2
    assert "--value axes=" in capsys.readouterr().err
    assert main(["run", str(path), "--value", "axes=1", "--vs", "onnxruntime", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["outputs"]["y"] == [3, 5] and report["onnxruntime_relative_error"] < 1e-6
    assert main(["compile", str(path), "--value", "axes=-1", "-o", str(tmp_path / "r.tg"), "--json"]) == 0
    capsys.readouterr()
    assert main(["run", str(tmp_path / "r.tg"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["outputs"]["y"] == [3, 4]
    assert main(["run", str(tmp_path / "r.tg"), "--value", "axes=1"]) == 2
    assert "bound already" in capsys.readouterr().err
    for bad in ("axes=x", "axes", "axes=1.5"):
        assert main(["run", str(path), "--value", bad]) == 2
        assert capsys.readouterr().err.count("\n") == 1


def test_a_model_onnxruntime_cannot_run_is_one_line_and_tilegraph_still_runs_it(tmp_path, capsys):
    """bfloat16 MatMul: tilegraph computes it (float32 inside, rounded once); ONNX Runtime's CPU
    provider has no kernel for it, which --vs reports in one line with exit code 2."""
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("MatMul", ["x", "x"], ["y"])], "m",
                              [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [3, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, None)])
    path = tmp_path / "bf16.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)]), str(path))
    assert main(["run", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["outputs"]["y"] == [3, 3]
    assert main(["run", str(path), "--vs", "onnxruntime"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "onnxruntime cannot run this model" in err


@pytest.fixture(scope="module")
def conv3x3(tmp_path_factory):
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(2)
    weights = (rng.standard_normal((16, 16, 3, 3)) / 12).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, "conv3x3", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 24, 24])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(weights, "w")])
    path = tmp_path_factory.mktemp("cli") / "conv3x3.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    return path


@pytest.mark.extended
def test_winograd_by_default_and_left_out_on_request(conv3x3, tmp_path, capsys):
    assert main(["compile", str(conv3x3), "-o", str(tmp_path / "w.tg"), "--json", "--orchestration", "greedy"]) == 0
    assert json.loads(capsys.readouterr().out)["kernels"] == 3  # input transform, GEMM, output transform
    assert main(["compile", str(conv3x3), "-o", str(tmp_path / "d.tg"), "--json", "--orchestration", "greedy",
                 "--no-rewrite", "winograd_conv"]) == 0
    assert json.loads(capsys.readouterr().out)["kernels"] == 1
    assert main(["run", str(conv3x3), "--vs", "onnxruntime", "--bench", "--time", "0.2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["onnxruntime_relative_error"] < 1e-4
    assert main(["compile", str(conv3x3), "-o", str(tmp_path / "x.tg"), "--no-rewrite", "winograd"]) == 2
    assert "invalid choice: 'winograd'" in capsys.readouterr().err

import json
import subprocess
import sys

import pytest

from tilegraph.cli.main import main


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TILEGRAPH_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


@pytest.mark.parametrize("argv, fragment", [
    (["tune", "NOPE-7"], "NOPE-7"),
    (["tune", "matmul:8,x,8"], "matmul:8,x,8"),
    (["tune", "matmul:8,8,8", "--time", "-1"], "--time"),
    (["tune", "matmul:8,8,8", "--trials", "-3"], "--trials"),
    (["tune", "matmul:8,8,8", "--strategy", "nope"], "unknown search strategy"),
    (["bench", "matmul:8,8,8", "--vs", "matlab"], "unknown peer"),
    (["db", "frobnicate"], "invalid choice"),
    (["db", "import", "missing.jsonl"], "cannot read"),
    ([], "required"),
])
def test_bad_input_is_one_line_and_exit_code_2(dirs, capsys, argv, fragment):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tilegraph: error: ") and fragment in err


@pytest.mark.parametrize("content", [b"garbage" * 100, b""])
def test_corrupt_or_unwritable_database(dirs, capsys, content):
    bad = dirs / "bad.db"
    bad.write_bytes(content)
    if not content:
        bad.unlink()
        bad.mkdir()
    assert main(["db", "list", "--db", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "tilegraph: error:" in err


def test_missing_compiler(dirs, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(dirs))
    monkeypatch.setenv("CC", "definitely-not-a-compiler")
    assert main(["tune", "matmul:8,8,8", "--trials", "1", "--strategy", "random"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "compiler" in err.lower()


def test_console_script_exit_code_without_traceback():
    proc = subprocess.run([sys.executable, "-m", "tilegraph.cli.main", "tune", "nothing:1"], capture_output=True,
                          text=True)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


@pytest.mark.needs_cc
def test_tune_json_then_db_commands_then_bench(dirs, capsys):
    db = str(dirs / "t.db")
    assert main(["tune", "matmul:8,8,8", "--strategy", "random", "--trials", "2", "--db", db, "--json"]) == 0
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert row["workload"] == "matmul:8,8,8" and row["strategy"] == "random" and row["measured"] == 2
    assert row["latency_s"] > 0 and row["gflops"] > 0 and row["tuning_time_s"] > 0 and row["failed"] == 0

    assert main(["db", "best", "--db", db, "--json"]) == 0
    best = json.loads(capsys.readouterr().out.strip())
    assert best["latency_s"] == row["latency_s"]
    assert main(["db", "export", str(dirs / "x.jsonl"), "--db", db]) == 0
    assert main(["db", "import", str(dirs / "x.jsonl"), "--db", str(dirs / "copy.db")]) == 0
    assert main(["db", "merge", db, "--db", str(dirs / "copy2.db")]) == 0
    assert "merged 2 new records" in capsys.readouterr().out
    assert main(["db", "distill", "--db", db]) == 0
    assert "removed 1 records" in capsys.readouterr().out
    assert main(["db", "list", "--db", db]) == 0
    assert "matmul" in capsys.readouterr().out

    assert main(["bench", "matmul:8,8,8", "--db", db, "--vs", "numpy,torch", "--time", "0.1", "--json"]) == 0
    bench = json.loads(capsys.readouterr().out.strip())
    assert bench["schedule"] == "tuned" and bench["latency_s"] > 0 and bench["ratio_numpy"] > 0
    assert "ratio_torch" in bench or any("torch" in n for n in bench["notes"])


@pytest.mark.needs_cc
def test_tune_profile_names_every_stage_of_the_measurement_pipeline(dirs, capsys):
    argv = ["tune", "matmul:24,16,40", "--strategy", "random", "--trials", "3", "--db", str(dirs / "p.db")]
    assert main([*argv, "--profile", "--json"]) == 0
    prof = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["profile"]
    assert prof["candidates"] == 3 and prof["built"] >= 3 and prof["runs"] >= 3
    stages = prof["seconds"]
    # every stage ran (inputs and reference may all have been drawn during the builds)
    for name in ("propose", "build", "run", "commit", "notify", "build.replay", "build.lower", "build.print",
                 "build.compile", "run.load", "run.check", "run.time"):
        assert stages[name] > 0.0, name
    assert stages["inputs"] >= 0.0 and stages["reference"] >= 0.0
    loop = sum(stages[n] for n in ("propose", "build", "inputs", "reference", "run", "commit", "notify"))
    assert 0 < loop <= prof["wall_s"] * 1.01 and prof["candidates_per_s"] > 0
    assert stages["run"] >= stages["run.check"] + stages["run.time"], "the worker's stages happen inside the wait"
    assert main([*argv, "--seed", "1", "--profile"]) == 0
    out = capsys.readouterr().out
    assert "candidates/s" in out and "build.compile" in out and "run.time" in out


def test_info_json(dirs, capsys):
    assert main(["info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["fingerprint"].startswith("cpu-") and info["cores"] >= 1 and info["database"].endswith("tuning.db")
    assert info["peak_gflops_1_thread"] > 0 and info["peaks_source"] in ("measured", "nominal (no compiler to measure with)")
    assert any(key.startswith("bandwidth_") for key in info)


@pytest.mark.needs_cc
def test_tune_with_the_language_model(dirs, capsys):
    pytest.importorskip("torch")
    assert main(["tune", "matmul:20,12,36", "--strategy", "tlm", "--trials", "3", "--json"]) == 0
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert row["strategy"] == "tlm" and row["measured"] == 3 and row["failed"] == 0


def test_tlm_without_torch_is_one_line_naming_the_extra(dirs, capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    assert main(["tune", "matmul:8,8,8", "--strategy", "tlm", "--trials", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "tilegraph[tlm]" in err

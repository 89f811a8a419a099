import threading
import time

from tilegraph.stages import add, recording, stage


def test_stages_count_only_inside_a_recording_and_nest():
    with stage("lost"):
        pass
    with recording() as outer:
        with stage("a"):
            time.sleep(0.01)
        with recording() as inner:
            with stage("a"):
                pass
            add("b", 2.0)
    assert set(outer) == {"a", "b"} and outer["a"] >= 0.01 and outer["b"] == 2.0
    assert set(inner) == {"a", "b"} and inner["a"] < outer["a"]


def test_a_stage_that_raises_still_counts_and_other_threads_record_nothing():
    with recording() as seconds:
        try:
            with stage("fails"):
                raise ValueError
        except ValueError:
            pass
        worker = threading.Thread(target=lambda: add("elsewhere", 1.0))
        worker.start()
        worker.join()
    assert "fails" in seconds and "elsewhere" not in seconds

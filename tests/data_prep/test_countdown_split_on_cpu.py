"""``python -m data_prep.countdown_split``: held-out, SFT and RL splits of one Countdown file, whole tasks apart."""

import pytest

from data_prep import countdown_split as split


def test_split_countdown_holds_out_whole_tasks(tmp_path):
    from data_prep.embedded_datasets import GENERATORS
    from data_prep.schema import read_rows, write_rows

    rows = GENERATORS["countdown"](train_size=120, test_size=1, seed=3)["train"]
    twin = rows[7]  # the same task with its numbers in another order: one task
    truth = twin["reward_model"]["ground_truth"]
    rows.append({**twin, "reward_model": {**twin["reward_model"], "ground_truth": {
        **truth, "numbers": truth["numbers"][::-1]}}, "extra_info": {**twin["extra_info"], "index": 120}})
    write_rows(rows, tmp_path / "source.parquet")
    assert split.main(["--input", str(tmp_path / "source.parquet"), "--out", str(tmp_path), "--test-size", "20",
                       "--sft-size", "30", "--sft-test-size", "5", "--seed", "1"]) == 0
    files = {name: read_rows(tmp_path / folder / f"{s}.parquet") for name, folder, s in split.OUTPUTS}
    assert {n: len(r) for n, r in files.items()} == {"test": 20, "sft_test": 5, "sft": 30, "train": 65}
    keys = {n: {split.task_key(r, "", 0) for r in rs} for n, rs in files.items()}
    assert sum(map(len, keys.values())) == 120 and len(set().union(*keys.values())) == 120  # disjoint, all kept
    for name, _, s in split.OUTPUTS:
        info = [r["extra_info"] for r in files[name]]
        assert [i["index"] for i in info] == list(range(len(info))) and {i["split"] for i in info} == {s}
        assert [i["source_index"] for i in info] == sorted(i["source_index"] for i in info)  # source order
        assert all(i["bucket"] in range(8) for i in info)
    report = (tmp_path / "countdown" / "split.json").read_text()
    assert '"repeated_tasks_dropped": 1' in report
    again = tmp_path / "again"  # the draw is the seed's
    split.main(["--input", str(tmp_path / "source.parquet"), "--out", str(again), "--test-size", "20",
                "--sft-size", "30", "--sft-test-size", "5", "--seed", "1"])
    assert read_rows(again / "countdown" / "test.parquet") == files["test"]
    capped = tmp_path / "capped"  # a smaller RL pool, the same held-out and SFT prompts
    split.main(["--input", str(tmp_path / "source.parquet"), "--out", str(capped), "--test-size", "20",
                "--sft-size", "30", "--sft-test-size", "5", "--train-size", "40", "--seed", "1"])
    assert read_rows(capped / "countdown" / "test.parquet") == files["test"]
    pool = {split.task_key(r, "", 0) for r in read_rows(capped / "countdown" / "train.parquet")}
    assert len(pool) == 40 and pool <= keys["train"]
    with pytest.raises(SystemExit, match="not enough"):
        split.main(["--input", str(tmp_path / "source.parquet"), "--out", str(tmp_path / "x"), "--test-size", "100",
                    "--sft-size", "20"])

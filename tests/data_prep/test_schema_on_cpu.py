"""verl RL row validation: bad input stops with an error naming file, row and field."""

import copy

import pytest

from data_prep.schema import (
    PARQUET_BATCH_ROWS,
    DataError,
    iter_records,
    make_row,
    read_rows,
    record_count,
    validate_rows,
    write_rows,
)


def _rows(n=3):
    return [make_row(data_source="math", question=f"q{i}", ability="math", ground_truth=str(i), index=i, split="train",
                     weak_pass_rate=0.25, strong_pass_rate=0.5) for i in range(n)]


def test_round_trip(tmp_path):
    path = write_rows(_rows(), tmp_path / "d.parquet")
    back = read_rows(path)
    assert back == _rows()
    assert back[1]["prompt"] == [{"role": "user", "content": "q1"}]


def test_parquet_sources_stream_in_batches_with_every_row_in_order(tmp_path):
    n = 2 * PARQUET_BATCH_ROWS + 3  # three batches, the last one short
    path = write_rows(_rows(n), tmp_path / "d.parquet")
    records = iter_records(path)
    assert next(records)["extra_info"]["index"] == 0  # a generator: nothing read ahead of use
    assert [r["extra_info"]["index"] for r in records] == list(range(1, n))
    assert record_count(path) == n and record_count(tmp_path / "d.jsonl") is None


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda r: r.pop("data_source"), "data_source"),
        (lambda r: r.__setitem__("prompt", []), "prompt"),
        (lambda r: r["prompt"][-1].__setitem__("content", "   "), "prompt"),
        (lambda r: r["reward_model"].__setitem__("ground_truth", ""), "reward_model.ground_truth"),
        (lambda r: r["extra_info"].pop("index"), "extra_info.index"),
        (lambda r: r["extra_info"].__setitem__("index", "7"), "extra_info.index"),
        (lambda r: r["extra_info"].__setitem__("index", 0), "extra_info.index"),  # duplicate of row 0
        (lambda r: r["extra_info"].__setitem__("weak_pass_rate", float("nan")), "extra_info.weak_pass_rate"),
        (lambda r: r["extra_info"].__setitem__("strong_pass_rate", "high"), "extra_info.strong_pass_rate"),
        (lambda r: r["extra_info"].__setitem__("strong_pass_rate", 1.5), "extra_info.strong_pass_rate"),
    ],
)
def test_bad_rows_name_file_row_and_field(mutate, field, tmp_path):
    rows = copy.deepcopy(_rows())
    mutate(rows[2])
    with pytest.raises(DataError) as err:
        write_rows(rows, tmp_path / "bad.parquet", source="source.jsonl")
    assert err.value.row == 2 and err.value.field == field
    assert str(err.value).startswith("source.jsonl, row 2, field ")
    assert not (tmp_path / "bad.parquet").exists()


def test_valid_rows_pass():
    validate_rows(_rows(5), "x")

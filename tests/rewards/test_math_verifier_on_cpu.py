"""Math verifier: answer extraction, math-verify equivalence, time limits and thread safety."""

import subprocess
import sys
import textwrap
import threading

import pytest

from verl_ext.rewards import math as math_reward
from verl_ext.rewards.math import extract_answer, last_boxed, score


@pytest.mark.parametrize(
    "text, expected",
    [
        ("so \\boxed{42}.", "42"),
        ("\\boxed{1} then finally \\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("\\boxed{\\{1, 2\\} \\cup {3}}", "\\{1, 2\\} \\cup {3}"),
        ("$\\boxed 7$", "7"),
        ("\\fbox{x^2}", "x^2"),
        ("\\boxed{unclosed", None),
        ("nothing here", None),
    ],
)
def test_last_boxed(text, expected):
    assert last_boxed(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("blah\n#### 18", "18"),
        ("So the final answer is 3/4.", "3/4"),
        ("Answer: $12$", "12"),
        ("no answer", None),
    ],
)
def test_fallbacks(text, expected):
    assert extract_answer(text) == expected


@pytest.mark.parametrize(
    "completion, truth, expected",
    [
        ("\\boxed{\\frac{1}{2}}", "0.5", 1.0),
        ("\\boxed{\\frac12}", "1/2", 1.0),
        ("\\boxed{2\\pi}", "2 \\pi", 1.0),
        ("\\boxed{x^2+2x+1}", "(x+1)^2", 1.0),
        ("\\boxed{\\frac{1}{3}}", "1/2", 0.0),
        ("\\boxed{41}", "42", 0.0),
        ("The answer is 42", "42", 1.0),
        ("\\boxed{(C)}", "C", 1.0),
        ("\\boxed{B}", "C", 0.0),
        ("no final answer", "42", 0.0),
    ],
)
def test_equivalence(completion, truth, expected):
    assert score(completion, truth)["score"] == expected


def test_off_main_thread_matches_main_thread():
    cases = [("\\boxed{\\frac{1}{2}}", "0.5"), ("\\boxed{3}", "4"), ("\\boxed{\\sqrt{4}}", "2")]
    main = [score(c, t)["score"] for c, t in cases]
    results = {}

    def worker(i):
        results[i] = [score(c, t)["score"] for c, t in cases]

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert main == [1.0, 0.0, 1.0]
    assert all(r == main for r in results.values())


def test_worker_timeout_kills_a_hung_check_and_recovers(monkeypatch):
    """A check that hangs is cut at the wall-clock limit, its process killed, and the next call works."""
    import queue
    import time

    monkeypatch.setattr(math_reward, "_idle", queue.LifoQueue())
    monkeypatch.setattr(math_reward, "_started", 0)
    real_init = math_reward._Worker.__init__
    hung = []

    def hanging_init(self):
        self.proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        hung.append(self.proc)

    out = {}

    def worker():
        monkeypatch.setattr(math_reward._Worker, "__init__", hanging_init)
        t0 = time.monotonic()
        out["hung"] = math_reward.is_equivalent("\\frac{1}{2}", "0.4", timeout_s=0.5)
        out["elapsed"] = time.monotonic() - t0
        monkeypatch.setattr(math_reward._Worker, "__init__", real_init)
        out["after"] = math_reward.is_equivalent("\\frac{1}{2}", "0.5", timeout_s=60)

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert out["hung"] == (False, True)
    assert out["elapsed"] < 5
    assert hung[0].poll() is not None  # the hung process was killed
    assert out["after"] == (True, False)


def test_script_without_main_guard_scores_from_threads(tmp_path):
    """The spawn-pool gotcha: a script without ``if __name__ == "__main__"`` must still score correctly."""
    script = tmp_path / "score_script.py"
    script.write_text(textwrap.dedent(
        """
        import threading
        from verl_ext.rewards import compute_score
        out = []
        t = threading.Thread(target=lambda: out.append(compute_score("math", "\\\\boxed{\\\\frac{1}{2}}", "0.5")["score"]))
        t.start(); t.join()
        print("SCORE", out[0])
        """
    ))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "SCORE 1.0" in proc.stdout


def test_waiting_callers_get_a_worker_after_all_workers_died(monkeypatch):
    """More callers than workers, and every worker killed on timeout: nobody waits forever."""
    import queue

    monkeypatch.setattr(math_reward, "_idle", queue.LifoQueue())
    monkeypatch.setattr(math_reward, "_started", 0)
    results = []

    def call(timeout_s):
        results.append(math_reward.is_equivalent("\\frac{1}{2}", "0.5", timeout_s=timeout_s))

    threads = [threading.Thread(target=call, args=(t,)) for t in (0.0001, 0.0001, 60, 60)]
    [t.start() for t in threads]
    [t.join(timeout=120) for t in threads]
    assert not any(t.is_alive() for t in threads)
    assert (True, False) in results and len(results) == 4


MC_FORMS = [r"\boxed{\text{C}}", r"\boxed{\textbf{(C)}}", r"\boxed{(C) 42}", r"\boxed{C. 42}", r"\boxed{c}",
            r"\boxed{C)}", r"\boxed{\mathrm{C}}", "The answer is (C).", "Answer: C"]


@pytest.mark.parametrize("completion", MC_FORMS)
def test_multiple_choice_forms_pick_the_letter(completion):
    assert score(completion, "C")["score"] == 1.0
    assert score(completion, "B")["score"] == 0.0  # the letter itself decides, not just its presence


@pytest.mark.parametrize("completion", [r"\boxed{42}", r"\boxed{\text{Cat}}", r"\boxed{}"])
def test_multiple_choice_answers_without_a_letter_score_zero(completion):
    assert score(completion, "C")["score"] == 0.0


def test_a_letter_is_not_a_choice_when_the_gold_is_not_one():
    assert score(r"\boxed{c}", "3")["score"] == 0.0 and score(r"\boxed{2c}", "2c")["score"] == 1.0


@pytest.mark.parametrize("completion", ["The final answer is $5$. I hope it is correct.",
                                        "Final Answer: The final answer is $5$. I hope it is correct.",
                                        "Final Answer: The final answer is $\\frac{10}{2}$. I hope it is correct."])
def test_minerva_style_final_answer(completion):
    assert extract_answer(completion) in ("5", "\\frac{10}{2}")
    assert score(completion, "5")["score"] == 1.0


@pytest.mark.parametrize("answer, gold", [("50\\%", "50"), ("50", "50\\%"), ("50%", "50"), ("50 \\%", "50"),
                                          ("50 percent", "50"), ("50\\%", "50\\%"), ("12.5\\%", "12.5")])
def test_percent_signs_are_ignored_on_both_sides(answer, gold):
    assert score(f"\\boxed{{{answer}}}", gold)["score"] == 1.0


def test_percent_is_not_a_fraction():
    # documented: the sign is dropped, so 0.5 vs 50% is math-verify's 0.5 vs 50
    assert score("\\boxed{0.5}", "50\\%")["score"] == 0.0 and score("\\boxed{51\\%}", "50")["score"] == 0.0

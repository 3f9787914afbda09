"""Math verifier: the final answer (last ``\\boxed{}``, or a common fallback) checked with math-verify.

Multiple choice (GPQA-Diamond, MMLU-Pro): when the gold answer is a single letter A-J, the answer's
chosen letter is compared (:func:`answer_choice`; an answer with no letter scores 0). Percentages: a
trailing ``\\%`` / ``%`` / ``percent`` is dropped on both sides before comparing.

math-verify's own time limit uses ``signal.alarm``, which only works in a process's main thread.
In the main thread we call it directly; elsewhere (verl's reward workers score from threads) the
check runs in a long-lived helper process (``python -m verl_ext.rewards.math_worker``) with a hard
wall-clock limit, killed and restarted on timeout. Unlike a ``multiprocessing`` spawn pool it never
re-imports the caller's ``__main__``, so scripts need no ``if __name__ == "__main__":`` guard.
"""

from __future__ import annotations

import json
import queue
import re
import select
import subprocess
import sys
import threading

TIMEOUT_S = 10.0
_FALLBACKS = (
    re.compile(r"####\s*([^\n]+)"),
    # Minerva: "Final Answer: The final answer is $5$. I hope it is correct." (the $...$ after "is")
    re.compile(r"(?:final answer|the answer)\s*(?:is|:)\s*\$+([^\n$]+)\$+", re.IGNORECASE),
    re.compile(r"(?:final answer|the answer)\s*(?:is|:)\s*([^\n$]+)", re.IGNORECASE),
    re.compile(r"answer\s*:\s*\$?([^\n$]+)", re.IGNORECASE),
)
_GOLD_CHOICE_RE = re.compile(r"^\(?([A-J])\)?[.)]?$")
# a chosen option: "C", "c", "(C)", "C)", "C.", "(C) 42", "C. 42", "C: 42" (after unwrapping \text{} etc.)
_ANSWER_CHOICE_RE = re.compile(r"^\(?([A-Ja-j])\)?(?:[.):]|\s|$)")
_WRAPPER_RE = re.compile(r"\\(?:text|textbf|textrm|mathrm|mathbf|mathit|bf|rm)\s*\{([^{}]*)\}")
_PERCENT_RE = re.compile(r"\s*(?:\\%|%|\\text\{\s*\\?%\s*\}|\\?\s*percent)\s*$", re.IGNORECASE)

MAX_WORKERS = 2
_idle: queue.LifoQueue = queue.LifoQueue()
_started = 0
_start_lock = threading.Lock()


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` / ``\\fbox{...}`` (nested braces handled)."""
    starts = [(text.rfind(cmd), cmd) for cmd in ("\\boxed", "\\fbox")]
    start, cmd = max(starts)
    if start < 0:
        return None
    rest = text[start + len(cmd) :]
    if not rest.lstrip().startswith("{"):
        tokens = rest.replace("$", " ").split()
        return tokens[0] if tokens else None
    i = start + len(cmd) + rest.index("{")
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j]
    return None


def extract_answer(solution_str: str) -> str | None:
    """The model's final answer string, or ``None`` when there is none."""
    boxed = last_boxed(solution_str)
    if boxed is not None:
        return boxed.strip()
    for pattern in _FALLBACKS:
        found = pattern.findall(solution_str)
        if found:
            return found[-1].strip().rstrip(".")
    return None


def answer_choice(answer: str) -> str | None:
    """The option letter an answer picks (``\\text{C}``, ``\\textbf{(C)}``, ``(C) 42``, ``C. 42``, ``c``), or
    ``None``. Used only when the gold answer is a letter: elsewhere ``c`` may be a variable."""
    text = answer.strip().strip("$").strip()
    while True:
        unwrapped = _WRAPPER_RE.sub(r"\1", text).strip()
        if unwrapped == text:
            break
        text = unwrapped
    found = _ANSWER_CHOICE_RE.match(text)
    return found.group(1).upper() if found else None


def strip_percent(answer: str) -> str:
    """``50\\%``, ``50%``, ``50 \\%``, ``50 percent`` -> ``50`` (a trailing percent sign only)."""
    return _PERCENT_RE.sub("", answer.strip())


def verify_answer(answer: str, ground_truth: str) -> bool:
    """math-verify equivalence of two answer strings (uses signal timeouts: main thread only)."""
    from math_verify import parse, verify

    gold = parse(f"\\boxed{{{ground_truth}}}")
    pred = parse(f"\\boxed{{{answer}}}")
    return bool(gold and pred and verify(gold, pred))


class _Worker:
    """A ``verl_ext.rewards.math_worker`` process answering one JSON request per line."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "verl_ext.rewards.math_worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1,
        )

    def ask(self, answer: str, ground_truth: str, timeout_s: float) -> bool | None:
        """True/False, or None on timeout (the process is then dead)."""
        self.proc.stdin.write(json.dumps([answer, ground_truth]) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        if not ready:
            self.proc.kill()
            self.proc.wait()
            return None
        return bool(json.loads(self.proc.stdout.readline()))


def _checkout() -> _Worker:
    """An idle worker, or a new one while fewer than ``MAX_WORKERS`` live (re-checked while waiting,
    since a worker killed on timeout frees its slot without returning to the idle queue)."""
    global _started
    while True:
        with _start_lock:
            if _idle.empty() and _started < MAX_WORKERS:
                _started += 1
                return _Worker()
        try:
            return _idle.get(timeout=0.1)
        except queue.Empty:
            continue


def _verify_in_worker(answer: str, ground_truth: str, timeout_s: float) -> bool | None:
    global _started
    worker = _checkout()
    try:
        verdict = worker.ask(answer, ground_truth, timeout_s)
    except (OSError, ValueError):  # worker died: treat like a timeout
        worker.proc.kill()
        verdict = None
    if worker.proc.poll() is None:
        _idle.put(worker)
    else:
        with _start_lock:
            _started -= 1
    return verdict


def is_equivalent(answer: str, ground_truth: str, timeout_s: float = TIMEOUT_S) -> tuple[bool, bool]:
    """(equivalent, timed_out). A letter gold (multiple choice) compares with the letter the answer picks;
    a trailing percent sign is ignored on both sides (``50\\%`` = ``50``; ``0.5`` vs ``50\\%`` stays
    math-verify's verdict on ``0.5`` vs ``50``: not equal)."""
    gt_choice = _GOLD_CHOICE_RE.match(ground_truth.strip())
    if gt_choice:
        return answer_choice(answer) == gt_choice.group(1), False
    answer, ground_truth = strip_percent(answer), strip_percent(ground_truth)
    if answer.strip() == ground_truth.strip():
        return True, False
    if threading.current_thread() is threading.main_thread():
        try:
            return verify_answer(answer, ground_truth), False
        except Exception:  # math-verify's TimeoutException or a parser failure
            return False, True
    verdict = _verify_in_worker(answer, ground_truth, timeout_s)
    return bool(verdict), verdict is None


def score(solution_str: str, ground_truth) -> dict[str, float | int]:
    answer = extract_answer(solution_str)
    result: dict[str, float | int] = {"score": 0.0, "has_answer": int(answer is not None), "timeout": 0}
    if answer is None:
        return result
    ok, timed_out = is_equivalent(answer, str(ground_truth))
    result["score"], result["timeout"] = float(ok), int(timed_out)
    return result

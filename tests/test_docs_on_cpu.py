"""The Markdown docs hold together: every relative link (and image) of every tracked ``*.md`` file resolves to a file
or folder of the repository, every ``#anchor`` to a heading of its file (GitHub's slugs); the landing page stays a
landing page (at most 250 lines, no commit hashes, no issue numbers); every ``python -m MODULE`` a doc names is a
module of this repository (with a ``__main__`` when it is a package) or a known third-party / standard one; every
``make TARGET`` is a Makefile target. Fast, and imports nothing of verl or torch."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LANDING = ROOT / "README.md"
LANDING_MAX_LINES = 250
OUR_PACKAGES = {"verl_ext", "data_prep", "eval", "tests"}
# third-party modules the docs may run with python -m (not checked: they live in other environments, e.g. the GPU one)
THIRD_PARTY = {"verl", "pytest", "pip", "torch", "vllm", "ray", "transformers", "huggingface_hub"}

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`]*`")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)
PYTHON_M = re.compile(r"\bpython3?\s+-m\s+([A-Za-z_][\w.]*)")
MAKE = re.compile(r"(?:^|[\s;&|(`])make\s+([a-z][\w-]*)")
HASH = re.compile(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")
ISSUE = re.compile(r"\bissues?\s+#?[0-9]+", re.I)


@cache
def tracked(*patterns: str) -> tuple[Path, ...]:
    out = subprocess.run(["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return tuple(ROOT / line for line in out.splitlines() if line and (ROOT / line).is_file())


def tracked_markdown() -> tuple[Path, ...]:
    return tracked("*.md")


def prose(text: str) -> str:
    """The text without fenced code blocks and inline code (links inside code are not links)."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: inline markup dropped, lowercase, punctuation but '-' and '_' removed, spaces
    to '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").replace("*", "")
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    out = set()
    for match in HEADING.finditer(FENCE.sub("", path.read_text())):
        base = slug(match.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return frozenset(out)


def link_problems(path: Path) -> list[str]:
    problems = []
    for target in LINK.findall(prose(path.read_text())):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto:, ...
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        where = f"{path.relative_to(ROOT)}: ({target})"
        if file_part.startswith("/") or not str(resolved).startswith(str(ROOT)):
            problems.append(f"{where} leaves the repository")
        elif not resolved.exists():
            problems.append(f"{where}: {file_part} does not exist")
        elif anchor and resolved.is_file() and resolved.suffix == ".md" and anchor not in anchors(resolved):
            problems.append(f"{where}: no heading #{anchor} in {resolved.relative_to(ROOT)}")
    return problems


def module_problem(module: str) -> str | None:
    top = module.split(".")[0]
    if top not in OUR_PACKAGES:
        known = top in THIRD_PARTY or top in sys.stdlib_module_names
        return None if known else f"{module}: neither a module of this repository nor a known third-party one"
    sys.path.insert(0, str(ROOT))
    try:
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.submodule_search_locations is not None:  # a package runs its __main__
            spec = importlib.util.find_spec(f"{module}.__main__") and spec
            if spec is None:
                return f"{module}: a package without __main__"
    except ImportError as e:
        return f"{module}: {e}"
    finally:
        sys.path.remove(str(ROOT))
    return None if spec is not None else f"{module}: no such module"


@cache
def make_targets() -> frozenset[str]:
    text = (ROOT / "Makefile").read_text()
    return frozenset(re.findall(r"^([A-Za-z0-9_-]+)\s*:(?!=)", text, re.M))


def code_segments(text: str) -> str:
    return "\n".join([m.group(0) for m in FENCE.finditer(text)] + INLINE_CODE.findall(FENCE.sub("", text)))


def test_every_markdown_file_is_found():
    names = {p.relative_to(ROOT).as_posix() for p in tracked_markdown()}
    assert "README.md" in names and "tests/README.md" in names


@pytest.mark.parametrize("path", tracked_markdown(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_and_anchors_resolve(path):
    assert link_problems(path) == []


@pytest.mark.parametrize("path", tracked_markdown(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_python_m_modules_exist(path):
    # "python -m verl_ext.apps.<name>" names a family, not a module: a trailing dot is a placeholder
    modules = sorted({m for m in PYTHON_M.findall(path.read_text()) if not m.endswith(".")})
    assert [p for p in map(module_problem, modules) if p] == []


@pytest.mark.parametrize("path", tracked_markdown(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_make_targets_exist(path):
    named = set(MAKE.findall(code_segments(path.read_text())))
    assert sorted(named - make_targets()) == []


def test_landing_page_is_short():
    lines = LANDING.read_text().splitlines()
    assert len(lines) <= LANDING_MAX_LINES, f"README.md has {len(lines)} lines (at most {LANDING_MAX_LINES})"


def test_landing_page_has_no_commit_hashes_or_issue_numbers():
    text = LANDING.read_text()
    assert HASH.findall(text) == [] and ISSUE.findall(text) == []


# ------------------------------------------------------------------ the checks themselves, on planted mistakes
def test_slug_follows_githubs_rules():
    assert slug("The study (`python -m verl_ext.apps.study`)") == "the-study-python--m-verl_extappsstudy"
    assert slug("The GPU path: what a CPU proved, and your first GPU hour") == \
        "the-gpu-path-what-a-cpu-proved-and-your-first-gpu-hour"
    assert slug("DOTS's trained predictor") == "dotss-trained-predictor"
    assert slug("Train / evaluation overlap") == "train--evaluation-overlap"


def test_checks_catch_planted_mistakes(tmp_path, monkeypatch):
    doc = ROOT / "tests" / "_planted_doc.md"
    doc.write_text("# Title\n\n## A section\n\n[ok](README.md) [ok](#a-section) [code](`x`)\n"
                   "[bad](no/such/file.md) [bad anchor](README.md#no-such-heading) ![img](no_such.png)\n"
                   "`[not a link](nowhere.md)`\n")
    try:
        problems = link_problems(doc)
    finally:
        doc.unlink()
    assert len(problems) == 3, problems
    assert module_problem("verl_ext.no_such_module") and module_problem("no_such_tool")
    assert module_problem("verl_ext.main") is None and module_problem("pytest") is None
    assert MAKE.findall(code_segments("`make demo` and `make no-such-target`")) == ["demo", "no-such-target"]
    assert HASH.findall("at commit 40a858e, in 2026") == ["40a858e"] and HASH.findall("a decade, 1234567") == []
    assert ISSUE.findall("as issue %d asked" % 35) == ["issue %d" % 35]


# the READMEs beside the code: a commit hash only as a measurement's provenance, under a "Measurements" heading
DEPTH_READMES = ["verl_ext/trainer/README.md", "verl_ext/cpu/README.md", "scripts/README.md", "verl_ext/apps/README.md",
                 "verl_ext/apps/sim/README.md", "data_prep/README.md", "eval/README.md", "verl_ext/rewards/README.md"]


def hashes_outside_measurements(text: str) -> list[str]:
    out, inside, level = [], False, 0
    for block in re.split(r"(?m)^(?=#{1,6}[ \t])", FENCE.sub("", text)):
        heading = HEADING.match(block)
        if heading:
            depth = len(heading.group(1))
            if "measurement" in heading.group(2).lower():
                inside, level = True, depth
            elif inside and depth <= level:
                inside = False
        if not inside:
            out += HASH.findall(block)
    return out


@pytest.mark.parametrize("name", DEPTH_READMES)
def test_depth_readmes_keep_hashes_in_measurements(name):
    assert hashes_outside_measurements((ROOT / name).read_text()) == []


@pytest.mark.parametrize("path", tracked_markdown(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_issue_numbers(path):
    """A user has no tracker to read an issue number in: a README states the target itself."""
    assert ISSUE.findall(path.read_text()) == []


def test_no_issue_numbers_in_code():
    """Nor in a docstring or a comment (another project's issue is named by its address)."""
    found = {p.relative_to(ROOT).as_posix(): ISSUE.findall(p.read_text())
             for p in tracked("*.py", "*.yaml", "*.sh", "Makefile")}
    assert {p: hits for p, hits in found.items() if hits} == {}


def test_hash_check_sees_sections():
    text = "# T\n\nat 40a858e\n\n## Measurements\n\nat 1ce958d\n\n### Sub\n\nat 9e556bd\n\n## Next\n\nat b88d681\n"
    assert hashes_outside_measurements(text) == ["40a858e", "b88d681"]

"""The Hydra overrides a recipe gives the objective and the component its launcher was asked for.

``python -m verl_ext.recipe_overrides GROUP SETTING OBJECTIVE AXIS CHOICE [--value KEY]`` prints, one per line, the
leaves of ``recipe.objectives.OBJECTIVE`` in ``recipes/GROUP/SETTING.yaml`` (with the files its defaults list names),
then the component's settings under ``AXIS.``: for ``rollout_filter``, ``recipe.schedulers.OBJECTIVE.NAME`` (NAME =
the chosen preset's ``name``: CBS's per-objective Table 4); for ``selector``, ``recipe.selectors.CHOICE``, whose
``rollout_filter`` entry (``name`` + settings), when present, chooses the filter the selector runs with
(``rollout_filter=NAME`` then its settings: DOTS+RR's replay) and whose ``with`` entry holds other config leaves it
runs with (``data.train_batch_size``), printed as they are. With ``--value KEY`` it prints the component's
effective KEY instead. Unknown names exit 2 with the known ones listed.
Used by ``scripts/common.sh`` (``objective_train``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml
from omegaconf import OmegaConf

from verl_ext.cpu import project_root


def chain(path: Path, absolute: Path) -> list[Path]:
    """The files a config's defaults list names (relative ones beside it, ``/x`` under ``absolute``), then itself."""
    if not path.is_file():
        raise SystemExit(f"no config {path}")
    files = []
    for entry in (yaml.safe_load(path.read_text()) or {}).get("defaults") or []:
        if isinstance(entry, str) and entry != "_self_":
            where = absolute / entry[1:] if entry.startswith("/") else path.parent / entry
            files += chain(where.with_name(where.name + ".yaml"), absolute)
    return files + [path]


def merged(path: Path, absolute: Path) -> dict:
    return OmegaConf.to_container(OmegaConf.merge(*(OmegaConf.load(p) for p in chain(path, absolute))))


def leaves(node: dict, prefix: str = ""):
    for key, value in node.items():
        if isinstance(value, dict) and value:
            yield from leaves(value, f"{prefix}{key}.")
        elif not isinstance(value, dict):
            yield f"{prefix}{key}", value


def text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ",".join(text(v) for v in value) + "]"
    return "null" if value is None else str(value)


def settings(root: Path, group: str, setting: str, objective: str, axis: str, choice: str) -> tuple[list[str], dict]:
    """(the overrides, the chosen component's merged preset)."""
    config = root / "verl_ext" / "config"
    for kind, name in (("objective", objective), (axis, choice)):
        if not (config / kind / f"{name}.yaml").is_file():
            known = " ".join(sorted(p.stem for p in (config / kind).glob("*.yaml")))
            raise SystemExit(f"unknown {kind} {name!r} (verl_ext/config/{kind}: {known})")
    recipe = merged(root / "recipes" / group / f"{setting}.yaml", config).get("recipe", {})
    if objective not in recipe.get("objectives", {}):
        raise SystemExit(f"recipes/{group}/{setting}.yaml has no recipe.objectives.{objective}")
    preset = merged(config / axis / f"{choice}.yaml", config / axis)
    if axis == "rollout_filter":
        own = ((recipe.get("schedulers") or {}).get(objective) or {}).get(preset["name"]) or {}
    else:
        own = dict((recipe.get("selectors") or {}).get(choice) or {})
    lines = [f"{k}={text(v)}" for k, v in leaves(recipe["objectives"][objective] or {})]
    companion = own.pop("rollout_filter", None) if axis == "selector" else None
    if companion is not None:
        if not isinstance(companion, dict) or "name" not in companion:
            raise SystemExit(f"recipes/{group}/{setting}.yaml: recipe.selectors.{choice}.rollout_filter needs a name")
        companion = dict(companion)
        lines.append(f"rollout_filter={companion.pop('name')}")
        lines += [f"rollout_filter.{k}={text(v)}" for k, v in leaves(companion)]
    lines += [f"{k}={text(v)}" for k, v in leaves((own.pop("with", None) or {}) if axis == "selector" else {})]
    return lines + [f"{axis}.{k}={text(v)}" for k, v in leaves(own)], {**preset, **own}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl_ext.recipe_overrides", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    for name in ("group", "setting", "objective", "axis", "choice"):
        parser.add_argument(name)
    parser.add_argument("--value", metavar="KEY", help="print the component's effective KEY instead")
    parser.add_argument("--root", type=Path, default=Path(project_root()))
    args = parser.parse_args(argv)
    try:
        lines, component = settings(args.root, args.group, args.setting, args.objective, args.axis, args.choice)
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2
    print(text(component.get(args.value)) if args.value else "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

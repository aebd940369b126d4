"""The checks of what runs beside the Python stack: the agent's sandbox (bubblewrap), the
environments (ALFWorld, a TextWorldExpress step) and the programs they need (Java), the HTML
report's browser, Slurm, the agent CLIs of the built-in profiles, each task's data, and the
free space under the workspaces root.

One function ``check_<part>(where) -> list[Finding]`` per part, as in ``checks``; programs
answer through ``procs`` (``program_version``, a probe), under its timeouts.
"""

from __future__ import annotations

import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from agent2rl_tui.run.doctor.findings import SETUP_FIX, Finding, State, Where
from agent2rl_tui.run.doctor.procs import installed, probe, program_version

if TYPE_CHECKING:
    from agent2rl_tui.run.profiles import AgentProfile

LOW_DISK_GIB = 20.0
"""Below this much free space under the workspaces root, say so: checkpoints add up."""
JAVA_FIX = "sudo apt install openjdk-17-jre-headless (any Java 17 runtime on PATH)"


# -- containment, environments, programs -------------------------------------------------------

def check_bubblewrap(where: Where) -> list[Finding]:
    from agent2rl_tui.run.containment import bwrap_path
    from agent2rl_tui.run.containment import probe as sandbox_probe

    path = bwrap_path()
    if path is None:
        return [Finding("bubblewrap", "bwrap", State.MISSING, "not on PATH: agents run NOT CONTAINED",
                        "sudo apt install bubblewrap (Fedora: sudo dnf install bubblewrap)")]
    version, _ = program_version(path)
    why = sandbox_probe(path)
    if why:
        return [Finding("bubblewrap", "bwrap", State.BROKEN, f"{version or path}: {why}",
                        "allow unprivileged user namespaces (docs/containment.md), or start runs with --no-contain")]
    return [Finding("bubblewrap", "bwrap", State.OK, f"{version or path}: a contained `true` ran (the agent's sandbox)")]


def check_alfworld(where: Where) -> list[Finding]:
    fix = "make setup (the alfworld extra; it builds fast-downward and jericho: needs a C/C++ compiler)"
    if not installed("alfworld"):
        return [Finding("alfworld", "ALFWorld", State.MISSING, "not installed: the alfworld task cannot run", fix)]
    answer = probe("alfworld")
    if "error" in answer:
        return [Finding("alfworld", "ALFWorld", State.BROKEN, f"import failed: {answer['error']}", fix)]
    if answer["missing"]:
        return [Finding("alfworld", "ALFWorld", State.BROKEN, f"alfworld {answer['version']}: its package data lacks "
                        f"{', '.join(answer['missing'])} in {answer['data']}", fix)]
    return [Finding("alfworld", "ALFWorld", State.OK, f"alfworld {answer['version']} and textworld "
                    f"{answer['textworld']} import; alfred.pddl and alfred.twl2 in {answer['data']} (the games: "
                    "`doctor data`)")]


def check_textworld(where: Where) -> list[Finding]:
    if not installed("textworld_express"):
        return [Finding("textworld", "TextWorldExpress", State.MISSING, "textworld-express is not installed", SETUP_FIX)]
    if shutil.which("java") is None:
        return [Finding("textworld", "TextWorldExpress", State.MISSING, "its simulator needs Java, not on PATH",
                        JAVA_FIX)]
    answer = probe("textworld")
    if "error" in answer:
        return [Finding("textworld", "TextWorldExpress", State.BROKEN, f"could not play a step: {answer['error']}",
                        f"check `java -version` (Java 17); {SETUP_FIX}")]
    return [Finding("textworld", "TextWorldExpress", State.OK, f"textworld-express {answer['version']}: played "
                    f"{answer['action']!r} in coin game train:0 ({answer['observation']!r})")]


def check_java(where: Where) -> list[Finding]:
    path = shutil.which("java")
    if path is None:
        return [Finding("java", "java", State.MISSING, "not on PATH: TextWorldExpress games and WebShop's search "
                        "index need it", JAVA_FIX)]
    version, ran = program_version(path, "-version")
    if not version:
        return [Finding("java", "java", State.BROKEN, f"{path} -version failed: {ran.why()}", JAVA_FIX)]
    return [Finding("java", "java", State.OK, f"{version} ({path})")]


def check_chromium(where: Where) -> list[Finding]:
    path = next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None)
    if path is None:
        return [Finding("chromium", "chromium", State.MISSING, "not on PATH: the HTML report's browser tests need it "
                        "(`report --html` pages open in any browser)", "sudo apt install chromium")]
    version, ran = program_version(path)
    if not version:
        return [Finding("chromium", "chromium", State.BROKEN, f"{path} --version failed: {ran.why()}",
                        "sudo apt install --reinstall chromium")]
    return [Finding("chromium", "chromium", State.OK, f"{version} ({path})")]


SLURM_PROGRAMS = ("slurmctld", "slurmd", "sbatch", "munged")
SLURM_FIX = "sudo apt install slurmctld slurmd slurm-client munge"


def check_slurm(where: Where) -> list[Finding]:
    search = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    found = {name: shutil.which(name, path=search) for name in SLURM_PROGRAMS}
    absent = [name for name, path in found.items() if path is None]
    if absent:
        return [Finding("slurm", "Slurm", State.MISSING, f"{', '.join(absent)} not found (PATH, /usr/sbin, /sbin): "
                        "campaigns run on the local scheduler", SLURM_FIX)]
    slurm, ran = program_version(str(found["slurmctld"]), "-V")
    munge, _ = program_version(str(found["munged"]))
    if not slurm:
        return [Finding("slurm", "Slurm", State.BROKEN, f"slurmctld -V failed: {ran.why()}", SLURM_FIX)]
    where_found = ", ".join(f"{name} {Path(str(path)).parent}" for name, path in found.items())
    return [Finding("slurm", "Slurm", State.OK, f"{slurm}, {munge or 'munge'}: {where_found}")]


# -- agent CLIs, task data, disk ---------------------------------------------------------------

def check_agents(where: Where) -> list[Finding]:
    from agent2rl_tui.run.profiles import BUILTIN_PROFILES

    clis = [p for p in BUILTIN_PROFILES.values() if p.check_args]
    with ThreadPoolExecutor(max_workers=len(clis)) as pool:
        return list(pool.map(lambda p: _agent_cli(p, where), clis))


def _agent_cli(profile: AgentProfile, where: Where) -> Finding:
    exe = profile.executable
    from agent2rl_tui.run.profiles import agent_cli_dirs  # the same folders the pre-flight and runs look in

    local = next((d / exe for d in agent_cli_dirs(where.repo) if (d / exe).is_file()), None)
    on_path = shutil.which(exe)
    npm = profile.install_hint.startswith("npm install")
    install = f"make agent-clis (needs npm), or {profile.install_hint}" if npm else profile.install_hint
    path = on_path or (str(local) if local else None)
    if path is None:
        return Finding("agents", profile.name, State.MISSING, f"{exe} is neither on PATH nor in .agent-clis/", install)
    version, ran = program_version(path, *profile.check_args)
    if not version:
        return Finding("agents", profile.name, State.BROKEN, f"`{path} {' '.join(profile.check_args)}` failed: "
                       f"{ran.why()}", install)
    pin = _npm_pin(profile.install_hint.split()[-1], where) if npm else None
    pinned = f"; make agent-clis pins {pin}" if pin and pin not in version else ""
    if on_path:
        return Finding("agents", profile.name, State.OK, f"{version} ({on_path}){pinned}")
    assert local is not None
    return Finding("agents", profile.name, State.INFO, f"{version} in {local.parent}, not on PATH, where runs look "
                   f"for it{pinned}", f'export PATH="{local.parent}:$PATH"')


def _npm_pin(package: str, where: Where) -> str | None:
    try:
        manifest = json.loads((where.repo / "locks" / "agent-clis" / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    version = manifest.get("dependencies", {}).get(package)
    return version if isinstance(version, str) else None


def check_data(where: Where) -> list[Finding]:
    from agent2rl_tui.tasks.registry import TaskError, cache_root, discover, load_task, prepared, task_cache

    found = [Finding("data", "cache", State.INFO, f"{cache_root()} ($AGENT2RL_DATA sets it)")]
    for name, folder in sorted(discover().items()):
        try:
            task = load_task(folder)
        except TaskError as exc:
            found.append(Finding("data", name, State.BROKEN, f"its task.toml: {exc}", f"correct {folder / 'task.toml'}"))
            continue
        source = task.data.get("source")
        if source != "prepared":
            found.append(Finding("data", name, State.OK, f"built in ({source})"))
        elif prepared(task):
            found.append(Finding("data", name, State.OK, _prepared_detail(task_cache(task))))
        else:
            found.append(Finding("data", name, State.MISSING, f"not prepared in {task_cache(task)}",
                                 f"agent2rl-tui data prepare {name} (--from PATH: local files, offline)"))
    return found


def _prepared_detail(folder: Path) -> str:
    try:
        meta = json.loads((folder / "source.json").read_text(encoding="utf-8"))
        return f"ready: {meta['train']} train / {meta['eval']} eval rows from {meta['source']} ({meta['prepared_at']})"
    except (OSError, ValueError, KeyError, TypeError):
        return f"ready in {folder}"


def check_disk(where: Where) -> list[Finding]:
    folder = where.root.absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    usage = shutil.disk_usage(folder)
    free, total = usage.free / (1 << 30), usage.total / (1 << 30)
    detail = f"{free:.0f} GiB free of {total:.0f} GiB under {where.root}"
    if free < LOW_DISK_GIB:
        return [Finding("disk", "workspaces", State.INFO, detail + ": low for runs that save checkpoints",
                        "free space there, or keep runs elsewhere: agent2rl-tui --root PATH ($AGENT2RL_WORKSPACES)")]
    return [Finding("disk", "workspaces", State.OK, detail)]

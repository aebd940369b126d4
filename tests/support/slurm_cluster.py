"""A real one-node Slurm cluster in a temporary folder, for the tests and by hand.

Debian's slurm-wlm (22.05) and munge, run as root: a munge key and its own munged, a generated
slurm.conf (this node's real CPUs and memory as ``slurmd -C`` reads them at start, one partition,
job completions logged to a file so ``sacct -c`` answers for ended jobs), slurmctld and slurmd
in the foreground as our children, on free ports, with every file (state, spool, logs, sockets)
under the folder. Nothing of the system's own Slurm or munge set-up is read or touched:
clients find the cluster through ``SLURM_CONF`` (``SlurmCluster.env``).

As a pytest fixture (``slurm_cluster``, session scope): one cluster per pytest process, so keep
the Slurm tests in one file (``make test`` spreads files over workers, ``--dist loadfile``); it
skips, saying how to run them, where root or the packages are missing. Its environment is set in
``os.environ`` for the session, so the CLI's subprocesses (sbatch, squeue, sacct) reach it.

By hand::

    python tests/support/slurm_cluster.py [FOLDER]     # up until Ctrl-C; prints the SLURM_CONF to export

At the end every job is cancelled, the daemons stopped, and no process of the cluster is left
(its job steps' ``slurmstepd`` included: they carry ``A2RL_SLURM_CLUSTER`` in their environment).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "sinfo", "sacct", "scancel", "scontrol")
HOW = ("the Slurm tests need root and Debian's slurmctld, slurmd, slurm-client and munge (`make setup` installs them "
       "as root, else `sudo apt-get install slurmctld slurmd slurm-client munge`); run them as root: "
       "`sudo .venv/bin/python -m pytest tests/system/test_campaign_slurm_real.py`")
MARKER = "A2RL_SLURM_CLUSTER"
"""Set in the daemons' environment (and so in their job steps'): how the shutdown finds what is ours."""


def missing() -> str | None:
    """Why a cluster cannot start here (None: it can)."""
    if os.geteuid() != 0:
        return "not root; " + HOW
    absent = [name for name in DAEMONS + CLIENTS if not shutil.which(name, path=_sbin_path())]
    if absent:
        return f"{', '.join(absent)} not installed; " + HOW
    return None


def _sbin_path() -> str:
    return os.environ.get("PATH", "") + ":/usr/sbin:/sbin"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_line() -> dict[str, str]:
    """This node as slurmd sees it (``slurmd -C``): NodeName, CPUs, sockets, cores, RealMemory ..."""
    out = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True, timeout=60,
                         env={**os.environ, "PATH": _sbin_path()}).stdout
    fields = dict(item.split("=", 1) for item in out.split() if "=" in item)
    fields.pop("UpTime", None)
    return fields


class SlurmCluster:
    """One controller and one node, all under ``folder``; ``stop()`` leaves nothing running."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder.resolve()
        self.conf = self.folder / "slurm.conf"
        self.logs = self.folder / "log"
        self.procs: dict[str, subprocess.Popen] = {}
        self.node = node_line()
        self.name = self.node["NodeName"]
        self.env = {**os.environ, "SLURM_CONF": str(self.conf), "PATH": _sbin_path()}

    # -- bring-up ---------------------------------------------------------------------------------

    def write_config(self) -> None:
        f = self.folder
        for sub in ("munge", "state", "spool", "log"):
            (f / sub).mkdir(parents=True, exist_ok=True)
        (f / "munge").chmod(0o700)
        (f / "plugstack.conf").write_text("", encoding="utf-8")  # none of the system's SPANK plugins
        cpus = int(self.node["CPUs"])
        mem_mb = int(self.node["RealMemory"])
        node = " ".join(f"{k}={v}" for k, v in self.node.items() if k != "NodeName")
        self.conf.write_text(f"""\
# A one-node test cluster (tests/support/slurm_cluster.py); everything under {f}
ClusterName=a2rl-test
SlurmctldHost={self.name}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={f}/munge/munge.socket
CredType=cred/munge
StateSaveLocation={f}/state
SlurmdSpoolDir={f}/spool
SlurmctldPidFile={f}/slurmctld.pid
SlurmdPidFile={f}/slurmd.pid
SlurmctldLogFile={self.logs}/slurmctld.log
SlurmdLogFile={self.logs}/slurmd.log
PlugStackConfig={f}/plugstack.conf
# No cgroups (a container may not delegate them): processes tracked by their parentage.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/linux
# Cores and memory are consumable: Slurm, not the test, decides how many jobs fit at once.
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
ReturnToService=2
# No slurmdbd: `sacct` answers for ended jobs from the completion log (`sacct -c`), and squeue
# keeps an ended job for MinJobAge seconds.
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={self.logs}/jobcomp.txt
MinJobAge=600
KillWait=10
InactiveLimit=0
NodeName={self.name} NodeAddr=127.0.0.1 {node} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP DefMemPerCPU={mem_mb // cpus}
""", encoding="utf-8")

    def _spawn(self, name: str, cmd: list[str]) -> None:
        log = (self.logs / f"{name}.out").open("ab")
        with log:
            self.procs[name] = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                                env={**self.env, MARKER: str(self.folder)}, cwd=self.folder,
                                                start_new_session=True)

    def start(self, timeout: float = 120) -> SlurmCluster:
        self.write_config()
        m = self.folder / "munge"
        key = m / "munge.key"
        subprocess.run(["mungekey", "--create", "--force", "--keyfile", str(key)], check=True, env=self.env, timeout=60)
        key.chmod(0o400)
        self._spawn("munged", ["munged", "--foreground", "--force", f"--socket={m}/munge.socket",
                               f"--key-file={key}", f"--pid-file={m}/munged.pid", f"--seed-file={m}/munged.seed",
                               f"--log-file={self.logs}/munged.log"])
        self._wait(lambda: (m / "munge.socket").exists(), timeout, "munged's socket")
        self._spawn("slurmctld", ["slurmctld", "-D", "-c", "-i", "-f", str(self.conf)])
        self._wait(lambda: self.run("scontrol", "ping").returncode == 0, timeout, "slurmctld to answer")
        self._spawn("slurmd", ["slurmd", "-D", "-N", self.name, "-f", str(self.conf)])
        self._wait(lambda: self.node_state() == "idle", timeout, f"node {self.name} idle in sinfo")
        return self

    def _wait(self, predicate, timeout: float, what: str) -> None:  # noqa: ANN001
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            dead = [n for n, p in self.procs.items() if p.poll() is not None]
            if dead:
                raise RuntimeError(f"{', '.join(dead)} exited while waiting for {what}; see {self.logs}:\n"
                                   + self.log_tail())
            if predicate():
                return
            time.sleep(0.5)
        raise RuntimeError(f"timed out after {timeout} s waiting for {what}; see {self.logs}:\n" + self.log_tail())

    # -- use --------------------------------------------------------------------------------------

    def run(self, *cmd: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """A Slurm command against this cluster."""
        return subprocess.run(list(cmd), capture_output=True, text=True, env=self.env, timeout=timeout)

    def node_state(self) -> str:
        return self.run("sinfo", "-h", "-N", "-o", "%t").stdout.strip()

    def jobs(self) -> list[str]:
        """Ids of the jobs the controller holds that have not ended."""
        out = self.run("squeue", "-h", "-o", "%i").stdout
        return out.split()

    def log_tail(self, lines: int = 15) -> str:
        out = []
        for log in sorted(self.logs.glob("*")):
            text = log.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
            out.append(f"--- {log.name}\n" + "\n".join(text))
        return "\n".join(out)

    # -- shutdown ---------------------------------------------------------------------------------

    def stop(self, timeout: float = 60) -> None:
        """Cancel every job, stop the daemons, end any job step left over; wait for each."""
        if self.procs.get("slurmctld") and self.procs["slurmctld"].poll() is None:
            self.run("scancel", "--full", *self.jobs()) if self.jobs() else None
            deadline = time.monotonic() + timeout
            while self.jobs() and time.monotonic() < deadline:
                time.sleep(0.5)
        for name in ("slurmd", "slurmctld", "munged"):
            proc = self.procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        deadline = time.monotonic() + timeout
        while (left := self.leftovers()) and time.monotonic() < deadline:
            time.sleep(0.5)
        for pid in self.leftovers():  # a job step that outlived its slurmd: ours, by its environment
            try:
                os.killpg(os.getpgid(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        left = self.leftovers()
        if left:
            raise RuntimeError(f"the Slurm cluster under {self.folder} left processes running: {left}")

    def leftovers(self) -> list[int]:
        """Live processes started by this cluster's daemons (they carry its marker)."""
        mine = f"{MARKER}={self.folder}".encode()
        out = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if mine in environ and state != "Z" and int(pid) != os.getpid():
                out.append(int(pid))
        return out

    def __enter__(self) -> SlurmCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_cluster(folder: Path) -> SlurmCluster:
    """Bring a cluster up under ``folder``; on failure nothing is left running."""
    cluster = SlurmCluster(folder)
    try:
        return cluster.start()
    except BaseException:
        cluster.stop()
        raise


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """The cluster for this pytest process, its ``SLURM_CONF`` in ``os.environ`` while it runs."""
    reason = missing()
    if reason:
        pytest.skip(reason)
    # Short path: munge's and slurmd's unix sockets live under it (sun_path holds 108 bytes).
    folder = Path(tempfile.mkdtemp(prefix="a2rl-slurm-", dir="/tmp"))
    cluster = start_cluster(folder)
    old = {k: os.environ.get(k) for k in ("SLURM_CONF", "PATH")}
    os.environ.update(SLURM_CONF=cluster.env["SLURM_CONF"], PATH=cluster.env["PATH"])
    try:
        yield cluster
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        cluster.stop()
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    reason = missing()
    if reason:
        sys.exit(reason)
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="a2rl-slurm-", dir="/tmp"))
    folder.mkdir(parents=True, exist_ok=True)
    cluster = start_cluster(folder)
    print(f"Slurm is up: node {cluster.name} idle, logs in {cluster.logs}\n"
          f"  export SLURM_CONF={cluster.conf}\nCtrl-C stops it.", flush=True)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # started with `&`, a shell leaves it ignored
    try:
        while True:
            signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        print("stopping the cluster ...", flush=True)
        cluster.stop()


if __name__ == "__main__":
    main()

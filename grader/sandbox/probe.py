"""What this machine allows (mechanisms), and what each protection a student meets stops.

A *protection* is named by what it stops ("no-network", "processes-unreachable"); it is
met by whichever *mechanism* the machine offers (a network namespace or a seccomp socket
filter; a pid namespace per submission or a uid per submission). ``plan(isolation)``
probes the mechanisms once per process and says, for every protection, how it is met or
why it is missing:

- ``"auto"`` (the default): grade with every mechanism the machine offers;
- ``"strict"`` (alias ``"full"``): refuse, naming each missing protection and why;
- ``"none"``: no sandbox at all (only the time limit), for notebooks you trust.

``require=("memory-cap", ...)`` makes ``auto`` refuse when one of those is missing.

Test hook: ``GRADER_SANDBOX_WITHOUT=bwrap,namespaces,cgroups,seccomp,uid-drop,subreaper``
(any of them, or ``all``) makes the probe act as if those mechanisms were missing, the way
a container that forbids user namespaces, or macOS, would (``all`` leaves rlimits, a
separate process and the wall clock).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from coursekit import settings
from coursekit.errors import UserError
from grader.i18n import Message, join, msg, render

from . import bwrap as bw
from . import cgroup

PROTECTIONS: dict[str, str] = {
    "files-hidden": "solutions/, the graders, home folders and the rest of the disk are out "
    "of sight: only Python, its packages and the course's public files are there",
    "read-only": "nothing outside its own scratch folder can be written",
    "private-scratch": "its scratch folder is its own: fresh, size-capped, unseen by other "
    "submissions, gone afterwards",
    "no-network": "no network at all, not even localhost",
    "processes-invisible": "it sees no process but its own (not the grader, not other "
    "submissions, not yours)",
    "processes-unreachable": "it cannot signal or trace the grader, another submission or "
    "any other process of yours",
    "nothing-outlives": "every process it starts is killed when it ends or runs out of time",
    "memory-cap": "all its processes together stay under --memory",
    "process-cap": "a fork bomb stops at a fixed number of processes",
    "no-privileges": "no root, no capabilities, and no way to gain any (setuid programs are "
    "inert)",
    "syscall-filter": "kernel interfaces no exercise needs are refused: ptrace, mount, "
    "namespaces, bpf, io_uring, keyrings, non-Unix sockets",
    "time-limit": "it is killed at --timeout (wall clock) and at its CPU-time rlimit",
}
MECHANISMS = ("bwrap", "namespaces", "uid-drop", "seccomp", "subreaper", "cgroups")
TEST_HOOK = settings.SANDBOX_WITHOUT
LEVELS = ("auto", "strict", "none")


class SandboxUnavailable(UserError, RuntimeError):
    """The requested isolation cannot be provided on this machine."""

    exit_code = 3


@dataclass(frozen=True)
class SandboxPlan:
    """The mechanisms a pool uses, and the protections they add up to."""

    isolation: str
    bwrap: str | None = None  # the zygotes run in bubblewrap (this binary)
    userns: bool = False  # ... unprivileged, in a user namespace
    namespaces: bool = False  # a pid namespace per zygote, a mount and IPC one per submission
    new_net: bool = False  # no bwrap: the zygote makes its own pid and network namespaces
    uid_drop: bool = False  # a uid of its own per submission (root only)
    seccomp: bool = False
    no_new_privs: bool = False
    subreaper: bool = False  # the zygote adopts and kills a submission's orphans
    cgroups: dict[str, tuple[int, Path]] = field(default_factory=dict)
    rlimits: bool = False
    unavailable: dict[str, str] = field(default_factory=dict)  # mechanism -> why not
    active: dict[str, Message | str] = field(default_factory=dict)  # protection -> how
    missing: dict[str, Message | str] = field(default_factory=dict)  # protection -> why not

    @property
    def protections(self) -> list[str]:
        return list(self.active)

    def report(self) -> dict[str, dict[str, str]]:
        """What ``run.json`` records: ``{"active": {name: how}, "missing": {name: why}}``
        (English)."""
        return {"active": {k: str(v) for k, v in self.active.items()},
                "missing": {k: str(v) for k, v in self.missing.items()}}

    def lines(self) -> list[Message]:
        """What ``grade`` prints: each protection and how it is met, or why not."""
        lines = [msg("isolation {isolation}: {active} of {protections} protections active",
                     isolation=self.isolation, active=len(self.active), protections=len(PROTECTIONS))]
        lines += [msg("  + {name}: {how}", name=name, how=how) for name, how in self.active.items()]
        lines += [msg("  - {name}: MISSING, {why}", name=name, why=why) for name, why in self.missing.items()]
        return lines

    def describe(self, lang: str = "en") -> str:
        """:meth:`lines` in ``lang``, one a line."""
        return "\n".join(render(line, lang) for line in self.lines())


def _without() -> set[str]:
    names = settings.sandbox_without()
    return set(MECHANISMS) if "all" in names else names


def _linux() -> bool:
    return sys.platform.startswith("linux")


_NS_PROBE = """
import ctypes, json, os, shutil, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
NEWPID, NEWNET, NEWNS, NEWIPC = 0x20000000, 0x40000000, 0x00020000, 0x08000000
SLEEP = shutil.which("sleep", path="/usr/bin:/bin")
def ok(ret):
    return ret == 0
def exited_ok(pid):
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
def worker():  # what W does first, as process 2 of its own pid namespace
    good = os.getpid() == 2 and ok(libc.unshare(NEWNS | NEWIPC))
    good = good and ok(libc.mount(b"none", b"/", None, 0x4000 | 0x40000, None))
    good = good and ok(libc.mount(b"proc", b"/proc", b"proc", 0xE, None))
    good = good and ok(libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0x6, b"size=1m"))
    os._exit(0 if good else 1)
def zygote():  # what the zygote does, for two submissions
    own = os.open("/proc/self/ns/pid", os.O_RDONLY)
    for _ in range(2):
        if not ok(libc.unshare(NEWPID)):
            os._exit(1)
        init = os.posix_spawn(SLEEP, [SLEEP, "infinity"], {})
        pid = os.fork()
        if pid == 0:
            worker()
        good = ok(libc.setns(own, NEWPID)) and exited_ok(pid)
        os.kill(init, signal.SIGKILL)
        os.waitpid(init, 0)
        if not good:
            os._exit(1)
    os._exit(0)
works = SLEEP is not None
if "--own" in sys.argv:  # no bwrap: the zygote makes its own network namespace too
    works = works and ok(libc.unshare(NEWNET))
works = works and ok(libc.unshare(NEWPID))
if works:
    pid = os.fork()
    if pid == 0:
        zygote()
    works = exited_ok(pid)
print(json.dumps({"namespaces": works, "prefix": sys.prefix}))
"""


def _run_probe(cmd: list[str]) -> tuple[dict | None, str]:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin"})
    except (OSError, subprocess.SubprocessError) as exc:
        return None, str(exc)
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1]), ""
    except (ValueError, IndexError):
        return None, (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]


@functools.cache
def _bwrap_probe(path: str, euid: int) -> tuple[bool, bool, str]:
    """(bwrap works here, it gives the zygote namespaces for its children, why not)."""
    inner = [sys.executable, "-I", "-c", _NS_PROBE]
    result, error = _run_probe(bw.bwrap_command(path, None, inner, euid == 0))
    if result is None:
        return False, False, f"{path} cannot build the sandbox here ({error})"
    if result["prefix"] != sys.prefix:
        return False, False, f"the interpreter inside bwrap is not this one ({result['prefix']})"
    return True, bool(result["namespaces"]), "" if result["namespaces"] else (
        "bwrap does not let the zygote create namespaces")


@functools.cache
def _plain_namespaces() -> tuple[bool, str]:
    """Can this process give children pid/mount/IPC namespaces without bwrap (root)?"""
    result, error = _run_probe([sys.executable, "-I", "-S", "-c", _NS_PROBE, "--own"])
    if result is None or not result["namespaces"]:
        return False, error or "creating namespaces is not permitted here"
    return True, ""


def _capabilities() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    except (OSError, ValueError):
        pass
    return 0


def _readable_by_others(path: str) -> bool:
    """Can an unprivileged uid reach ``path`` (every ancestor searchable by others)?"""
    current = os.path.realpath(path)
    while True:
        try:
            if not os.stat(current).st_mode & 0o001:
                return False
        except OSError:
            return False
        parent = os.path.dirname(current)
        if parent == current:
            return True
        current = parent


@functools.cache
def _seccomp_works() -> bool:
    if not _linux() or importlib.util.find_spec("pyseccomp") is None:
        return False
    try:
        import pyseccomp  # noqa: F401
    except Exception:  # noqa: BLE001 - e.g. libseccomp missing
        return False
    return True


def _mechanisms(isolation: str) -> dict:
    """Which mechanisms to use, and why the others are unavailable."""
    off = _without()
    why: dict[str, str] = {}
    hook = f"disabled by {TEST_HOOK}"
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    found: dict = {"bwrap": None, "userns": False, "namespaces": False, "new_net": False,
                   "uid_drop": False, "seccomp": False, "no_new_privs": _linux(),
                   "subreaper": False, "cgroups": {}, "rlimits": importlib.util.find_spec(
                       "resource") is not None}
    path = shutil.which("bwrap") if _linux() else None
    if "bwrap" in off:
        why["bwrap"] = hook
    elif path is None:
        why["bwrap"] = "bubblewrap is not installed (apt install bubblewrap)" if _linux() else (
            "bubblewrap is Linux only")
    else:
        works, namespaces, reason = _bwrap_probe(path, os.geteuid())
        if works:
            found["bwrap"], found["userns"] = path, not root
            found["namespaces"] = namespaces and "namespaces" not in off
        else:
            why["bwrap"] = reason
        if reason:
            why["namespaces"] = reason
    if found["bwrap"] is None and _linux() and root and "namespaces" not in off:
        found["namespaces"], reason = _plain_namespaces()
        found["new_net"] = found["namespaces"]
        if reason:
            why["namespaces"] = reason
    if "namespaces" in off:
        why["namespaces"] = hook
    elif not found["namespaces"] and "namespaces" not in why:
        why["namespaces"] = "needs bubblewrap, or root" if _linux() else "Linux only"
    setuid = _capabilities() & 0b11000000 == 0b11000000
    if "uid-drop" in off:
        why["uid-drop"] = hook
    elif not (root and _linux() and setuid):
        why["uid-drop"] = "needs root (with CAP_SETUID) on Linux"
    elif found["bwrap"] is None and not all(_readable_by_others(d) for d in bw.python_dirs()):
        why["uid-drop"] = (f"without bwrap to bind it, the interpreter under {sys.base_prefix} "
                           "is not readable by an unprivileged uid")
    else:
        found["uid_drop"] = True
    if "seccomp" in off:
        why["seccomp"] = hook
    elif _seccomp_works():
        found["seccomp"] = True
    else:
        why["seccomp"] = ("pyseccomp/libseccomp unavailable (pip install pyseccomp)"
                          if _linux() else "seccomp is Linux only")
    if "subreaper" in off:
        why["subreaper"] = hook
    elif _linux():
        found["subreaper"] = True
    else:
        why["subreaper"] = "child subreapers are Linux only"
    if "cgroups" in off:
        why["cgroups"] = hook
    elif _linux():
        found["cgroups"], reasons = cgroup.parent_dirs()
        why.update({f"cgroup {c}": r for c, r in reasons.items()})
        if reasons:
            why["cgroups"] = "; ".join(f"{c}: {r}" for c, r in reasons.items())
    else:
        why["cgroups"] = "cgroups are Linux only"
    if isolation == "none":
        found = {k: ({} if k == "cgroups" else None if k == "bwrap" else False) for k in found}
        why = dict.fromkeys(MECHANISMS, "--isolation none")
    found["unavailable"] = why
    return found


def _join(*parts: Message | str | None) -> Message | str:
    return join(" + ", (p for p in parts if p))


def _protections(m: dict, isolation: str) -> tuple[dict[str, Message | str], dict[str, Message | str]]:
    """For every protection: how the mechanisms meet it, or why it is missing (the reasons
    the probe found, ``why``: the system's words, shown as they are)."""
    active: dict[str, Message | str] = {}
    missing: dict[str, Message | str] = {}
    why = m["unavailable"]
    bwrap, ns, uid, sub = m["bwrap"], m["namespaces"], m["uid_drop"], m["subreaper"]
    cg = m["cgroups"]
    cg_name = {c: f"cgroup v{v} {c}" for c, (v, _) in cg.items()}
    kind = msg("in a user namespace") if m["userns"] else msg("as root")
    who = msg("any user") if uid else msg("you")
    if bwrap:
        active["files-hidden"] = msg("bubblewrap ({kind}): only Python and public files bound", kind=kind)
        active["read-only"] = msg("bubblewrap: every bind read-only, scratch on its own tmpfs")
    else:
        missing["files-hidden"] = msg("no bubblewrap ({why}): the notebook can read every file {who} can read",
                                      why=why.get('bwrap'), who=who)
        missing["read-only"] = msg("no bubblewrap ({why}): the notebook can write wherever {who} can write",
                                   why=why.get('bwrap'), who=who)
    if ns:
        active["private-scratch"] = msg("a tmpfs in its own mount namespace")
    elif uid:
        active["private-scratch"] = msg("a folder only its own uid can open")
    else:
        missing["private-scratch"] = msg("no namespaces: its scratch folder is yours, so a "
                                         "submission graded at the same time could open it")
    net = msg("a network namespace") if bwrap or m["new_net"] else None
    if net or m["seccomp"]:
        active["no-network"] = _join(net, msg("seccomp: Unix sockets only") if m["seccomp"] else None)
    else:
        missing["no-network"] = msg("no network namespace and no seccomp filter")
    if ns:
        active["processes-invisible"] = msg("its own pid namespace and /proc")
    else:
        missing["processes-invisible"] = msg("no pid namespace ({why}): it can list processes and "
                                             "their command lines in /proc", why=why.get('namespaces'))
    if ns or uid:
        active["processes-unreachable"] = _join(msg("its own pid namespace") if ns else None,
                                                msg("a uid of its own") if uid else None)
    else:
        missing["processes-unreachable"] = msg(
            "it runs as {who}, in your pid namespace, so it can signal (kill) your other processes "
            "(uid-drop: {why_uid}; namespaces: {why_namespaces})",
            who="root" if os.geteuid() == 0 else msg("you"), why_uid=why.get('uid-drop'),
            why_namespaces=why.get('namespaces'))
    outlive = _join(msg("its pid namespace ends with it") if ns else None,
                    msg("subreaper (its zygote kills whatever it leaves)") if sub and not ns else None,
                    "cgroup" if cg else None, msg("kill by uid") if uid else None)
    if outlive:
        active["nothing-outlives"] = outlive
    else:
        missing["nothing-outlives"] = msg("only its process group is killed: a process that "
                                          "starts a session of its own survives grading")
    if "memory" in cg:
        active["memory-cap"] = cg_name["memory"]
    elif m["rlimits"]:
        missing["memory-cap"] = msg("no cgroup memory controller of ours ({why}); instead each process may "
                                    "use --memory beyond what it inherited (RLIMIT_DATA), so n processes "
                                    "n times --memory", why=why.get('cgroup memory', why.get('cgroups')))
    else:
        missing["memory-cap"] = msg("no cgroup memory controller of ours ({why})",
                                    why=why.get('cgroup memory', why.get('cgroups')))
    if "pids" in cg:
        active["process-cap"] = cg_name["pids"]
    elif m["rlimits"] and uid:
        active["process-cap"] = msg("RLIMIT_NPROC of its own uid")
    elif m["rlimits"] and m["userns"]:
        active["process-cap"] = msg("RLIMIT_NPROC in its own user namespace")
    elif m["rlimits"] and _linux() and os.geteuid() != 0:
        active["process-cap"] = msg("RLIMIT_NPROC on your processes (yours + the cap)")
    else:
        missing["process-cap"] = msg("no cgroup pids controller of ours ({why}), and RLIMIT_NPROC does "
                                     "not bind root", why=why.get('cgroup pids', why.get('cgroups')))
    caps = msg("no capabilities") if (uid or m["userns"] or os.geteuid() != 0) else None
    if (uid or os.geteuid() != 0) and isolation != "none":
        active["no-privileges"] = _join(msg("its own uid") if uid else msg("your uid"), caps,
                                        "no_new_privs" if m["no_new_privs"] else None)
    else:
        missing["no-privileges"] = msg("it runs as root") if os.geteuid() == 0 else "--isolation none"
    if m["seccomp"]:
        active["syscall-filter"] = "seccomp"
    else:
        missing["syscall-filter"] = why.get("seccomp", "")
    active["time-limit"] = _join(msg("wall clock (SIGKILL)"), "RLIMIT_CPU" if m["rlimits"] else None)
    order = list(PROTECTIONS)
    return ({k: active[k] for k in order if k in active},
            {k: missing[k] for k in order if k in missing})


def plan(isolation: str = "auto", require: tuple[str, ...] = ()) -> SandboxPlan:
    """The mechanisms to use for ``isolation`` and the protections they give; raises
    ``SandboxUnavailable`` when ``strict`` (or ``require``) names a missing protection."""
    isolation = "strict" if isolation == "full" else isolation
    if isolation not in LEVELS:
        raise ValueError(f"isolation must be one of {', '.join(LEVELS)}, not {isolation!r}")
    unknown = [r for r in require if r not in PROTECTIONS]
    if unknown:
        raise ValueError(f"unknown protection(s) {', '.join(unknown)}; "
                         f"known: {', '.join(PROTECTIONS)}")
    m = _mechanisms(isolation)
    active, missing = _protections(m, isolation)
    needed = list(PROTECTIONS) if isolation == "strict" else list(require)
    lacking = {p: missing[p] for p in needed if p in missing}
    if lacking and isolation != "none":
        lines = join("\n", [msg("  - {protection}: {reason}", protection=p, reason=why) for p, why in lacking.items()])
        if isolation == "strict":
            raise SandboxUnavailable(msg("strict isolation is not available here. Missing:\n{missing}\nGrade with "
                                         "the default isolation (auto) to run with what this machine offers.",
                                         missing=lines))
        raise SandboxUnavailable(msg("a required protection is not available here. Missing:\n{missing}\nGrade "
                                     "with the default isolation (auto) to run with what this machine offers.",
                                     missing=lines))
    return SandboxPlan(isolation=isolation, active=active, missing=missing, **m)


def available_protections() -> list[str]:
    """The protections this machine allows (``auto``), in ``PROTECTIONS`` order."""
    return plan("auto").protections


def missing_protections() -> dict[str, str]:
    """Why each protection is missing here under ``auto``, in English (empty when none is)."""
    return plan("auto").report()["missing"]

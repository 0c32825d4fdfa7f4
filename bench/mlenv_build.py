"""ml-env build: uv against pip for the CI profile, cold and warm cache, and the re-run (issue 13 figure 3).

Inside a demo host (inferops-demo-1, started and converged by tools/demo.sh when it is not), where the
role runs: its python3, its pinned uv and its wheelhouse. Each round builds the CI profile of
inventories/local four times in fresh directories under /tmp/mlenv-bench: uv cold, pip cold, uv
warm, pip warm (the installer that goes first alternates by round; warm = the same cache again into
a fresh venv). uv runs as roles/ml_env/tasks/install.yml runs it for a profile without a lock; pip
installs the same five pins with --no-deps (pip has no overrides: the stand-in sglang's idna==3.7
makes the pins unresolvable for it, checked once per run). Then the re-run with unchanged pins: the
ml_env role itself (bench/playbooks/mlenv_rerun.yml) RUNS times, each under BSD process accounting in the
host's pid namespace, counting the processes started by name (no uv, no pip),
next to `uv pip install` and `pip install` of the same pins again into the built venvs. Writes the
section between the mlenv markers of docs/benchmarks.md and docs/bench/mlenv.png.
Run from the repository root with the tool venv on PATH (`make bench-mlenv`).
"""

import argparse
import collections
import json
import os
import subprocess
import sys
import time

import benchdoc

ROOT = benchdoc.ROOT
INVENTORY = "inventories/local/hosts.yml"
PLAYBOOK = "bench/playbooks/mlenv_rerun.yml"
WORK = "/tmp/mlenv-bench"  # in the container
# What the role's tasks use on the demo hosts (roles/ml_env/defaults, vars; the inventory's CI profile).
UV = "/opt/ml-env.d/tools/uv-0.13.9/bin/uv"
RECORDS = "/opt/ml-env/.ml_env"
INDEX_URL = "https://pypi.org/simple"
WHEELHOUSE = "/opt/inferops-wheelhouse"
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
# Command names that mean an installer ran. The role runs pip as `<release>/bin/python -m pip`, named
# python like the release's RECORD check it does run; its task report tells those apart.
INSTALLER_NAMES = ("uv", "pip", "pip3")

# Runs in the container with its python3 (stdlib only): `python3 - COMMAND ARGS...`, JSON on stdout.
HELPER = r'''
import ctypes, hashlib, json, os, shutil, struct, subprocess, sys, time

UV, RECORDS, INDEX_URL, WHEELHOUSE, CA_BUNDLE = CONSTS
CMD_TIMEOUT = 600


def net_env(cache_var, cache):
    # The role's __ml_env_net_env, and PIP_CONFIG_FILE so that pip, like uv --no-config, reads no config.
    env = dict(os.environ, PYTHONNOUSERSITE="1", UV_NO_PROGRESS="1", PIP_NO_INPUT="1", SSL_CERT_FILE=CA_BUNDLE,
               PIP_CERT=CA_BUNDLE, REQUESTS_CA_BUNDLE=CA_BUNDLE, PIP_CONFIG_FILE="/dev/null")
    env[cache_var] = cache
    return env


def pip_requirements(venv):
    # pip takes the PyPI sglang 0.5.9 over the wheelhouse's stand-in of the same version (uv takes the
    # stand-in): a direct reference makes both install the same distribution.
    path = os.path.join(os.path.dirname(venv), "pip-requirements.txt")
    wheel = [n for n in os.listdir(WHEELHOUSE) if n.startswith("sglang-")][0]
    with open(RECORDS + "/requirements.txt") as handle:
        lines = [("sglang @ file://%s/%s" % (WHEELHOUSE, wheel)) if l.startswith("sglang==") else l.strip()
                 for l in handle if l.strip()]
    with open(path, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    return path


def install_argv(installer, venv, deps=False):
    if installer == "uv":
        # roles/ml_env/tasks/install.yml, a profile without a lock: the pins resolved as overrides.
        return [UV, "pip", "install", "--no-config", "--python", venv + "/bin/python",
                "--requirements", RECORDS + "/requirements.txt", "--overrides", RECORDS + "/overrides.txt",
                "--index-strategy", "first-index", "--link-mode", "copy",
                "--index-url=" + INDEX_URL, "--find-links=" + WHEELHOUSE]
    return ([venv + "/bin/pip", "install", "--disable-pip-version-check"] + ([] if deps else ["--no-deps"])
            + ["--requirement", pip_requirements(venv), "--index-url=" + INDEX_URL, "--find-links=" + WHEELHOUSE])


def run(argv, env):
    begin = time.monotonic()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=CMD_TIMEOUT, check=False)
    return time.monotonic() - begin, proc.returncode, (proc.stdout + proc.stderr)[-1500:]


def build(installer, venv, cache):
    """A fresh venv as the role makes it for this installer, then the install, each timed."""
    env = net_env("UV_CACHE_DIR" if installer == "uv" else "PIP_CACHE_DIR", cache)
    os.makedirs(os.path.dirname(venv), exist_ok=True)
    bare = ["--without-pip"] if installer == "uv" else []
    venv_s, rc, out = run(["/usr/bin/python3", "-m", "venv"] + bare + [venv], env)
    if rc:
        return {"rc": rc, "out": out}
    install_s, rc, out = run(install_argv(installer, venv), env)
    return {"venv_s": venv_s, "install_s": install_s, "rc": rc, "out": out}


def unresolvable(venv, cache):
    """pip resolving the same pins (no --no-deps) into a scratch venv: it refuses them."""
    env = net_env("PIP_CACHE_DIR", cache)
    run(["/usr/bin/python3", "-m", "venv", venv], env)
    seconds, rc, out = run(install_argv("pip", venv, deps=True), env)
    shutil.rmtree(venv, ignore_errors=True)
    return {"rc": rc, "seconds": seconds, "out": out}


def fingerprint(venv):
    """The pinned distributions and the bytes of the sglang package: the same stack, whoever installed it."""
    site = [os.path.join(venv, "lib", d, "site-packages") for d in os.listdir(venv + "/lib")][0]
    dists = sorted(n[:-len(".dist-info")].lower() for n in os.listdir(site) if n.endswith(".dist-info")
                   and not n.lower().startswith(("pip-", "setuptools-")))
    # pip compiles bytecode as it installs, uv does not: __pycache__ is no part of the comparison.
    paths = sorted(os.path.relpath(os.path.join(top, name), site)
                   for top, dirs, files in os.walk(os.path.join(site, "sglang"))
                   if "__pycache__" not in top.split(os.sep) for name in files)
    digest = hashlib.sha256()
    for path in paths:
        with open(os.path.join(site, path), "rb") as handle:
            digest.update(path.encode() + hashlib.sha256(handle.read()).digest())
    return {"dists": dists, "sglang": digest.hexdigest()[:12]}


LIBC = ctypes.CDLL(None, use_errno=True)


def acct_on(path):
    """BSD process accounting for this pid namespace into path; ns_last_pid when the kernel has none."""
    open(path, "wb").close()
    start = int(open("/proc/sys/kernel/ns_last_pid").read())
    if LIBC.acct(path.encode()) == 0:
        return {"method": "acct", "start": start, "self": os.getpid()}
    return {"method": "ns_last_pid", "start": start, "self": os.getpid(), "errno": os.strerror(ctypes.get_errno())}


def acct_off(path, state):
    """Processes that exited since acct_on, by command name, split by where they came from.

    "run": under a `docker exec` session (what Ansible or this helper started); "host": under the
    container's systemd (services, timers), which runs meanwhile. The helpers' own processes are
    not counted.
    """
    end = int(open("/proc/sys/kernel/ns_last_pid").read())
    if state["method"] != "acct":
        # Less the acct_off helper itself when it is not the process that called acct_on.
        return {"method": state["method"], "total": end - state["start"] - (os.getpid() != state.get("self")),
                "names": {}, "host_total": None, "host_names": {}, "forks": None}
    LIBC.acct(None)
    with open(path, "rb") as handle:
        data = handle.read()
    os.unlink(path)
    records = []
    for offset in range(0, len(data) - 63, 64):
        record = data[offset:offset + 64]
        # struct acct_v3 (linux/acct.h): ac_flag, ac_version, ..., ac_pid and ac_ppid at 16, ac_comm[16] at 48.
        if record[1] & 0x0f == 3:
            pid, ppid = struct.unpack_from("<II", record, 16)
            records.append((pid, ppid, record[48:64].split(b"\0")[0].decode(errors="replace"), record[0] & 0x01))
    helpers = {state.get("self"), os.getpid()}
    parents = {pid: ppid for pid, ppid, comm, fork in records}
    found = {"run": {}, "host": {}}
    forks = 0
    for pid, ppid, comm, fork in records:
        if pid in helpers:
            continue
        where = origin(pid, parents, helpers)
        found[where][comm] = found[where].get(comm, 0) + 1
        forks += fork if where == "run" else 0  # AFORK: forked and never exec'd
    return {"method": "acct", "total": sum(found["run"].values()), "names": found["run"], "forks": forks,
            "host_total": sum(found["host"].values()), "host_names": found["host"]}


def origin(pid, parents, helpers):
    # A docker exec session's first process has parent 0 here (its parent is outside the namespace);
    # systemd (pid 1) and the services still running never exited, so they have no record.
    for dummy in range(256):
        if pid in helpers:
            return "run"
        if pid not in parents:
            return "host"
        if parents[pid] == 0:
            return "run" if pid != 1 else "host"
        pid = parents[pid]
    return "host"


def rerun(installer, venv, cache):
    """The same pins again into the built venv, under accounting."""
    env = net_env("UV_CACHE_DIR" if installer == "uv" else "PIP_CACHE_DIR", cache)
    path = os.path.join(os.path.dirname(venv), "pacct-" + installer)
    state = acct_on(path)
    try:
        seconds, rc, out = run(install_argv(installer, venv), env)
    finally:
        counted = acct_off(path, state)
    return dict(counted, seconds=seconds, rc=rc, out=out)


def clean(path):
    # Also switches off accounting that a run killed half-way left on.
    LIBC.acct(None)
    shutil.rmtree(path, ignore_errors=True)


def versions():
    release = dict(l.rstrip().split("=", 1) for l in open("/etc/os-release") if "=" in l)
    pip = subprocess.run(["/usr/bin/python3", "-c", "import ensurepip; print(ensurepip.version())"],
                         capture_output=True, text=True, timeout=60, check=False).stdout.strip()
    uv = subprocess.run([UV, "--version"], capture_output=True, text=True, timeout=60, check=False).stdout.split()
    return {"os": release.get("PRETTY_NAME", "?").strip('"'), "python": sys.version.split()[0],
            "uv": uv[1] if len(uv) > 1 else "?", "pip": pip or "?", "kernel": os.uname().release}


COMMANDS = {"build": build, "unresolvable": unresolvable, "fingerprint": fingerprint, "rerun": rerun,
            "acct_on": acct_on, "acct_off": lambda path, state: acct_off(path, json.loads(state)),
            "versions": versions, "clean": clean}
print(json.dumps(COMMANDS[sys.argv[1]](*sys.argv[2:])))
'''.replace("CONSTS", repr((UV, RECORDS, INDEX_URL, WHEELHOUSE, CA_BUNDLE)))


def helper(host, *args, timeout=900):
    """One helper command in the container; docker exec's own start is outside what it times."""
    proc = subprocess.run(["docker", "exec", "-i", host, "python3", "-", *args], input=HELPER, capture_output=True,
                          text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        sys.exit("helper %s on %s failed (rc %d): %s" % (args[0], host, proc.returncode, proc.stderr[-3000:]))
    return json.loads(proc.stdout)


def ensure_demo(host):
    """tools/demo.sh (idempotent, but minutes) only when the host is not up with a current release."""
    up = subprocess.run(["docker", "exec", host, "test", "-e", RECORDS + "/pins.json"], capture_output=True,
                        timeout=60, check=False).returncode == 0
    if not up:
        print("mlenv: %s is not up and converged: tools/demo.sh" % host, file=sys.stderr)
        subprocess.run([os.path.join(ROOT, "tools", "demo.sh")], cwd=ROOT, check=True, stdout=subprocess.DEVNULL,
                       timeout=3600)


def current_release(host):
    return subprocess.run(["docker", "exec", host, "readlink", "/opt/ml-env"], capture_output=True, text=True,
                          timeout=60, check=True).stdout.strip()


def checked(result, what):
    if result.get("rc"):
        sys.exit("%s failed (rc %s):\n%s" % (what, result["rc"], result.get("out", "")))
    return result


def builds(host, runs):
    """RUNS rounds of uv cold, pip cold, uv warm, pip warm; the first installer alternates by round."""
    results = collections.defaultdict(list)
    for index in range(runs):
        order = ("uv", "pip") if index % 2 == 0 else ("pip", "uv")
        base = "%s/round-%d" % (WORK, index)
        for cache in ("cold", "warm"):
            for installer in order:
                result = helper(host, "build", installer, "%s/%s-%s" % (base, installer, cache),
                                "%s/%s-cache" % (base, installer))
                what = "%s %s build, round %d" % (installer, cache, index + 1)
                results[(installer, cache)].append(checked(result, what))
        print("mlenv: build round %d/%d done (%s first)" % (index + 1, runs, order[0]), file=sys.stderr)
    return results, base


def role_rerun(host, path):
    """The ml_env role once on the converged host, under accounting."""
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
    state = helper(host, "acct_on", path)
    begin = time.monotonic()
    try:
        proc = subprocess.run(["ansible-playbook", "-i", INVENTORY, "-l", host, PLAYBOOK], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=1800, check=False)
    finally:
        seconds = time.monotonic() - begin
        counted = helper(host, "acct_off", path, json.dumps(state))
    if proc.returncode != 0:
        sys.exit("%s failed (rc %d):\n%s\n%s" % (PLAYBOOK, proc.returncode, proc.stdout[-4000:], proc.stderr[-4000:]))
    return dict(counted, seconds=seconds, **summarise(json.loads(proc.stdout)))


def reruns(host, runs, base):
    """RUNS rounds of the role's re-run and each installer's again over its built venv, interleaved."""
    before = current_release(host)
    results = collections.defaultdict(list)
    for index in range(runs):
        results["role"].append(role_rerun(host, "%s/pacct-role-%d" % (WORK, index)))
        for installer in (("uv", "pip") if index % 2 == 0 else ("pip", "uv")):
            result = helper(host, "rerun", installer, "%s/%s-warm" % (base, installer),
                            "%s/%s-cache" % (base, installer))
            results[installer].append(checked(result, "%s re-run %d" % (installer, index + 1)))
        print("mlenv: re-run round %d/%d: the role %.1f s, %d processes" % (
            index + 1, runs, results["role"][-1]["seconds"], results["role"][-1]["total"]), file=sys.stderr)
    if current_release(host) != before:
        sys.exit("the re-run switched %s from %s to %s" % (host, before, current_release(host)))
    return results, before


# Tasks of build.yml and install.yml: none may run when the pins are unchanged.
BUILD_TASKS = ("Create the venv", "Resolve and install the pin set", "Install exactly the lock",
               "Install the pin set with pip", "Verify imports, versions")


def summarise(report):
    """Tasks run and changed, and whether any task of the build ran."""
    ran, built = 0, []
    for one in report["plays"]:
        for task in one["tasks"]:
            name = task["task"]["name"]
            for result in task["hosts"].values():
                if result.get("skipped"):
                    continue
                ran += 1
                if name.split(" : ")[-1].startswith(BUILD_TASKS):
                    built.append(name)
    changed = sum(stats.get("changed", 0) for stats in report["stats"].values())
    return {"tasks": ran, "changed": changed, "built": built}


def seconds_list(values, digits=2):
    return ", ".join(benchdoc.fmt(v, digits) for v in values)


def build_table(results):
    rows = []
    for cache in ("cold", "warm"):
        for installer in ("uv", "pip"):
            runs = results[(installer, cache)]
            total = [r["venv_s"] + r["install_s"] for r in runs]
            rows.append(["%s, %s cache" % (installer, cache), benchdoc.fmt(benchdoc.median(total), 2),
                         benchdoc.fmt(benchdoc.median([r["venv_s"] for r in runs]), 2),
                         benchdoc.fmt(benchdoc.median([r["install_s"] for r in runs]), 2), seconds_list(total)])
    return benchdoc.table(["build", "median s (venv + install)", "venv s", "install s", "runs, total s"], rows)


def ratio_table(results):
    rows = []
    for cache in ("cold", "warm"):
        med = {i: (benchdoc.median([r["venv_s"] + r["install_s"] for r in results[(i, cache)]]),
                   benchdoc.median([r["install_s"] for r in results[(i, cache)]])) for i in ("uv", "pip")}
        rows.append([cache, benchdoc.ratio(med["pip"][0], med["uv"][0]), benchdoc.ratio(med["pip"][1], med["uv"][1])])
    return benchdoc.table(["cache", "pip / uv, venv + install", "pip / uv, install alone"], rows)


def names_cell(counted_runs, key):
    """Each name's median count per run, the most frequent first."""
    names = collections.Counter()
    for counted in counted_runs:
        names.update(counted.get(key, {}))
    medians = {name: benchdoc.median([c.get(key, {}).get(name, 0) for c in counted_runs]) for name in names}
    return ", ".join("%s %g" % (name, count) for name, count in sorted(medians.items(), key=lambda kv: (-kv[1], kv[0]))
                     if count) or "-"


def installer_count(counted):
    return sum(counted.get(key, {}).get(name, 0) for key in ("names", "host_names") for name in INSTALLER_NAMES)


def rerun_table(results):
    rows = []
    changed = ", ".join(str(r["changed"]) for r in results["role"])
    role_label = "the ml_env role (`%s`), %d tasks run, changed %s" % (PLAYBOOK, results["role"][0]["tasks"], changed)
    for key, label in (("role", role_label),
                       ("uv", "`uv pip install` of the same pins again (the role's command)"),
                       ("pip", "`pip install --no-deps` of the same pins again")):
        runs = results[key]
        rows.append([label, benchdoc.fmt(benchdoc.median([r["seconds"] for r in runs]), 2),
                     seconds_list([r["seconds"] for r in runs]),
                     ", ".join(str(installer_count(r)) for r in runs),
                     benchdoc.fmt(benchdoc.median([r["total"] for r in runs]), 0), names_cell(runs, "names"),
                     names_cell(runs, "host_names")])
    return benchdoc.table(["re-run with unchanged pins", "median s", "runs (s)", "uv / pip processes, per run",
                           "processes it started (median per run)", "by name (median per run)",
                           "the host's own meanwhile, by name (median per run)"], rows)


def section(args, results, stack, refused, reruns, release, versions, chart):
    role = reruns["role"]
    if role[0]["method"] == "acct":
        counting = (
            "BSD process accounting: `acct(2)` switched on inside the host's pid namespace around each run, its "
            "struct acct_v3 records (one per process that exited, threads not counted) read back by command name and "
            "sorted by parent: under a `docker exec` session (what the run started) or under the host's systemd "
            "(its services and timers, running meanwhile); a fork without exec counts under its parent's name "
            "(%s of the role's per run)" % ", ".join(str(r["forks"]) for r in role))
    else:
        counting = ("the delta of `/proc/sys/kernel/ns_last_pid` (acct(2) refused: %s), processes and threads of the "
                    "whole host, no names" % role[0].get("errno", "?"))
    built = sorted({name for r in role for name in r["built"]})
    return "\n".join([
        "## ml-env build: uv against pip, cold and warm cache, and the re-run (%s)" % time.strftime("%Y-%m-%d"),
        benchdoc.provenance(benchdoc.command("make bench-mlenv"), "; inside the demo host %s: %s, kernel %s, Python %s, uv %s, pip %s "
                            "(the one `python3 -m venv` installs)" % (
                                args.host, versions["os"], versions["kernel"], versions["python"], versions["uv"],
                                versions["pip"])),
        "",
        "`make bench-mlenv` runs `python bench/mlenv_build.py --runs %d --host %s`. "
        "The CI profile of `inventories/local` (packaging, six, idna, markupsafe from PyPI, the SGLang stand-in "
        "from the host's wheelhouse; no lock, so the role resolves) built %d times each way in fresh directories "
        "under `%s` in the host, interleaved by round: uv cold, pip cold, uv warm, pip warm, the installer that goes "
        "first alternating by round. **uv** as `roles/ml_env/tasks/install.yml` runs it: `python3 -m venv "
        "--without-pip`, then `uv pip install --no-config --requirements --overrides --index-strategy first-index "
        "--link-mode copy --index-url=%s --find-links=%s` in the role's environment (CA bundle, no user site). "
        "**pip**: `python3 -m venv` (with pip), then `pip install --no-deps` of the same five pins, same index and "
        "find-links, `PIP_CONFIG_FILE=/dev/null`. pip has no overrides: resolving the pins (no `--no-deps`) it "
        "refuses them (rc %d in %.1f s: the stand-in requires idna==3.7, the profile pins 3.10), so it can only "
        "install this stack without resolving, which favours pip; and it takes PyPI's real sglang 0.5.9 over the "
        "wheelhouse's stand-in of the same version, so the stand-in is given to it by direct reference. Both "
        "builds hold the same distributions (%s; the sglang package's files, digest %s, are the same). Cold = an "
        "empty `UV_CACHE_DIR` / `PIP_CACHE_DIR` for that build; warm = the same cache again into a fresh venv. pip "
        "compiles bytecode as it installs, uv (as the role runs it) does not. Packages come from PyPI through this "
        "network's TLS-intercepting proxy: the cold runs carry its latency and are the noisy ones."
        % (args.runs, args.host, args.runs, WORK, INDEX_URL, WHEELHOUSE, refused["rc"], refused["seconds"],
           ", ".join(stack["dists"]), stack["sglang"]),
        "",
        build_table(results),
        "",
        ratio_table(results),
        "",
        chart,
        "",
        "The re-run with unchanged pins: `bench/playbooks/mlenv_rerun.yml` applies `inferops.gpu.ml_env` alone to %s as "
        "`site.yml` applies it (runtime_env's start-up hook handed over), %d times, release `%s` current before and "
        "after. Tasks of the build or the install that ran: %s. Processes started in the host during each run, "
        "counted by %s. Ansible starts each task's module through `docker exec` (sh, python3); the role's two "
        "`timeout`s are its bounded probes: the pre-check asking `/usr/bin/python3` its version (`ml_env_check`) "
        "and the current release's interpreter (`python`) checking its files against their RECORD "
        "(`ml_env_release`). Interleaved with each role run: "
        "each installer once more over the venv it built (warm cache); uv checks the installed set against "
        "the pins, pip runs its resolver over them, neither downloads; their uv / pip counts (uv 1; pip 2: pip "
        "and a fork of it that never exec'd) show that the counting sees an installer when one runs."
        % (args.host, args.runs, os.path.basename(release), ", ".join(built) or "none", counting),
        "",
        rerun_table(reruns),
    ])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--host", default="inferops-demo-1", help="the demo host the builds and re-runs run in")
    parser.add_argument("--no-write", action="store_true", help="print the section, write neither it nor the chart")
    args = parser.parse_args()

    ensure_demo(args.host)
    helper(args.host, "clean", WORK)
    versions = helper(args.host, "versions")
    refused = helper(args.host, "unresolvable", WORK + "/pip-resolve", WORK + "/pip-resolve-cache")
    if refused["rc"] == 0:
        sys.exit("pip resolved the CI pins: the stand-in needs no override any more, so this benchmark's pip side "
                 "(--no-deps) no longer matches what pip can do")
    results, base = builds(args.host, args.runs)
    stacks = [helper(args.host, "fingerprint", "%s/%s-warm" % (base, i)) for i in ("uv", "pip")]
    if stacks[0] != stacks[1]:
        sys.exit("uv and pip built different stacks: %s" % stacks)
    rerun_results, release = reruns(args.host, args.runs, base)
    helper(args.host, "clean", WORK)
    if any(installer_count(r) or r["built"] or r["changed"] for r in rerun_results["role"]):
        sys.exit("the re-run with unchanged pins installed or changed something: %s" % rerun_results["role"])

    chart = "(chart not written: --no-write)"
    if not args.no_write:
        series = [("%s %s" % (i, c), [r["venv_s"] + r["install_s"] for r in results[(i, c)]])
                  for c in ("cold", "warm") for i in ("uv", "pip")]
        chart = benchdoc.chart("mlenv", "CI profile build, venv + install (median bar, every run a dot)",
                               "seconds", series)
    text = section(args, results, stacks[0], refused, rerun_results, release, versions, chart)
    print(text)
    if not args.no_write:
        benchdoc.write_section("mlenv", text)  # re-reads the doc: other sections may have changed meanwhile


if __name__ == "__main__":
    main()

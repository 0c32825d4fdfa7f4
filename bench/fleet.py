"""Local container hosts for the benchmarks and the playbook runs over them.

Hosts are systemd containers started by tools/hosts.sh (the demo's flags), named
`inferops-bench-<name>-<n>`, in an inventory of their own under .build/bench/<name>/ whose group
`blackwell` gets the demo's group_vars (inventories/local/group_vars: the CI stack, CUDA 13.0 from
NVIDIA's wheels). Every playbook runs with the ansible.posix.json callback, so a benchmark reads
its task timings and results from the report.
"""

import datetime
import json
import os
import subprocess
import time

from benchdoc import ROOT

BUILD = os.path.join(ROOT, ".build", "bench")


class PlaybookFailed(Exception):
    pass


class Fleet:
    def __init__(self, name, count):
        self.name = name
        self.hosts = ["inferops-bench-%s-%d" % (name, index) for index in range(1, count + 1)]
        self.dir = os.path.join(BUILD, name)
        self.inventory = os.path.join(self.dir, "hosts.yml")

    def start(self, fresh=False):
        """Start (fresh: replace) the hosts and write their inventory."""
        command = [os.path.join(ROOT, "tools", "hosts.sh")] + (["--fresh"] if fresh else []) + self.hosts
        subprocess.run(command, cwd=ROOT, check=True, timeout=900, stdout=subprocess.DEVNULL)
        os.makedirs(self.dir, exist_ok=True)
        group_vars = os.path.join(self.dir, "group_vars")
        if not os.path.lexists(group_vars):
            os.symlink(os.path.join(ROOT, "inventories", "local", "group_vars"), group_vars)
        lines = ["---", "# Written by bench/fleet.py: the benchmark hosts %s." % self.name,
                 "blackwell:", "  hosts:"]
        lines += ["    %s:" % host for host in self.hosts]
        lines += ["  vars:", "    ansible_connection: community.docker.docker",
                  "    ansible_python_interpreter: /usr/bin/python3", ""]
        with open(self.inventory, "w") as handle:
            handle.write("\n".join(lines))
        return self

    def destroy(self):
        subprocess.run([os.path.join(ROOT, "tools", "hosts.sh"), "--destroy"] + self.hosts,
                       cwd=ROOT, check=False, timeout=300)

    def play(self, playbook, *extra, limit=None, check=True, timeout=3600, env=None):
        """Run a playbook over the fleet; returns a Run (seconds, the JSON report, rc)."""
        command = ["ansible-playbook", "-i", self.inventory, playbook] + list(extra)
        if limit:
            command[3:3] = ["-l", limit]
        return play(command, check=check, timeout=timeout, env=env)

    def exec(self, host, *command, timeout=120):
        return subprocess.run(["docker", "exec", host] + list(command), capture_output=True, text=True,
                              timeout=timeout, check=False)


class Run:
    def __init__(self, seconds, report, rc, started):
        self.seconds, self.report, self.rc, self.started = seconds, report, rc, started

    def tasks(self):
        for one in self.report.get("plays", []):
            yield from one["tasks"]

    def task(self, name):
        """The last task whose name ends with `name`."""
        found = [task for task in self.tasks() if task["task"]["name"].endswith(name)]
        return found[-1] if found else None

    def result(self, name, host):
        task = self.task(name)
        return (task or {}).get("hosts", {}).get(host)

    def task_end(self, name):
        task = self.task(name)
        end = ((task or {}).get("task", {}).get("duration") or {}).get("end")
        return stamp(end) if end else None

    def changed(self):
        return sum(stats.get("changed", 0) for stats in self.report.get("stats", {}).values())

    def ran(self):
        """Task results that were not skipped, over all hosts."""
        return sum(1 for task in self.tasks() for result in task["hosts"].values() if not result.get("skipped"))

    def skipped(self):
        return sum(1 for task in self.tasks() for result in task["hosts"].values() if result.get("skipped"))


def play(command, check=True, timeout=3600, env=None):
    environment = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
                       **(env or {}))
    started = time.time()
    begin = time.monotonic()
    proc = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=timeout,
                          check=False)
    seconds = time.monotonic() - begin
    try:
        report = json.loads(proc.stdout[proc.stdout.index("{"):])
    except ValueError:
        report = {}
    if check and proc.returncode != 0:
        raise PlaybookFailed("%s failed (rc %d):\n%s\n%s" % (
            " ".join(command), proc.returncode, proc.stdout[-4000:], proc.stderr[-4000:]))
    return Run(seconds, report, proc.returncode, started)


def stamp(text):
    """The json callback's UTC time stamps as POSIX seconds."""
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()

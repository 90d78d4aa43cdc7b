"""What the check_*.py scripts over real run directories share: memdiag run
on a case's directory, its JSON read, and failed checks counted.

    runs = Runs(sys.argv[1], sys.argv[2]); runs.check("what", ok); sys.exit(runs.done())"""
import json
import subprocess
import sys

EMPTY = {"summary": "", "severity": "", "evidence": ["", ""], "sites": [{"site": "", "count": 0}],
         "advice": ""}


class Runs:
    def __init__(self, memdiag, root):
        self.memdiag, self.root, self.bad = memdiag, root, 0

    def check(self, what, ok):
        if not ok:
            self.bad += 1
            print(f"failed: {what}", file=sys.stderr)

    def run(self, *args):
        return subprocess.run([self.memdiag, *args], capture_output=True, text=True,
                              check=True).stdout

    def path(self, case, name=""):
        return f"{self.root}/{case}" + (f"/{name}" if name else "")

    def diagnosis(self, case):
        """diagnose --json of a case's directory: its ranks and cross-rank findings."""
        return json.loads(self.run("diagnose", "--json", self.path(case)))

    def ranks(self, case):
        return self.diagnosis(case)["ranks"]

    def rank(self, case, kind):
        return [r for r in self.ranks(case) if r["kind"] == kind][0]

    def findings(self, case, kind, what="snapshot"):
        return [f for f in self.rank(case, what)["findings"] if f["kind"] == kind]

    def finding(self, case, kind, what="snapshot"):
        """The first finding of that kind, or an empty one (its checks then fail)."""
        found = self.findings(case, kind, what)
        return found[0] if found else EMPTY

    def leaks(self, expected, snapshot_only=(), tol=0.001):
        """Each case's snapshot and capture: a leak of the expected MiB a step,
        or none where expected is None (a capture of a case without steps:
        not judged)."""
        for case, per in expected.items():
            ranks = self.ranks(case)
            self.check(f"{case}: a snapshot and a capture",
                       sorted(r["kind"] for r in ranks) == ["capture", "snapshot"])
            for r in ranks:
                if case in snapshot_only and r["kind"] == "capture":
                    continue
                leaks = [f for f in r["findings"] if f["kind"] == "leak"]
                ok = not leaks if per is None else (
                    len(leaks) == 1 and abs(leaks[0]["bytes"] / 2**20 - per) < tol)
                self.check(f"{case} ({r['kind']}): leak {per}, found "
                           f"{[f['summary'] for f in leaks]}", ok)

    def done(self):
        return 1 if self.bad else 0

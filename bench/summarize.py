#!/usr/bin/env python3
"""Turns bench/in-guest's RAW and BPF lines into the markdown report (bench/run).

Input lines: KERNEL CLOCK RAW PHASE OP VARIANT ROUND NS, and KERNEL CLOCK BPF
PHASE OP OPS PROGRAM RUN_CNT RUN_TIME_NS. CLOCK is icount (guest time counts
instructions: exact) or wall (plain TCG: noisy). Every ratio is taken within
one round (the variants of a round ran back to back), then the median over
rounds is reported with the min-max spread. Verdicts come from icount where
the run has it.
"""
import datetime
import os
import platform
import statistics
import subprocess
import sys
from collections import defaultdict

raw, cmdline, rounds, n_ops, n_start, out_rounds, n_files, jobs, soak, plot_data = sys.argv[1:11]

runs = {"icount": defaultdict(dict), "wall": defaultdict(dict)}  # clock -> (kernel, phase, op, variant) -> {round: ns}
# clock -> (kernel, phase, op) -> program -> [runs, ns], per op
stats = {"icount": defaultdict(lambda: defaultdict(lambda: [0, 0])), "wall": defaultdict(lambda: defaultdict(lambda: [0, 0]))}
guest = {}  # kernel -> (uname -r, nproc)
for line in open(raw):
    f = line.split()
    k, clock, kind = f[:3]
    if kind == "BPF":
        phase, op, ops, prog, cnt, ns = f[3:]
        s_ = stats[clock][(k, phase, op)][prog]
        s_[0] += int(cnt) / int(ops)
        s_[1] += int(ns) / int(ops)
        continue
    phase, op, variant, rnd, ns = f[3:]
    if phase == "info":
        guest[k] = (op, variant)
        continue
    runs[clock][(k, phase, op, variant)][int(rnd)] = int(ns)


# Each kernel's program figures from icount where it ran.
progs = {key: v for clock in ("wall", "icount") for key, v in stats[clock].items()}


def has(clock, k, phase):
    return any(key[0] == k and key[1] == phase for key in runs[clock])


def primary(k, phase):
    """The clock a phase's verdicts come from: icount where it ran."""
    return "icount" if has("icount", k, phase) else "wall"


def ratios(k, phase, op, variant, base, clock=None):
    data = runs[clock or primary(k, phase)]
    a, b = data.get((k, phase, op, variant), {}), data.get((k, phase, op, base), {})
    return [a[r] / b[r] for r in sorted(a) if r in b and b[r] > 0]


def fmt(rs):
    if not rs:
        return "n/a"
    return f"{statistics.median(rs):.2f} ({min(rs):.2f}-{max(rs):.2f})"


def cell(k, phase, op, variant, base):
    """The verdict clock's ratio, then wall-clock TCG's as a second figure."""
    main = fmt(ratios(k, phase, op, variant, base))
    if primary(k, phase) == "icount" and has("wall", k, phase):
        return f"{main} · wall {fmt(ratios(k, phase, op, variant, base, 'wall'))}"
    return main


def med(k, phase, op, variant, clock=None):
    v = list(runs[clock or primary(k, phase)].get((k, phase, op, variant), {}).values())
    return statistics.median(v) if v else float("nan")


def costliest(k, phase, op, n=3):
    """The confine programs that cost an operation most, by ns per op (those
    that ran for it at all: under 1 ns per op is another operation's call)."""
    ran = [kv for kv in progs.get((k, phase, op), {}).items() if kv[1][1] >= 1]
    ranked = sorted(ran, key=lambda kv: -kv[1][1])[:n]
    return ", ".join(f"`{name}` {duration(ns)}" for name, (_, ns) in ranked) or "no program ran"


def duration(ns):
    return f"{ns / 1e6:.1f} ms" if abs(ns) >= 1e6 else f"{ns / 1e3:.1f} µs" if abs(ns) >= 1e4 else f"{ns:.0f} ns"


def explained(k, phase, op, variant, base):
    """How much of what confine added to an operation its programs ran."""
    ran = progs.get((k, phase, op))
    added = med(k, phase, op, variant) - med(k, phase, op, base)
    if not ran or not added > 0:
        return ""
    ns = sum(per_op for _, per_op in ran.values())
    if ns < 1:
        return ""
    if ns >= added:
        return f"; its programs ran {duration(ns)}, more than the {duration(added)} between the medians"
    return f"; its programs ran {duration(ns)} of the {duration(added)} added ({100 * ns / added:.0f}%)"


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def base_of(k, phase):
    """What confine's own cost is measured against: the same process
    unconfined in a cgroup like a job's, where the run has it."""
    return "cgroup" if any(key[0] == k and key[1] == phase and key[3] == "cgroup" for key in runs[primary(k, phase)]) \
        else "plain"


def sandbox_table(k, phase, ops, title, what, unit, scale):
    cg = base_of(k, phase) == "cgroup"
    p(f"### {title}\n")
    p(f"| {what} | unconfined ({primary(k, phase)} {unit}) | "
      + ("unconfined, job's cgroup | " if cg else "") + "confine enforce | confine audit | bwrap | srt |"
      + (" **confine over the job's cgroup** |" if cg else ""))
    p("|---|---:|" + ("---:|" if cg else "") + "---:|---:|---:|---:|" + ("---:|" if cg else ""))
    for op, label in ops:
        p(f"| {label} | {med(k, phase, op, 'plain') / scale:.0f} | "
          + " | ".join(cell(k, phase, op, v, "plain") for v in (("cgroup",) if cg else ()) + SANDBOXES) + " |"
          + (f" **{cell(k, phase, op, 'confine', 'cgroup')}** |" if cg else ""))
    p("")


def program_table(k):
    """Per program and operation: what bpf_stats counted in one more run."""
    keys = [key for key in progs if key[0] == k]
    if not keys:
        return
    clock = "icount" if any(key[0] == k for key in stats["icount"]) else "wall"
    p(f"### What each confine program costs ({clock} ns, one more run with `kernel.bpf_stats_enabled`)\n")
    p("Per operation: how often each program ran and its time in it. The rest of what confine adds "
      "is dispatch (trampolines, the cgroup program arrays), which bpf_stats doesn't count.\n")
    p("| phase | operation | added by confine (ns per op) | program | runs per op | ns per run | ns per op |")
    p("|---|---|---:|---|---:|---:|---:|")
    order = {ph: i for i, ph in enumerate(("hot", "work", "outside"))}
    for _, phase, op in sorted(keys, key=lambda key: (order.get(key[1], 9), key[2])):
        base, variant = ("unloaded", "loaded") if phase == "outside" else (base_of(k, phase), "confine")
        added = med(k, phase, op, variant, clock) - med(k, phase, op, base, clock)
        ranked = sorted(progs[(k, phase, op)].items(), key=lambda kv: -kv[1][1])
        # The programs that matter, and the rest as one row: each under 1% of the gap.
        shown = [(name, n, ns) for name, (n, ns) in ranked if ns >= max(abs(added) / 100, 1)]
        rest = [(n, ns) for name, (n, ns) in ranked if ns < max(abs(added) / 100, 1)]
        if rest:
            shown.append((f"{len(rest)} others", sum(n for n, _ in rest), sum(ns for _, ns in rest)))
        for i, (name, n, ns) in enumerate(shown):
            lead = f"| {phase} | {op} | {added:.0f} |" if i == 0 else "| | | |"
            label = f"`{name}`" if not name.endswith("others") else name
            p(f"{lead} {label} | {n:.2f} | {ns / n if n else 0:.0f} | {ns:.0f} |")
    p("")


kernels = sorted({key[0] for clock in runs.values() for key in clock}, key=lambda s: [int(x) for x in s.split(".")])
SANDBOXES = ("confine", "audit", "bwrap", "srt")
MODULES = max(2, min(16, int(n_files) // 1000))  # as bench/in-guest generates them
WORK = [("status", "`git status`"), ("logp", "`git log -p`"), ("tar", "`tar x` of the repository"),
        ("make", f"`make -j2`, {MODULES + 1} C files")]
OPS = [("open", "open+read+close, 8 dirs deep"), ("stat", "stat, 8 dirs deep"),
       ("create", "create+close+unlink"), ("touch", "utimensat (times only), 8 dirs deep"),
       ("connect", "TCP connect+accept, loopback")]
out = []
p = out.append
p("# confine benchmarks\n")
p("Generated by `bench/run`; do not edit by hand.\n")
commit = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "describe", "--always", "--dirty"],
                        capture_output=True, text=True).stdout.strip() or "unknown"
p(f"- Command: `{cmdline}`, at commit {commit}")
p(f"- Date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}")
p(f"- Host: {os.cpu_count()} CPUs (`nproc` {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()}), "
  f"{cpu_model()}, kernel {platform.release()}, shared with other jobs")
for k in kernels:
    g = guest.get(k, ("?", "?"))
    clocks = " and ".join(c for c in ("icount", "wall") if any(key[0] == k for key in runs[c]))
    p(f"- Guest ({k}): QEMU TCG (no KVM), kernel {g[0]}, {g[1]} vCPUs; clocks: {clocks}")
    p9 = [f"{c} {op} {r[1]}" for c in ("icount", "wall") for (k_, ph, op, _), r in runs[c].items()
          if k_ == k and ph == "p9"]
    if p9:
        p(f"- Requests to the host's 9p root while a phase ran ({k}; see the notes, Clocks): {', '.join(p9)}")
p(f"- {rounds} rounds, variants interleaved (rotated order each round); hot path: "
  f"{n_ops} ops per run, median of 16-op batches; start: {n_start} starts per round; "
  f"outside jobs: {out_rounds} load/unload rounds; real work: {n_files} files, "
  f"{min(int(rounds), 3)} rounds; concurrency: {jobs.replace(',', ', ')} jobs; daemon soak: "
  f"{soak.replace(',', ' one after another, ')} at once")
p("\n![Ratios to unconfined](benchmarks.png)\n")
p("Cells: median over rounds of the same-round ratio, (min-max) over rounds. Where a phase ran under both "
  "clocks, the first figure is **icount** (`qemu -icount shift=0`: guest time counts executed "
  "instructions, 1 ns each, so it is exact and the host's load can't move it; the goal verdicts come "
  "from it) and the second, after `wall`, is plain TCG time, noisy on a shared host. Absolute times "
  "are for orientation only.\n")

for k in kernels:
    p(f"## Kernel {k}\n")
    sandbox_table(k, "hot", OPS, "Hot path inside a job (ratio to unconfined, same user)", "operation", "ns", 1)
    program_table(k)
    sandbox_table(k, "work", WORK, "Real work inside a job (ratio to unconfined; the command is timed inside "
                  "the job)", "work", "ms", 1e6)
    p("### Policy size: open+read+close 8 deep under N extra rules (ratio to unconfined)\n")
    p("| rules | ratio |")
    p("|---:|---:|")
    for n in ("10", "1000", "10000"):
        p(f"| {int(n):,} | {cell(k, 'rules', 'open', 'rules' + n, 'plain')} |")
    p(f"\n10,000 against 10 rules, same round: {cell(k, 'rules', 'open', 'rules10000', 'rules10')}.")
    p("\n### Processes outside any job (programs loaded / not loaded)\n")
    p(f"| operation | not loaded ({primary(k, 'outside')} ns) | loaded, ratio |")
    p("|---|---:|---:|")
    for op, label in OPS:
        p(f"| {label} | {med(k, 'outside', op, 'unloaded'):.0f} | {cell(k, 'outside', op, 'loaded', 'unloaded')} |")
    p("\n### Job start: fork+exec+wait of `true` through each launcher\n")
    p(f"| launcher | median ({primary(k, 'start')} ms) | ratio to `true` | ratio to bwrap |")
    p("|---|---:|---:|---:|")
    for v, label in (("true", "`true`"), ("asuser", "`true` as the user (dropped to in the child)"),
                     ("confine", "`confine run --user U -- true`"),
                     ("daemon", "`confine run -- true` as the user, through `confine daemon`"),
                     ("bwrap", "`bwrap … true` as the user"),
                     ("srt", "`srt true` as the user")):
        if med(k, "start", "true", v) > 0:
            p(f"| {label} | {med(k, 'start', 'true', v) / 1e6:.1f} | "
              f"{cell(k, 'start', 'true', v, 'true')} | {cell(k, 'start', 'true', v, 'bwrap')} |")
        elif med(k, "start", "true", v, "wall") > 0:  # srt runs on the wall clock only
            p(f"| {label} | wall {med(k, 'start', 'true', v, 'wall') / 1e6:.1f} | "
              f"wall {fmt(ratios(k, 'start', 'true', v, 'true', 'wall'))} | "
              f"wall {fmt(ratios(k, 'start', 'true', v, 'bwrap', 'wall'))} |")
    wall = runs["wall"]
    if wall.get((k, "proxy", "start", "domains")):
        p("\n### The job's proxy (`[network] domains`)\n")
        p("| what | without the proxy (wall ms) | with it (wall ms) | ratio | added (wall ms) |")
        p("|---|---:|---:|---:|---:|")
        for op, base, v, label in (("start", "nodomains", "domains", "`confine run -- true`, one name listed"),
                                   ("request", "direct", "proxied", "`curl` of a small page, in the job")):
            a, b = med(k, "proxy", op, base, "wall"), med(k, "proxy", op, v, "wall")
            p(f"| {label} | {a / 1e6:.1f} | {b / 1e6:.1f} | {fmt(ratios(k, 'proxy', op, v, base, 'wall'))} | "
              f"{(b - a) / 1e6:.1f} |")
    conc = sorted({int(v) for (kn, ph, _, v) in wall if kn == k and ph == "conc"})
    if conc:
        p("\n### Concurrency: K jobs alive at once (wall clock)\n")
        p("| jobs | started | enforcing (read refused and audited) | leaked | mean start, back to back (ms) "
          "| one more start while K run (ms) | BPF kernel memory per job (KiB) |")
        p("|---:|---:|---:|---:|---:|---:|---:|")
    unseen = False
    for kk in conc:
        c = lambda what: wall.get((k, "conc", what, str(kk)), {}).get(1, float("nan"))
        seen = c("kib_per_job") > 0
        unseen = unseen or not seen
        kib = f"{c('kib_per_job'):.0f}" if seen else "n/a*"
        p(f"| {kk:,} | {c('started'):.0f} | {c('enforced'):.0f} | {c('leaked'):.0f} | "
          f"{c('start_mean') / 1e6:.0f} | {c('one_more') / 1e6:.0f} | {kib} |")
    if unseen:
        p("\n\\* No growth visible: before 6.4 (the series that added `map_mem_usage`) the kernel reports a "
          "map's memlock as an estimate from its key size, value size and max_entries, fixed at creation, "
          "and a ring buffer as 0. A job's memory is its 32 KiB ring buffer plus its map entries, as on "
          "the newer kernels.")
    p("")
    sk = lambda what, when: wall.get((k, "soak", what, when), {}).get(1)
    if sk("rss_kib", "before") is not None:
        seq, par = soak.split(",")
        p(f"### The daemon: {int(seq):,} jobs one after another, then {int(par):,} at once\n")
        p(f"Through `confine daemon`, by an unprivileged client; `true` one after another "
          f"({sk('seq_ms_per_job', seq)} wall ms a job), then `sleep 2` at once. Failed: "
          f"{sk('seq_failed', seq)} and {sk('par_failed', par)}. Before: after one warm-up job.\n")
        p("| | before | after |")
        p("|---|---:|---:|")
        for what, label in (("rss_kib", "daemon RSS (KiB)"), ("fds", "daemon fds"), ("cgroups", "job cgroups"),
                            ("map_entries", "entries in the policy maps"),
                            ("pins", "files in /sys/fs/bpf/confine (not the ring slots)"),
                            ("processes", "the user's processes")):
            p(f"| {label} | {sk(what, 'before')} | {sk(what, 'after')} |")
        p("")


def judge(ratio, goal):
    return "met" if ratio <= goal else f"missed by {(ratio - goal) * 100:.1f} points"


# The performance goals, each operation by its median ratio on the verdict clock.
p("## Goals\n")
p("Each by its median ratio, on icount where the phase ran under it. Inside a job, confine's own cost: "
  "its ratio to the same process unconfined in a cgroup like the job's (see Notes, *unconfined, job's "
  "cgroup*); the ratio to a bare process in the guest's root cgroup follows it. A missed goal names the "
  "confine programs that cost the operation most (per operation, from bpf_stats), and how much of the "
  "time confine added they ran: the rest is the hooks' dispatch, or spread between rounds.\n")
for k in kernels:
    p(f"Kernel {k}:\n")
    for phase, ops, goal, base, variant, what in (
            ("hot", OPS, 1.05, base_of(k, "hot"), "confine", "Hot path inside a job ≤ 1.05 (stretch 1.02)"),
            ("work", WORK, 1.02, base_of(k, "work"), "confine", "Real work inside a job ≤ 1.02"),
            ("outside", OPS, 1.01, "unloaded", "loaded", "Processes outside any job ≤ 1.01")):
        got = {op: (statistics.median(r), label) for op, label in ops if (r := ratios(k, phase, op, variant, base))}
        if not got:
            continue
        p(f"- {what} ({primary(k, phase)}):")
        for op, (ratio, label) in got.items():
            line = f"  - {label}: {ratio:.3f}, {judge(ratio, goal)}"
            if base == "cgroup" and (bare := ratios(k, phase, op, variant, "plain")):
                line += f" (to a bare process: {statistics.median(bare):.3f})"
            if phase == "hot" and ratio <= goal:
                line += " (stretch: " + ("met)" if ratio <= 1.02 else "not met)")
            if ratio > goal:
                line += f"; costliest: {costliest(k, phase, op)}{explained(k, phase, op, variant, base)}"
            p(line)
    # Start: what each sandbox adds to starting the job as the user unsandboxed.
    def start_added(clock=None, confine="confine"):
        u, c, b = (med(k, "start", "true", v, clock) for v in ("asuser", confine, "bwrap"))
        return (c - u, b - u) if u > 0 and c > 0 and b > 0 else None

    if got := start_added():
        added, bw_added = got
        line = (f"- Job start, time added ≤ half of bubblewrap's ({primary(k, 'start')}; both against starting "
                f"`true` as the user unsandboxed): confine adds {added / 1e6:.1f} ms, bwrap {bw_added / 1e6:.1f} ms: "
                + ("met" if added <= bw_added / 2 else f"missed ({added / bw_added:.2f}x bwrap's, goal 0.5x)"))
        if primary(k, "start") == "icount" and (w := start_added("wall")):
            line += f" (wall: {w[0] / 1e6:.0f} ms and {w[1] / 1e6:.0f} ms, {w[0] / w[1]:.2f}x)"
        if d := start_added(confine="daemon"):
            line += f"; through the daemon it adds {d[0] / 1e6:.1f} ms ({d[0] / d[1]:.2f}x)"
        p(line + ".")
    conc = sorted({int(v) for (kn, ph, _, v) in runs["wall"] if kn == k and ph == "conc"})
    if conc:
        kk = conc[-1]
        kib = runs["wall"].get((k, "conc", "kib_per_job", str(kk)), {}).get(1, 0)
        if kib > 0:
            p(f"- {kk:,} concurrent jobs, kernel memory ≤ 64 KiB a job: {kib} KiB, "
              + ("met" if kib <= 64 else "missed") + ".")
        for kk in conc:
            e = runs["wall"].get((k, "conc", "enforced", str(kk)), {}).get(1)
            st = runs["wall"].get((k, "conc", "started", str(kk)), {}).get(1)
            p(f"- {kk:,} concurrent job{'s' if kk != 1 else ''}: {e} of {kk} enforcing ({st} started).")
    flat = ratios(k, "rules", "open", "rules10000", "rules10")
    if flat:
        p(f"- Rule count 10 → 10,000 flat (≤ 1.02, {primary(k, 'rules')}): {statistics.median(flat):.3f}, "
          f"{judge(statistics.median(flat), 1.02)}.")
    p("")

p("""## Notes

- **Variants.** *unconfined*: `setpriv --reuid=U --regid=U --init-groups -- CMD`.
  *unconfined, job's cgroup*: the same, started in a cgroup as deep as a
  job's (`/sys/fs/cgroup/confine-bench/unconfined/job`) with the default
  policy's `[limits]` (`memory.max` half the guest's memory,
  `memory.swap.max` 0, `pids.max` 4096). A runner puts each job in a
  cgroup anyway (and systemd every process), and there memory accounting
  charges each kernel allocation (a `struct file`, a dentry, a socket and
  its buffers) to the cgroup, which the guest's root cgroup, where
  *unconfined* runs, never does: under icount on 6.12 that alone is 1.02
  on open, 1.05 on create and 1.10 on connect. So confine's own cost, and
  the goals, are its ratio to this variant. bwrap and srt run where
  *unconfined* does, in the root cgroup, so their ratios leave that out.
  *confine*: `confine run --user U --workdir WORK -- CMD` (embedded default
  policy, enforce); *audit*: the same with `--mode audit`. *bwrap*: bubblewrap
  0.8 as a runner would use it, unprivileged (user namespace), started as the
  user:

  ```
  setpriv --reuid=U --regid=U --init-groups -- bwrap \\
    --ro-bind /usr /usr --ro-bind /etc /etc \\
    --symlink usr/bin /bin --symlink usr/sbin /sbin \\
    --symlink usr/lib /lib --symlink usr/lib64 /lib64 \\
    --bind WORK WORK --tmpfs /tmp --proc /proc --dev /dev \\
    --unshare-all --share-net --die-with-parent --chdir WORK -- CMD
  ```
- **Operations** (`bench/hotpath.c`): the file is `WORK/d1/.../d8/file`
  (WORK = `/var/tmp/confine-bench/work`, so the resolved path has 12
  components). `stat` passes no confine hook and is a control: its ratio
  shows the noise floor. `touch` sets the file's times (`utimensat`, as
  `tar x` and `make` do), which `inode_setattr` decides: it gets the file
  but no mount, so a first decision goes through every mount of the
  file's filesystem, and the next ones come from the file's cache slot.
  `connect` includes socket, accept and close;
  the listener is the job's own (always allowed on loopback).
- **Outside jobs** compares an unconfined process while this build's programs
  are loaded and attached with the same process after they are removed
  (parent cgroup rmdir'd, pins unlinked), alternating each round.
- **bwrap below 1.0** is real but not bwrap's merit: in the guest `/` is an
  overlay on 9p, and bwrap's root is a tmpfs with WORK bind-mounted in, so
  its lookups of `/var`, `/var/tmp`, ... skip the slow overlay. On a normal
  disk root expect bwrap near 1.0 for these operations.
- **Start** times the whole `fork+exec+wait` from a root process. Every
  row but `true` and confine's drops to the user in the child before its
  exec (`hotpath spawnas`: `initgroups`, `setgid`, `setuid`, `HOME`), as
  a runner starting a job itself would; `confine run --user` does the
  same inside confine. Each pays one user look-up through NSS. The
  verdict is on icount like the others; on the wall clock, TCG also
  translates each new page of code before running it, which no
  instruction shows and hardware doesn't do, so a launcher with more code
  (confine's 3.7 MB against bwrap's 70 KB) loses more there.
- **srt** is Anthropic's sandbox-runtime 0.0.83 from npm (`scripts/setup`
  installs it), run as the user with settings equivalent to the default
  policy: `denyRead` the account's home, `allowWrite` WORK and /tmp,
  `denyWrite` the `.git` carve-outs, no network. It is bubblewrap underneath
  plus a Node.js launcher and proxies, which is most of its start time.
  `--quick` leaves it out (tens of seconds per start under TCG).
- **Real work** runs each command inside the sandbox and times it there
  (`hotpath spawn 1 sh -c CMD`), so launcher start is not in it. The
  repository is generated (N files of 3 lines in directories of 100, one
  commit); `tar x` extracts a tarball of it; `make -j2` builds a main and
  16 modules of 200 functions each (2 modules for fewer than 2,000 files).
- **The job's proxy** compares the same policy with and without one
  `domains` entry, so the start row is the time to start tinyproxy for the
  job and see it listen. The request row times a whole `curl` process
  inside the job (`hotpath spawn`), through the proxy against directly to
  the same loopback server; the difference is the proxy's per-request
  cost (a second connection, the filter, the relay).
- **Policy size** adds N `read` rules, each a distinct path, to a policy like
  the default one; the file opened matches none of them.
- **Concurrency** starts K jobs back to back, each of which tries to read a
  file in the account's home (the default policy denies it) and then sleeps
  until killed (a job polling for a stop mark would fork every second, and
  1,000 of them would load the guest by themselves);
  a job counts as enforcing if its audit log holds that denial and the read
  failed. Memory is the growth of `bytes_memlock` over all BPF maps and
  programs (bpftool) with K jobs alive, per job: the job's 32 KiB ring
  buffer (44 KiB with its metadata pages) and its policy's map entries.
- **Clocks.** *icount* boots QEMU with `-icount shift=0`: the guest's
  clock advances 1 ns per executed instruction, so a loop's time is its
  instruction count, the same on every run and under any host load (two
  boots agree to well under 1%). It misses what instructions don't show:
  cache and TLB misses, memory latency, branch mispredictions, and the
  cost of a trampoline's indirect calls beyond their instruction count; I/O
  (the guest's 9p root) takes no guest instructions at all. So icount
  judges the code confine adds, not the machine it runs on. The icount
  guest has one vCPU: with two, QEMU 7.2's icount mode (which runs vCPUs
  in turn on one host thread) double-faulted 6.12 guests in 3 of 4 full
  runs, each time in SLUB's allocation fast path just after its
  `cmpxchg16b`, at a `prefetchw` (which can't fault), with RFLAGS holding
  a kernel pointer's low bits. That is the emulator's CPU state, not a
  kernel fault: the stack pointer was well inside the task's stack (an
  overflow reports itself as one), and no guest code loads RFLAGS from a
  pointer. Instruction counts don't depend on the vCPU count. *wall* is
  plain TCG time on a shared host; its spread between rounds is often
  larger than the gaps measured, which is why it is the second figure.
  What icount can't make exact is waiting: while the vCPU idles, its
  clock follows real time. The guest's root is the host's, over 9p, and
  every request to it idles the vCPU, so a start (a dozen opens, a few
  symlinks) moved by 25 % between rounds. Before each phase that starts
  programs, the guest now runs its commands once under strace and copies
  every file they reached into its own memory (`local_copy`), as a
  machine's cached disk would have them. A start's rounds now agree to
  1 %, and the real work's to 0.7 %. The requests counted while a phase
  ran are above: look-ups of missing files, which 9p never caches (srt's
  Node.js searching for its modules, git and the compiler for their
  files), the same in every round.
- **Program costs** come from one more run of each operation with
  `kernel.bpf_stats_enabled=1`, outside the timed rounds (counting costs
  two clock reads per program run). `run_time_ns / run_cnt` is the time
  inside the program; what the hook's dispatch costs (the BPF trampoline,
  the cgroup program array walk) is the rest of the gap.
- **What would close the gaps.**
  - *Open*: after the first open, a job's decision on a file is kept on
    its inode (design.md, "The decision cache"), so `file_open` does no
    path walk. A hit is now plain loads (the file's path and the task's
    root, hashed as `ptr_value`; the kernel's two change counters through
    `bpf_rdonly_cast` on 6.2+), the job and cache lookups, and nothing
    else: the cache is checked before the tests that can only allow. That
    took `file_open` from 1,006 to 494 instructions a call (6.12); each
    `bpf_probe_read_kernel` it dropped cost about 84. On 6.1, without
    `bpf_rdonly_cast`, the counters are still two helper calls. The rest
    is the `lsm_cgroup` dispatch (trampoline and shim, about 200).
  - *Create*: a directory keeps one decision for every name in it when no
    rule singles one out below it (design.md), so creating and removing a
    file does no walk: `path_mknod` and `path_unlink` each do a cache
    lookup (and the `fs_names` check, now skipped when no rule's name has
    the new name's length), `file_open` records the created file for the
    times set next (below). Without the helper calls the three went from
    1,428, 1,197 and 530 instructions a call to 638, 506 and 369.
  - *`touch`, `tar x`*: `inode_setattr` gets no mount, so an uncached
    decision walks the file's path through every mount of its filesystem.
    A decision through every mount is kept on the file (design.md), so a
    repeated `touch` skips the walk. `tar x` sets each new file's times
    once: the creating open records the file and its allowed mount on the
    task, and `inode_setattr` takes that record where the filesystem has
    one mount. A directory whose names one rule decides alike passes that
    decision down, with a bound on the levels a walk would still reach, to
    the directories made or opened below it (design.md, "The decision
    cache"), so `tar x`, `mkdir -p` and `rm -rf` walk once at the top of a
    tree, and an open takes its decision from its directory's slot: the
    benchmark's `rm -rf` went from 2,667 to 876 instructions a `file_open`,
    `git log -p` from 1,683 to 781 and `tar x` from 660 to 408 (7.2 keeps
    the walk for opens: its `struct file` yields no trusted parent). What
    `tar x` still pays is each program's own work per file, about 400 to
    800 instructions: the job and cache-slot lookups, and the task's create
    record for the times. Deciding a new file's times from its directory's
    slot would drop the record. In audit mode no create is recorded (it may
    have passed unallowed), so each new file's times are walked.
  - *Connect* runs six programs on four kinds of hook: `socket_create`,
    `sock_create`, `socket_connect`, `connect4` (which looks a loopback
    destination up in the kernel's socket table to see whose it is) and
    `ingress` for each packet. A TCP socket's job is now read from the
    socket itself (`sk_cgrp_data`, through `bpf_skc_to_tcp_sock`), so
    `sock_create` no longer allocates socket storage for it (1,106 to
    85); `socket_connect` reads the socket and address with plain loads
    and one copy (1,496 to 375); `connect4` asks the socket table before
    the rules, as a job's own server is the common case (1,376 to 786).
    UDP keeps the storage: on 6.1 no helper reaches an IPv4 UDP socket's
    cgroup from a `sock_addr` program. What is left is `connect4`'s
    socket-table lookup and six programs' dispatch.
  - *Start*: `confine run --user U -- true` timed phase by phase under
    icount, with its files local (6.12, mean of 20 runs, µs, at
    `c8be4c5`): the options and the default policy 103 (465 when it was
    parsed at each start), the user look-up through NSS 1,245 (glibc
    tries nscd's socket, then loads `libnss_systemd`, which tries
    systemd's userdb; the baseline pays as much for its own), the kernel
    check 75, the pinned objects 666, orphaned proxies 70, the private
    directories 54, compiling the policy 532 (54 `readlink`s by
    `realpath`), the ring, audit log and cgroup 325, the limits 86, the
    policy's map entries 393, the spawn until the job's exec 1,625 (the
    clone with its mount and IPC namespaces 178, the private /dev/pts and
    /dev/shm 97, dropping privileges 99, the exec), the job's run 80, the
    cgroup's removal 230 and confine's exit 208. A phase's figure moves
    with what an earlier one first touched: without the parse, the heap
    pages it had faulted in are faulted in later. Exec, the dynamic loader
    and exit cost about 1,000 more than `true`'s. The job's first process
    shares confine's memory until its exec (`CLONE_VM | CLONE_VFORK`,
    where `fs.suid_dumpable` isn't 1), which took the spawn from 2,271
    to 1,655 with the job's run, and the start from 9.5 to 8.8 ms. The
    default policy is parsed at build time (`policy/embed_default.cpp`),
    so a job on it parses no TOML: 0.2 ms less a start (A/B of the two
    builds in one boot, 4 rounds of 20). Before the files
    were local, the same trace read 3,457 for NSS and 2,548 for the
    spawn: most of that was waiting on 9p. Of what is left, confine's own
    process is about 2.4 ms: an exec like `true`'s, plus some 1,000 for
    its size (relocating a PIE, faulting in 2 MB of text, and an exit
    that unmaps 4.8 MB where `true`'s unmaps 1: 0.7 ms against 0.27 under
    `perf`). Linked with `--gc-sections` (each function in a section of its
    own, and those nothing uses dropped) its text went from 2.0 to 1.5 MB
    and a start took 0.17 ms less (A/B in one boot, 4 rounds of 20).
    Linked without PIE it started 0.28 ms sooner; it stays a PIE,
    as the daemon's address space faces unprivileged clients. Dropping
    its own libm saved nothing: `libnss_systemd` loads it anyway.
  - *Start through the daemon*: the worker skips the kernel check and
    the objects, but the client is an exec of confine too and the worker
    a fork of the daemon. Profiled by process (`perf`, 6.12, icount), it
    went from 12.2 to 10.6 ms: `wire::receive` zeroed a 128 KiB buffer, and
    faulted in its pages, for each message in both the worker and the
    client (0.7 ms a job); each worker loaded the NSS modules, which the
    daemon now does once before it forks, and parsed the default policy;
    and a daemon that had loaded the objects kept libbpf's freed heap
    (6 MB), whose page tables each fork copied (`malloc_trim` after the
    load). What is left: the client, an exec of confine (2.5 ms under
    `perf`); the worker's page faults (it faults in again the text the
    daemon had mapped, as a fork copies no page-table entries of a file
    mapping, and copies each heap page it writes) and its exit. Earlier cuts: a job's end no
    longer walks `job_keys`; one listing of the pin directory, one query
    per attach type, `cgroup.stat` before listing the proxies' cgroup,
    and batched policy entries (`BPF_MAP_UPDATE_BATCH` and
    `BPF_MAP_DELETE_BATCH`, 5.6); confine linked statically (libbpf with
    libelf and zlib, libstdc++; fmt and toml++ header-only; journald
    spoken to without libsystemd); a per-build pool of rings, which
    removes two RCU grace periods; and a build-time manifest of each
    object (`bpf/manifest.cpp`), so a confine that finds the objects
    pinned skips parsing their ELF. What is left is spread thin over
    pieces of 0.2 to 0.6 ms; icount weighs first touches heavily (a
    fresh page's zeroing counts each byte of `rep stosb`).
""")
print("\n".join(out))

# The plot's data (bench/plot.gp): one row per operation, one column per sandbox.
with open(plot_data, "w") as f:
    for k in kernels:
        for phase, ops in (("hot", OPS), ("work", WORK)):
            for op, label in ops:
                meds = [statistics.median(r) if (r := ratios(k, phase, op, v, "plain")) else None for v in SANDBOXES]
                if any(m is not None for m in meds):
                    name = (label if len(kernels) == 1 else f"{k}: {label}").replace("`", "").replace('"', "'")
                    f.write(f'"{name}" ' + " ".join("?" if m is None else f"{m:.3f}" for m in meds) + "\n")

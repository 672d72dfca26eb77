// A runner's side of confine, as a CI runner would do it: start one job
// through `confine run` as the runner's own (unprivileged) user, which the
// confine daemon serves; stream the job's output as it comes; collect its
// audit lines as they come, on a channel of their own; and map the exit
// status to what happened.
//
//   node runner.js [--policy FILE] [--workdir DIR] [--timeout DURATION] -- CMD [ARG...]
//
// Prints the job's stdout and stderr prefixed "out| " and "err| ", each
// denial as "denied: OP TARGET (COMM)" as it arrives, and at the end one
// JSON line: {"outcome": ..., "status": N, "denials": N, "lost": N}.
// Exits 0 if the job succeeded, 1 if it failed, 2 if confine did.

import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import type { Readable } from "node:stream";

// One line of confine's audit log (docs/contract.md "Audit log").
interface AuditEvent {
    time: string;
    job: string;
    op: string;
    target?: string;
    comm?: string;
    verdict?: "allow" | "deny";
    count?: number;
}

type Outcome = "succeeded" | "failed" | "timed out" | "killed by signal" | "could not run" | "confine failed";

// confine run's status, as the contract defines it.
export function outcome(status: number): Outcome {
    if (status === 0) return "succeeded";
    if (status === 124) return "timed out";
    if (status === 125) return "confine failed";
    if (status === 126 || status === 127) return "could not run";
    if (status > 128) return "killed by signal";
    return "failed";
}

function lines(stream: Readable, each: (line: string) => void): Promise<void> {
    return new Promise((resolve) => {
        const rl = createInterface({ input: stream, crlfDelay: Infinity });
        rl.on("line", each);
        rl.on("close", resolve);
    });
}

async function main(argv: string[]): Promise<number> {
    const split = argv.indexOf("--");
    if (split < 0 || split === argv.length - 1) {
        process.stderr.write("usage: runner [--policy FILE] [--workdir DIR] [--timeout D] -- CMD [ARG...]\n");
        return 2;
    }
    const confine = process.env.CONFINE ?? "confine";
    // The audit log gets fd 3, a channel the job never sees: no line on it
    // can come from the job.
    const args = ["run", ...argv.slice(0, split), "--audit-log", "/dev/fd/3", "--", ...argv.slice(split + 1)];
    const child = spawn(confine, args, { stdio: ["ignore", "pipe", "pipe", "pipe"] });

    const denials: AuditEvent[] = [];
    let lost = 0;
    const done = Promise.all([
        lines(child.stdout!, (l) => process.stdout.write(`out| ${l}\n`)),
        lines(child.stderr!, (l) => process.stdout.write(`err| ${l}\n`)),
        lines(child.stdio[3] as Readable, (l) => {
            let e: AuditEvent;
            try {
                e = JSON.parse(l) as AuditEvent;
            } catch {
                process.stdout.write(`audit: unreadable line: ${l}\n`);
                return;
            }
            if (e.op === "lost") lost += e.count ?? 0;
            else if (e.verdict === "deny") {
                denials.push(e);
                process.stdout.write(`denied: ${e.op} ${e.target ?? ""} (${e.comm ?? "?"})\n`);
            }
        }),
    ]);
    const status: number = await new Promise((resolve) =>
        child.on("close", (code, signal) => resolve(code ?? (signal ? 128 : 125))),
    );
    await done;
    const what = outcome(status);
    process.stdout.write(JSON.stringify({ outcome: what, status, denials: denials.length, lost }) + "\n");
    return what === "succeeded" ? 0 : what === "confine failed" ? 2 : 1;
}

main(process.argv.slice(2)).then((code) => process.exit(code));

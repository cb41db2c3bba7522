import { CotalError } from "../errors.ts";
import { type PidRecord, writePidFile } from "./pidfile.ts";

/** How to start one daemon of the stack. */
export interface DaemonSpec {
  /** The executable's name, for messages and file names (`cotal-delivery`). */
  name: string;
  /** The program and its argv: `deno run <flags> cmd/x.ts ...` in development, a binary in release. */
  command: string;
  args: string[];
  /** Appended with the daemon's stdout and stderr. */
  logFile: string;
  /** Written with the pid pinned to the start time. */
  pidFile: string;
  /** Environment; the daemon starts with only this (a cleared environment otherwise). */
  env?: Record<string, string>;
  /**
   * Foreground daemons die with the process that started them (parent-death signal); detached
   * ones get their own session so a Ctrl-C in the operator's terminal does not reach them.
   */
  detach: boolean;
}

/** A started daemon. */
export interface StartedDaemon {
  record: PidRecord;
  child: Deno.ChildProcess;
}

/** Starts one daemon with its log and pid file; the recorded pid is the daemon's own. */
export async function startDaemon(spec: DaemonSpec): Promise<StartedDaemon> {
  // sh redirects straight into the log (a detached daemon must not write into a pipe whose
  // reader is gone) and execs, as do setsid and setpriv: the child's pid stays the daemon's.
  const wrap = spec.detach
    ? ["/usr/bin/setsid", spec.command]
    : ["/usr/bin/setpriv", "--pdeathsig", "SIGTERM", "--", spec.command];
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command("/bin/sh", {
      args: [
        "-c",
        'log=$1; shift; exec "$@" >>"$log" 2>&1',
        "sh",
        spec.logFile,
        ...wrap,
        ...spec.args,
      ],
      stdin: "null",
      stdout: "null",
      stderr: "null",
      clearEnv: true,
      env: spec.env ?? {},
    }).spawn();
  } catch (err) {
    throw new CotalError(
      "daemon_start_failed",
      `Could not start ${spec.name} (${(err as Error).message}).`,
    );
  }
  if (spec.detach) child.unref();
  const record = await writePidFile(spec.pidFile, child.pid, spec.name);
  return { record, child };
}

/**
 * Starting one daemon of the stack: its log, its pid file, and its liveness lock.
 *
 * The daemon is started through a small `sh` wrapper that takes an exclusive `flock` on the
 * component's lock file on descriptor 9, copies `/proc/self/stat` for the pid record, and then
 * execs the daemon: the daemon keeps the lock (an inherited descriptor) for exactly its life, so
 * "is it alive" is "is its lock held" for anyone, without reading `/proc` (which Deno grants
 * only to `--allow-all`) and without a reused pid ever looking alive. The supervisor marks
 * every descriptor close-on-exec before it starts an agent, so agents never inherit it.
 *
 * @module
 */
import { ensureOwnFile } from "../atomic_file.ts";
import { CotalError } from "../errors.ts";
import { type PidRecord, startTimeFromStat, writePidFile } from "./pidfile.ts";

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
  /** Held locked (flock) by the daemon for its life: see {@linkcode isLockHeld}. */
  lockFile: string;
  /** Environment; the daemon starts with only this (a cleared environment otherwise). */
  env?: Record<string, string>;
  /**
   * Foreground daemons die with the process that started them (parent-death signal); detached
   * ones outlive it. Both get their own session, so a Ctrl-C in the operator's terminal reaches
   * only the `up` that started them, whose stop is a `down` (agents despawned first), never the
   * daemons directly (a supervisor so stopped kept its agents for the next up).
   */
  detach: boolean;
}

/** A started daemon. */
export interface StartedDaemon {
  record: PidRecord;
  child: Deno.ChildProcess;
}

// $1 log, $2 lock, $3 where to copy our stat line; then the daemon's argv. A start that finds
// the lock held (a live daemon) gives up after a second with 75 (a liveness check holds a free
// lock only for an instant). The stat line also goes into the lock file itself: the holder's
// pid and start time, for when its pid file is lost or corrupt (recordFromLock).
const WRAPPER = 'log=$1 lock=$2 stat=$3; shift 3; exec 9>>"$lock" || exit 73; ' +
  "/usr/bin/flock -x -w 1 9 || exit 75; " +
  'read -r line </proc/$$/stat && printf "%s\\n" "$line" >"$stat" && ' +
  'printf "%s\\n" "$line" >"$lock" || exit 74; ' +
  'exec "$@" >>"$log" 2>&1';

/** How long a start waits for the wrapper's stat line. */
const STAT_WAIT_MS = 10_000;

/** Starts one daemon with its log and pid file; the recorded pid is the daemon's own. */
export async function startDaemon(spec: DaemonSpec): Promise<StartedDaemon> {
  // sh redirects straight into the log (a detached daemon must not write into a pipe whose
  // reader is gone) and execs, as do setsid and setpriv: the child's pid stays the daemon's.
  const wrap = spec.detach
    ? ["/usr/bin/setsid", spec.command]
    : ["/usr/bin/setsid", "/usr/bin/setpriv", "--pdeathsig", "SIGTERM", "--", spec.command];
  // One stat file per start: two starts of one component at once (two racing commands, or a
  // command and the watchdog) each read their own wrapper's line (fault pass 14: the loser
  // read the winner's and recorded its own dead wrapper's pid).
  const statFile = `${spec.pidFile}.${crypto.randomUUID().slice(0, 8)}.stat`;
  // The wrapper's redirections follow links: each file is made (or found) ours first.
  for (const [file, what] of [[spec.logFile, "log"], [spec.lockFile, "lock"], [statFile, "stat"]]) {
    await ensureOwnFile(file, `The ${what} file of ${spec.name}`);
  }
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command("/bin/sh", {
      args: [
        "-c",
        WRAPPER,
        "sh",
        spec.logFile,
        spec.lockFile,
        statFile,
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
  let startTime: number;
  try {
    startTime = await wrapperStartTime(statFile, child, spec.name);
  } catch (err) {
    // Nothing this start made is left running unrecorded (fault pass 14: a broker started by
    // an up that then failed ran on, unwatched, with no pid file).
    try {
      child.kill("SIGKILL");
    } catch {
      // Gone.
    }
    throw err;
  } finally {
    await Deno.remove(statFile).catch(() => {});
  }
  const record = await writePidFile(spec.pidFile, child.pid, spec.name, startTime);
  return { record, child };
}

/** Waits (bounded) for the wrapper's copy of its stat line: the daemon's start time. */
async function wrapperStartTime(
  statFile: string,
  child: Deno.ChildProcess,
  name: string,
): Promise<number> {
  let exited: Deno.CommandStatus | undefined;
  child.status.then((s) => exited = s);
  const deadline = Date.now() + STAT_WAIT_MS;
  // Read once more after the deadline: a starter frozen past it (SIGSTOP) finds the line its
  // wrapper wrote meanwhile (fault pass 14 failed an up that was only paused).
  for (let last = false; !last;) {
    last = Date.now() >= deadline;
    const text = await Deno.readTextFile(statFile).catch(() => "");
    if (text.endsWith("\n")) {
      const start = startTimeFromStat(text.trim());
      if (start !== undefined) return start;
      break;
    }
    if (exited) {
      throw new CotalError(
        "daemon_start_failed",
        exited.code === 75
          ? `${name} is already running (its lock is held); stop it first.`
          : `${name} exited at once (exit code ${exited.code}); see its log.`,
      );
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new CotalError(
    "daemon_start_failed",
    `${name} did not start within ${STAT_WAIT_MS / 1000} s; see its log.`,
  );
}

/**
 * True while a live process holds `lockFile` (a daemon started by {@linkcode startDaemon}). A
 * free lock is released again at once, so a start racing this check only waits a moment.
 */
export async function isLockHeld(lockFile: string): Promise<boolean> {
  let f: Deno.FsFile;
  try {
    f = await Deno.open(lockFile, { read: true });
  } catch {
    return false;
  }
  try {
    if (!(await f.tryLock(true))) return true;
    await f.unlock();
    return false;
  } finally {
    f.close();
  }
}

/**
 * The live holder of `lockFile` as a pid record, read from the stat line its start wrapper
 * wrote into the lock: how `down` and `status` find a daemon whose pid file is gone or
 * corrupt. Undefined when the lock is free or holds no readable line.
 */
export async function recordFromLock(
  lockFile: string,
  name: string,
): Promise<PidRecord | undefined> {
  if (!(await isLockHeld(lockFile))) return undefined;
  const line = (await Deno.readTextFile(lockFile).catch(() => "")).trim().split("\n").at(-1) ?? "";
  const pid = Number(line.slice(0, line.indexOf(" ")));
  const startTime = startTimeFromStat(line);
  if (!Number.isSafeInteger(pid) || pid <= 0 || startTime === undefined) return undefined;
  return { pid, startTime, name, startedAt: "" };
}

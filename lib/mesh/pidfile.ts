/**
 * Pid files pinned to the process's start time: a recorded pid is signalled only while it is
 * still the same process, never a reused one.
 *
 * @module
 */
import { writeFileAtomic } from "../atomic_file.ts";
import { CotalError } from "../errors.ts";

/** What a pid file records: the pid and the process start time that pins its identity. */
export interface PidRecord {
  pid: number;
  /** Field 22 of /proc/<pid>/stat: clock ticks since boot. A reused pid has another. */
  startTime: number;
  /** What the process is, for messages. */
  name: string;
  startedAt: string;
}

/** The start time in a `/proc/<pid>/stat` line; undefined for a zombie or a malformed line. */
export function startTimeFromStat(stat: string): number | undefined {
  // The command name may hold spaces and parentheses: fields count from the last ')'.
  const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  if (rest[0] === "Z" || rest[0] === "X") return undefined;
  const start = Number(rest[19]);
  return Number.isInteger(start) && start > 0 ? start : undefined;
}

/** The start time of a live process, or undefined when it is gone (or a zombie). */
export function processStartTime(pid: number): number | undefined {
  try {
    return startTimeFromStat(Deno.readTextFileSync(`/proc/${pid}/stat`));
  } catch {
    return undefined;
  }
}

/**
 * Records a running process; the file is written atomically with mode 0600. `startTime` is
 * read from `/proc` when not given (a caller without access to `/proc` passes it).
 */
export async function writePidFile(
  path: string,
  pid: number,
  name: string,
  startTime = processStartTime(pid),
): Promise<PidRecord> {
  if (startTime === undefined) {
    throw new CotalError("pid_gone", `${name} (pid ${pid}) exited before it could be recorded.`);
  }
  const rec: PidRecord = { pid, startTime, name, startedAt: new Date().toISOString() };
  await writeFileAtomic(path, JSON.stringify(rec) + "\n", { what: `The pid file of ${name}` });
  return rec;
}

/** Reads a pid file; undefined when absent, a CotalError when unreadable. */
export async function readPidFile(path: string): Promise<PidRecord | undefined> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return undefined;
    throw err;
  }
  try {
    const rec = JSON.parse(text);
    if (
      Number.isInteger(rec.pid) && rec.pid > 0 && Number.isInteger(rec.startTime) &&
      typeof rec.name === "string"
    ) return rec as PidRecord;
  } catch {
    // Fall through to the refusal.
  }
  throw new CotalError(
    "pid_file_corrupt",
    `The pid file ${path} is not a Cotal pid record; remove it if nothing is running.`,
  );
}

/** True when the recorded process is still the one that was started (same pid, same start). */
export function isSameProcess(rec: PidRecord): boolean {
  return processStartTime(rec.pid) === rec.startTime;
}

/**
 * Signals the recorded process only when it is still the same one (a reused pid is never
 * signalled), waits up to `graceMs` for it to exit, then SIGKILLs it. Returns what happened.
 */
export async function stopRecorded(
  rec: PidRecord,
  graceMs = 5_000,
): Promise<"stopped" | "killed" | "not-running"> {
  if (!isSameProcess(rec)) return "not-running";
  try {
    Deno.kill(rec.pid, "SIGTERM");
  } catch {
    return "not-running";
  }
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    if (!isSameProcess(rec)) return "stopped";
    await new Promise((r) => setTimeout(r, 25));
  }
  if (isSameProcess(rec)) {
    try {
      Deno.kill(rec.pid, "SIGKILL");
    } catch {
      return "stopped";
    }
    return "killed";
  }
  return "stopped";
}

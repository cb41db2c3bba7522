/**
 * Starting a sandbox with exactly the descriptors it should have. Before every spawn, every
 * descriptor the supervisor holds is marked close-on-exec (earlier agents' pty masters, a pipe
 * from the shell that started it); then only the pipes bwrap reads are made inheritable: the
 * seccomp program, and the info and block pipes that let the supervisor put the sandbox's first
 * process into the agent's cgroup before it forks anything. Spawns are serialized across the
 * whole process, not only within one isolate: another isolate's spawn in between would mark
 * these pipes close-on-exec before the fork, or have its own inherited by this child.
 *
 * @module
 */
import { CotalError } from "../../errors.ts";
import {
  closeFd,
  closeOnExecAll,
  pipe,
  readNow,
  setCloseOnExec,
  setNonBlocking,
  tryLockProcess,
  unlockProcess,
  writeAll,
} from "./libc.ts";

/** Descriptors the child inherits, by what bwrap does with them. */
export interface ChildFds {
  readonly seccomp?: number;
  readonly info?: number;
  readonly block?: number;
}

/** The supervisor's ends of the sync pipes (when asked for). */
export interface SyncFds {
  readonly infoRead: number;
  readonly blockWrite: number;
}

/**
 * How long bwrap has to report its child's pid: the clone that makes the sandbox's namespaces.
 * A new network namespace waits while the kernel tears others down (it holds the lock their
 * cleanup takes), and on a loaded 2-core machine running many sandboxes that clone took more
 * than 10 s (a clean-clone CI run of the full suite); 30 s is a deadline, not a wait.
 */
export const CHILD_PID_DEADLINE_MS = 30_000;

/**
 * How long a spawn waits for another isolate of this process to finish its own. A spawn holds
 * the lock for a fork and a few descriptor calls; only an isolate that ended while holding it
 * keeps it longer, and then the spawn goes on rather than never starting an agent again.
 */
export const PROCESS_SPAWN_LOCK_DEADLINE_MS = 10_000;

let queue: Promise<unknown> = Promise.resolve();

async function lockProcessSpawns(): Promise<boolean> {
  const until = Date.now() + PROCESS_SPAWN_LOCK_DEADLINE_MS;
  while (!tryLockProcess()) {
    if (Date.now() >= until) return false;
    await new Promise((r) => setTimeout(r, 1));
  }
  return true;
}

/**
 * Runs `spawn` with the descriptors asked for made inheritable, and every other descriptor
 * close-on-exec; closes the child's ends afterwards. One spawn at a time per process.
 */
export function spawnWithFds<T>(
  need: { seccomp?: Uint8Array; sync?: boolean },
  spawn: (fds: ChildFds) => Promise<T>,
): Promise<{ result: T; sync?: SyncFds }> {
  const run = async () => {
    const locked = await lockProcessSpawns();
    closeOnExecAll();
    const childEnds: number[] = [];
    const ours: number[] = [];
    let fds: ChildFds = {};
    let sync: SyncFds | undefined;
    try {
      if (need.seccomp) {
        const p = pipe();
        ours.push(p.write);
        // The filter is a few hundred bytes, far below a pipe's buffer: the write never blocks.
        writeAll(p.write, need.seccomp);
        closeFd(p.write);
        ours.pop();
        setCloseOnExec(p.read, false);
        childEnds.push(p.read);
        fds = { ...fds, seccomp: p.read };
      }
      if (need.sync) {
        const info = pipe();
        const block = pipe();
        ours.push(info.read, block.write);
        childEnds.push(info.write, block.read);
        setCloseOnExec(info.write, false);
        setCloseOnExec(block.read, false);
        setNonBlocking(info.read);
        fds = { ...fds, info: info.write, block: block.read };
        sync = { infoRead: info.read, blockWrite: block.write };
      }
      const result = await spawn(fds);
      return { result, ...(sync ? { sync } : {}) };
    } catch (err) {
      for (const fd of ours) closeFd(fd);
      throw err;
    } finally {
      for (const fd of childEnds) closeFd(fd);
      if (locked) unlockProcess();
    }
  };
  const next = queue.then(run, run);
  queue = next.catch(() => {});
  return next;
}

/**
 * Reads bwrap's `--info-fd` report for its child's host pid; `sandbox_start_failed` when bwrap
 * closes the pipe first (it failed) or the deadline passes.
 */
export async function awaitChildPid(
  infoRead: number,
  deadlineMs = CHILD_PID_DEADLINE_MS,
): Promise<number> {
  const until = Date.now() + deadlineMs;
  let text = "";
  let closed = false;
  try {
    while (Date.now() < until) {
      const chunk = readNow(infoRead);
      if (chunk === undefined) {
        await new Promise((r) => setTimeout(r, 2));
        continue;
      }
      // Read to the end: bwrap writes its report in pieces and closes the pipe after the last;
      // closing our end early would kill it with SIGPIPE on its next write.
      if (chunk.length === 0) {
        const m = /"child-pid"\s*:\s*(\d+)/.exec(text);
        if (m) return Number(m[1]);
        closed = true;
        break;
      }
      text += new TextDecoder().decode(chunk);
      if (text.length > 65536) break;
    }
  } finally {
    closeFd(infoRead);
  }
  throw new CotalError(
    "sandbox_start_failed",
    closed
      ? "bwrap exited before it reported its sandbox's pid (it could not set the sandbox up)."
      : `bwrap did not report its sandbox's pid within ${Math.round(deadlineMs / 1000)} s.`,
  );
}

/** Lets a blocked sandbox go on (bwrap's `--block-fd`). */
export function releaseBlock(blockWrite: number): void {
  try {
    writeAll(blockWrite, new Uint8Array([1]));
  } catch {
    // bwrap already exited: nothing waits.
  } finally {
    closeFd(blockWrite);
  }
}

/**
 * A daemon's heartbeat: while its event loop turns, it rewrites one file every
 * {@linkcode HEARTBEAT_INTERVAL_MS}. A liveness lock says a process exists; only a beat says it
 * still runs. The stack's watchdog kills a daemon whose beat is older than
 * {@linkcode HUNG_AFTER_MS} (frozen with SIGSTOP, stuck in a loop, blocked on a dead disk) and
 * starts it again: fault pass 7 froze each daemon and nothing healed it.
 *
 * `cotal up` names the file in {@linkcode HEARTBEAT_ENV} and grants the daemon's row write on
 * that one file; without the variable (systemd, an embedder) nothing is written.
 *
 * @module
 */

/** The variable that names a daemon's heartbeat file. */
export const HEARTBEAT_ENV = "COTAL_HEARTBEAT";
/** How often a daemon rewrites its heartbeat. */
export const HEARTBEAT_INTERVAL_MS = 2_000;
/**
 * A beat older than this is a hung daemon. Ten missed beats: a healthy daemon's longest
 * synchronous step is far below it, even on a loaded machine.
 */
export const HUNG_AFTER_MS = 20_000;

/** The heartbeat file `cotal up` named; undefined without one, or without leave to read it. */
function heartbeatFromEnv(): string | undefined {
  try {
    return Deno.env.get(HEARTBEAT_ENV);
  } catch {
    return undefined;
  }
}

/** A running heartbeat; `stop` ends it (a daemon's shutdown need not call it). */
export interface Heartbeat {
  stop(): void;
}

/**
 * Starts this process's heartbeat on `path` (default: {@linkcode HEARTBEAT_ENV}); a no-op
 * without one. The timer never keeps the process alive, and a failed write is said once.
 */
export function startHeartbeat(
  path: string | undefined = heartbeatFromEnv(),
  log: (line: string) => void = console.error,
): Heartbeat {
  if (!path) return { stop() {} };
  let writing = false;
  let failed = false;
  const beat = () => {
    // A write still pending (a slow disk) is not doubled; its lateness is the signal.
    if (writing) return;
    writing = true;
    Deno.writeTextFile(path, `${Date.now()}\n`).then(() => {
      failed = false;
    }, (err) => {
      if (!failed) log(`heartbeat: cannot write ${path} (${(err as Error).message})`);
      failed = true;
    }).finally(() => writing = false);
  };
  // The first beat is written before anything else runs: a daemon stopped at once (a fast
  // 'cotal down') still leaves the proof that it started.
  try {
    Deno.writeTextFileSync(path, `${Date.now()}\n`);
  } catch (err) {
    log(`heartbeat: cannot write ${path} (${(err as Error).message})`);
    failed = true;
  }
  const timer = setInterval(beat, HEARTBEAT_INTERVAL_MS);
  Deno.unrefTimer(timer);
  return { stop: () => clearInterval(timer) };
}

/**
 * An `up --detach` killed part-way is finished by its own watchdog. `up` starts the watchdog
 * pair first (lib/mesh/up.ts) and, before that, leaves a note of itself in the run dir: the
 * command that ran it and a lock it holds for its life. A note whose lock is free is an up that
 * died before it finished or undid its work; the watchdog (the pair's first, never the peer)
 * runs the same `cotal up` again, which starts what is missing and removes the note. Fault pass
 * 12 killed `up` between its daemons and its watchdogs and nothing healed the half stack.
 *
 * A resumed up that dies or fails too is resumed again, {@linkcode UP_RESUMES_MAX} times at most
 * and {@linkcode UP_RESUME_GAP_MS} apart (the watchdog counts them in the note before each run);
 * then the watchdog says once that a human is needed.
 * `down` removes the note first and stops a resumed up that still runs.
 *
 * @module
 */
import { writeFileAtomic } from "../atomic_file.ts";
import { CotalError } from "../errors.ts";
import { isLockHeld, startDaemon } from "./daemon.ts";
import { meshPaths } from "./layout.ts";
import { processStartTime, readPidFile, stopRecorded } from "./pidfile.ts";
import { signalSame } from "./signal_same.ts";

/** How many times an abandoned up is run again before the watchdog gives up. */
export const UP_RESUMES_MAX = 3;
/** The least time between two resumes. */
export const UP_RESUME_GAP_MS = 20_000;
/** Set in a resumed up's environment: how many resumes came before it. */
export const UP_RESUMES_ENV = "COTAL_UP_RESUMES";
// What of the operator's environment a resumed up gets (where Deno and Cotal find their
// files); nothing else of their shell is written down.
const KEPT_ENV = /^(HOME|PATH|DENO_DIR|XDG_[A-Z_]+|NATS_SERVER|COTAL_[A-Z_]+|NO_COLOR)$/;

/** How often a running up beats (see {@linkcode UP_HUNG_MS}). */
export const UP_BEAT_MS = 2_000;
/**
 * An up whose lock is held but that has not beaten this long is hung (frozen, SIGSTOP): the
 * watchdog kills it and finishes its work, as it restarts a daemon that stopped beating.
 */
export const UP_HUNG_MS = 20_000;

/** What a note says: how to run the same up again, and which process wrote it. */
interface UpNote {
  command: string;
  args: string[];
  env: Record<string, string>;
  resumes: number;
  /** The up that wrote it (pid and start time), to be judged hung by its beat. */
  by?: { pid: number; startTime: number };
}

/**
 * The commands that leave a note: `up`, and `space` (a `space add` or `space rm`, one at a
 * time per root: its lock also keeps two of them from racing).
 */
export type NoteKind = "up" | "space";

function files(root: string, kind: NoteKind = "up") {
  const dir = `${meshPaths(root).runDir}/resume`;
  const resumed = kind === "up" ? "resumed" : `${kind}-resumed`;
  return {
    dir,
    note: `${dir}/${kind}.json`,
    lock: `${dir}/${kind}.lock`,
    // The resumed command's own files (its wrapper holds `resumeLock` for its life).
    resumeLock: `${dir}/${resumed}.lock`,
    resumePid: `${dir}/${resumed}.pid`,
    beat: `${dir}/${kind}.beat`,
    resumeLog: `${meshPaths(root).logDir}/${kind}-resumed.log`,
    said: kind === "up" ? "'cotal up'" : "'cotal space'",
  };
}

/** How long a `space add` or `space rm` waits for another of the same root to end. */
export const SPACE_LOCK_WAIT_MS = 60_000;
/**
 * How long an `up` waits for the up lock before it says another up runs: the watchdog's check
 * of that lock (`isLockHeld`) takes and releases it in an instant, and an up that came at that
 * instant was refused in CI (`tests/mesh/broker_settings_test.ts`). A real up holds it for
 * seconds, so a refusal comes one second later than before.
 */
export const UP_LOCK_WAIT_MS = 1_000;

/** The note of a running up. */
export interface UpNoteHandle {
  /** The up finished: the note is removed and the lock let go. */
  done(): Promise<void>;
  /**
   * The up failed: an up a human ran removes the note (they read the failure); a resumed one
   * keeps it, for the watchdog's next resume.
   */
  failed(): Promise<void>;
}

/**
 * Takes the root's up lock and writes the note (`command` and `args` run the same up again).
 * Refuses with `up_running` while another up of this root holds the lock.
 */
export function noteUp(
  root: string,
  run: { command: string; args: string[] },
  /** Resumes before this up (default: its environment's {@linkcode UP_RESUMES_ENV}). */
  resumes = Number(Deno.env.get(UP_RESUMES_ENV) ?? 0) || 0,
): Promise<UpNoteHandle> {
  return noteCommand(root, "up", run, resumes);
}

/**
 * {@linkcode noteUp} for a `space add` or `space rm`: it waits up to
 * {@linkcode SPACE_LOCK_WAIT_MS} for another of the same root to end (fault pass 14 raced two
 * adds of one space: one's rollback removed the space the other had just added), then refuses
 * with `space_busy`.
 */
export function noteSpaceCommand(
  root: string,
  run: { command: string; args: string[] },
  resumes = Number(Deno.env.get(UP_RESUMES_ENV) ?? 0) || 0,
): Promise<UpNoteHandle> {
  return noteCommand(root, "space", run, resumes);
}

async function noteCommand(
  root: string,
  kind: NoteKind,
  run: { command: string; args: string[] },
  resumes: number,
): Promise<UpNoteHandle> {
  const f = files(root, kind);
  await Deno.mkdir(f.dir, { recursive: true, mode: 0o700 });
  const lock = await Deno.open(f.lock, { read: true, write: true, create: true, mode: 0o600 });
  const until = Date.now() + (kind === "space" ? SPACE_LOCK_WAIT_MS : UP_LOCK_WAIT_MS);
  while (!(await lock.tryLock(true))) {
    if (Date.now() < until) {
      await new Promise((r) => setTimeout(r, kind === "space" ? 100 : 20));
      continue;
    }
    lock.close();
    throw kind === "up"
      ? new CotalError(
        "up_running",
        `Another 'cotal up' of ${root} is starting its stack now (its own, or one its watchdog ` +
          "runs to finish an up that was killed); wait for it, then run 'cotal status'.",
      )
      : new CotalError(
        "space_busy",
        `Another 'cotal space add' or 'space rm' of ${root} has run for over ` +
          `${SPACE_LOCK_WAIT_MS / 1000} s; wait for it to end, then run this again.`,
      );
  }
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(Deno.env.toObject())) if (KEPT_ENV.test(k)) env[k] = v;
  const startTime = processStartTime(Deno.pid);
  const note: UpNote = {
    command: run.command,
    args: run.args,
    env,
    resumes,
    ...(startTime !== undefined ? { by: { pid: Deno.pid, startTime } } : {}),
  };
  await writeFileAtomic(f.note, JSON.stringify(note, null, 2) + "\n", {
    what: `The note of ${f.said}`,
  });
  const beat = () => Deno.writeTextFile(f.beat, `${Date.now()}\n`).catch(() => {});
  await beat();
  const beating = setInterval(beat, UP_BEAT_MS);
  Deno.unrefTimer(beating);
  return {
    async done() {
      clearInterval(beating);
      await Deno.remove(f.note).catch(() => {});
      lock.close();
    },
    async failed() {
      clearInterval(beating);
      if (resumes === 0) await Deno.remove(f.note).catch(() => {});
      lock.close();
    },
  };
}

/**
 * Removes the notes of an up and of a space command and stops a resumed one that runs (`down`,
 * before anything else).
 */
export async function forgetUp(root: string): Promise<void> {
  for (const kind of ["up", "space"] as const) {
    const f = files(root, kind);
    await Deno.remove(f.note).catch(() => {});
    const rec = await readPidFile(f.resumePid).catch(() => undefined);
    if (rec && await isLockHeld(f.resumeLock)) await stopRecorded(rec, 5_000).catch(() => {});
  }
}

/**
 * An up that holds its lock but stopped beating {@linkcode UP_HUNG_MS} ago is killed (fault pass
 * 14 froze one part-way: the half stack it held stayed so, and every other up was refused);
 * its note stays, so the next pass resumes it.
 */
async function stopHungUp(
  f: ReturnType<typeof files>,
  text: string,
  log: (line: string) => void,
  now: number,
): Promise<void> {
  const text_ = (await Deno.readTextFile(f.beat).catch(() => "")).trim();
  const beat = Number(text_);
  // No beat yet (the up is between its note and its first beat): not judged.
  if (!text_ || !Number.isFinite(beat) || now - beat < UP_HUNG_MS) return;
  let by: UpNote["by"];
  try {
    by = (JSON.parse(text) as UpNote).by;
  } catch {
    return;
  }
  if (!by || !Number.isSafeInteger(by.pid) || by.pid <= 1) return;
  log(
    `watchdog: ${f.said} (pid ${by.pid}) holds its lock but has not beaten for ` +
      `${Math.round((now - beat) / 1000)} s (frozen); killing it, its work is finished next`,
  );
  await signalSame(by, "KILL");
}

/** The watchdog's memory of its resumes. */
export interface ResumeState {
  lastAt: number;
  gaveUp: boolean;
}

/**
 * Runs an abandoned up again: a note whose up holds no lock, and no resumed up running.
 * Called on each pass of the stack's first watchdog; says what it does through `log`.
 */
export function resumeAbandonedUp(
  root: string,
  state: ResumeState,
  log: (line: string) => void,
  now = Date.now(),
): Promise<void> {
  return resumeAbandoned(root, "up", state, log, now);
}

/** {@linkcode resumeAbandonedUp} for a `space add` or `space rm` killed part-way. */
export function resumeAbandonedSpaceCommand(
  root: string,
  state: ResumeState,
  log: (line: string) => void,
  now = Date.now(),
): Promise<void> {
  return resumeAbandoned(root, "space", state, log, now);
}

async function resumeAbandoned(
  root: string,
  kind: NoteKind,
  state: ResumeState,
  log: (line: string) => void,
  now: number,
): Promise<void> {
  const f = files(root, kind);
  let text: string;
  try {
    text = await Deno.readTextFile(f.note);
  } catch {
    state.gaveUp = false;
    return;
  }
  if (await isLockHeld(f.lock)) {
    // Only an up is judged hung: a space command waits on the broker's reload, which a flooded
    // log can slow, and it holds nothing the stack needs meanwhile.
    if (kind === "up") await stopHungUp(f, text, log, now);
    return;
  }
  if (await isLockHeld(f.resumeLock)) return;
  if (now - state.lastAt < UP_RESUME_GAP_MS) return;
  let note: UpNote;
  try {
    note = JSON.parse(text);
    if (
      typeof note.command !== "string" || !Array.isArray(note.args) ||
      !note.args.every((a) => typeof a === "string") || typeof note.env !== "object" ||
      !Number.isInteger(note.resumes) || note.resumes < 0
    ) throw new Error("not a note");
  } catch {
    log(`watchdog: ${f.note} is not a note of ${f.said}; removing it`);
    await Deno.remove(f.note).catch(() => {});
    return;
  }
  if (note.resumes >= UP_RESUMES_MAX) {
    if (!state.gaveUp) {
      log(
        `watchdog: ${f.said} did not finish ${note.resumes + 1} times; not running it again: ` +
          (kind === "up"
            ? `run 'cotal up --detach --root ${root}' (see ${f.resumeLog})`
            : `run it again by hand (see ${f.resumeLog})`),
      );
    }
    state.gaveUp = true;
    return;
  }
  state.lastAt = now;
  // The count is the watchdog's: written before the resumed up runs, so an up that dies (or
  // fails) before it notes itself still uses up one of the resumes.
  try {
    await writeFileAtomic(
      f.note,
      JSON.stringify({ ...note, resumes: note.resumes + 1 }, null, 2) + "\n",
      { what: `The note of ${f.said}` },
    );
  } catch (err) {
    log(`watchdog: cannot count the resume in ${f.note} (${(err as Error).message}); not resuming`);
    return;
  }
  log(
    `watchdog: ${f.said} ended before it finished (killed); running it again ` +
      `(resume ${note.resumes + 1} of ${UP_RESUMES_MAX}, its log: ${f.resumeLog})`,
  );
  try {
    const { record } = await startDaemon({
      name: `${f.said.replaceAll("'", "")} (resumed)`,
      command: note.command,
      args: note.args,
      env: { ...note.env, [UP_RESUMES_ENV]: String(note.resumes + 1) },
      logFile: f.resumeLog,
      pidFile: f.resumePid,
      lockFile: f.resumeLock,
      detach: true,
    });
    log(`watchdog: resumed ${kind === "up" ? "up" : "space command"} runs (pid ${record.pid})`);
  } catch (err) {
    log(`watchdog: could not run ${f.said} again (${(err as Error).message})`);
  }
}

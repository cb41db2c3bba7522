/**
 * The stack's watchdog: restarts the broker and any daemon of a root that dies or hangs, with
 * backoff, and says why. `up` writes the list of what it started (`<run>/watch.json`: each
 * component's command, argv and environment, the same specs it ran); the watchdog checks each
 * component's liveness lock (see `startDaemon`) every 250 ms and starts a dead one again from
 * its spec. A process that lives but does not run is killed first, then restarted the same way:
 * a daemon whose heartbeat (lib/heartbeat.ts) is older than {@linkcode HUNG_AFTER_MS}, and a
 * broker that accepts connections but sends no INFO {@linkcode BROKER_SILENT_PROBES} times in a
 * row. It reads nothing else of the root: no store, no signer.
 *
 * A detached stack runs it as its own process (`cotal-watchdog`, started by `up --detach` and
 * stopped first by `down`); a foreground `up` runs the same loop in its own process. Under
 * systemd the units' `Restart=` does this job instead.
 *
 * @module
 */
import { abortableSleep } from "../abortable_sleep.ts";
import { HEARTBEAT_ENV, HUNG_AFTER_MS } from "../heartbeat.ts";
import { brokerGreets } from "./ready.ts";
import { outOfDescriptors, StorageFaultReader } from "./storage_fault.ts";
import { writeFileAtomic } from "../atomic_file.ts";
import { capLogFile } from "./log_cap.ts";
import { CotalError } from "../errors.ts";
import { isLockHeld, recordFromLock, startDaemon } from "./daemon.ts";
import { readPidFile } from "./pidfile.ts";
import { meshPaths } from "./layout.ts";
import {
  componentFiles,
  componentLabel,
  type ComponentSpec,
  type MeshRecord,
  readMeshRecord,
} from "./stack.ts";
import { readSpaceIndex } from "./trust_state.ts";
import { resumeAbandonedSpaceCommand, resumeAbandonedUp, type ResumeState } from "./up_resume.ts";
import { signalSame } from "./signal_same.ts";

/** What the watchdog restarts: a component's spec without its readiness check. */
export type WatchedComponent = Pick<ComponentSpec, "id" | "name" | "command" | "args" | "env">;

/** How often every component's lock is checked. */
export const WATCH_INTERVAL_MS = 250;
/** The first restart of a component waits this long; each further one doubles it. */
export const RESTART_BASE_MS = 250;
/** The longest wait before a restart. */
export const RESTART_CAP_MS = 30_000;
/** A component alive this long has its backoff reset. */
export const RESTART_RESET_MS = 30_000;
/** How often the broker's client port is asked for its INFO line. */
export const BROKER_PROBE_INTERVAL_MS = 5_000;
/** How long one probe waits for the INFO line. */
export const BROKER_PROBE_TIMEOUT_MS = 5_000;
/** Probes in a row that find the broker accepting but silent before it is killed as hung. */
export const BROKER_SILENT_PROBES = 3;
/** A gap between two passes longer than this is the watchdog's own pause, not its components'. */
export const PAUSED_AFTER_MS = 5_000;

function watchListPath(root: string): string {
  return `${meshPaths(root).runDir}/watch.json`;
}

/** Records what the watchdog restarts (atomically, 0600). */
export async function writeWatchList(root: string, components: WatchedComponent[]): Promise<void> {
  const path = watchListPath(root);
  const list = components.map(({ id, name, command, args, env }) => ({
    id,
    name,
    command,
    args,
    ...(env ? { env } : {}),
  }));
  await writeFileAtomic(path, JSON.stringify(list, null, 2) + "\n", {
    what: "The watchdog's list",
  });
}

/**
 * Changes the watch list a running watchdog reads on its next pass: `remove` drops every
 * component whose id matches, `add` puts specs in (replacing any of the same id). `space add`
 * and `space restore` add the new space's daemons, `space rm` drops them before stopping them,
 * so the watchdog heals the spaces that exist and never restarts a removed one. Without a
 * list (a stack no `up` started) nothing is written.
 */
export async function updateWatchList(
  root: string,
  change: { add?: WatchedComponent[]; remove?: (id: string) => boolean },
): Promise<void> {
  let list: WatchedComponent[];
  try {
    list = await readWatchList(root);
  } catch {
    return;
  }
  if (list.length === 0) return;
  const added = new Set((change.add ?? []).map((c) => c.id));
  const kept = list.filter((c) => !added.has(c.id) && !(change.remove?.(c.id) ?? false));
  await writeWatchList(root, [...kept, ...(change.add ?? [])]);
}

/** Reads the watch list; empty when `up` has written none. */
export async function readWatchList(root: string): Promise<WatchedComponent[]> {
  let text: string;
  try {
    text = await Deno.readTextFile(watchListPath(root));
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return [];
    throw err;
  }
  const list = JSON.parse(text);
  const ok = Array.isArray(list) &&
    list.every((c) =>
      typeof c?.id === "string" && /^[A-Za-z0-9._-]+$/.test(c.id) && typeof c.name === "string" &&
      typeof c.command === "string" && Array.isArray(c.args) &&
      c.args.every((a: unknown) => typeof a === "string")
    );
  if (!ok) {
    throw new CotalError(
      "watch_list_corrupt",
      `${watchListPath(root)} is not a Cotal watch list; run 'cotal up' again to rewrite it.`,
    );
  }
  return list;
}

/** One component's restart state. */
interface Track {
  failures: number;
  /** When it was last seen dead (the backoff counts from here), or 0 while alive. */
  deadSince: number;
  /** When it was last (re)started or first seen alive. */
  upSince: number;
  restarts: number;
  /** The broker's probes in a row that found it silent. */
  silent: number;
  /** When it was first on the list (-Infinity: already at this watchdog's first pass). */
  firstSeen: number;
  /** Whether this watchdog has seen it running. */
  seenUp?: boolean;
}

/**
 * A detached stack's two watchdogs. `watchdog` heals the stack and its peer; `watchdog-peer`
 * heals `watchdog` alone (two healing one stack would race for each restart). A kill -9 of
 * either is healed by the other: fault pass 7 killed the only one, and nothing came back.
 */
export const WATCHDOGS = ["watchdog", "watchdog-peer"] as const;
/** One of {@linkcode WATCHDOGS}. */
export type WatchdogId = typeof WATCHDOGS[number];

/** The watchdog loop over one root. */
export class Watchdog {
  readonly root: string;
  readonly #detach: boolean;
  readonly #log: (line: string) => void;
  readonly #tracks = new Map<string, Track>();
  #brokerLog?: StorageFaultReader;
  /** The broker probe in flight, and when the last one started. */
  #probe?: Promise<void>;
  #probedAt = 0;

  /** This watchdog's own id on the watch list (it does not watch itself). */
  readonly #self?: string;

  constructor(
    opts: { root: string; detach: boolean; log: (line: string) => void; self?: string },
  ) {
    this.root = opts.root;
    this.#detach = opts.detach;
    this.#log = opts.log;
    this.#self = opts.self;
  }

  /** Restarts so far, per component id. */
  restarts(): Record<string, number> {
    return Object.fromEntries([...this.#tracks].map(([id, t]) => [id, t.restarts]));
  }

  /** Checks every component until `signal` ends it. */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        await this.check();
      } catch (err) {
        this.#log(`watchdog: ${(err as Error).message}`);
      }
      await abortableSleep(WATCH_INTERVAL_MS, signal);
    }
  }

  /**
   * True when the running broker logged a storage fault and was told to stop: the next passes
   * find it dead and restart it with the usual backoff (see lib/mesh/storage_fault.ts).
   */
  async #storageFault(
    files: { logFile: string; pidFile: string; lockFile: string },
    upMs: number,
  ): Promise<boolean> {
    this.#brokerLog ??= new StorageFaultReader(files.logFile);
    const fault = await this.#brokerLog.poll();
    if (!fault || upMs < FAULT_RESTART_MIN_UP_MS) return false;
    const rec = await readPidFile(files.pidFile).catch(() => undefined) ??
      await recordFromLock(files.lockFile, "nats-server");
    if (!rec) return false;
    this.#log(
      `watchdog: the broker cannot write (${fault.slice(0, 300)}); restarting it to resume`,
    );
    await signalSame(rec, "TERM");
    this.#brokerLog.clear();
    return true;
  }

  /**
   * True when a live component does not run and was killed for it: the next passes find it
   * dead and restart it with the usual backoff. A daemon is hung when its heartbeat (or, before
   * its first, its start) is older than {@linkcode HUNG_AFTER_MS}; the broker when its port
   * accepts and stays silent {@linkcode BROKER_SILENT_PROBES} probes in a row.
   */
  async #hung(
    c: WatchedComponent,
    t: Track,
    files: { lockFile: string; beatFile: string; logFile: string },
    said: string,
    now: number,
  ): Promise<boolean> {
    let why: string | undefined;
    if (c.id === "nats-server") {
      this.#probeBroker(t, now);
      if (t.silent >= BROKER_SILENT_PROBES) {
        if (await outOfDescriptors(files.logFile, now)) {
          // Out of descriptors, not hung: a restart would give up the port (red team 31).
          t.silent = 0;
          this.#log(
            `watchdog: ${said} answers no new connection and is out of descriptors (too many ` +
              `open files): connections hold them; not restarting it, which would give up its port`,
          );
          return false;
        }
        why = `accepted ${t.silent} connections in a row and sent no INFO within ${
          BROKER_PROBE_TIMEOUT_MS / 1000
        } s (frozen or wedged)`;
      }
    } else if (c.env?.[HEARTBEAT_ENV]) {
      const beat = (await Deno.stat(files.beatFile).catch(() => undefined))?.mtime?.getTime() ?? 0;
      const quiet = now - Math.max(beat, t.upSince);
      if (quiet > HUNG_AFTER_MS) {
        why = `has not beaten for ${Math.round(quiet / 1000)} s (frozen or wedged)`;
      }
    }
    if (!why) return false;
    t.silent = 0;
    const rec = await recordFromLock(files.lockFile, c.name);
    if (!rec) return false;
    this.#log(`watchdog: ${said} ${why}; killing it (pid ${rec.pid}) to restart it`);
    await signalSame(rec, "KILL");
    // Counted from its kill: the restart that follows waits out the usual backoff.
    t.upSince = now;
    return true;
  }

  /** Starts a probe of the broker's port when none is in flight and the last is old enough. */
  #probeBroker(t: Track, now: number): void {
    if (this.#probe || now - this.#probedAt < BROKER_PROBE_INTERVAL_MS) return;
    this.#probedAt = now;
    this.#probe = (async () => {
      const rec: MeshRecord | undefined = await readMeshRecord(this.root);
      if (!rec) return;
      const answer = await brokerGreets(rec.host, rec.port, BROKER_PROBE_TIMEOUT_MS);
      // Refused is a broker still starting (or gone, which its lock shows): not hung.
      t.silent = answer === "silent" ? t.silent + 1 : 0;
    })().catch(() => {}).finally(() => this.#probe = undefined);
  }

  /**
   * When the last pass ended: a pass that finds it long ago means this watchdog was paused
   * (the machine suspended, the whole stack frozen and thawed), and what it sees has had no
   * time to run again since. Fault pass 8 thawed a frozen stack and the watchdog killed the
   * healthy daemons for their old beats at once.
   */
  #lastPass = 0;

  /** One pass: every dead component whose backoff has passed is started again. */
  async check(now = Date.now()): Promise<void> {
    if (this.#lastPass && now - this.#lastPass > PAUSED_AFTER_MS) {
      this.#log(
        `watchdog: it did not run for ${
          Math.round((now - this.#lastPass) / 1000)
        } s (paused); every component gets ${
          HUNG_AFTER_MS / 1000
        } s to beat again before it is judged`,
      );
      for (const t of this.#tracks.values()) {
        t.upSince = Math.max(t.upSince, now);
        t.silent = 0;
      }
    }
    // The pass's end in the caller's clock (a test drives it with its own).
    const began = Date.now();
    try {
      await this.#pass(now);
    } finally {
      this.#lastPass = now + (Date.now() - began);
    }
  }

  /** The first watchdog's resumes of an up that was killed part-way. */
  readonly #resume: ResumeState = { lastAt: 0, gaveUp: false };
  /** Its resumes of a `space add` or `space rm` killed part-way. */
  readonly #resumeSpace: ResumeState = { lastAt: 0, gaveUp: false };

  /** Passes made: what is on the list at the first is healed at once (a watchdog restarted). */
  #passes = 0;

  async #pass(now: number): Promise<void> {
    try {
      await this.#passOnce(now);
    } finally {
      this.#passes++;
    }
  }

  async #passOnce(now: number): Promise<void> {
    if (this.#detach && this.#self === "watchdog") {
      await resumeAbandonedUp(this.root, this.#resume, this.#log, now);
      await resumeAbandonedSpaceCommand(this.root, this.#resumeSpace, this.#log, now);
    }
    const { spaces } = await readSpaceIndex(this.root).catch(() => ({ spaces: [] as string[] }));
    for (const c of await readWatchList(this.root)) {
      if (c.id === this.#self) continue;
      if (this.#self === "watchdog-peer" && c.id !== "watchdog") continue;
      // Said as status and `cotal logs` say it (`delivery.default`), not by the id's hex.
      const said = componentLabel(c.id, spaces);
      const files = componentFiles(this.root, c.id);
      const t = this.#tracks.get(c.id) ??
        {
          failures: 0,
          deadSince: 0,
          upSince: now,
          restarts: 0,
          silent: 0,
          firstSeen: this.#passes === 0 ? -Infinity : now,
        };
      this.#tracks.set(c.id, t);
      // The broker rotates its own log; every other daemon's is capped here.
      if (c.id !== "nats-server") {
        await capLogFile(files.logFile).then((rotated) => {
          if (rotated) this.#log(`watchdog: ${said}'s log passed its cap; kept it as .log.1`);
        }).catch((err) => this.#log(`watchdog: could not cap ${said}'s log (${err.message})`));
      }
      if (await isLockHeld(files.lockFile)) {
        t.seenUp = true;
        if (c.id === "nats-server" && await this.#storageFault(files, now - t.upSince)) continue;
        if (await this.#hung(c, t, files, said, now)) continue;
        if (t.deadSince) t.deadSince = 0;
        if (t.failures && now - t.upSince >= RESTART_RESET_MS) t.failures = 0;
        continue;
      }
      // An entry added since, never seen running, may be one its lister is starting now (`space add` lists a
      // space's daemons before it starts them): a start beside its own raced it, and the loser's
      // wrapper, waiting on the lock, came up after the winner was stopped.
      if (!t.seenUp && now - t.firstSeen < LISTED_GRACE_MS) continue;
      const wait = Math.min(RESTART_BASE_MS * 2 ** t.failures, RESTART_CAP_MS);
      if (!t.deadSince) t.deadSince = now;
      if (now - t.deadSince < wait) continue;
      // Said when it is done, not when first seen: a component that comes up meanwhile (the
      // peer `up` starts just after this watchdog) was never restarted (newcomer pass 10).
      this.#log(
        `watchdog: ${said} is not running; restarting it after ${wait} ms (restart ${
          t.restarts + 1
        })`,
      );
      t.failures++;
      t.restarts++;
      t.deadSince = 0;
      t.upSince = now;
      try {
        const { record } = await startDaemon({
          name: c.name,
          command: c.command,
          args: c.args,
          env: c.env,
          ...files,
          detach: this.#detach,
        });
        this.#log(`watchdog: restarted ${said} (pid ${record.pid})`);
      } catch (err) {
        this.#log(`watchdog: could not restart ${said} (${(err as Error).message})`);
      }
    }
  }
}

/**
 * How long the watchdog leaves a listed component it has never seen running to whoever listed
 * it, before starting it itself (a killed `space add` is finished after this).
 */
export const LISTED_GRACE_MS = 15_000;

/** A broker alive for at least this long may be restarted for a storage fault. */
export const FAULT_RESTART_MIN_UP_MS = 1_000;

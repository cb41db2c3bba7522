/**
 * The stack's watchdog: restarts the broker and any daemon of a root that dies, with backoff,
 * and says why. `up` writes the list of what it started (`<run>/watch.json`: each component's
 * command, argv and environment, the same specs it ran); the watchdog checks each component's
 * liveness lock (see `startDaemon`) every 250 ms and starts a dead one again from its spec.
 * It reads nothing else of the root: no store, no signer.
 *
 * A detached stack runs it as its own process (`cotal-watchdog`, started by `up --detach` and
 * stopped first by `down`); a foreground `up` runs the same loop in its own process. Under
 * systemd the units' `Restart=` does this job instead.
 *
 * @module
 */
import { capLogFile } from "./log_cap.ts";
import { CotalError } from "../errors.ts";
import { isLockHeld, startDaemon } from "./daemon.ts";
import { meshPaths } from "./layout.ts";
import { componentFiles, type ComponentSpec } from "./stack.ts";

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

function watchListPath(root: string): string {
  return `${meshPaths(root).runDir}/watch.json`;
}

/** Records what the watchdog restarts (atomically, 0600). */
export async function writeWatchList(root: string, components: WatchedComponent[]): Promise<void> {
  const path = watchListPath(root);
  const tmp = `${path}.tmp-${crypto.randomUUID()}`;
  const list = components.map(({ id, name, command, args, env }) => ({
    id,
    name,
    command,
    args,
    ...(env ? { env } : {}),
  }));
  await Deno.writeTextFile(tmp, JSON.stringify(list, null, 2) + "\n", { mode: 0o600 });
  await Deno.rename(tmp, path);
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
}

/** The watchdog loop over one root. */
export class Watchdog {
  readonly root: string;
  readonly #detach: boolean;
  readonly #log: (line: string) => void;
  readonly #tracks = new Map<string, Track>();

  constructor(opts: { root: string; detach: boolean; log: (line: string) => void }) {
    this.root = opts.root;
    this.#detach = opts.detach;
    this.#log = opts.log;
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
      await sleep(WATCH_INTERVAL_MS, signal);
    }
  }

  /** One pass: every dead component whose backoff has passed is started again. */
  async check(now = Date.now()): Promise<void> {
    for (const c of await readWatchList(this.root)) {
      const files = componentFiles(this.root, c.id);
      const t = this.#tracks.get(c.id) ??
        { failures: 0, deadSince: 0, upSince: now, restarts: 0 };
      this.#tracks.set(c.id, t);
      // The broker rotates its own log; every other daemon's is capped here.
      if (c.id !== "nats-server") {
        await capLogFile(files.logFile).then((rotated) => {
          if (rotated) this.#log(`watchdog: ${c.id}'s log passed its cap; kept it as .log.1`);
        }).catch((err) => this.#log(`watchdog: could not cap ${c.id}'s log (${err.message})`));
      }
      if (await isLockHeld(files.lockFile)) {
        if (t.deadSince) t.deadSince = 0;
        if (t.failures && now - t.upSince >= RESTART_RESET_MS) t.failures = 0;
        continue;
      }
      const wait = Math.min(RESTART_BASE_MS * 2 ** t.failures, RESTART_CAP_MS);
      if (!t.deadSince) {
        t.deadSince = now;
        this.#log(
          `watchdog: ${c.id} is not running; restarting it in ${wait} ms (restart ${
            t.restarts + 1
          })`,
        );
      }
      if (now - t.deadSince < wait) continue;
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
        this.#log(`watchdog: restarted ${c.id} (pid ${record.pid})`);
      } catch (err) {
        this.#log(`watchdog: could not restart ${c.id} (${(err as Error).message})`);
      }
    }
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
  });
}

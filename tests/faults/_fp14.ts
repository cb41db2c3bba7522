/**
 * Fault pass 14 helpers: a fresh root under /tmp/fp14 (or the OS temp dir when that is absent),
 * a broker port in 46000-46900, `up --detach` with a deadline, the watch list and space index as
 * the stack wrote them, and a teardown that continues anything frozen, runs `down`, kills what
 * is left and removes the root. Builds on the fault pass 12 and 13 helpers. Not a test file.
 */
import { waitFor } from "../_harness/broker.ts";
import { processesMentioning } from "../manager/_manager_mesh.ts";
import { cotalRun, kill9 } from "./_fp12.ts";

export { cotalRun, cotalSpawn, kill9, pidsOf } from "./_fp12.ts";
export { daemonPids, healLogs, healsWithin, newDaemon } from "./_fp13.ts";
export { waitFor } from "../_harness/broker.ts";
export { processesMentioning } from "../manager/_manager_mesh.ts";

/** A free loopback port in 46000-46900. */
export function fp14Port(): number {
  for (let i = 0; i < 200; i++) {
    const port = 46000 + Math.floor(Math.random() * 900);
    try {
      Deno.listen({ hostname: "127.0.0.1", port }).close();
      return port;
    } catch {
      // Taken.
    }
  }
  throw new Error("no free port in 46000-46900");
}

function signalAll(pids: number[], sig: Deno.Signal): void {
  for (const p of pids) {
    try {
      Deno.kill(p, sig);
    } catch {
      // Gone.
    }
  }
}

export interface Fp14Root {
  base: string;
  root: string;
  port: number;
  /** Continue what is frozen, `down`, kill what is left, remove the root. */
  cleanup(): Promise<void>;
}

/** A fresh root (`<base>/.cotal`) and its teardown. */
export async function fp14Root(prefix: string): Promise<Fp14Root> {
  const parent = await Deno.stat("/tmp/fp14").then(() => "/tmp/fp14", () => undefined);
  const base = await Deno.makeTempDir({ prefix: `fp14-${prefix}-`, dir: parent });
  const root = `${base}/.cotal`;
  return {
    base,
    root,
    port: fp14Port(),
    async cleanup() {
      signalAll(processesMentioning(base), "SIGCONT");
      await cotalRun(root, ["down"], 90_000).catch(() => {});
      kill9(processesMentioning(root));
      kill9(processesMentioning(base));
      await new Promise((r) => setTimeout(r, 200));
      await Deno.remove(base, { recursive: true }).catch(() => {});
    },
  };
}

/** `cotal up --detach` on the root's port; throws on failure. */
export async function upDetached(r: Fp14Root, timeoutMs = 120_000): Promise<void> {
  const up = await cotalRun(r.root, ["up", "--detach", "--port", String(r.port)], timeoutMs);
  if (up.code !== 0) throw new Error(`up failed (${up.code}): ${up.text}`);
}

/** The watch list's ids (empty when there is none or it cannot be read). */
export function watchedIds(root: string): string[] {
  try {
    const list = JSON.parse(Deno.readTextFileSync(`${root}/run/watch.json`));
    return (list as { id: string }[]).map((c) => c.id);
  } catch {
    return [];
  }
}

/** `cotal space list --json`'s rows, or undefined when it failed. */
export async function spaceRows(
  root: string,
): Promise<{ space: string; daemons: { id: string; state: string }[] }[] | undefined> {
  const r = await cotalRun(root, ["space", "list", "--json"], 30_000);
  if (r.code !== 0) return undefined;
  try {
    const j = JSON.parse(r.text.slice(r.text.indexOf("{")));
    return j.spaces ?? j;
  } catch {
    try {
      return JSON.parse(r.text.slice(r.text.indexOf("[")));
    } catch {
      return undefined;
    }
  }
}

/** Waits (bounded) for `fn`, true when it held in time. */
export function holdsWithin(
  fn: () => boolean | Promise<boolean>,
  timeoutMs: number,
  intervalMs = 500,
): Promise<boolean> {
  return waitFor(fn, { timeoutMs, intervalMs }).then(() => true, () => false);
}

/** SIGSTOP / SIGCONT of pids. */
export function freeze(pids: number[]): void {
  signalAll(pids, "SIGSTOP");
}
export function thaw(pids: number[]): void {
  signalAll(pids, "SIGCONT");
}

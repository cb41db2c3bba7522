/**
 * Fault pass 13 helpers: a fresh root for a detached stack, a port in 44000-44999, the
 * processes of one daemon kind found by root path, and what a failed wait reports. Builds on
 * the fault pass 12 helpers. Not a test file.
 */
import { tempDir, waitFor } from "../_harness/broker.ts";
import { processesMentioning } from "../manager/_manager_mesh.ts";
import { cotalRun, kill9, pidsOf } from "./_fp12.ts";

export { cotalRun, cotalSpawn, kill9, pidsOf } from "./_fp12.ts";

/** A free loopback port in 44000-44999. */
export function fp13Port(): number {
  for (let i = 0; i < 200; i++) {
    const port = 44000 + Math.floor(Math.random() * 1000);
    try {
      Deno.listen({ hostname: "127.0.0.1", port }).close();
      return port;
    } catch {
      // Taken.
    }
  }
  throw new Error("no free port in 44000-44999");
}

/** A fresh root (`<tmp>/.cotal`), and what to run when done: down, then kill what is left. */
export async function freshRoot(prefix: string): Promise<{
  base: string;
  root: string;
  port: number;
  cleanup(): Promise<void>;
}> {
  const base = await tempDir(`cotal-fp13-${prefix}-`);
  const root = `${base}/.cotal`;
  return {
    base,
    root,
    port: fp13Port(),
    async cleanup() {
      await cotalRun(root, ["down"], 120_000).catch(() => {});
      kill9(processesMentioning(root));
      kill9(processesMentioning(base));
    },
  };
}

/** The running processes of one kind (`cmd/delivery.ts`, `nats-server -c`), wrappers left out. */
export function daemonPids(root: string, kind: string): number[] {
  return pidsOf(root, kind.split(" ")[0]).filter((p) => {
    try {
      const cmd = Deno.readTextFileSync(`/proc/${p}/cmdline`).replaceAll("\0", " ");
      return cmd.includes(kind) && !cmd.startsWith("/bin/sh");
    } catch {
      return false;
    }
  });
}

/** Waits until a process of `kind` runs that is not one of `known`; returns its pids. */
export async function newDaemon(
  root: string,
  kind: string,
  known: number[] = [],
  timeoutMs = 60_000,
): Promise<number[]> {
  let got: number[] = [];
  await waitFor(() => {
    got = daemonPids(root, kind).filter((p) => !known.includes(p));
    return got.length > 0;
  }, { timeoutMs, intervalMs: 5, what: `a new ${kind} under ${root}` });
  return got;
}

/** True once `cotal status` exits 0 within `timeoutMs`; the last status output either way. */
export async function healsWithin(
  root: string,
  timeoutMs: number,
): Promise<{ healed: boolean; status: string; ms: number }> {
  const t0 = Date.now();
  let status = "";
  const healed = await waitFor(async () => {
    const s = await cotalRun(root, ["status"], 30_000);
    status = s.text;
    return s.code === 0;
  }, { timeoutMs, intervalMs: 2_000 }).then(() => true, () => false);
  return { healed, status, ms: Date.now() - t0 };
}

/** The tails of the logs that say why a stack did not heal. */
export async function healLogs(root: string): Promise<string> {
  const tail = async (f: string, n: number) =>
    (await Deno.readTextFile(`${root}/logs/${f}`).catch(() => "")).trim().split("\n").slice(-n)
      .join("\n");
  return `watchdog.log:\n${await tail("watchdog.log", 8)}\nup-resumed.log:\n${await tail(
    "up-resumed.log",
    8,
  )}`;
}

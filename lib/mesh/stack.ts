/**
 * The components of a root's stack (the broker and each daemon): their specs, pid files, locks
 * and logs, starting one that is not running, stopping one by its recorded identity, listing
 * them, and the root's mesh record.
 *
 * @module
 */
import { cotalCommand } from "../cli/mod.ts";
import { ensureServer, type FoundServer, serverLine } from "../broker/mod.ts";
import { writeFileAtomic } from "../atomic_file.ts";
import { CotalError } from "../errors.ts";
import { ensureBwrap } from "../manager/mod.ts";
import { spaceKeyHex } from "../workspace/mod.ts";
import { isLockHeld, recordFromLock, startDaemon } from "./daemon.ts";
import { ensureMeshDirs, meshPaths } from "./layout.ts";
import {
  isSameProcess,
  type PidRecord,
  readPidFile,
  stopRecorded,
  writePidFile,
} from "./pidfile.ts";
import { fileSize, waitBrokerReady, waitLogLine } from "./ready.ts";

/** Where a running mesh listens; recorded in `<root>/run/mesh.json`. */
export interface MeshRecord {
  root: string;
  host: string;
  port: number;
  url: string;
  detached: boolean;
  startedAt: string;
  /** The agents' isolation the supervisors were started with. */
  isolation?: "bwrap" | "deno-only";
  /** The spaces' agent limits (`name=value,...`), over the frozen defaults. */
  agentLimits?: string;
  /** The uid range a root supervisor gives agents (`first-last`). */
  agentIds?: string;
  /** The broker's HTTP monitoring address (`host:port`), when `up --monitor` asked for one. */
  monitor?: string;
  /** The foreground `cotal up` that runs (and heals) the stack, when it is not detached. */
  owner?: { pid: number; startTime: number };
}

/** One daemon of the stack, as `up` starts it and `down`/`status` find it. */
export interface ComponentSpec {
  /** Unique within the root: `nats-server`, `delivery.<hex>`, `supervise.<hex>`. */
  id: string;
  /** The executable's name (`cotal-delivery`). */
  name: string;
  space?: string;
  command: string;
  args: string[];
  env?: Record<string, string>;
  /** Bounded readiness check once started. */
  ready?: (rec: PidRecord) => Promise<void>;
}

/** A component's state as `status` reports it. */
export interface ComponentStatus {
  id: string;
  name: string;
  space?: string;
  state: "running" | "stopped" | "stale-pid";
  pid?: number;
  since?: string;
}

/** Paths of one component's pid file, liveness lock, heartbeat and log. */
export function componentFiles(
  root: string,
  id: string,
): { pidFile: string; lockFile: string; logFile: string; beatFile: string } {
  const p = meshPaths(root);
  return {
    pidFile: `${p.runDir}/${id}.pid`,
    lockFile: `${p.runDir}/${id}.lock`,
    logFile: `${p.logDir}/${id}.log`,
    beatFile: `${p.runDir}/${id}.beat`,
  };
}

/** The broker component of a root. */
export function brokerComponent(root: string, server: FoundServer, rec: MeshRecord): ComponentSpec {
  return {
    id: "nats-server",
    name: "nats-server",
    command: server.path,
    args: ["-c", meshPaths(root).brokerConfig],
    ready: (pid) => waitBrokerReady(rec.host, rec.port, 10_000, () => isSameProcess(pid)),
  };
}

/** The store-dir name of a space's per-space daemons: `<kind>.<hex>`. */
export function spaceComponentId(kind: string, space: string): string {
  return `${kind}.${spaceKeyHex(space)}`;
}

/**
 * A component as people read it: `delivery.default` for `delivery.<hex of default>` (what
 * `cotal logs` takes); ids of no listed space, and the broker's, as they are.
 */
export function componentLabel(id: string, spaces: readonly string[]): string {
  const dot = id.indexOf(".");
  if (dot < 0) return id;
  const space = spaces.find((s) => spaceKeyHex(s) === id.slice(dot + 1));
  return space === undefined ? id : `${id.slice(0, dot)}.${space}`;
}

/** Starts made of a component that dies while it starts, before the start is a failure. */
export const START_ATTEMPTS = 3;

/**
 * Starts a component unless the one its pid file names is still running (same pid, same start
 * time): that makes a second `up` heal dead parts and change nothing else. One that dies before
 * it is ready is started again, {@linkcode START_ATTEMPTS} times in all, as the watchdog would
 * on a running stack (fault pass 13 killed delivery the moment `up` started it, and the up
 * undid the whole stack); one that runs but never reports ready is a failure at once.
 */
export async function ensureComponent(
  root: string,
  spec: ComponentSpec,
  detach: boolean,
  /** Called once the process runs, before its readiness check (`up` lists it for the watchdog). */
  onStarted?: () => Promise<void>,
): Promise<{ record: PidRecord; started: boolean; child?: Deno.ChildProcess }> {
  const { pidFile, lockFile, logFile } = componentFiles(root, spec.id);
  for (let attempt = 1;; attempt++) {
    const existing = await readPidFile(pidFile).catch(() => undefined);
    if (existing && isSameProcess(existing)) return { record: existing, started: false };
    // Running with no pid file of its own: its starter was killed between the start and the
    // write (fault pass 12's up, killed the moment the broker ran), or the watchdog started it
    // again while this start failed. Its lock names it.
    const held = await recordFromLock(lockFile, spec.name);
    if (held && isSameProcess(held)) {
      const record = await writePidFile(pidFile, held.pid, spec.name, held.startTime);
      return { record, started: false };
    }
    let started: Awaited<ReturnType<typeof startDaemon>>;
    try {
      started = await startDaemon({
        name: spec.name,
        command: spec.command,
        args: spec.args,
        env: spec.env,
        logFile,
        pidFile,
        lockFile,
        detach,
      });
    } catch (err) {
      // Another start won the lock meanwhile (the watchdog, which lists a space's daemons
      // before `space add` starts them): the next round adopts it.
      if (attempt < START_ATTEMPTS && await isLockHeld(lockFile)) {
        await new Promise((r) => setTimeout(r, 250)); // its line into the lock
        continue;
      }
      throw err;
    }
    const { record, child } = started;
    try {
      await onStarted?.();
      await spec.ready?.(record);
      return { record, started: true, child };
    } catch (err) {
      const died = !isSameProcess(record);
      await stopRecorded(record, 2_000);
      const now = await readPidFile(pidFile).catch(() => undefined);
      if (now?.pid === record.pid) await Deno.remove(pidFile).catch(() => {});
      if (died && attempt < START_ATTEMPTS) continue;
      const tail = (await Deno.readTextFile(logFile).catch(() => "")).trim().split("\n").slice(-5);
      throw new CotalError(
        "component_not_ready",
        `${spec.name} did not become ready (${(err as Error).message}${
          died ? `, ${attempt} starts` : ""
        }); last log lines: ${tail.join(" | ")}`,
      );
    }
  }
}

/** Stops one component after checking its identity; removes its pid file. */
export async function stopComponent(
  root: string,
  id: string,
): Promise<"stopped" | "killed" | "not-running"> {
  const { pidFile, lockFile } = componentFiles(root, id);
  const rec = await readPidFile(pidFile).catch(() => undefined) ??
    await recordFromLock(lockFile, id);
  const result = rec ? await stopRecorded(rec) : "not-running";
  await Deno.remove(pidFile).catch(() => {});
  return result;
}

/** Every component with a pid file under the root, and whether it still runs. */
export async function listComponents(root: string): Promise<ComponentStatus[]> {
  const p = meshPaths(root);
  const out: ComponentStatus[] = [];
  let files: string[] = [];
  try {
    files = [...Deno.readDirSync(p.runDir)].map((e) => e.name);
  } catch {
    return out;
  }
  // Every component with a pid file, and any whose pid file is gone but whose lock is held.
  const ids = new Set(
    files.filter((n) => n.endsWith(".pid") || n.endsWith(".lock")).map((n) =>
      n.replace(/\.(pid|lock)$/, "")
    ),
  );
  for (const id of [...ids].sort()) {
    const hasPid = files.includes(`${id}.pid`);
    const rec = (hasPid
      ? await readPidFile(`${p.runDir}/${id}.pid`).catch(() => undefined)
      : undefined) ?? await recordFromLock(componentFiles(root, id).lockFile, id);
    if (!hasPid && !rec) continue;
    out.push({
      id,
      name: rec?.name ?? id,
      state: !rec ? "stale-pid" : isSameProcess(rec) ? "running" : "stopped",
      pid: rec?.pid,
      since: rec?.startedAt,
    });
  }
  return out;
}

/** Reads the root's mesh record; undefined when it has never been brought up. */
export async function readMeshRecord(root: string): Promise<MeshRecord | undefined> {
  try {
    return JSON.parse(await Deno.readTextFile(`${meshPaths(root).runDir}/mesh.json`));
  } catch {
    return undefined;
  }
}

/** Writes the root's mesh record atomically. */
export async function writeMeshRecord(rec: MeshRecord): Promise<void> {
  const p = meshPaths(rec.root);
  await ensureMeshDirs(p);
  await writeFileAtomic(`${p.runDir}/mesh.json`, JSON.stringify(rec, null, 2) + "\n", {
    what: "The mesh record",
  });
}

/** Asks the running broker to re-read its config and waits until it says it did. */
export async function reloadBroker(root: string): Promise<void> {
  const { pidFile, logFile } = componentFiles(root, "nats-server");
  const rec = await readPidFile(pidFile);
  if (!rec || !isSameProcess(rec)) {
    throw await brokerNotRunning(root);
  }
  const from = await fileSize(logFile);
  Deno.kill(rec.pid, "SIGHUP");
  const line = await waitLogLine(
    logFile,
    from,
    serverLine(/Reloaded server configuration|Failed to reload/),
  );
  if (/Failed to reload/.test(line)) {
    // Some settings are read only at start (server_name, listeners): say how to apply them.
    const restart = /not supported/i.test(line)
      ? `; a setting nats-server reads only at start changed (a listener or name in ${root}/broker/operator.conf): it takes effect after '${cotalCommand()} down --root ${root} --keep-agents && ${cotalCommand()} up --root ${root}' (add --detach if the stack ran detached)`
      : "";
    throw new CotalError(
      "broker_reload_failed",
      `nats-server refused the new configuration: ${
        line.replace(/^.*Failed/, "Failed").replace(/\.?\s*$/, "")
      }${restart}.`,
    );
  }
}

/** The nats-server binary a root uses (installed into the project cache when absent). */
export function brokerBinary(say: (l: string) => void): Promise<FoundServer> {
  return ensureServer({ onProgress: (l) => say(`nats-server: ${l}`) });
}

/**
 * Makes sure the agents' sandbox (bwrap) is there before a supervisor starts: installed into the
 * project cache like nats-server when the machine has none. Without it untrusted agents are
 * refused, so a failure is said, not thrown: the rest of the stack still comes up.
 */
export async function sandboxBinary(say: (l: string) => void): Promise<string | undefined> {
  try {
    return (await ensureBwrap({ onProgress: (l) => say(`bwrap: ${l}`) })).path;
  } catch (err) {
    say(
      `bwrap: ${
        err instanceof Error ? err.message : String(err)
      } Until it is there, untrusted agents are refused (cotal status says so).`,
    );
    return undefined;
  }
}

/**
 * The refusal of a command that needs the broker of `root` when it is not running. While a
 * watchdog of the root runs, the broker is being restarted (a kill, a storage fault): the
 * sentence says to wait, not to start it (fault pass 9 was told to run `up` mid-restart).
 */
export async function brokerNotRunning(root: string, alternative = ""): Promise<CotalError> {
  const watched = (await listComponents(root)).some((c) =>
    c.id.startsWith("watchdog") && c.state === "running"
  );
  return new CotalError(
    "broker_not_running",
    watched
      ? `The broker of ${root} is not running right now, and its watchdog is restarting it; try again in a few seconds ('${cotalCommand()} status --root ${root}' shows it).`
      : `The mesh under ${root} is not running; start it with '${cotalCommand()} up --root ${root}'${alternative}.`,
  );
}

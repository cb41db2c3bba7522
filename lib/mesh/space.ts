/**
 * A root's spaces at run time: add one to a running broker without a restart (all or
 * nothing), list them with their daemons, remove one with its streams, account and secrets.
 *
 * @module
 */
import { noteSpaceCommand } from "./up_resume.ts";
import { CotalError } from "../errors.ts";
import { spaceDaemons } from "./space_daemons.ts";
import { readWatchList, updateWatchList, WATCHDOGS } from "./watchdog.ts";
import { mintCreds, newIdentity, type SpaceAccountAuth, spaceNames } from "../trust/mod.ts";
import { bucketNames, connectBroker, streamNames } from "../wire/mod.ts";
import {
  type SecretStore,
  spaceAccountKey,
  spaceKeyHex,
  workspaceSecretStore,
} from "../workspace/mod.ts";
import { meshPaths } from "./layout.ts";
import { isSameProcess, readPidFile } from "./pidfile.ts";
import {
  brokerNotRunning,
  componentFiles,
  ensureComponent,
  listComponents,
  readMeshRecord,
  reloadBroker,
  stopComponent,
} from "./stack.ts";
import type { ComponentStatus } from "./stack.ts";
import { ensureDaemonCreds } from "./daemons.ts";
import { registerMesh, unregisterMesh } from "../workspace/mod.ts";
import { loadSpaceAccount, readSpaceIndex, writeSpaceIndex } from "./trust_state.ts";
import { addSpaceRecord, provisionSpace, renderBrokerConfig } from "./space_setup.ts";

/** One space of a root and the state of its daemons. */
export interface SpaceRow {
  space: string;
  key: string;
  account: string;
  daemons: { id: string; state: string }[];
}

/** The root's running broker, or undefined when it is stopped. */
export async function runningBroker(
  root: string,
): Promise<{ url: string; host: string; port: number } | undefined> {
  const rec = await readMeshRecord(root);
  const broker = (await listComponents(root)).find((c) => c.id === "nats-server");
  return rec && broker?.state === "running" ? rec : undefined;
}

/** How long `space add` waits for the broker of a stack that runs (a restart in progress). */
export const BROKER_BACK_WAIT_MS = 20_000;

/**
 * The broker, once back, when the root's stack runs without it (a daemon of it is up): a
 * restart in progress. Undefined when the whole stack is down; a broker not back within
 * {@linkcode BROKER_BACK_WAIT_MS} is refused with the watchdog-aware sentence.
 */
async function brokerBackSoon(
  root: string,
): Promise<{ url: string; host: string; port: number } | undefined> {
  const running = (await listComponents(root)).some((c) =>
    c.id !== "nats-server" && c.state === "running"
  );
  if (!running) return undefined;
  const deadline = Date.now() + BROKER_BACK_WAIT_MS;
  while (Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 250));
    const live = await runningBroker(root);
    if (live) return live;
  }
  throw await brokerNotRunning(root);
}

/** Every JetStream stream a space owns: its five streams and the streams behind its buckets. */
export function spaceStreamList(space: string): string[] {
  return [
    ...Object.values(streamNames(space)),
    ...Object.values(bucketNames(space)).map((b) => `KV_${b}`),
  ];
}

/**
 * Adds a space to a root: a new data account signed by the root's operator. When the broker
 * runs it re-reads its config in place (no restart: sibling spaces keep their connections)
 * and the new space's streams are created.
 */
export async function spaceAdd(
  root: string,
  space: string,
  opts: {
    onServing?: () => void;
    signal?: AbortSignal;
    /**
     * How to run this same add again (the CLI's command line): it takes the root's space lock
     * for its life and leaves a note the watchdog runs again if it is killed part-way.
     */
    resume?: { command: string; args: string[] };
  } = {},
): Promise<{ created: boolean; completed?: boolean; served: boolean }> {
  const note = opts.resume ? await noteSpaceCommand(root, opts.resume) : undefined;
  try {
    const result = await addSpace(root, space, opts);
    await note?.done();
    return result;
  } catch (err) {
    await note?.failed();
    throw err;
  }
}

async function addSpace(
  root: string,
  space: string,
  opts: { onServing?: () => void; signal?: AbortSignal },
): Promise<{ created: boolean; completed?: boolean; served: boolean }> {
  const before = await readSpaceIndex(root);
  if (before.spaces.includes(space)) {
    // An add or restore killed part-way (kill -9 of the CLI) leaves the space listed with some
    // of its daemons never started, or started and never put on the watchdog's list: the same
    // add completes it (fault pass 9 found it refused as "already served", and nothing healed it).
    const live = await runningBroker(root);
    if (live && await spaceIncomplete(root, space)) {
      // An add killed before the broker re-read its config left it without the account.
      await renderBrokerConfig(root, live);
      await reloadBroker(root);
      await serveSpace(root, space, live.url, opts.onServing);
      return { created: false, completed: true, served: true };
    }
    throw new CotalError(
      "space_exists",
      `Space '${space}' is already served by ${root}; 'cotal space list' shows them all.`,
    );
  }
  // A stack whose broker is down while its daemons run is being healed (the watchdog restarts
  // the broker): the add waits for it, rather than listing a space nothing serves (fault pass
  // 11 added one that way, and it stayed unserved).
  const live = await runningBroker(root) ?? await brokerBackSoon(root);
  await addSpaceRecord(root, space);
  let served = false;
  // An interrupt (Ctrl-C) is taken between steps and rolls the add back like a failure
  // (newcomer pass 10 left a space listed with no daemon that way).
  const step = () => {
    if (opts.signal?.aborted) {
      throw new CotalError(
        "space_add_interrupted",
        `The add of space '${space}' was interrupted; it was rolled back, nothing of it is left.`,
      );
    }
  };
  try {
    step();
    if (live) {
      await renderBrokerConfig(root, live);
      await reloadBroker(root);
      step();
      await serveSpace(root, space, live.url, opts.onServing, step);
      served = true;
    }
  } catch (err) {
    // All or nothing: a space that could not be served is not left listed (every later
    // `cotal up` would trip on it).
    await removeSpace(root, space).catch(() => {});
    throw err;
  }
  return { created: true, served };
}

/**
 * Serves a space the broker trusts: its streams and buckets, then (once it serves, `onServing`)
 * its daemons, and the machine registry's row. Each step keeps what is already there.
 */
async function serveSpace(
  root: string,
  space: string,
  url: string,
  onServing?: () => void,
  step: () => void = () => {},
): Promise<void> {
  const store = workspaceSecretStore(root);
  const account = (await loadSpaceAccount(store, space))!;
  await provisionSpace(account, url, root);
  step();
  onServing?.();
  await startSpaceDaemons(root, store, account, step);
  step();
  await registerMesh({ space, root, url });
}

/**
 * Starts one space's daemons on a running mesh: its daemon creds first, then delivery, the
 * supervisor, and in user mode its auth service. Detached even under a foreground up: the
 * command that calls this exits, the daemons must not.
 */
export async function startSpaceDaemons(
  root: string,
  store: SecretStore,
  account: SpaceAccountAuth,
  step: () => void = () => {},
): Promise<void> {
  const rec = (await readMeshRecord(root))!;
  await ensureDaemonCreds(root, store, account);
  const specs = await spaceDaemons(root, account.space, rec);
  // On the watchdog's list before any starts: an add or restore killed part-way leaves the
  // watchdog starting the rest (fault pass 13: the space stayed without its supervisor). A
  // failed add takes them off again (removeSpace).
  await updateWatchList(root, { add: specs });
  for (const spec of specs) {
    step();
    await ensureComponent(root, spec, true);
  }
}

/**
 * Whether a listed space of a running mesh lacks one of its daemons, running or on the
 * watchdog's list (a detached mesh has one): what an interrupted `space add` or `restore` leaves.
 */
export async function spaceIncomplete(root: string, space: string): Promise<boolean> {
  const rec = await readMeshRecord(root);
  if (!rec) return false;
  const watched = new Set((await readWatchList(root).catch(() => [])).map((c) => c.id));
  for (const spec of await spaceDaemons(root, space, rec)) {
    const pid = await readPidFile(componentFiles(root, spec.id).pidFile).catch(() => undefined);
    if (!pid || !isSameProcess(pid)) return true;
    if (watched.size > 0 && !watched.has(spec.id)) return true;
  }
  return false;
}

/**
 * The components a running mesh should have and that have no record at all, as stopped ones for
 * `status` to show: a listed space's daemons never started (an interrupted `space add` or
 * `restore`), and a detached stack's watchdogs (an interrupted `down` stops them first, and
 * then nothing heals the stack: newcomer pass 10 read "healthy" there).
 */
export async function neverStartedDaemons(
  root: string,
  spaces: readonly string[],
  have: readonly ComponentStatus[],
): Promise<ComponentStatus[]> {
  const rec = await readMeshRecord(root);
  if (!rec || !have.some((c) => c.id === "nats-server" && c.state === "running")) return [];
  const out: ComponentStatus[] = rec.detached
    ? WATCHDOGS.filter((id) => !have.some((c) => c.id === id)).map((id) => ({
      id,
      name: id,
      state: "stopped",
    }))
    : [];
  for (const space of spaces) {
    for (const spec of await spaceDaemons(root, space, rec)) {
      if (!have.some((c) => c.id === spec.id)) {
        out.push({ id: spec.id, name: spec.name, space, state: "stopped" });
      }
    }
  }
  return out;
}

/** Lists a root's spaces with their accounts and daemons. */
export async function spaceList(root: string): Promise<SpaceRow[]> {
  const { spaces } = await readSpaceIndex(root);
  const store = workspaceSecretStore(root);
  const components = await listComponents(root);
  const rows: SpaceRow[] = [];
  for (const space of spaces) {
    const key = spaceKeyHex(space);
    const acct = await loadSpaceAccount(store, space).catch(() => undefined);
    rows.push({
      space,
      key,
      account: acct?.account.pub ?? "(record unreadable)",
      daemons: components.filter((c) => c.id.endsWith(`.${key}`)).map((c) => ({
        id: c.id,
        state: c.state,
      })),
    });
  }
  return rows;
}

async function deleteStreams(account: SpaceAccountAuth, url: string): Promise<string[]> {
  const creds = await mintCreds(
    { space: account.space, account: account.account },
    await newIdentity(),
    "teardown",
  );
  const nc = await connectBroker({ servers: url, creds }, { name: "cotal space rm" });
  const deleted: string[] = [];
  try {
    const jsm = await nc.jetstreamManager();
    // The signer rail's stream too: it is on disk, and no one else may delete it.
    for (const name of [...spaceStreamList(account.space), spaceNames(account.space).signStream]) {
      try {
        await jsm.streams.delete(name);
        deleted.push(name);
      } catch (err) {
        if (!/stream not found/i.test(String(err))) throw err;
      }
    }
  } finally {
    await nc.close();
  }
  return deleted;
}

/**
 * Removes a space: stops its daemons, deletes its streams and buckets, its account record and
 * its per-space secrets, and reloads the broker without the account. Siblings are untouched.
 */
export async function spaceRm(
  root: string,
  space: string,
  /** As {@linkcode spaceAdd}'s: the space lock, and a note the watchdog runs again. */
  resume?: { command: string; args: string[] },
): Promise<{ stopped: string[]; deletedStreams: string[]; removedOnDisk?: boolean }> {
  const note = resume ? await noteSpaceCommand(root, resume) : undefined;
  try {
    const result = await rmSpace(root, space);
    await note?.done();
    return result;
  } catch (err) {
    await note?.failed();
    throw err;
  }
}

async function rmSpace(
  root: string,
  space: string,
): Promise<{ stopped: string[]; deletedStreams: string[]; removedOnDisk?: boolean }> {
  const index = await readSpaceIndex(root);
  if (!index.spaces.includes(space) && await spaceLeftovers(root, space)) {
    // An rm killed after the space left the index: the rest of it goes now.
    return await removeSpace(root, space);
  }
  if (!index.spaces.includes(space)) {
    throw new CotalError(
      "space_unknown",
      `Space '${space}' is not served by ${root}; 'cotal space list' shows the spaces it has.`,
    );
  }
  if (index.spaces.length === 1) {
    throw new CotalError(
      "space_last",
      `Space '${space}' is the last one of ${root}; stop the mesh with 'cotal down' and remove ` +
        "the root instead.",
    );
  }
  return await removeSpace(root, space);
}

/** Whether anything of an unlisted space is left: a daemon's record, or its account. */
async function spaceLeftovers(root: string, space: string): Promise<boolean> {
  const key = spaceKeyHex(space);
  if ((await listComponents(root)).some((c) => c.id.endsWith(`.${key}`))) return true;
  const store = workspaceSecretStore(root);
  return (await loadSpaceAccount(store, space).catch(() => undefined)) !== undefined;
}

/** Stops a space's daemons and removes its streams, account, store dir and index entry. */
async function removeSpace(
  root: string,
  space: string,
): Promise<{ stopped: string[]; deletedStreams: string[]; removedOnDisk?: boolean }> {
  const index = await readSpaceIndex(root);
  const store = workspaceSecretStore(root);
  const account = await loadSpaceAccount(store, space).catch(() => undefined);
  const key = spaceKeyHex(space);
  const stopped: string[] = [];
  // Out of the watchdog's list first, so it does not bring back what is stopped next.
  await updateWatchList(root, { remove: (id) => id.endsWith(`.${key}`) });
  for (const c of await listComponents(root)) {
    if (c.id.endsWith(`.${key}`)) {
      await stopComponent(root, c.id);
      stopped.push(c.id);
    }
  }
  const live = await runningBroker(root);
  let deletedStreams: string[] = [];
  let removedOnDisk = false;
  if (live && account) deletedStreams = await deleteStreams(account, live.url).catch(() => []);
  index.spaces = index.spaces.filter((s) => s !== space);
  await writeSpaceIndex(root, index);
  await unregisterMesh(space, root);
  await store.delete(spaceAccountKey(space));
  const p = meshPaths(root);
  await Deno.remove(`${p.store}/space.${key}`, { recursive: true }).catch(() => {});
  if (live) {
    await renderBrokerConfig(root, live);
    await reloadBroker(root);
  } else if (account) {
    // A stopped broker: its JetStream files for the account go with it.
    removedOnDisk = await Deno.remove(`${p.jetstream}/jetstream/${account.account.pub}`, {
      recursive: true,
    }).then(() => true, () => false);
    await renderBrokerConfig(root, {
      host: "127.0.0.1",
      port: 4222,
      ...await readMeshRecord(root),
    });
  }
  return { stopped, deletedStreams, ...(removedOnDisk ? { removedOnDisk } : {}) };
}

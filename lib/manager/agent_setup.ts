/**
 * Everything the supervisor makes for one agent before its runner starts: its ids (its own uid
 * under a root supervisor), a fresh launch dir, its sandbox resources, its module, its broker
 * footprint and creds, and the launch material telling the runner where it reaches the broker,
 * the supervisor and its dirs.
 *
 * @module
 */
import { ctlSubject, subjectRoot } from "../wire/mod.ts";
import { CotalError } from "../errors.ts";
import { parseCreds, renderRelayedCreds } from "../nats/mod.ts";
import { newIdentity, nonceProver, syncVerifier } from "../trust/mod.ts";
import { agentSocketPath, type DeploymentLayout } from "../permissions.ts";
import { MAX_AGENTS } from "./manager_types.ts";
import {
  DIR_REMOVE_DEADLINE_MS,
  freshAgentDir,
  type LifecycleContext,
  provisionFootprint,
  writeAgentLaunch,
} from "./lifecycle.ts";
import type { ManagedAgent } from "./managed_agent.ts";
import {
  AgentSandbox,
  type AgentSandboxOptions,
  MAX_SOCKET_PATH,
} from "./sandbox/agent_sandbox.ts";
import { type AgentIdPool, type AgentIds, ownIds } from "./sandbox/ids.ts";
import {
  BROKER_SOCKET_INSIDE,
  CONTROL_SOCKET_INSIDE,
  HOME_INSIDE,
  SPAWN_SOCKET_INSIDE,
} from "./sandbox/plan.ts";
import { RELAY_PORT } from "./sandbox/relay.ts";
import { type CgroupHost, cgroupName, removeAgentCgroup } from "./sandbox/cgroup.ts";
import { readNoFollow, unmount } from "./sandbox/libc.ts";
import type { RunnerSandbox } from "./start_runner.ts";
import type { LaunchSandbox } from "./launch.ts";
import { removeTree } from "./remove_tree.ts";

/** What {@linkcode prepareAgent} needs besides the lifecycle context. */
export interface PrepareOptions {
  readonly servers: readonly string[];
  /** The agent's socket slot (unique among this supervisor's live agents). */
  readonly slot: number;
  readonly socketDir: string;
  /** Hands out agent uids (a root supervisor); absent: agents run as the supervisor's uid. */
  readonly idPool?: AgentIdPool;
  /** The uid a kept agent ran as, asked for again when it comes back (if free). */
  readonly preferUid?: number;
  /** A module agent's file on the supervisor's host. */
  readonly moduleSource?: string;
  readonly subscribe?: readonly string[];
  readonly ttlSeconds?: number;
  readonly description?: string;
  /** The personas it may spawn and who serves its requests (delegated_spawn.ts). */
  readonly spawn?: AgentSandboxOptions["spawn"];
}

/**
 * Where a supervisor's agent sockets live: `<runDir>/sockets/<instance>` (each space's
 * supervisor of a root its own dir: it empties it at start and numbers its sockets from 0, so a
 * shared one had two spaces' supervisors remove each other's), or, under a root too long for a
 * unix socket path, `/tmp/cotal-<uid>-<instance>`. Pure, so the supervisor's permission row can
 * name the same paths.
 */
export function agentSocketDir(layout: DeploymentLayout, instanceId: string): string {
  const runDir = layout.runDir ?? `${layout.root}/run`;
  const longest = (dir: string) => agentSocketPath(dir, MAX_AGENTS - 1, "control").length;
  const mine = `${runDir}/sockets/${instanceId.slice(0, 12)}`;
  if (longest(mine) <= MAX_SOCKET_PATH) return mine;
  const tmp = `/tmp/cotal-${Deno.uid() ?? 0}-${instanceId}`;
  if (longest(tmp) <= MAX_SOCKET_PATH) return tmp;
  throw new CotalError(
    "sandbox_socket_path",
    `No directory short enough for the agents' sockets (under ${MAX_SOCKET_PATH} bytes); use a shorter --root.`,
  );
}

/**
 * Makes the socket dir (0700). One in `/tmp` must be a private dir of this user: never one
 * someone else planted.
 */
export async function socketDirFor(layout: DeploymentLayout, instanceId: string): Promise<string> {
  const dir = agentSocketDir(layout, instanceId);
  // The permission row was rendered with a socket dir: it must be this one.
  if (layout.agentSocketDir && layout.agentSocketDir !== dir) {
    throw new CotalError(
      "sandbox_socket_path",
      `The layout names ${layout.agentSocketDir} for agent sockets, but this manager uses ${dir}; render the row with agentSocketDir().`,
    );
  }
  const runDir = layout.runDir ?? `${layout.root}/run`;
  if (dir.startsWith(`${runDir}/`)) {
    await Deno.mkdir(dir, { recursive: true, mode: 0o700 });
    return dir;
  }
  try {
    await Deno.mkdir(dir, { mode: 0o700 });
  } catch (err) {
    if (!(err instanceof Deno.errors.AlreadyExists)) throw err;
  }
  const st = await Deno.lstat(dir);
  if (!st.isDirectory || st.uid !== Deno.uid() || ((st.mode ?? 0) & 0o077) !== 0) {
    throw new CotalError(
      "sandbox_socket_path",
      `${dir} exists but is not a private directory of this user; remove it and try again.`,
    );
  }
  return dir;
}

/**
 * A root supervisor's agent must be able to write its workdir as its own uid: refused up front
 * (one sentence, with the fix) rather than failing inside.
 */
async function checkWorkdirWritable(dir: string, ids: AgentIds): Promise<void> {
  const st = await Deno.stat(dir);
  const mode = st.mode ?? 0;
  const ok = (st.uid === ids.uid && (mode & 0o200)) ||
    (st.gid === ids.gid && (mode & 0o020)) || (mode & 0o002);
  if (!ok) {
    throw new CotalError(
      "sandbox_workdir_not_writable",
      `The workdir ${dir} is not writable by Cotal's agents (group ${ids.gid}); let the group write it: chgrp -R ${ids.gid} ${dir} && chmod -R g+rwX ${dir}.`,
    );
  }
}

/** The group name an agent lifecycle's cgroup was given (see `AgentSandbox.create`). */
export function cgroupUnique(lifecycleUid: string): string {
  return lifecycleUid.replace(/[^A-Za-z0-9]/g, "").slice(0, 16);
}

/** Removes a crashed predecessor's cgroup for one agent lifecycle (its processes are gone). */
export async function removeStaleCgroup(
  host: CgroupHost,
  name: string,
  lifecycleUid: string,
): Promise<void> {
  const group = cgroupName(name, cgroupUnique(lifecycleUid));
  await removeAgentCgroup({
    version: host.version,
    dirs: Object.values(host.parents).map((p) => `${p}/${group}`),
  }, 500);
}

/**
 * Empties this manager's socket dir at start (its lease says no other manager uses it): sockets
 * and devpts mounts a crashed predecessor left.
 */
export async function clearSocketDir(dir: string): Promise<void> {
  let entries: Deno.DirEntry[];
  try {
    entries = [...Deno.readDirSync(dir)];
  } catch {
    return;
  }
  for (const e of entries) {
    const path = `${dir}/${e.name}`;
    if (e.name.endsWith(".pts")) unmount(path);
    await removeTree(path, Date.now() + DIR_REMOVE_DEADLINE_MS);
  }
}

/** The runner's view of its place: broker addresses, channels, dirs. */
export function launchPlace(agent: ManagedAgent, servers: readonly string[]): {
  servers: string[];
  sandbox: LaunchSandbox;
  owner?: { uid: number; gid: number };
} {
  const p = agent.plan;
  const sb = agent.sandbox!;
  const bwrap = p.isolation.mode === "bwrap";
  const relay = bwrap && p.net === "relay";
  const port = sb.brokerPort;
  return {
    servers: relay
      ? [`nats://127.0.0.1:${RELAY_PORT}`]
      : port !== undefined
      ? [`nats://127.0.0.1:${port}`]
      : [...servers],
    sandbox: {
      control: bwrap ? CONTROL_SOCKET_INSIDE : sb.controlSocket,
      ...(relay ? { relay: BROKER_SOCKET_INSIDE } : {}),
      home: bwrap ? HOME_INSIDE : `${p.agentDir}/home`,
      ...(p.workdir ? { workdir: p.workdir } : {}),
      ...(sb.spawnSocket && sb.opts.spawn
        ? {
          spawn: {
            socket: bwrap ? SPAWN_SOCKET_INSIDE : sb.spawnSocket,
            personas: [...sb.opts.spawn.personas],
          },
        }
        : {}),
    },
    ...(sb.opts.switchUser ? { owner: { uid: sb.opts.ids.uid, gid: sb.opts.ids.gid } } : {}),
  };
}

/**
 * Writes (or rewrites on renewal) the agent's launch material. Every agent is behind its relay
 * and given its JWT alone (relayed creds): the seed stays with the supervisor, so nothing the
 * agent holds, reads or leaks connects to the broker except through its guard.
 */
export async function writeLaunch(
  ctx: LifecycleContext,
  agent: ManagedAgent,
  servers: readonly string[],
  creds: string,
  description?: string,
): Promise<void> {
  const standIn = agent.sandbox?.opts.standInSeed;
  const given = standIn ? renderRelayedCreds((await parseCreds(creds)).jwt, standIn) : creds;
  await writeAgentLaunch(ctx, agent.plan, launchPlace(agent, servers), given, description);
}

/** The sandbox part of the runner's options. */
export function runnerSandbox(agent: ManagedAgent): RunnerSandbox {
  const sb = agent.sandbox!;
  const p = agent.plan;
  return {
    controlSocket: sb.controlSocket,
    ...(sb.brokerSocket ? { brokerSocket: sb.brokerSocket } : {}),
    ...(sb.brokerPort !== undefined ? { brokerPort: sb.brokerPort } : {}),
    ...(sb.spawnSocket ? { spawnSocket: sb.spawnSocket } : {}),
    net: p.net,
    uid: sb.opts.ids.uid,
    gid: sb.opts.ids.gid,
    switchUser: sb.opts.switchUser,
    limits: p.limits,
    etcFiles: sb.etcFiles,
    ...(p.workdir ? { workdir: p.workdir } : {}),
    expose: p.expose,
    ...(sb.cgroup ? { cgroup: sb.cgroup } : {}),
    ...(sb.ptsDir ? { ptsDir: sb.ptsDir } : {}),
    ...(sb.landlockScope ? { landlockScope: true } : {}),
  };
}

/**
 * Makes the agent's ids, dir, sandbox resources, module copy, broker footprint, creds and
 * launch material. On failure what it made is left on `agent` (its sandbox) and in the store
 * for the caller's teardown; a uid taken before the sandbox existed is released here.
 */
export async function prepareAgent(
  ctx: LifecycleContext,
  agent: ManagedAgent,
  opts: PrepareOptions,
): Promise<void> {
  const p = agent.plan;
  const bwrap = p.isolation.mode === "bwrap";
  const switchUser = bwrap && !!p.isolation.switchUser && !!opts.idPool;
  const ids = switchUser ? await opts.idPool!.acquire(opts.preferUid) : ownIds();
  // The stand-in key of its relayed creds: what a loopback relay checks its caller against.
  const standIn = newIdentity();
  try {
    if (switchUser && p.workdir) await checkWorkdirWritable(p.workdir, ids);
    await freshAgentDir(p.agentDir, ctx.root, { home: !bwrap });
    agent.sandbox = await AgentSandbox.create({
      name: p.name,
      unique: cgroupUnique(p.lifecycleUid),
      slot: opts.slot,
      agentDir: p.agentDir,
      socketDir: opts.socketDir,
      mode: p.isolation.mode,
      ids,
      switchUser,
      limits: p.limits,
      net: p.net,
      servers: opts.servers,
      inboxPrefix: `_INBOX_${p.identity.id}`,
      // The delivery daemon answers durable joins and history reads on this rail's replies.
      boundRails: [ctlSubject(ctx.space, "delivery", p.principal)],
      // Channel posts, DMs and tasks are stored for others: a stricter byte budget.
      storedPrefixes: ["chat", "inst", "svc"].map((plane) => `${subjectRoot(ctx.space)}.${plane}.`),
      ...(p.workdir ? { workdir: p.workdir } : {}),
      ...(bwrap && p.isolation.cgroup ? { cgroupHost: p.isolation.cgroup } : {}),
      // The agent's seed stays here: its relay proves its key at connect. An agent on the
      // host's network (or under Deno permissions alone) dials its relay on a loopback port,
      // which lets in only the holder of its launch creds.
      proveKey: nonceProver(p.identity.seed),
      callerKey: { verify: syncVerifier(standIn.id) },
      ...(ctx.bearers ? { bearer: ctx.bearers.presenter(p) } : {}),
      standInSeed: standIn.seed,
      seccomp: bwrap,
      ...(opts.spawn ? { spawn: opts.spawn } : {}),
    });
  } catch (err) {
    ids.release();
    throw err;
  }
  if (opts.moduleSource && p.spec.kind === "module") {
    const dest = `${p.agentDir}/${p.spec.module}`;
    await Deno.writeFile(dest, await readModuleSource(opts.moduleSource), { mode: 0o600 });
    await Deno.chmod(dest, 0o600);
    if (switchUser) await Deno.chown(dest, ids.uid, ids.gid);
  }
  const creds = await provisionFootprint(ctx, p, opts.subscribe, opts.ttlSeconds);
  await writeLaunch(ctx, agent, opts.servers, creds, opts.description);
}

/** The largest agent module a spawn copies in. */
export const MAX_MODULE_BYTES = 16 * 1024 * 1024;

/**
 * The bytes of the module a spawn names: a regular file, never a symlink, FIFO, device or
 * directory, read without blocking and without following a link swapped in after the check.
 */
export async function readModuleSource(path: string): Promise<Uint8Array> {
  const bad = (what: string) =>
    new CotalError(
      "bad_module",
      `The agent module ${JSON.stringify(path)} ${what}; name a regular file of at most ${
        MAX_MODULE_BYTES / 1024 / 1024
      } MiB.`,
    );
  let before: Deno.FileInfo;
  try {
    before = await Deno.lstat(path);
  } catch {
    throw bad("cannot be read");
  }
  if (before.isSymlink) throw bad("is a symlink");
  if (!before.isFile) throw bad("is not a regular file");
  if (before.size > MAX_MODULE_BYTES) throw bad("is too large");
  const data = readNoFollow(path, MAX_MODULE_BYTES);
  if (data === "over") throw bad("is too large");
  if (data === "link") {
    // Every component, not the last alone: a directory above it swapped for a link by an agent
    // that may write there would point a root supervisor at a file of its choosing (red team 43).
    throw new CotalError(
      "bad_module",
      `The agent module ${JSON.stringify(path)} is reached through a symlink; name it by its ` +
        "real path (what 'realpath' prints).",
    );
  }
  const after = await Deno.lstat(path).catch(() => undefined);
  if (!data || !after?.isFile || after.ino !== before.ino || after.dev !== before.dev) {
    throw bad("changed while it was read");
  }
  return data;
}

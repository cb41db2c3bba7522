/**
 * Test fixtures for the manager: a throwaway deployment layout with an agent dir, real creds,
 * launch material, and a lazily provisioned bwrap.
 */
import { tempDir } from "../_harness/broker.ts";
import type { DeploymentLayout } from "../../lib/permissions.ts";
import { createSpaceAuth, mintCreds, newIdentity } from "../../lib/trust/mod.ts";
import { newLifecycleUid } from "../../lib/wire/names.ts";
import {
  type AgentSpec,
  LAUNCH_FORMAT,
  launchFilePath,
  type LaunchMaterial,
  writeLaunchMaterial,
} from "../../lib/manager/launch.ts";
import { ensureBwrap } from "../../lib/manager/sandbox/bwrap.ts";
import { AgentSandbox } from "../../lib/manager/sandbox/agent_sandbox.ts";
import { AgentIdPool, DEFAULT_AGENT_IDS, ownIds } from "../../lib/manager/sandbox/ids.ts";
import {
  chooseIsolation,
  type Isolation,
  probeIsolation,
} from "../../lib/manager/sandbox/isolation.ts";
import { type AgentLimits, resolveLimits } from "../../lib/manager/sandbox/limits.ts";
import {
  BROKER_SOCKET_INSIDE,
  CONTROL_SOCKET_INSIDE,
  HOME_INSIDE,
  type NetMode,
} from "../../lib/manager/sandbox/plan.ts";
import { RELAY_PORT } from "../../lib/manager/sandbox/relay.ts";
import { freshAgentDir } from "../../lib/manager/lifecycle.ts";
import { credsId } from "../trust/_helpers.ts";
import type { RunnerOptions } from "../../lib/manager/start_runner.ts";

let creds: Promise<string> | undefined;
/** Real provisioner creds for one throwaway space (shape-valid launch material needs them). */
export function testCreds(): Promise<string> {
  creds ??= createSpaceAuth("manager-tests").then((auth) =>
    mintCreds(auth, newIdentity(), "provisioner")
  );
  return creds;
}

let bwrap: Promise<string> | undefined;
/** A working bwrap, fetched into the project cache the first time. */
export function testBwrap(): Promise<string> {
  bwrap ??= ensureBwrap().then((b) => b.path);
  return bwrap;
}

/** One throwaway deployment: `root` with secrets, run dir, logs and one agent dir. */
export interface AgentFixture {
  readonly root: string;
  readonly layout: DeploymentLayout;
  readonly agentDir: string;
  readonly launchFile: string;
}

/** Makes a layout under a temp dir (removed at exit) with `agents/<name>` created 0700. */
export async function agentFixture(name = "a1"): Promise<AgentFixture> {
  const root = await tempDir("cotal-mgr-");
  const layout: DeploymentLayout = {
    root,
    broker: ["127.0.0.1:4222"],
    machineHome: `${root}/home/.cotal`,
  };
  const agentDir = `${root}/agents/${name}`;
  await Deno.mkdir(agentDir, { recursive: true, mode: 0o700 });
  return { root, layout, agentDir, launchFile: launchFilePath(agentDir) };
}

/** Valid launch material for `agent`. */
export async function material(
  agent: AgentSpec,
  over: Partial<LaunchMaterial> = {},
): Promise<LaunchMaterial> {
  return {
    format: LAUNCH_FORMAT,
    servers: ["nats://127.0.0.1:4222"],
    space: "manager-tests",
    principal: { owner: "local", actor: "a1" },
    card: { name: "a1", role: "worker" },
    lifecycleUid: newLifecycleUid(),
    auth: { kind: "creds", creds: await testCreds() },
    agent,
    ...over,
  };
}

/** Writes launch material for `agent` into the fixture's launch file. */
export async function writeMaterial(
  fx: AgentFixture,
  agent: AgentSpec,
  over: Partial<LaunchMaterial> = {},
): Promise<LaunchMaterial> {
  const m = await material(agent, over);
  await writeLaunchMaterial(fx.launchFile, m);
  return m;
}

/** Collects a handle's output as text and resolves with it and the exit once it ends. */
export function collect(handle: {
  onData(fn: (d: Uint8Array) => void): () => void;
  onExit(fn: (e: { code: number | null; signal: string | null }) => void): () => void;
}): Promise<{ out: string; code: number | null; signal: string | null }> {
  const dec = new TextDecoder();
  let out = "";
  handle.onData((d) => (out += dec.decode(d, { stream: true })));
  return new Promise((resolve) => handle.onExit((e) => resolve({ out, ...e })));
}

/** What {@linkcode sandboxedAgent} builds the runner for. */
export interface SandboxedAgentOptions {
  readonly mode?: "bwrap" | "deno-only";
  readonly name?: string;
  readonly net?: NetMode;
  /** Leave the agent without a cgroup (a supervisor that cannot make them). */
  readonly noCgroup?: boolean;
  readonly workdir?: string;
  readonly expose?: readonly string[];
  readonly limits?: Partial<AgentLimits>;
  /** Copied into the launch dir as the module file (`agent.ts`). */
  readonly moduleText?: string;
  /** Launch material fields to override. */
  readonly launch?: Partial<LaunchMaterial>;
}

/** One agent's sandbox outside any manager: its resources, and the runner options for it. */
export interface SandboxedAgent extends AgentFixture {
  readonly isolation: Isolation;
  readonly sandbox: AgentSandbox;
  readonly runner: RunnerOptions;
  [Symbol.asyncDispose](): Promise<void>;
}

let idPool: AgentIdPool | undefined;

/**
 * The sandbox the supervisor would give an agent with `spec` (its uid, launch dir, sockets,
 * cgroup, launch material pointing at them), for tests that start the runner themselves.
 */
export async function sandboxedAgent(
  spec: AgentSpec,
  opts: SandboxedAgentOptions = {},
): Promise<SandboxedAgent> {
  const fx = await agentFixture(opts.name ?? "a1");
  const mode = opts.mode ?? "bwrap";
  const isolation = mode === "bwrap"
    ? chooseIsolation({ ...(await probeIsolation({ bwrap: await testBwrap() })) })
    : chooseIsolation({ mode: "deno-only", trusted: true });
  const switchUser = mode === "bwrap" && !!isolation.switchUser;
  const ids = switchUser ? await (idPool ??= new AgentIdPool()).acquire() : ownIds();
  const net = mode === "bwrap" ? opts.net ?? "relay" : "host";
  const limits = resolveLimits(opts.limits);
  await Deno.remove(fx.agentDir, { recursive: true });
  await freshAgentDir(fx.agentDir, fx.root, { home: mode === "deno-only" });
  const socketDir = `${fx.root}/run/sockets`;
  await Deno.mkdir(socketDir, { recursive: true, mode: 0o700 });
  const sandbox = await AgentSandbox.create({
    name: opts.name ?? "a1",
    unique: crypto.randomUUID().slice(0, 8),
    slot: 0,
    agentDir: fx.agentDir,
    socketDir,
    mode,
    ids,
    switchUser,
    limits,
    net,
    servers: fx.layout.broker.map((b) => `nats://${b}`),
    inboxPrefix: `_INBOX_${credsId(await testCreds())}`,
    ...(opts.workdir ? { workdir: opts.workdir } : {}),
    ...(mode === "bwrap" && isolation.cgroup && !opts.noCgroup
      ? { cgroupHost: isolation.cgroup }
      : {}),
    seccomp: mode === "bwrap",
  });
  const owner = switchUser ? { uid: ids.uid, gid: ids.gid } : undefined;
  if (opts.moduleText !== undefined) {
    await Deno.writeTextFile(`${fx.agentDir}/agent.ts`, opts.moduleText, { mode: 0o600 });
    if (owner) await Deno.chown(`${fx.agentDir}/agent.ts`, owner.uid, owner.gid);
  }
  const bwrap = mode === "bwrap";
  const relay = bwrap && net === "relay";
  await writeLaunchMaterial(fx.launchFile, {
    ...(await material(spec)),
    ...(relay ? { servers: [`nats://127.0.0.1:${RELAY_PORT}`] } : {}),
    sandbox: {
      control: bwrap ? CONTROL_SOCKET_INSIDE : sandbox.controlSocket,
      ...(relay ? { relay: BROKER_SOCKET_INSIDE } : {}),
      home: bwrap ? HOME_INSIDE : `${fx.agentDir}/home`,
      ...(opts.workdir ? { workdir: opts.workdir } : {}),
    },
    ...opts.launch,
  }, owner);
  const runner: RunnerOptions = {
    layout: fx.layout,
    agentDir: fx.agentDir,
    spec,
    isolation,
    sandbox: {
      controlSocket: sandbox.controlSocket,
      ...(sandbox.brokerSocket ? { brokerSocket: sandbox.brokerSocket } : {}),
      net,
      uid: ids.uid,
      gid: ids.gid,
      switchUser,
      limits,
      etcFiles: sandbox.etcFiles,
      ...(opts.workdir ? { workdir: opts.workdir } : {}),
      expose: [...(opts.expose ?? [])],
      ...(sandbox.cgroup ? { cgroup: sandbox.cgroup } : {}),
      ...(sandbox.ptsDir ? { ptsDir: sandbox.ptsDir } : {}),
    },
  };
  return {
    ...fx,
    isolation,
    sandbox,
    runner,
    [Symbol.asyncDispose]: () => sandbox.close(),
  };
}

/**
 * A temp dir an agent may use as its workdir: group-writable by the agents' group when the
 * supervisor runs as root (agents then run as their own uids), as an operator would set one up.
 */
export async function agentWorkdir(prefix = "cotal-work-"): Promise<string> {
  const dir = await tempDir(prefix);
  if (Deno.uid() === 0) {
    await Deno.chown(dir, 0, DEFAULT_AGENT_IDS.first);
    await Deno.chmod(dir, 0o2770);
  }
  return dir;
}

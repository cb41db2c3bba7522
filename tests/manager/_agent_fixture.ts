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
export async function writeMaterial(fx: AgentFixture, agent: AgentSpec): Promise<LaunchMaterial> {
  const m = await material(agent);
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

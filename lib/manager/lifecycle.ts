/**
 * The footprint of one managed agent and how it is made and unmade: a fresh nkey and lifecycle
 * uid, `provisionAgent` (durables, ACL row, the bounded agent cred), the cred in the secret
 * store, the agent's dir with its 0600 launch material; and the reverse: stop, deprovision
 * through a target-pinned deprovisioner, cred deleted, dir removed. The manager's index of what
 * it made lets a successor clean up after a crash.
 *
 * @module
 */
import { CotalError, isCotalError } from "../errors.ts";
import type { DeploymentLayout } from "../permissions.ts";
import { type CredentialSigner, mintWith, newIdentity } from "../trust/mod.ts";
import { deprovisionAgent, provisionAgent, provisionAgentDurables } from "../wire/mod.ts";
import type { Principal } from "../wire/mod.ts";
import { spaceSecretKey } from "../workspace/mod.ts";
import type { SecretStore } from "../workspace/mod.ts";
import { LAUNCH_FORMAT, type LaunchSandbox, writeLaunchMaterial } from "./launch.ts";
import type { AgentPlan } from "./managed_agent.ts";
import { removeTree } from "./remove_tree.ts";
import type { JsonObject } from "./control_rail.ts";
import { type AgentBearers, agentDescriptorCreds } from "./agent_bearers.ts";

/** What the lifecycle functions need from their manager. */
export interface LifecycleContext {
  readonly space: string;
  readonly servers: readonly string[];
  /** Signs every credential the lifecycle needs (in process, or the space's cotal-signer). */
  readonly signer: CredentialSigner;
  readonly store: SecretStore;
  /** Whether the store was injected (key composition); default the workspace store. */
  readonly injected: boolean;
  readonly root: string;
  readonly layout: DeploymentLayout;
  readonly log: (line: string) => void;
  /**
   * User mode: agents are admitted by the space's auth callout on bearers its auth service
   * issues (lib/manager/agent_bearers.ts), under the owner it keeps for them; no agent cred is
   * minted or stored.
   */
  readonly bearers?: AgentBearers;
}

/**
 * One entry of the manager's index (its roster): enough to tear an agent down without its
 * process, and the spawn request that brings it back after the manager restarts.
 */
export interface IndexedAgent {
  readonly name: string;
  readonly principal: Principal;
  readonly lifecycleUid: string;
  readonly agentDir: string;
  readonly credsKey: string;
  readonly pid?: number;
  /** The spawn request as given: the agent is spawned again, same lifecycle, at the next start. */
  readonly request?: JsonObject;
  /** The control request that spawned it: a re-send after a restart finds it (fleet.ts). */
  readonly requestId?: string;
  /**
   * The uid it ran as (a supervisor that switches uids): asked for again when it comes back,
   * so the files it made in its workdir stay its own.
   */
  readonly uid?: number;
}

function composition(ctx: LifecycleContext) {
  return ctx.injected ? { injected: true as const } : { root: ctx.root };
}

/** The store key of the manager instance's agent index. */
export function indexKey(ctx: LifecycleContext, instanceId: string): string {
  return spaceSecretKey(ctx.space, `manager.${instanceId}.agents.json`, composition(ctx));
}

/** The store key of one agent lifecycle's creds. */
export function agentCredsKey(ctx: LifecycleContext, name: string, uid: string): string {
  return spaceSecretKey(ctx.space, `agent.${name}.${uid}.creds`, composition(ctx));
}

/** Reads the index; a missing or unreadable one is empty (nothing to sweep). */
export async function readIndex(
  ctx: LifecycleContext,
  instanceId: string,
): Promise<IndexedAgent[]> {
  try {
    const text = await ctx.store.get(indexKey(ctx, instanceId));
    const v = text ? JSON.parse(text) : undefined;
    return Array.isArray(v?.agents) ? v.agents as IndexedAgent[] : [];
  } catch {
    return [];
  }
}

/** Rewrites the index from the live set. */
export async function writeIndex(
  ctx: LifecycleContext,
  instanceId: string,
  agents: readonly IndexedAgent[],
): Promise<void> {
  await ctx.store.put(indexKey(ctx, instanceId), JSON.stringify({ agents }));
}

/** Mints the agent's bounded cred for its fixed identity and grants. */
export function mintAgentCreds(
  ctx: LifecycleContext,
  plan: AgentPlan,
  ttlSeconds?: number,
): Promise<string> {
  return mintWith(ctx.signer, plan.identity, "agent", {
    principal: plan.principal,
    lifecycleUid: plan.lifecycleUid,
    allowSubscribe: plan.channels.allowSubscribe,
    allowPublish: plan.channels.allowPublish,
    ...(plan.role ? { role: plan.role } : {}),
    ...(ttlSeconds ? { expiresInSeconds: ttlSeconds } : {}),
  });
}

/** Where the runner reaches the broker and the supervisor, and works. */
export interface AgentLaunchPlace {
  /** Broker addresses as the runner dials them (the relay's loopback port inside a netns). */
  readonly servers: readonly string[];
  readonly sandbox: LaunchSandbox;
  /** The agent's uid and gid, when it runs as its own user. */
  readonly owner?: { uid: number; gid: number };
}

/** Writes (or rewrites, on renewal) the agent's launch material with `creds`. */
export async function writeAgentLaunch(
  ctx: LifecycleContext,
  plan: AgentPlan,
  place: AgentLaunchPlace,
  creds: string,
  description?: string,
): Promise<void> {
  await writeLaunchMaterial(plan.launchFile, {
    format: LAUNCH_FORMAT,
    servers: [...place.servers],
    space: ctx.space,
    principal: plan.principal,
    card: {
      name: plan.name,
      ...(plan.role ? { role: plan.role } : {}),
      ...(description ? { description } : {}),
    },
    lifecycleUid: plan.lifecycleUid,
    // What `cotal mcp` (its harness's MCP server) joins at start, as the agent's own endpoint.
    ...(plan.channels.subscribe.length ? { channels: [...plan.channels.subscribe] } : {}),
    auth: { kind: "creds", creds },
    agent: plan.spec,
    sandbox: place.sandbox,
  }, place.owner);
}

/**
 * Provisions the agent's broker footprint (durables, ACL row) through a one-shot provisioner
 * cred and returns its agent creds, also kept in the store. In user mode it grants the agent's
 * ledger row instead of minting, and returns its launch JWT (which connects only through its
 * relay): nothing is stored.
 */
export async function provisionFootprint(
  ctx: LifecycleContext,
  plan: AgentPlan,
  subscribe: readonly string[] | undefined,
  ttlSeconds?: number,
): Promise<string> {
  const provisioner = await mintWith(ctx.signer, newIdentity(), "provisioner");
  if (ctx.bearers) {
    await provisionAgentDurables({
      servers: [...ctx.servers],
      creds: provisioner,
      space: ctx.space,
      principal: plan.principal,
      lifecycleUid: plan.lifecycleUid,
      ...(subscribe ? { subscribe } : {}),
      allowSubscribe: plan.channels.allowSubscribe,
      allowPublish: plan.channels.allowPublish,
      ...(plan.role ? { role: plan.role } : {}),
    });
    await ctx.bearers.grant(plan);
    return await agentDescriptorCreds(plan);
  }
  const p = await provisionAgent({
    servers: [...ctx.servers],
    creds: provisioner,
    space: ctx.space,
    auth: ctx.signer,
    identity: plan.identity,
    principal: plan.principal,
    lifecycleUid: plan.lifecycleUid,
    ...(subscribe ? { subscribe } : {}),
    allowSubscribe: plan.channels.allowSubscribe,
    allowPublish: plan.channels.allowPublish,
    ...(plan.role ? { role: plan.role } : {}),
    ...(ttlSeconds ? { expiresInSeconds: ttlSeconds } : {}),
  });
  await ctx.store.put(plan.credsKey, p.creds);
  return p.creds;
}

/** What a teardown found; `errors` names each step that failed (never a secret). */
export interface TeardownResult {
  readonly durablesRemoved: readonly string[];
  readonly aclPurged: boolean;
  readonly errors: readonly string[];
}

/** Deprovisions one lifecycle, deletes its creds and removes its dir; never throws. */
export async function teardownFootprint(
  ctx: LifecycleContext,
  a: Pick<IndexedAgent, "principal" | "lifecycleUid" | "agentDir" | "credsKey">,
): Promise<TeardownResult> {
  const errors: string[] = [];
  let removed: string[] = [];
  let aclPurged = false;
  try {
    const creds = await mintWith(ctx.signer, newIdentity(), "deprovisioner", {
      deprovisionTarget: { ...a.principal, lifecycleUid: a.lifecycleUid },
    });
    const r = await deprovisionAgent({
      servers: [...ctx.servers],
      creds,
      space: ctx.space,
      principal: a.principal,
      lifecycleUid: a.lifecycleUid,
    });
    removed = r.removed;
    aclPurged = r.aclPurged;
  } catch (err) {
    errors.push(`deprovision: ${isCotalError(err) ? err.code : "failed"}`);
  }
  if (ctx.bearers) {
    try {
      await ctx.bearers.revoke(a.principal.actor, a.lifecycleUid);
    } catch (err) {
      errors.push(`ledger row: ${isCotalError(err) ? err.code : "revoke failed"}`);
    }
  }
  try {
    await ctx.store.delete(a.credsKey);
  } catch (err) {
    errors.push(`creds: ${isCotalError(err) ? err.code : "delete failed"}`);
  }
  const dirProblem = await removeAgentDir(a.agentDir);
  if (dirProblem) errors.push(`dir: ${dirProblem}`);
  if (errors.length) ctx.log(`teardown of ${a.principal.actor}: ${errors.join(", ")}`);
  return { durablesRemoved: removed, aclPurged, errors };
}

/** How long removing one agent's dir may take before teardown reports it and moves on. */
export const DIR_REMOVE_DEADLINE_MS = 10_000;

/**
 * Removes an agent's dir, bounded by {@linkcode DIR_REMOVE_DEADLINE_MS}, without recursion and
 * without following a link (lib/manager/remove_tree.ts); returns why it failed, or undefined.
 */
export async function removeAgentDir(dir: string): Promise<string | undefined> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<string>((r) => {
    // Also a step that blocks (one syscall on a hung mount) is bounded.
    timer = setTimeout(() => r("timed out"), DIR_REMOVE_DEADLINE_MS + 1_000);
  });
  try {
    return await Promise.race([removeTree(dir, Date.now() + DIR_REMOVE_DEADLINE_MS), deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Makes the agent's launch dir fresh and private (0700, supervisor-owned), removing a stale one
 * of the same name; `home` also makes the `home/` a deno-only runner works in.
 */
export async function freshAgentDir(
  dir: string,
  layoutRoot: string,
  opts: { home?: boolean } = {},
): Promise<void> {
  if (!dir.startsWith(`${layoutRoot}/agents/`)) {
    throw new CotalError("spawn_bad_args", `The agent dir ${dir} is outside ${layoutRoot}/agents.`);
  }
  await removeAgentDir(dir);
  await Deno.mkdir(dir, { recursive: true, mode: 0o700 });
  await Deno.chmod(dir, 0o700);
  if (opts.home) await Deno.mkdir(`${dir}/home`, { mode: 0o700 });
}

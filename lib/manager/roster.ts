/**
 * The roster: the index a manager keeps of its agents (each with its spawn request), what a
 * restarted manager reads to clear what its predecessor left and to spawn the same agents again.
 *
 * @module
 */
import { clearSocketDir, removeStaleCgroup } from "./agent_setup.ts";
import {
  type IndexedAgent,
  type LifecycleContext,
  readIndex,
  removeAgentDir,
  teardownFootprint,
} from "./lifecycle.ts";
import type { Presence } from "../endpoint/mod.ts";
import { lifecycleTag } from "../wire/mod.ts";
import type { ManagedAgent } from "./managed_agent.ts";
import type { CgroupHost } from "./sandbox/cgroup.ts";

/** An agent's roster row (its request kept when it has one). */
export function rosterRow(a: ManagedAgent): IndexedAgent {
  return {
    name: a.plan.name,
    principal: a.plan.principal,
    lifecycleUid: a.plan.lifecycleUid,
    agentDir: a.plan.agentDir,
    credsKey: a.plan.credsKey,
    ...(a.handle ? { pid: a.handle.pid } : {}),
    ...(a.request ? { request: { ...a.request } } : {}),
    ...(a.requestId !== undefined ? { requestId: a.requestId } : {}),
    ...(a.sandbox?.switchedUid !== undefined ? { uid: a.sandbox.switchedUid } : {}),
  };
}

/** The rows to write: every agent not retired, then the kept ones not running. */
export function rosterRows(
  agents: ReadonlyMap<string, ManagedAgent>,
  kept: ReadonlyMap<string, IndexedAgent>,
): IndexedAgent[] {
  const rows = [...agents.values()].filter((a) => a.status !== "retired").map(rosterRow);
  for (const [name, row] of kept) if (!agents.has(name)) rows.push(row);
  return rows;
}

/**
 * Clears what a previous manager (same instance) left: its sandboxes died with it (bwrap's
 * --die-with-parent; a deno-only runner ends when its control channel drops), so its sockets,
 * devpts mounts, cgroups and agent dirs are what is left. Rows with a request are returned to
 * be spawned again (lifecycle, creds and durables stay); a row without one (an older index) is
 * torn down.
 */
export async function sweepRoster(
  ctx: LifecycleContext,
  instanceId: string,
  socketDir: string,
  cgroup: CgroupHost | undefined,
  log: (line: string) => void,
): Promise<{ kept: IndexedAgent[]; found: number }> {
  const left = await readIndex(ctx, instanceId);
  await clearSocketDir(socketDir);
  const kept: IndexedAgent[] = [];
  for (const a of left) {
    if (cgroup) await removeStaleCgroup(cgroup, a.name, a.lifecycleUid);
    if (a.request) {
      await removeAgentDir(a.agentDir);
      kept.push(a);
      continue;
    }
    await teardownFootprint(ctx, a);
    log(`manager: swept ${a.name} (left by a previous manager)`);
  }
  return { kept, found: left.length };
}

/** Whether `id` is online in `roster`, as the lifecycle `uid` when one is given. */
export function isPresent(roster: readonly Presence[], id: string, uid?: string): boolean {
  return roster.some((p) =>
    p.card.id === id && p.status !== "offline" &&
    (uid === undefined || p.lifecycleTag === lifecycleTag(uid))
  );
}

/**
 * Whether a live presence row holds the name `local.<name>`: a row of a lifecycle this manager
 * ended holds nothing, and neither does the resumed lifecycle's own stale row.
 */
export function presenceHolds(
  roster: readonly Presence[],
  name: string,
  ended: ReadonlySet<string>,
  resumedUid?: string,
): boolean {
  return roster.some((p) =>
    p.card.id === `local.${name}` && p.status !== "offline" &&
    !(p.lifecycleTag && ended.has(p.lifecycleTag)) &&
    (resumedUid === undefined || p.lifecycleTag !== lifecycleTag(resumedUid))
  );
}

/**
 * What the fleet asks of its agents on a spawn's behalf, apart from its own state: the agent an
 * earlier copy of a re-sent spawn made (a caller that heard no answer asks again), the host
 * paths every other agent has bound (no agent's paths in another's workdir), and the roles
 * they serve (no two differing only by case); and what a despawn reports.
 *
 * @module
 */
import { CotalError, isCotalError } from "../errors.ts";
import { declaredProgram } from "./launch.ts";
import type { IndexedAgent } from "./lifecycle.ts";
import type { AgentRow, ManagedAgent } from "./managed_agent.ts";
import { bindsOf, type OtherAgentBinds } from "./spawn_plan.ts";

/** How long a spawn asked again waits for the agent its first copy made to be ready. */
export const SPAWN_AGAIN_WAIT_MS = 60_000;

/** The fleet as `spawnedFor` looks at it. */
export interface FleetView {
  agents(): Iterable<ManagedAgent>;
  kept(): Iterable<IndexedAgent>;
  failedBack(): readonly { name: string; reason: string }[];
  present(a: ManagedAgent): boolean;
}

/**
 * The agent an earlier copy of spawn request `requestId` made, once it is ready: a caller
 * that heard no answer (its supervisor frozen and replaced) asks again, and the supervisor
 * that took the first copy and saved its roster must not start a second agent. Undefined when
 * no agent here came from it; its own failure when it could not come back.
 */
export async function spawnedFor(
  requestId: string,
  fleet: FleetView,
): Promise<AgentRow | undefined> {
  const mine = () => [...fleet.agents()].find((a) => a.requestId === requestId);
  const waiting = () => [...fleet.kept()].find((r) => r.requestId === requestId);
  const name = mine()?.plan.name ?? waiting()?.name;
  if (name === undefined) return undefined;
  const until = Date.now() + SPAWN_AGAIN_WAIT_MS;
  while (Date.now() < until) {
    const a = mine();
    if (a && a.status !== "starting") return a.row(fleet.present(a));
    if (!a && !waiting()) {
      const failed = fleet.failedBack().find((f) => f.name === name);
      throw new CotalError(
        "spawn_failed",
        `${name}, which this spawn started before its supervisor was replaced, could not come back${
          failed ? ` (${failed.reason})` : ""
        }; spawn it again.`,
      );
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new CotalError(
    "spawn_not_ready",
    `${name}, which this spawn started before its supervisor was replaced, is still starting after ${
      SPAWN_AGAIN_WAIT_MS / 1000
    } s; check 'cotal ps'.`,
  );
}

/**
 * The host paths every other agent has bound (running, or kept to come back), for
 * `assertNoSharedTree`. The agent being planned is not in `agents` yet; a kept one coming back
 * (`except`) is skipped by its name.
 */
export function othersBinds(
  agents: ReadonlyMap<string, ManagedAgent>,
  kept: ReadonlyMap<string, IndexedAgent>,
  except?: string,
): OtherAgentBinds[] {
  const out: OtherAgentBinds[] = [];
  for (const a of agents.values()) {
    if (a.status === "retired") continue;
    const p = a.plan;
    out.push({
      name: p.name,
      ...(p.workdir ? { workdir: p.workdir } : {}),
      binds: bindsOf(p.workdir, p.expose, declaredProgram(p.spec)),
    });
  }
  for (const [name, row] of kept) {
    if (name === except || agents.has(name)) continue;
    const r = row.request ?? {};
    const workdir = typeof r.workdir === "string" ? r.workdir : undefined;
    const expose = Array.isArray(r.expose) ? r.expose.filter((e) => typeof e === "string") : [];
    const command = typeof r.command === "string" ? r.command : undefined;
    out.push({
      name,
      ...(workdir ? { workdir } : {}),
      binds: bindsOf(workdir, expose as string[], command),
    });
  }
  return out;
}

/**
 * Refuses a role that differs only by case from one an agent here serves: `send --role lower`
 * would find no agent while `Lower` has one (a task queue is named by the exact role).
 */
export function assertRoleCase(role: string, agents: Iterable<ManagedAgent>): void {
  for (const a of agents) {
    const other = a.plan.role;
    if (other !== undefined && other !== role && other.toLowerCase() === role.toLowerCase()) {
      throw new CotalError(
        "role_case_clash",
        `The role ${role} differs only by case from the role ${other} that ${a.plan.name} serves; use ${other}.`,
      );
    }
  }
}

/** What a despawn did. */
export interface DespawnResult {
  /** The agent despawned. */
  readonly name: string;
  /** Its durables that were removed. */
  readonly durablesRemoved: readonly string[];
  /** The agents it had spawned, despawned with it. */
  readonly childrenEnded?: readonly string[];
}

/** The `childrenEnded` field of a despawn's result: present only when it ended some. */
export function childrenEnded(names: string[]): { childrenEnded?: string[] } {
  return names.length ? { childrenEnded: names } : {};
}

/** The lowest socket slot no other live agent holds (MAX_AGENTS bounds the agents). */
export function freeSlot(agents: Iterable<ManagedAgent>, agent: ManagedAgent): number {
  const used = new Set([...agents].filter((a) => a !== agent).map((a) => a.slot));
  let slot = 0;
  while (used.has(slot)) slot++;
  return slot;
}

/**
 * A spawn refused because its name's principal has a live lifecycle this supervisor does not
 * run (a space restored from another root, or an agent provisioned by hand): said with the
 * `cotal deprovision` that ends it (newcomer pass 10 met the library's `deprovisionAgent`).
 */
export function heldElsewhere(err: unknown, name: string): CotalError | undefined {
  if (!isCotalError(err, "lifecycle_still_live")) return undefined;
  const uid = /live lifecycle (\S+?);/.exec(err.message)?.[1] ?? "<uid>";
  return new CotalError(
    "name_taken",
    `${name} has a lifecycle this supervisor does not run (a space restored from another root, ` +
      `or an agent provisioned by hand): 'cotal deprovision ${name} --lifecycle ${uid}' ends ` +
      `it, or pick another name.`,
  );
}

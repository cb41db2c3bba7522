/**
 * Agents that spawn agents: what the supervisor lets one agent do on its spawn channel
 * (lib/manager/sandbox/spawn_channel.ts). The operator decides everything when spawning the
 * parent: its request carries `spawnable`, each persona it may start already resolved into a
 * complete spawn request (the operator's CLI read the persona files and the variables they
 * name). The agent only picks one of those by name; it cannot add a field, widen a grant or
 * name another program. Its children are marked `spawnedBy` it, it may despawn only them, and
 * they end with it. Children may not spawn in turn, run `trusted` or on the host's network.
 *
 * @module
 */
import { CotalError } from "../errors.ts";
import type { JsonObject } from "./control_rail.ts";
import type { AgentRow } from "./managed_agent.ts";
import type { SpawnChannelHandler, SpawnChannelRequest } from "./sandbox/spawn_channel.ts";

/** Children one agent may have at once unless the operator sets another bound for the space. */
export const DEFAULT_MAX_CHILDREN = 4;
/** The most the operator may set it to. */
export const MAX_CHILDREN_CAP = 16;
/**
 * Spawns one agent may ask for: a burst, then one per refill interval. A spawn costs the
 * supervisor a sandbox, creds and a readiness wait, so a spawn/despawn loop is held to this.
 */
export const CHILD_SPAWN_RATE = Object.freeze({ burst: 4, refillMs: 15_000 });

/** The space's bound on one agent's children: the operator's, within the frozen cap. */
export function maxChildren(opts: { readonly maxChildrenPerAgent?: number }): number {
  const n = opts.maxChildrenPerAgent ?? DEFAULT_MAX_CHILDREN;
  return Number.isInteger(n) ? Math.max(0, Math.min(MAX_CHILDREN_CAP, n)) : DEFAULT_MAX_CHILDREN;
}

/**
 * Spawns one agent may ask for, as a token bucket: a burst, then one per refill interval. Kept by
 * the supervisor per parent lifecycle while it runs, so a parent whose runner restarts or that a
 * stop keeping agents brings back does not get a fresh burst; a new supervisor process starts
 * fresh ones (the bound on children still holds).
 */
export class SpawnRate {
  #tokens: number = CHILD_SPAWN_RATE.burst;
  #refilled: number;
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
    this.#refilled = now();
  }

  /** Takes one spawn, or refuses naming when the next one is allowed. */
  take(parent: string): void {
    const t = this.#now();
    const add = Math.floor((t - this.#refilled) / CHILD_SPAWN_RATE.refillMs);
    if (add > 0) {
      this.#tokens = Math.min(CHILD_SPAWN_RATE.burst, this.#tokens + add);
      this.#refilled += add * CHILD_SPAWN_RATE.refillMs;
    }
    if (this.#tokens < 1) {
      const wait = Math.ceil((this.#refilled + CHILD_SPAWN_RATE.refillMs - t) / 1000);
      throw new CotalError(
        "spawn_rate_limited",
        `${parent} asked for spawns faster than one every ${
          CHILD_SPAWN_RATE.refillMs / 1000
        } s; try again in ${wait} s.`,
      );
    }
    this.#tokens -= 1;
  }
}

/** What the policy needs of the supervisor, for one parent. */
export interface DelegationOps {
  /** Spawns one agent from a full spawn request (the operator's path, same checks). */
  spawn(args: JsonObject): Promise<AgentRow>;
  despawn(name: string): Promise<unknown>;
  /** The running agents the parent spawned. */
  children(): AgentRow[];
  /** How many agents the parent has: running, and kept to come back. */
  count(): number;
  /** Whether the parent is online (its own spawn complete): before that it may not spawn. */
  ready(): boolean;
  /** The parent's spawn rate, kept across its restarts. */
  rate: SpawnRate;
  log(line: string): void;
}

/** The subset of a row the parent is told about each child. */
function childView(r: AgentRow): Record<string, unknown> {
  return {
    name: r.name,
    id: r.id,
    agent: r.agent,
    ...(r.role ? { role: r.role } : {}),
    status: r.status,
    present: r.present,
  };
}

/**
 * The handler of `parent`'s spawn channel: `templates` are the spawn requests of the personas
 * its own request lists (validated with it), `maxChildren` the space's bound, `parentUid` its
 * lifecycle (what its children are marked with, so a later agent of the same name inherits
 * none of them).
 */
export function delegatedSpawnHandler(
  parent: { readonly name: string; readonly lifecycleUid: string },
  templates: Readonly<Record<string, JsonObject>>,
  maxChildren: number,
  ops: DelegationOps,
): SpawnChannelHandler {
  const name = parent.name;
  return async (req: SpawnChannelRequest) => {
    if (req.op === "list") return { children: ops.children().map(childView) };
    if (req.op === "despawn") {
      if (!ops.children().some((c) => c.name === req.name)) {
        throw new CotalError(
          "spawn_not_child",
          `${req.name} is not an agent ${name} spawned; an agent may despawn only its own.`,
        );
      }
      await ops.despawn(req.name);
      ops.log(`manager: ${name} despawned its agent ${req.name}`);
      return { name: req.name };
    }
    if (!ops.ready()) {
      throw new CotalError(
        "spawn_not_ready",
        `${name} is still starting; it may spawn once it is online.`,
      );
    }
    const template = Object.hasOwn(templates, req.persona) ? templates[req.persona] : undefined;
    if (!template) {
      throw new CotalError(
        "spawn_not_granted",
        `${name} may not spawn ${JSON.stringify(req.persona)}; it may spawn ${
          Object.keys(templates).join(", ")
        }.`,
      );
    }
    if (ops.count() >= maxChildren) {
      throw new CotalError(
        "spawn_children_exhausted",
        `${name} runs ${maxChildren} agents of its own already; despawn one first.`,
      );
    }
    ops.rate.take(name);
    ops.log(`manager: ${name} asked to spawn ${req.persona}`);
    const row = await ops.spawn({ ...template, spawnedBy: parent.lifecycleUid });
    return childView(row);
  };
}

/** The names of the agents in `rows` that the lifecycle `parentUid` spawned. */
export function childrenOf(
  rows: Iterable<{ name: string; request?: Readonly<Record<string, unknown>> }>,
  parentUid: string,
): string[] {
  return [...rows].filter((r) => r.request?.spawnedBy === parentUid).map((r) => r.name);
}

/**
 * The actor ledger: per space, which `(owner, actor)` may hold a bearer and with what ACL.
 * It is the one authorization source behind the IdP exchange and the connect gate, so it
 * fails closed: an absent row denies, and an unreadable or malformed ledger denies everything
 * (and refuses writes, so a corrupt ledger is repaired, never silently replaced).
 *
 * Storage is one JSON document per space in a SecretStore (`space.<hex>/actors.json`), so a
 * hosted composition injects its own backend; the filesystem default is an FsSecretStore
 * rooted at a state directory the caller passes.
 *
 * @module
 */

import { CotalError } from "../errors.ts";
import { channelCovers, isValidChannel, newLifecycleUid } from "../wire/mod.ts";
import { FsSecretStore } from "../workspace/mod.ts";
import type { SecretStore } from "../workspace/mod.ts";
import { describeClaim } from "./claims.ts";
import { isActorToken, isDerivedOwner, isLifecycleUid, isScopeList } from "./grammar.ts";
import { isPlainObject } from "./jwks.ts";
import { actorLedgerKey } from "./keys.ts";
import type { ValidatedBearer } from "./validate.ts";

/** What an operator grants: every ACL list is explicit (an omitted list never means `>`). */
export interface ActorGrant {
  /** The owner the actor belongs to. */
  owner: string;
  /** The actor's name. */
  actor: string;
  /** Channels the actor subscribes to live; each must be covered by `allowSubscribe`. */
  subscribe: readonly string[];
  /** Channel patterns the actor may read. */
  allowSubscribe: readonly string[];
  /** Channel patterns the actor may post to. */
  allowPublish: readonly string[];
  /** Scopes (`admin`, `spawn`, `supervise`, `run`, `role:<r>`); defaults to none. */
  scope?: readonly string[];
  /** The anycast role the actor serves, if any. */
  role?: string;
  /** A human note on the grant. */
  label?: string;
  /**
   * The lifecycle the row is for: a supervisor grants each agent lifecycle its own, so the row
   * and the agent's durables name the same one. Default: a fresh one, on every grant.
   */
  lifecycleUid?: string;
}

/** A ledger row as stored and returned. */
export interface ActorRow {
  /** The owner the actor belongs to. */
  owner: string;
  /** The actor's name. */
  actor: string;
  /** Channels joined at connect. */
  subscribe: string[];
  /** Channels it may read. */
  allowSubscribe: string[];
  /** Channels it may post to. */
  allowPublish: string[];
  /** Scopes its bearers carry. */
  scope: string[];
  /** The role whose tasks it serves. */
  role?: string;
  /** A human note on the row. */
  label?: string;
  /** Rotated on every grant, so a bearer minted under an earlier grant stops connecting. */
  lifecycleUid: string;
  /** Unix seconds. */
  grantedAt: number;
}

/** The per-space actor ledger. */
export interface ActorLedger {
  /** The space the ledger is for. */
  readonly space: string;
  /**
   * Insert or replace the row (whole-row upsert) with a fresh lifecycle uid (or the grant's).
   * With `ownerCap`, a new row is refused (`ledger_full`) once its owner holds that many,
   * counted inside the same serialised write.
   */
  grant(grant: ActorGrant, opts?: { ownerCap?: number }): Promise<ActorRow>;
  /**
   * Remove the row; `false` when there was none. With `lifecycleUid`, only a row of that
   * lifecycle is removed (checked inside the serialised write).
   */
  revoke(owner: string, actor: string, opts?: { lifecycleUid?: string }): Promise<boolean>;
  /** Every row, sorted by owner then actor. */
  list(): Promise<ActorRow[]>;
  /** The row, or `undefined` when the actor is not granted. */
  get(owner: string, actor: string): Promise<ActorRow | undefined>;
  /** The row, or `actor_not_granted`. */
  authorize(owner: string, actor: string): Promise<ActorRow>;
  /** The connect gate: the bearer's grant must still be the current one, scope included. */
  authorizeBearer(bearer: ValidatedBearer): Promise<ActorRow>;
}

/** Options for {@linkcode createActorLedger}: exactly one of `store` and `stateDir`. */
export interface ActorLedgerOptions {
  /** The space the ledger is for. */
  space: string;
  /** The store it lives in (`space.<hex>/actors.json`). */
  store?: SecretStore;
  /** Root of a filesystem store (e.g. the `.cotal` state dir resolved by the CLI). */
  stateDir?: string;
}

const MAX_ROWS = 10_000;
const MAX_ACL_ENTRIES = 256;
const ROW_KEYS = new Set([
  "owner",
  "actor",
  "subscribe",
  "allowSubscribe",
  "allowPublish",
  "scope",
  "role",
  "label",
  "lifecycleUid",
  "grantedAt",
]);
const ROLE_RE = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * Open the actor ledger of `space` over a SecretStore (or a filesystem store at `stateDir`).
 *
 * @example
 * ```ts
 * const ledger = createActorLedger({ space: "demo", store });
 * await ledger.grant({ owner, actor: "alice", subscribe: ["general"],
 *   allowSubscribe: ["general"], allowPublish: ["general"] });
 * ```
 */
export function createActorLedger(opts: ActorLedgerOptions): ActorLedger {
  const { space } = opts;
  if (typeof space !== "string" || space === "" || (!opts.store === !opts.stateDir)) {
    throw new CotalError(
      "ledger_bad_options",
      "The actor ledger needs a space and exactly one of a SecretStore or a state directory.",
    );
  }
  const store = opts.store ?? new FsSecretStore(opts.stateDir!);
  const key = actorLedgerKey(space);
  // Serialises this process's read-modify-write cycles (the store has no compare-and-set).
  let writes: Promise<unknown> = Promise.resolve();

  async function read(): Promise<Map<string, ActorRow>> {
    let text: string | undefined;
    try {
      text = await store.get(key);
    } catch (cause) {
      throw unreadable(space, "the store refused the read", cause);
    }
    return text === undefined ? new Map() : parseLedger(text, space);
  }

  function write(rows: Map<string, ActorRow>): Promise<void> {
    const actors = [...rows.values()].sort(byPrincipal);
    return store.put(key, JSON.stringify({ ver: 1, space, actors }));
  }

  function serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = writes.then(fn, fn);
    writes = next.catch(() => {});
    return next;
  }

  async function authorize(owner: string, actor: string): Promise<ActorRow> {
    assertPrincipal(owner, actor);
    const row = (await read()).get(`${owner}.${actor}`);
    if (!row) {
      throw new CotalError(
        "actor_not_granted",
        `Actor ${JSON.stringify(actor)} of owner ${owner} is not granted in space ` +
          `${JSON.stringify(space)}; an operator must grant it (cotal actor grant).`,
      );
    }
    return row;
  }

  return {
    space,
    async grant(grant, opts = {}) {
      const row = rowFromGrant(grant);
      return await serial(async () => {
        const rows = await read();
        const added = !rows.has(`${row.owner}.${row.actor}`);
        if (added && rows.size >= MAX_ROWS) {
          throw new CotalError(
            "ledger_full",
            `The actor ledger of ${JSON.stringify(space)} holds ${MAX_ROWS} rows; revoke some.`,
          );
        }
        const cap = opts.ownerCap;
        if (added && cap !== undefined) {
          let held = 0;
          for (const r of rows.values()) if (r.owner === row.owner) held++;
          if (held >= cap) {
            throw new CotalError(
              "ledger_full",
              `Owner ${row.owner} holds ${cap} rows in the actor ledger of ${
                JSON.stringify(space)
              }; revoke some.`,
            );
          }
        }
        rows.set(`${row.owner}.${row.actor}`, row);
        await write(rows);
        return structuredClone(row);
      });
    },
    async revoke(owner, actor, opts = {}) {
      assertPrincipal(owner, actor);
      return await serial(async () => {
        const rows = await read();
        const id = `${owner}.${actor}`;
        const row = rows.get(id);
        if (opts.lifecycleUid !== undefined && row?.lifecycleUid !== opts.lifecycleUid) {
          return false;
        }
        if (!rows.delete(id)) return false;
        await write(rows);
        return true;
      });
    },
    async list() {
      return [...(await read()).values()].sort(byPrincipal);
    },
    async get(owner, actor) {
      assertPrincipal(owner, actor);
      return (await read()).get(`${owner}.${actor}`);
    },
    authorize,
    async authorizeBearer(bearer) {
      if (bearer.space !== space) {
        throw new CotalError(
          "bearer_bad_audience",
          `The bearer is for space ${JSON.stringify(bearer.space)}, not ${JSON.stringify(space)}.`,
        );
      }
      const row = await authorize(bearer.owner, bearer.actor);
      if (bearer.lifecycleUid !== row.lifecycleUid) {
        throw new CotalError(
          "bearer_stale",
          `The bearer of ${bearer.owner}.${bearer.actor} was minted under an earlier (or no) ` +
            "grant; exchange for a fresh bearer.",
        );
      }
      const extra = bearer.scope.find((s) => !row.scope.includes(s));
      if (extra !== undefined) {
        throw new CotalError(
          "bearer_scope_exceeds_grant",
          `The bearer carries scope ${JSON.stringify(extra)}, which the current grant no ` +
            "longer has; exchange for a fresh bearer.",
        );
      }
      return row;
    },
  };
}

function rowFromGrant(g: ActorGrant): ActorRow {
  if (!isPlainObject(g)) badGrant("the grant is not an object");
  assertPrincipal(g.owner, g.actor);
  const row: ActorRow = {
    owner: g.owner,
    actor: g.actor,
    subscribe: aclList("subscribe", g.subscribe),
    allowSubscribe: aclList("allowSubscribe", g.allowSubscribe),
    allowPublish: aclList("allowPublish", g.allowPublish),
    scope: g.scope === undefined ? [] : [...g.scope],
    lifecycleUid: g.lifecycleUid ?? newLifecycleUid(),
    grantedAt: Math.floor(Date.now() / 1000),
  };
  if (g.role !== undefined) row.role = g.role;
  if (g.label !== undefined) row.label = g.label;
  const problem = rowProblem({ ...row });
  if (problem) badGrant(problem);
  return row;
}

function aclList(name: string, value: unknown): string[] {
  if (!Array.isArray(value)) {
    badGrant(`${name} is missing; state every ACL list explicitly (an empty list grants none)`);
  }
  return [...value];
}

function rowProblem(row: Record<string, unknown>): string | undefined {
  const extra = Object.keys(row).find((k) => !ROW_KEYS.has(k));
  if (extra) return `unknown field ${describeClaim(extra)}`;
  if (!isDerivedOwner(row.owner)) return `owner ${describeClaim(row.owner)} is not derived`;
  if (!isActorToken(row.actor)) return `actor ${describeClaim(row.actor)} is not an actor token`;
  for (const name of ["subscribe", "allowSubscribe", "allowPublish"]) {
    const list = row[name];
    if (
      !Array.isArray(list) || list.length > MAX_ACL_ENTRIES ||
      !list.every((c) => isValidChannel(c)) || new Set(list).size !== list.length
    ) return `${name} is not a list of distinct valid channels`;
  }
  const allow = row.allowSubscribe as string[];
  const uncovered = (row.subscribe as string[]).find((c) =>
    !allow.some((p) => channelCovers(p, c))
  );
  if (uncovered) return `subscribe ${describeClaim(uncovered)} is outside allowSubscribe`;
  if (!isScopeList(row.scope)) return "scope is not a list of distinct scope names";
  if (row.role !== undefined && (typeof row.role !== "string" || !ROLE_RE.test(row.role))) {
    return "role is not a role token";
  }
  if (row.label !== undefined && (typeof row.label !== "string" || row.label.length > 200)) {
    return "label is not a string of at most 200 characters";
  }
  if (!isLifecycleUid(row.lifecycleUid)) return "lifecycleUid is malformed";
  if (!Number.isSafeInteger(row.grantedAt)) return "grantedAt is not a Unix time";
  return undefined;
}

function parseLedger(text: string, space: string): Map<string, ActorRow> {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw unreadable(space, "it is not JSON");
  }
  if (!isPlainObject(doc) || doc.ver !== 1 || !Array.isArray(doc.actors)) {
    throw unreadable(space, "it is not a version 1 ledger");
  }
  if (doc.space !== space) throw unreadable(space, "it belongs to another space");
  if (doc.actors.length > MAX_ROWS) throw unreadable(space, "it holds too many rows");
  const rows = new Map<string, ActorRow>();
  for (const raw of doc.actors) {
    // One bad row poisons the whole ledger: skipping it could resurrect or hide a grant.
    const problem = isPlainObject(raw) ? rowProblem(raw) : "a row is not an object";
    if (problem) throw unreadable(space, problem);
    const row = raw as unknown as ActorRow;
    const id = `${row.owner}.${row.actor}`;
    if (rows.has(id)) throw unreadable(space, `${id} is listed twice`);
    rows.set(id, row);
  }
  return rows;
}

function assertPrincipal(owner: unknown, actor: unknown): asserts owner is string {
  if (!isDerivedOwner(owner) || !isActorToken(actor)) {
    throw new CotalError(
      "actor_bad_name",
      `The principal ${describeClaim(owner)}.${describeClaim(actor)} is invalid; the owner ` +
        "is u_ + 26 base32 characters and the actor 1-64 characters of [A-Za-z0-9_].",
    );
  }
}

function badGrant(detail: string): never {
  throw new CotalError("ledger_bad_grant", `The actor grant is refused: ${detail}.`);
}

function unreadable(space: string, detail: string, cause?: unknown): CotalError {
  return new CotalError(
    "ledger_unreadable",
    `The actor ledger of space ${JSON.stringify(space)} is unreadable (${detail}), so every ` +
      "actor is denied; restore it from backup, or remove it and re-grant every actor.",
    cause === undefined ? undefined : { cause },
  );
}

function byPrincipal(a: ActorRow, b: ActorRow): number {
  return a.owner === b.owner ? (a.actor < b.actor ? -1 : 1) : (a.owner < b.owner ? -1 : 1);
}

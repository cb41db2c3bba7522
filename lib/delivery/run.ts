/**
 * `runDelivery`: the delivery daemon of one space, composed from its parts. It runs from a
 * pre-minted scoped `delivery` cred (from an injected store, the workspace store, or a
 * `--creds` file, exactly one of them) and never loads a signer.
 *
 * Start-up order: cred, connection, registry mirrors, lease (acquired before anything binds a
 * durable: two consumers on one durable would split delivery), durables, loops, rails, then
 * the lease is marked ready; the membership feed (fail-soft), the lease watch and renew, and
 * the cred's 75 % re-read follow.
 *
 * @module
 */

import type { NatsConnection } from "nats";
import { CotalError } from "../errors.ts";
import type { ParsedArgs } from "../command_types.ts";
import type { SecretStore } from "../workspace/mod.ts";
import { connectDelivery, openDeliveryContext } from "./boot.ts";
import {
  type DeliveryContext,
  type DeliveryCounters,
  type DeliveryLogger,
  floodSafeLogger,
  stderrLogger,
} from "./context.ts";
import { loadCred, RenewingCred } from "./cred_renewal.ts";
import { flagValue, readFirstCred, resolveCredSource } from "./cred_source.ts";
import { evictPrincipal } from "./evict.ts";
import { acquireLease, DeliveryLease } from "./lease.ts";
import { LeaseKeeper } from "./lease_keeper.ts";
import { SetAside } from "./setaside.ts";
import { HolderLock } from "../workspace/mod.ts";
import { type FeedStatus, type MembershipFeed, startMembershipFeed } from "./membership_feed.ts";
import { DeliveryServing } from "./serving.ts";
import type { SysSource } from "./sys_creds.ts";

/** Where a run of the daemon is. */
export interface DeliveryStatus {
  /** The space served. */
  space: string;
  /** This daemon's lease holder id. */
  holder: string;
  /** This process's incarnation. */
  incarnation: string;
  /** True while the lease is held and every loop and rail is bound. */
  ready: boolean;
  /** The delivery cred in use. */
  credential: { expiresAt?: number; adoptions: number; lastError?: string };
  /** The membership feed's state. */
  membership: FeedStatus;
  /** What it has done since start. */
  counters: DeliveryCounters;
  /** What could not be delivered: dead letters, members' missed copies and pending markers. */
  setAside: {
    deadLetters: number;
    copiesMissed: number;
    gapsPending: number;
    markersDelivered: number;
  };
}

/** How a run ended: 0 after `stop()`, 1 when the lease was lost or the broker went away. */
export interface DeliveryExit {
  /** The process exit code. */
  code: 0 | 1;
  /** Why it ended. */
  reason: string;
}

/** A running delivery daemon. */
export interface DeliveryDaemon {
  /** The space served. */
  readonly space: string;
  /** Its state now. */
  status(): DeliveryStatus;
  /** Graceful stop: drain in-flight work, release the lease, close. */
  stop(): Promise<void>;
  /** Resolves once the daemon has stopped, for whatever reason. */
  readonly closed: Promise<DeliveryExit>;
}

const DEFAULT_SERVER = "nats://127.0.0.1:4222";

/** The daemon's args, checked: space, servers and the lease wait. */
function daemonArgs(args: ParsedArgs, store?: SecretStore) {
  const space = flagValue(args, "space");
  // Checked before the space, so an injected store with a local flag is refused however called.
  if (store && (flagValue(args, "creds") ?? flagValue(args, "creds-dir")) !== undefined) {
    resolveCredSource(args, "-", store);
  }
  if (space === undefined) {
    throw new CotalError("missing_space", "The delivery daemon needs --space <name>.");
  }
  const leaseWaitS = Number(flagValue(args, "lease-wait") ?? "0");
  if (!Number.isFinite(leaseWaitS) || leaseWaitS < 0) {
    throw new CotalError("usage", "--lease-wait needs a number of seconds (0 or more).");
  }
  const servers = (flagValue(args, "server") ?? DEFAULT_SERVER).split(",");
  return { space, servers, leaseWaitMs: leaseWaitS * 1000, lockPath: flagValue(args, "lock-file") };
}

/** The membership feed's graph input: open durable memberships per principal. */
function durableMemberships(ctx: DeliveryContext): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const [, e] of ctx.members.entries()) {
    const r = e.value;
    if (!r.activated || r.leaveCursor !== undefined) continue;
    out.set(r.owner, [...(out.get(r.owner) ?? []), r.channel]);
  }
  return out;
}

/** The code of a `reloadCreds` request the renewal could not satisfy, by its outcome. */
const RELOAD_REFUSED = {
  missed: "reload_missed",
  missing: "reload_missing",
  refused: "reload_refused",
} as const;

/**
 * Boots the delivery daemon for `args.values.space` on `args.values.server` (default
 * `nats://127.0.0.1:4222`) and resolves once it holds the lease and is serving. The cred
 * comes from `store` (under `deliveryCredsKey(space, { injected: true })`), or, without one,
 * from `--creds <file>`, `--creds-dir <dir>` (the space's creds as files named by kind, what a
 * systemd unit loads) or the workspace store at `--root`; a flag with an injected store is
 * refused. `--lease-wait <s>` keeps retrying a held lease for that long before refusing;
 * `--lock-file <path>` (see `HolderLock`) lets it take over at once from a holder proven dead.
 *
 * Refuses with `lease_held` when another daemon serves the space, `lease_denied` when the cred
 * may not write the lease, and `missing_delivery_cred` when the source holds no cred (the error
 * names the per-space key). The cred is re-read at 75 % of its life and swapped in once a probe
 * connection proves it; an unchanged cred past that point is reported loudly on every check.
 *
 * @example
 * ```ts
 * const daemon = await runDelivery({ values: { space, server }, positionals: [], raw: [] }, store);
 * const exit = await daemon.closed;
 * ```
 */
export async function runDelivery(
  args: ParsedArgs,
  store?: SecretStore,
  opts: { log?: DeliveryLogger } = {},
): Promise<DeliveryDaemon> {
  const log = floodSafeLogger(opts.log ?? stderrLogger());
  const { space, servers, leaseWaitMs, lockPath } = daemonArgs(args, store);
  const source = resolveCredSource(args, space, store);
  const initial = await loadCred(await readFirstCred(source, space), "delivery cred");
  const cred = new RenewingCred(source.reader, initial, { what: "delivery cred", servers, log });
  const holder = initial.principal ?? `local.${initial.nkey}`;
  const incarnation = crypto.randomUUID();

  const lock = lockPath ? await HolderLock.open(lockPath) : undefined;
  log.info(`connecting to ${servers.join(",")} for space ${JSON.stringify(space)}`);
  let nc: NatsConnection;
  try {
    nc = await connectDelivery(servers, cred, initial.connId, log);
  } catch (err) {
    cred.stop();
    lock?.close();
    throw err;
  }
  const fail = async (err: unknown): Promise<never> => {
    cred.stop();
    await nc.close().catch(() => {});
    throw err;
  };

  let ctx: DeliveryContext;
  let held: DeliveryLease;
  try {
    ({ ctx, lease: held } = await openAndLease(nc, {
      space,
      holder,
      incarnation,
      connId: initial.connId,
      leaseWaitMs,
      lock,
      log,
    }));
  } catch (err) {
    lock?.close();
    return await fail(err);
  }
  log.info(`lease ${ctx.buckets.delivery}/lease.0 acquired as ${holder}`);

  // Assigned once, after shutdown (which stops it) is defined: a lease lost before then
  // must find it undefined, not in its temporal dead zone.
  // deno-lint-ignore prefer-const
  let feed: MembershipFeed | undefined;
  let stopping: Promise<void> | undefined;
  const closed = Promise.withResolvers<DeliveryExit>();
  const sysSource = sysSourceOf(source, space, initial.account);
  const serving = servingFor(ctx, held, { incarnation, sysSource, servers, cred });
  const shutdown = (exit: DeliveryExit, release: boolean) => {
    stopping ??= (async () => {
      keeper.stop();
      ctx.setaside?.stop();
      cred.stop();
      // Each step against the broker has a deadline: with the broker gone too (a stack killed
      // at once), a drain waited for a reconnect that never came, and the daemon never ended.
      await bounded(serving.disarm());
      if (release) await bounded(held.release().catch(() => false));
      else held.stopWatch();
      lock?.close();
      await bounded(feed?.stop().catch(() => {}));
      ctx.gate.close();
      for (const m of [ctx.members, ctx.channels, ctx.acl]) m.stop();
      await bounded(nc.drain().catch(() => {}));
      await nc.close().catch(() => {});
      if (exit.code !== 0) log.error(exit.reason);
      else log.info(exit.reason);
      closed.resolve(exit);
    })();
    return stopping;
  };
  const keeper = new LeaseKeeper(held, {
    get ready() {
      return serving.ready;
    },
    arm: () => serving.arm(),
    disarm: () => serving.disarm(),
    stopping: () => stopping !== undefined,
    taken: (reason) => shutdown({ code: 1, reason }, false),
    log,
  });
  keeper.startRenewing();
  keeper.followConnection(nc);

  try {
    await serving.arm();
    await held.watch(() => void keeper.decide("the lease row changed hands"));
  } catch (err) {
    keeper.stop();
    await serving.disarm();
    await held.release().catch(() => false);
    lock?.close();
    ctx.gate.close();
    for (const m of [ctx.members, ctx.channels, ctx.acl]) m.stop();
    return await fail(err);
  }
  cred.attach(nc);
  log.info(`delivery daemon up for space ${JSON.stringify(space)}`);

  feed = await startFeed(sysSource, servers, ctx, log);

  return {
    space,
    status: () =>
      daemonStatus({ space, holder, incarnation, ready: serving.ready, cred, feed, ctx }),
    stop: () => shutdown({ code: 0, reason: "delivery daemon stopped" }, true),
    closed: closed.promise,
  };
}

/** Where the `$SYS` creds are (the membership feed, evictions): none without a secret store. */
function sysSourceOf(
  source: ReturnType<typeof resolveCredSource>,
  space: string,
  expectedAccount: string,
): SysSource | undefined {
  return source.store && source.composition
    ? {
      store: source.store,
      space,
      composition: source.composition,
      expectedAccount,
      injected: source.injected,
    }
    : undefined;
}

/** The membership feed, or a warning that the graph is traffic-only without it. */
async function startFeed(
  sysSource: SysSource | undefined,
  servers: string[],
  ctx: DeliveryContext,
  log: DeliveryLogger,
): Promise<MembershipFeed | undefined> {
  if (!sysSource) {
    log.warn(
      "membership feed down, the graph is traffic-only: no secret store holds its creds (pass --root)",
    );
    return undefined;
  }
  return await startMembershipFeed({
    src: sysSource,
    servers,
    root: ctx.root,
    bucket: ctx.buckets.membership,
    log,
    durable: () => durableMemberships(ctx),
    intervalMs: Number(Deno.env.get("COTAL_MEMBERSHIP_INTERVAL_MS") ?? "") || undefined,
  });
}

/** What `status()` answers: the lease holder, readiness, the cred, the feed and the counters. */
function daemonStatus(d: {
  space: string;
  holder: string;
  incarnation: string;
  ready: boolean;
  cred: RenewingCred;
  feed?: MembershipFeed;
  ctx: DeliveryContext;
}) {
  const { cred, feed, ctx } = d;
  return {
    space: d.space,
    holder: d.holder,
    incarnation: d.incarnation,
    ready: d.ready,
    credential: {
      ...(cred.current.claims.exp ? { expiresAt: cred.current.claims.exp } : {}),
      adoptions: cred.adoptions,
      ...(cred.lastError ? { lastError: cred.lastError } : {}),
    },
    membership: feed?.status() ??
      { state: "down" as const, reason: "no secret store holds its creds" },
    counters: { ...ctx.counters },
    setAside: {
      deadLetters: ctx.setaside?.deadLetters ?? 0,
      copiesMissed: ctx.setaside?.copiesMissed ?? 0,
      gapsPending: ctx.setaside?.gapsPending ?? 0,
      markersDelivered: ctx.setaside?.markersDelivered ?? 0,
    },
  };
}

/**
 * The daemon's context (mirrors, buckets, the publish gate) and its lease on the space, waited
 * for up to `leaseWaitMs`; the mirrors stop again if the lease cannot be had.
 */
async function openAndLease(
  nc: NatsConnection,
  o: {
    space: string;
    holder: string;
    incarnation: string;
    connId: string;
    leaseWaitMs: number;
    lock?: HolderLock;
    log: DeliveryLogger;
  },
): Promise<{ ctx: DeliveryContext; lease: DeliveryLease }> {
  let lease: DeliveryLease | undefined;
  const ctx = await openDeliveryContext({
    nc,
    space: o.space,
    holder: o.holder,
    connId: o.connId,
    log: o.log,
    holdsLease: () => !!lease?.revision,
  });
  try {
    lease = await DeliveryLease.bind(nc, ctx.buckets.delivery, o.holder, o.incarnation, o.lock?.id);
    await acquireLease(lease, { space: o.space, waitMs: o.leaseWaitMs, lock: o.lock, log: o.log });
    ctx.setaside = await SetAside.open(ctx);
    return { ctx, lease };
  } catch (err) {
    for (const m of [ctx.members, ctx.channels, ctx.acl]) m.stop();
    throw err;
  }
}

/** What serves the space once the lease is held: the rail, the fan-out, evictions, reloads. */
function servingFor(
  ctx: DeliveryContext,
  held: DeliveryLease,
  o: { incarnation: string; sysSource?: SysSource; servers: string[]; cred: RenewingCred },
): DeliveryServing {
  return new DeliveryServing(ctx, held, {
    incarnation: o.incarnation,
    evictPrincipal: (principal: string) => {
      if (!o.sysSource) {
        throw new CotalError(
          "eviction_unavailable",
          "This daemon has no secret store for the $SYS creds (run it with --root or an injected " +
            "store); until then removal is deny-new only.",
        );
      }
      return evictPrincipal(o.sysSource, o.servers, principal);
    },
    reloadCreds: async () => {
      const outcome = await o.cred.check();
      if (outcome.kind === "adopted" || outcome.kind === "unchanged") return { ...outcome };
      throw new CotalError(RELOAD_REFUSED[outcome.kind], outcome.error);
    },
  });
}

/** How long one shutdown step may wait on the broker before the daemon goes on without it. */
export const SHUTDOWN_STEP_MS = 5_000;

/** Resolves once `p` settles, or after {@linkcode SHUTDOWN_STEP_MS}, whichever is first. */
function bounded(p: Promise<unknown> | undefined): Promise<void> {
  if (!p) return Promise.resolve();
  let t: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    p.then(() => {}, () => {}),
    new Promise<void>((r) => t = setTimeout(r, SHUTDOWN_STEP_MS)),
  ]).finally(() => clearTimeout(t));
}

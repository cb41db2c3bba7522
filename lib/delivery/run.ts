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

import type { NatsConnection, Subscription } from "nats";
import { connectWhenUp } from "../nats/connect.ts";
import { CotalError, isCotalError } from "../errors.ts";
import type { ParsedArgs } from "../cli/mod.ts";
import {
  deliveryCredsKey,
  type SecretStore,
  type SecretStoreComposition,
  workspaceSecretStore,
} from "../workspace/mod.ts";
import type { AclRecord } from "../wire/acl.ts";
import type { ChannelConfig } from "../wire/channels.ts";
import { bucketNames, streamNames, subjectRoot } from "../wire/mod.ts";
import { LEASE_QUIESCE_AFTER_MS, LEASE_RENEW_MS } from "./constants.ts";
import {
  type ChannelMembers,
  type DeliveryContext,
  type DeliveryCounters,
  type DeliveryLogger,
  Fence,
  floodSafeLogger,
  newCounters,
  stderrLogger,
} from "./context.ts";
import { type CredReader, loadCred, RenewingCred } from "./cred_renewal.ts";
import { ensureFanoutDurable, ensureReaderDurable } from "./durables.ts";
import { evictPrincipal } from "./evict.ts";
import { startFanout } from "./fanout.ts";
import { KvMirror } from "./kv_mirror.ts";
import { acquireLease, DeliveryLease } from "./lease.ts";
import { SetAside } from "./setaside.ts";
import { StorageWarden } from "./warden.ts";
import { HolderLock } from "../workspace/holder_lock.ts";
import { type MembershipRecord, parseMemberKey, parseMemberRecord } from "./members.ts";
import { type FeedStatus, type MembershipFeed, startMembershipFeed } from "./membership_feed.ts";
import { PublishGate } from "./publish_gate.ts";
import type { PullLoop } from "./pull_loop.ts";
import { startReader } from "./reader.ts";
import { bindRails } from "./service.ts";
import { startRowPrune } from "./membership_ops.ts";
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

function str(args: ParsedArgs, name: string): string | undefined {
  const v = args.values[name];
  if (v === undefined) return undefined;
  if (typeof v !== "string" || v === "") {
    throw new CotalError("usage", `--${name} needs a non-empty value.`);
  }
  return v;
}

interface Source {
  reader: CredReader;
  /** The store the membership and `$SYS` kinds are read from, when there is one. */
  store?: SecretStore;
  composition?: SecretStoreComposition;
  injected: boolean;
}

function resolveSource(args: ParsedArgs, space: string, store?: SecretStore): Source {
  const credsPath = str(args, "creds");
  const root = str(args, "root");
  if (store) {
    if (credsPath !== undefined) {
      throw new CotalError(
        "cred_source_conflict",
        "--creds cannot be combined with an injected secret store; the store is the only cred " +
          "source of a hosted composition.",
      );
    }
    const key = deliveryCredsKey(space, { injected: true });
    return {
      reader: { describe: key, read: () => store.get(key) },
      store,
      composition: { injected: true },
      injected: true,
    };
  }
  const ws = root !== undefined ? workspaceSecretStore(root) : undefined;
  const composition: SecretStoreComposition | undefined = root !== undefined ? { root } : undefined;
  if (credsPath !== undefined) {
    // The operator chose the file: it is the delivery cred's only source (the store's
    // delivery key is never read); the store, if any, still serves the membership kinds.
    return {
      reader: {
        describe: credsPath,
        read: () =>
          Deno.readTextFile(credsPath).catch((err) => {
            if (err instanceof Deno.errors.NotFound) return undefined;
            throw err;
          }),
      },
      store: ws,
      composition,
      injected: false,
    };
  }
  if (ws && composition) {
    const key = deliveryCredsKey(space, composition);
    return {
      reader: { describe: key, read: () => ws.get(key) },
      store: ws,
      composition,
      injected: false,
    };
  }
  throw new CotalError(
    "no_cred_source",
    "The delivery daemon has no cred source; pass --root <state dir> (the workspace store), " +
      "--creds <file>, or inject a secret store.",
  );
}

function decodeJson<T>(_key: string, value: Uint8Array): T | undefined {
  try {
    const v = JSON.parse(new TextDecoder().decode(value));
    return typeof v === "object" && v !== null && !Array.isArray(v) ? v as T : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Boots the delivery daemon for `args.values.space` on `args.values.server` (default
 * `nats://127.0.0.1:4222`) and resolves once it holds the lease and is serving. The cred
 * comes from `store` (under `deliveryCredsKey(space, { injected: true })`), or, without one,
 * from `--creds <file>` or the workspace store at `--root`; `--creds` with an injected store is
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
  const spaceArg = str(args, "space");
  // Checked before the space, so an injected store with a local flag is refused however called.
  if (store && str(args, "creds") !== undefined) resolveSource(args, "-", store);
  if (spaceArg === undefined) {
    throw new CotalError("missing_space", "The delivery daemon needs --space <name>.");
  }
  const space = spaceArg;
  const servers = (str(args, "server") ?? DEFAULT_SERVER).split(",");
  const leaseWaitS = Number(str(args, "lease-wait") ?? "0");
  if (!Number.isFinite(leaseWaitS) || leaseWaitS < 0) {
    throw new CotalError("usage", "--lease-wait needs a number of seconds (0 or more).");
  }
  const source = resolveSource(args, space, store);
  let text: string | undefined;
  try {
    text = await source.reader.read();
  } catch (err) {
    throw new CotalError(
      "delivery_cred_unreadable",
      `Could not read the delivery cred at ${source.reader.describe} (${
        isCotalError(err) ? err.code : (err as Error)?.name ?? "error"
      }).`,
    );
  }
  if (text === undefined) {
    throw new CotalError(
      "missing_delivery_cred",
      `No delivery cred at ${source.reader.describe}; mint a delivery cred for space ` +
        `${
          JSON.stringify(space)
        } and put it there (launch the space with cotal up, or pass --creds).`,
    );
  }
  const initial = await loadCred(text, "delivery cred");
  const cred = new RenewingCred(source.reader, initial, { what: "delivery cred", servers, log });
  const holder = initial.principal ?? `local.${initial.nkey}`;
  const incarnation = crypto.randomUUID();

  const lockPath = str(args, "lock-file");
  const lock = lockPath ? await HolderLock.open(lockPath) : undefined;
  log.info(`connecting to ${servers.join(",")} for space ${JSON.stringify(space)}`);
  let nc: NatsConnection;
  try {
    nc = await connectWhenUp({
      servers,
      authenticator: cred.authenticator(),
      inboxPrefix: `_INBOX_${initial.connId}`,
      name: "cotal-delivery",
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
      pingInterval: 2500,
      maxPingOut: 2,
      // Async stack traces cost an Error per request: far too much on the copy path.
      noAsyncTraces: true,
    }, { waiting: (why) => log.warn(`the broker is not up (${why}); waiting for it`) });
  } catch (err) {
    cred.stop();
    lock?.close();
    throw new CotalError(
      "broker_unreachable",
      `Could not connect to ${servers.join(",")} (${(err as Error)?.message ?? err}); check the ` +
        `delivery cred belongs to this broker.`,
    );
  }
  const fail = async (err: unknown): Promise<never> => {
    cred.stop();
    await nc.close().catch(() => {});
    throw err;
  };

  const buckets = bucketNames(space);
  const byChannel = new Map<string, ChannelMembers>();
  let ctx: DeliveryContext;
  let lease: DeliveryLease;
  const mirrors: { stop(): void }[] = [];
  try {
    const members = await KvMirror.start<MembershipRecord>(nc, {
      bucket: buckets.members,
      decode: (_k, v) => parseMemberRecord(v),
      // This daemon writes member rows: one overwritten by something that is no row is put
      // back (compare-and-set on the bad revision) while it holds the lease.
      onUndecodable: (key, raw, revision) => {
        if (!ctx?.membersKv || !lease?.revision) return;
        ctx.membersKv.update(key, raw, revision).then(
          () => log.warn(`member row ${key} was overwritten by no writer; put it back`),
          () => {},
        );
      },
      onChange: (key, rec) => {
        const k = parseMemberKey(key);
        if (!k) return;
        const set = byChannel.get(k.channel) ?? new Map();
        if (rec) set.set(key, rec);
        else set.delete(key);
        if (set.size > 0) byChannel.set(k.channel, set);
        else byChannel.delete(k.channel);
      },
    });
    mirrors.push(members);
    const [channels, acl] = await Promise.all([
      KvMirror.start<ChannelConfig>(nc, { bucket: buckets.channels, decode: decodeJson }),
      KvMirror.start<AclRecord>(nc, {
        bucket: buckets.acl,
        decode: (_k, v) => {
          const raw = decodeJson<Record<string, unknown>>(_k, v);
          if (!raw || !Array.isArray(raw.allowSubscribe)) return undefined;
          return {
            allowSubscribe: raw.allowSubscribe as string[],
            issuedAllowSubscribe: Array.isArray(raw.issuedAllowSubscribe)
              ? raw.issuedAllowSubscribe as string[]
              : raw.allowSubscribe as string[],
            revision: typeof raw.revision === "number" ? raw.revision : 0,
            updatedAt: typeof raw.updatedAt === "number" ? raw.updatedAt : 0,
          };
        },
      }),
    ]);
    mirrors.push(channels, acl);
    ctx = {
      space,
      root: subjectRoot(space),
      streams: streamNames(space),
      buckets,
      nc,
      js: nc.jetstream(),
      jsm: await nc.jetstreamManager(),
      gate: new PublishGate(nc, `_INBOX_${initial.connId}`),
      self: holder,
      fence: new Fence(),
      log,
      channels,
      members,
      acl,
      membersKv: await nc.jetstream().views.kv(buckets.members, { bindOnly: true }),
      byChannel,
      counters: newCounters(),
    };
    lease = await DeliveryLease.bind(nc, buckets.delivery, holder, incarnation, lock?.id);
    await acquireLease(lease, { space, waitMs: leaseWaitS * 1000, lock, log });
    ctx.setaside = await SetAside.open(ctx);
  } catch (err) {
    for (const m of mirrors) m.stop();
    lock?.close();
    return await fail(err);
  }
  log.info(`lease ${buckets.delivery}/lease.0 acquired as ${holder}`);

  let loops: PullLoop[] = [];
  let rails: Subscription[] = [];
  let ready = false;
  let feed: MembershipFeed | undefined;
  let stopping: Promise<void> | undefined;
  const closed = Promise.withResolvers<DeliveryExit>();

  const sysSource: SysSource | undefined = source.store && source.composition
    ? {
      store: source.store,
      space,
      composition: source.composition,
      expectedAccount: initial.account,
      injected: source.injected,
    }
    : undefined;
  const hooks = {
    ready: () => ready,
    incarnation,
    evictPrincipal: (principal: string) => {
      if (!sysSource) {
        throw new CotalError(
          "eviction_unavailable",
          "This daemon has no secret store for the $SYS creds (run it with --root or an injected " +
            "store); until then removal is deny-new only.",
        );
      }
      return evictPrincipal(sysSource, servers, principal);
    },
    reloadCreds: async () => {
      const outcome = await cred.check();
      if (outcome.kind === "adopted" || outcome.kind === "unchanged") return { ...outcome };
      throw new CotalError(`reload_${outcome.kind}`, outcome.error);
    },
  };

  let prune: { stop(): void } | undefined;
  const arm = async () => {
    ctx.fence.activate();
    await ensureFanoutDurable(ctx);
    await ensureReaderDurable(ctx);
    loops = [await startFanout(ctx), await startReader(ctx)];
    rails = bindRails(ctx, hooks);
    prune = startRowPrune(ctx, ctx.fence.token);
    ctx.warden = new StorageWarden(ctx, ctx.fence.token);
    ctx.warden.start();
    ctx.setaside?.start();
    await nc.flush();
    if (!(await lease.write({ ready: true }))) {
      throw new CotalError("lease_lost", "The lease changed hands while starting.");
    }
    ready = true;
  };
  const disarm = async () => {
    ready = false;
    ctx.fence.quiesce();
    for (const s of rails) s.unsubscribe();
    rails = [];
    prune?.stop();
    prune = undefined;
    ctx.warden?.stop();
    ctx.warden = undefined;
    await Promise.allSettled(loops.map((l) => l.stop()));
    loops = [];
  };
  const shutdown = (exit: DeliveryExit, release: boolean) => {
    stopping ??= (async () => {
      clearInterval(renewTimer);
      ctx.setaside?.stop();
      cred.stop();
      await disarm();
      if (release) await lease.release().catch(() => false);
      else lease.stopWatch();
      lock?.close();
      await feed?.stop().catch(() => {});
      ctx.gate.close();
      for (const m of [ctx.members, ctx.channels, ctx.acl]) m.stop();
      await nc.drain().catch(() => nc.close().catch(() => {}));
      if (exit.code !== 0) log.error(exit.reason);
      else log.info(exit.reason);
      closed.resolve(exit);
    })();
    return stopping;
  };

  // A renew failure is a question: the row is re-read before anything is decided, and the
  // daemon only goes quiet once it has been unable to prove ownership for long enough that a
  // successor could be about to acquire.
  let lastRenewSent = Date.now();
  let deciding = false;
  const decide = async (why: string) => {
    if (deciding || stopping) return;
    deciding = true;
    try {
      const view = await lease.read();
      if (view.state === "held") {
        lease.adopt(view);
        if (!ready && !stopping) {
          await arm().catch(async (err) => {
            log.warn(`re-arming failed (${(err as Error)?.message ?? err}); staying quiet`);
            await disarm();
          });
          if (ready) log.info("lease proven again: serving");
        }
        return;
      }
      // No holder wrote that row (a broker answer a member aimed at it): ours again, at once.
      // (A lost race with another such write is settled by the next renew.)
      if (view.state === "vacant") {
        if (await lease.takeOver(view.revision).catch(() => false)) {
          log.warn(`the lease row was overwritten by no holder (${why}); wrote it back`);
          if (!ready && !stopping) await arm().catch(() => disarm());
        }
        return;
      }
      if (view.state === "unknown") {
        if (ready && Date.now() - lastRenewSent > LEASE_QUIESCE_AFTER_MS) {
          log.warn(`cannot prove the lease (${why}: ${view.error}); going quiet`);
          await disarm();
        }
        return;
      }
      await disarm();
      if (view.state === "gone" && await lease.acquire().catch(() => false)) {
        log.warn(`the lease row vanished (${why}); re-acquired it`);
        await arm().catch(() => disarm());
        return;
      }
      // Taken: exit without releasing, so the successor's row survives.
      await shutdown({
        code: 1,
        reason: `lost the delivery lease (${why}); another daemon serves the space`,
      }, false);
    } finally {
      deciding = false;
    }
  };
  const renewTimer = setInterval(async () => {
    if (stopping || deciding) return;
    const sent = Date.now();
    try {
      if (await lease.write()) {
        lastRenewSent = sent;
        // Quiet through an outage, and the row is still ours: serve again.
        if (!ready) await decide("the lease renewed after a quiet spell");
        return;
      }
      await decide("renew refused");
    } catch (err) {
      await decide(`renew failed: ${(err as Error)?.message ?? err}`);
    }
  }, LEASE_RENEW_MS);

  // A broker that goes away is waited for, however long: the client reconnects every 250 ms,
  // the lease logic goes quiet once ownership cannot be proven, and serves again after.
  (async () => {
    for await (const s of nc.status()) {
      if (s.type === "disconnect") {
        log.warn("broker connection lost; reconnecting until it is back");
      } else if (s.type === "reconnect") {
        log.info("broker connection back");
        void decide("reconnected");
      } else if (s.type === "error") {
        log.warn(`connection error: ${String(s.data)}`);
      }
    }
  })().catch(() => {});

  try {
    await arm();
    await lease.watch(() => void decide("the lease row changed hands"));
  } catch (err) {
    clearInterval(renewTimer);
    await disarm();
    await lease.release().catch(() => false);
    lock?.close();
    ctx.gate.close();
    for (const m of [ctx.members, ctx.channels, ctx.acl]) m.stop();
    return await fail(err);
  }
  cred.attach(nc);
  log.info(`delivery daemon up for space ${JSON.stringify(space)}`);

  if (sysSource) {
    feed = await startMembershipFeed({
      src: sysSource,
      servers,
      root: ctx.root,
      bucket: buckets.membership,
      log,
      durable: () => {
        const out = new Map<string, string[]>();
        for (const [, e] of ctx.members.entries()) {
          const r = e.value;
          if (!r.activated || r.leaveCursor !== undefined) continue;
          out.set(r.owner, [...(out.get(r.owner) ?? []), r.channel]);
        }
        return out;
      },
      intervalMs: Number(Deno.env.get("COTAL_MEMBERSHIP_INTERVAL_MS") ?? "") || undefined,
    });
  } else {
    log.warn(
      "membership feed down, the graph is traffic-only: no secret store holds its creds (pass --root)",
    );
  }

  return {
    space,
    status: () => ({
      space,
      holder,
      incarnation,
      ready,
      credential: {
        ...(cred.current.claims.exp ? { expiresAt: cred.current.claims.exp } : {}),
        adoptions: cred.adoptions,
        ...(cred.lastError ? { lastError: cred.lastError } : {}),
      },
      membership: feed?.status() ?? { state: "down", reason: "no secret store holds its creds" },
      counters: { ...ctx.counters },
      setAside: {
        deadLetters: ctx.setaside?.deadLetters ?? 0,
        copiesMissed: ctx.setaside?.copiesMissed ?? 0,
        gapsPending: ctx.setaside?.gapsPending ?? 0,
        markersDelivered: ctx.setaside?.markersDelivered ?? 0,
      },
    }),
    stop: () => shutdown({ code: 0, reason: "delivery daemon stopped" }, true),
    closed: closed.promise,
  };
}

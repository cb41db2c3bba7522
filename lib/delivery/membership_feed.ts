/**
 * The membership feed's sweep: the display-only bucket `cotal_membership_<s>` saying who is
 * subscribed to which channel (live, from the broker's CONNZ) and who holds a durable
 * membership (from the members registry). It is never an input to delivery or authorization.
 *
 * It runs on two connections of its own, isolated from the backstop: the `$SYS` observer
 * (conn A, scans this account only) and the data-account `membership-rw` cred (conn B, the
 * only writer of the bucket, renewed from the store like the delivery cred). Any start problem
 * degrades the graph to traffic-only with a loud line; the backstop is unaffected.
 *
 * @module
 */

import type { KV, NatsConnection, Subscription } from "nats";
import { connect } from "../nats/connect.ts";
import { isCotalError } from "../errors.ts";
import { credsAuthenticatorFast, MEMBERSHIP_INBOX_PREFIX } from "../trust/mod.ts";
import { membershipRwCredsKey } from "../workspace/mod.ts";
import { isStoreFull, jsonBytes, listKeys, purgeJunkRows } from "../wire/kv.ts";
import { connectionsOverCap, MAX_CONNECTIONS_PER_CRED } from "./conn_cap.ts";
import { type ConnRecord, type ConnzScan, scanConnz } from "./connz.ts";
import { kickConnections } from "./evict.ts";
import {
  connKey,
  type FeedRow,
  feedRows,
  isFeedRow,
  listArrivals,
  staleRows,
  withListing,
  writeRows,
} from "./feed_rows.ts";
import type { DeliveryLogger } from "./context.ts";
import { type CredReader, loadCred, RenewingCred } from "./cred_renewal.ts";
import { loadObserver, type SysSource } from "./sys_creds.ts";

/** The heartbeat key: `{observedAt, count}` after every complete sweep. */
export const FEED_HEARTBEAT_KEY = "=feed";
const DEFAULT_INTERVAL_MS = 15_000;
const DEBOUNCE_MS = 400;

/** The feed's state: `down` carries the reason (the graph is traffic-only meanwhile). */
export type FeedStatus =
  | {
    state: "up";
    lastSweepAt?: number;
    principals: number;
    lastIncomplete?: string;
    /** Set while the channels shown are the last complete listing's (see FeedRow.liveAsOf). */
    liveAsOf?: number;
  }
  | { state: "down"; reason: string };

/** A running (or degraded) feed. */
export interface MembershipFeed {
  status(): FeedStatus;
  /** Runs one sweep now (for tests and event triggers). */
  sweep(): Promise<boolean>;
  stop(): Promise<void>;
}

/** Options of {@linkcode startMembershipFeed}. */
export interface MembershipFeedOptions {
  src: SysSource;
  servers: string[];
  /** `cotal.<token>`. */
  root: string;
  bucket: string;
  log: DeliveryLogger;
  /** Open durable memberships per principal, from the daemon's members mirror. */
  durable: () => Map<string, string[]>;
  intervalMs?: number;
}

function down(log: DeliveryLogger, reason: string): MembershipFeed {
  log.warn(`membership feed down, the graph is traffic-only: ${reason}`);
  return {
    status: () => ({ state: "down", reason }),
    sweep: () => Promise.resolve(false),
    stop: () => Promise.resolve(),
  };
}

/** Sweeps that skip the subscription listing after one failed, at most (doubling from 1). */
const MAX_LISTING_BACKOFF = 16;

/** Starts the feed; never throws (a start problem returns a `down` feed). */
export async function startMembershipFeed(opts: MembershipFeedOptions): Promise<MembershipFeed> {
  const { src, log } = opts;
  const rwKey = membershipRwCredsKey(src.space, src.composition);
  const reader: CredReader = { describe: rwKey, read: () => src.store.get(rwKey) };
  let rwText: string | undefined;
  try {
    rwText = await reader.read();
  } catch (err) {
    return down(log, `the store refused ${rwKey} (${isCotalError(err) ? err.code : "error"})`);
  }
  if (rwText === undefined) return down(log, `the membership-rw cred is missing (${rwKey})`);
  let observer;
  let rw: RenewingCred;
  try {
    observer = await loadObserver(src);
    rw = new RenewingCred(reader, await loadCred(rwText, "membership-rw cred"), {
      what: "membership-rw cred",
      servers: opts.servers,
      log,
    });
  } catch (err) {
    return down(log, isCotalError(err) ? err.message : String(err));
  }
  let a: NatsConnection, b: NatsConnection, kv: KV;
  try {
    ({ a, b, kv } = await openFeedConnections(opts, observer.text, rw));
  } catch (err) {
    rw.stop();
    return down(log, `could not open its connections (${(err as Error)?.message ?? err})`);
  }
  const written = new Map<string, FeedRow>();
  try {
    // Listed from the stream's subjects, not npm:nats's kv.keys(): a status line a member aimed
    // at a key (stored with its header on nats-server 2.10) never let that listing end.
    for (const k of await listKeys(await b.jetstreamManager(), opts.bucket)) {
      if (k !== FEED_HEARTBEAT_KEY) written.set(k, { live: [], durable: [], observedAt: 0 });
    }
  } catch {
    // An unlistable bucket only means stale rows are pruned once they are seen again.
  }
  const chatPrefix = `${opts.root}.chat.`;
  let status: FeedStatus = { state: "up", principals: 0 };
  let running: Promise<boolean> | undefined;

  const capConnections = connectionCapper(src, opts.servers, log);
  let cleared = 0;
  let blindSaidAt = 0;
  // The last complete subscription listing, per principal, and when it was taken.
  let lastLive = new Map<string, string[]>();
  let listed = new Set<string>();
  let listedAt = 0;
  // After a listing fails, the next ones are skipped for `skip` sweeps (doubling): a listing a
  // member made too large to arrive costs the broker its whole size every time it is asked.
  let backoff = 0;
  let skip = 0;
  const sweepOnce = async (): Promise<boolean> => {
    // The connection cap from a scan without subscription lists: small whatever members
    // subscribe to, so nothing they subscribe can keep it from completing (red team 20c).
    const counted = await scanConnz(a, src.expectedAccount, { subscriptions: false });
    if (counted.complete) capConnections(counted.conns);
    // The self-canary: a sweep that cannot see conn B cannot be trusted to see anyone.
    if (!counted.complete || !counted.conns.some((c) => c.user === rw.current.nkey)) {
      // Said, at most once a minute: a count that never arrives leaves the cap blind, and
      // red team 22 found it so with nothing in the log.
      const now = Date.now();
      if (now - blindSaidAt >= 60_000) {
        blindSaidAt = now;
        log.warn(
          `membership feed: the connection count is incomplete (${
            counted.reason ?? "the feed's own connection was not in it"
          }); the per-cred cap and the live view wait for a complete one`,
        );
      }
      status = {
        ...status,
        state: "up",
        lastIncomplete: counted.reason ?? "the feed's own connection was not in the scan",
      } as FeedStatus;
      return false;
    }
    // Subscription lists only of connections with chat interest: a member's other
    // subscriptions (its inbox, up to 1000 of up to 64 KiB each per connection) are not
    // listed unless it also subscribes a channel. Those lists are the member's to swell, so
    // when they cannot be read the rows keep the last complete listing's channels, marked
    // with its date, and who is connected stays current from the small scan (red team 20c).
    let listing: ConnzScan | undefined;
    if (skip > 0) skip--;
    else {
      listing = await scanConnz(a, src.expectedAccount, {
        subscriptions: true,
        interestIn: `${opts.root}.chat.>`,
      });
      if (listing.complete) backoff = 0;
      else {
        backoff = Math.min(MAX_LISTING_BACKOFF, Math.max(1, backoff * 2));
        skip = backoff;
        log.warn(
          `membership feed: the subscription listing did not arrive (${listing.reason}); ` +
            `channels stay as listed ${
              listedAt ? new Date(listedAt).toISOString() : "never"
            }, next try in ${backoff} sweeps`,
        );
        listing = undefined;
      }
    }
    const now = Date.now();
    let next: Map<string, FeedRow>;
    if (listing) {
      next = feedRows(withListing(counted.conns, listing.conns), chatPrefix, opts.durable(), now);
      lastLive = new Map([...next].map(([p, r]) => [p, r.live]));
      listed = new Set(counted.conns.map(connKey));
      listedAt = now;
    } else {
      // Connections that arrived since the last listing are listed one by one, the smallest
      // first, so a member who joins during a fat listing still shows its channels.
      const arrived = await listArrivals(a, src.expectedAccount, counted.conns, listed);
      for (const c of arrived) listed.add(connKey(c));
      for (const [p, live] of feedRows(arrived, chatPrefix, new Map(), now)) {
        lastLive.set(p, [...new Set([...(lastLive.get(p) ?? []), ...live.live])]);
      }
      next = staleRows(counted.conns, lastLive, listedAt, opts.durable(), now);
    }
    let refused = await writeRows(kv, written, next);
    if (refused !== undefined && isStoreFull(refused) && now - cleared > 60_000) {
      // Full of rows no sweep wrote (answers a member aimed at made-up keys): those go, at
      // most once a minute, and the rows are written again.
      cleared = now;
      const n = await purgeJunkRows(b, opts.bucket, ">", (_k, v) => isFeedRow(v));
      log.warn(`membership feed: the bucket was full; removed ${n} rows no sweep wrote`);
      refused = await writeRows(kv, written, next);
    }
    if (refused !== undefined) {
      log.warn(`membership feed: a row was refused (${(refused as Error)?.message ?? refused})`);
    }
    await kv.put(
      FEED_HEARTBEAT_KEY,
      jsonBytes({ observedAt: now, count: next.size, ...(listing ? {} : { liveAsOf: listedAt }) }),
    );
    status = {
      state: "up",
      lastSweepAt: now,
      principals: next.size,
      ...(listing ? {} : { liveAsOf: listedAt }),
    };
    return true;
  };
  const sweep = () => {
    running ??= sweepOnce().catch((err) => {
      log.warn(
        `membership feed sweep failed (${
          (err as Error)?.message ?? err
        }); the last good state stays`,
      );
      return false;
    }).finally(() => running = undefined);
    return running;
  };

  let debounce: ReturnType<typeof setTimeout> | undefined;
  const subs: Subscription[] = [];
  for (const ev of ["CONNECT", "DISCONNECT"]) {
    subs.push(a.subscribe(`$SYS.ACCOUNT.${src.expectedAccount}.${ev}`, {
      callback: () => {
        clearTimeout(debounce);
        debounce = setTimeout(() => void sweep(), DEBOUNCE_MS);
      },
    }));
  }
  const interval = setInterval(() => void sweep(), opts.intervalMs ?? DEFAULT_INTERVAL_MS);
  await sweep();
  log.info("membership feed up");
  return {
    status: () => status,
    sweep,
    async stop() {
      clearInterval(interval);
      clearTimeout(debounce);
      rw.stop();
      for (const s of subs) s.unsubscribe();
      await running?.catch(() => {});
      await capConnections.settled();
      await a.close().catch(() => {});
      await b.close().catch(() => {});
    },
  };
}

/**
 * What a sweep calls with its scan: a cred over its connection cap loses its newest extras
 * (lib/delivery/conn_cap.ts); one round of kicks at a time, said once per round.
 */
function connectionCapper(src: SysSource, servers: string[], log: DeliveryLogger) {
  let kicking: Promise<void> | undefined;
  const cap = (conns: readonly ConnRecord[]) => {
    const over = connectionsOverCap(conns);
    if (over.length === 0 || kicking) return;
    const who = [...new Set(over.map((c) => c.principal ?? c.user))].join(", ");
    kicking = kickConnections(src, servers, over).then(
      (n) =>
        log.warn(
          `${over.length} connections over the cap of ${MAX_CONNECTIONS_PER_CRED} per cred (${who}): kicked ${n}`,
        ),
      (err) =>
        log.warn(
          `connections over the cap of ${MAX_CONNECTIONS_PER_CRED} per cred (${who}) could not be kicked (${
            isCotalError(err) ? err.code : (err as Error)?.message ?? err
          })`,
        ),
    ).finally(() => kicking = undefined);
  };
  return Object.assign(cap, { settled: () => kicking ?? Promise.resolve() });
}

/**
 * The feed's two connections: A observes (`$SYS` connz and connect events) with the observer
 * cred, B writes the bucket with the renewing membership-rw cred. Both, or neither.
 */
async function openFeedConnections(
  opts: MembershipFeedOptions,
  observerCreds: string,
  rw: RenewingCred,
): Promise<{ a: NatsConnection; b: NatsConnection; kv: KV }> {
  let a: NatsConnection | undefined;
  let b: NatsConnection | undefined;
  try {
    a = await connect({
      servers: opts.servers,
      authenticator: credsAuthenticatorFast(observerCreds),
      inboxPrefix: MEMBERSHIP_INBOX_PREFIX,
      name: "cotal-membership-observer",
      noAsyncTraces: true,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
    });
    b = await connect({
      servers: opts.servers,
      authenticator: rw.authenticator(),
      inboxPrefix: `_INBOX_${rw.current.connId}`,
      name: "cotal-membership-rw",
      noAsyncTraces: true,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
    });
    rw.attach(b);
    return { a, b, kv: await b.jetstream().views.kv(opts.bucket, { bindOnly: true }) };
  } catch (err) {
    await a?.close().catch(() => {});
    await b?.close().catch(() => {});
    throw err;
  }
}

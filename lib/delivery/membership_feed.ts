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
import { connect } from "../nats/mod.ts";
import { isCotalError } from "../errors.ts";
import { credsAuthenticatorFast, MEMBERSHIP_INBOX_PREFIX } from "../trust/mod.ts";
import { membershipRwCredsKey } from "../workspace/mod.ts";
import { isStoreFull, jsonBytes, listKeys, purgeJunkRows } from "../wire/mod.ts";
import { connectionsOverCap, MAX_CONNECTIONS_PER_CRED } from "./conn_cap.ts";
import { type ConnRecord, scanConnz } from "./connz.ts";
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
  const sweeper = new FeedSweeper(opts, { a, b, kv, rw }, await rowsInBucket(b, opts.bucket));
  const sweep = () => sweeper.sweep();

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
    status: () => sweeper.status,
    sweep,
    async stop() {
      clearInterval(interval);
      clearTimeout(debounce);
      rw.stop();
      for (const s of subs) s.unsubscribe();
      await sweeper.settled();
      await a.close().catch(() => {});
      await b.close().catch(() => {});
    },
  };
}

/** The rows already in the bucket, as empty rows (pruned by the first sweep that lacks them). */
async function rowsInBucket(b: NatsConnection, bucket: string): Promise<Map<string, FeedRow>> {
  const written = new Map<string, FeedRow>();
  try {
    // Listed from the stream's subjects, not npm:nats's kv.keys(): a status line a member aimed
    // at a key (stored with its header on nats-server 2.10) never let that listing end.
    for (const k of await listKeys(await b.jetstreamManager(), bucket)) {
      if (k !== FEED_HEARTBEAT_KEY) written.set(k, { live: [], durable: [], observedAt: 0 });
    }
  } catch {
    // An unlistable bucket only means stale rows are pruned once they are seen again.
  }
  return written;
}

/** The feed's two connections and its bucket. */
interface FeedConnections {
  /** The `$SYS` observer. */
  a: NatsConnection;
  /** The bucket's writer. */
  b: NatsConnection;
  kv: KV;
  rw: RenewingCred;
}

/**
 * One sweep at a time over the feed's state: the rows written, the last complete subscription
 * listing and the listing's backoff.
 */
class FeedSweeper {
  status: FeedStatus = { state: "up", principals: 0 };
  #running: Promise<boolean> | undefined;
  readonly #opts: MembershipFeedOptions;
  readonly #conns: FeedConnections;
  readonly #written: Map<string, FeedRow>;
  readonly #chatPrefix: string;
  readonly #capConnections: ReturnType<typeof connectionCapper>;
  #cleared = 0;
  #blindSaidAt = 0;
  // The last complete subscription listing, per principal, and when it was taken.
  #lastLive = new Map<string, string[]>();
  #listed = new Set<string>();
  #listedAt = 0;
  // After a listing fails, the next ones are skipped for `skip` sweeps (doubling): a listing a
  // member made too large to arrive costs the broker its whole size every time it is asked.
  #backoff = 0;
  #skip = 0;

  constructor(opts: MembershipFeedOptions, conns: FeedConnections, written: Map<string, FeedRow>) {
    this.#opts = opts;
    this.#conns = conns;
    this.#written = written;
    this.#chatPrefix = `${opts.root}.chat.`;
    this.#capConnections = connectionCapper(opts.src, opts.servers, opts.log);
  }

  /** Runs a sweep, or joins the one running; resolves false when it did not complete. */
  sweep(): Promise<boolean> {
    this.#running ??= this.#sweepOnce().catch((err) => {
      this.#opts.log.warn(
        `membership feed sweep failed (${
          (err as Error)?.message ?? err
        }); the last good state stays`,
      );
      return false;
    }).finally(() => this.#running = undefined);
    return this.#running;
  }

  /** Resolves once the running sweep and connection kicks have ended. */
  async settled(): Promise<void> {
    await this.#running?.catch(() => {});
    await this.#capConnections.settled();
  }

  async #sweepOnce(): Promise<boolean> {
    const counted = await this.#count();
    if (!counted) return false;
    const listing = await this.#list();
    const now = Date.now();
    const durable = this.#opts.durable();
    let next: Map<string, FeedRow>;
    if (listing) {
      next = feedRows(withListing(counted, listing), this.#chatPrefix, durable, now);
      this.#lastLive = new Map([...next].map(([p, r]) => [p, r.live]));
      this.#listed = new Set(counted.map(connKey));
      this.#listedAt = now;
    } else {
      await this.#listArrivals(counted, now);
      next = staleRows(counted, this.#lastLive, this.#listedAt, durable, now);
    }
    await this.#write(next, now);
    const stale = listing ? {} : { liveAsOf: this.#listedAt };
    await this.#conns.kv.put(
      FEED_HEARTBEAT_KEY,
      jsonBytes({ observedAt: now, count: next.size, ...stale }),
    );
    this.status = { state: "up", lastSweepAt: now, principals: next.size, ...stale };
    return true;
  }

  /**
   * The account's connections from a scan without subscription lists, and the connection cap
   * applied to them; undefined when the scan is incomplete or misses the feed's own connection.
   */
  async #count(): Promise<ConnRecord[] | undefined> {
    const { src, log } = this.#opts;
    // Small whatever members subscribe to, so nothing they subscribe can keep it from
    // completing (red team 20c).
    const counted = await scanConnz(this.#conns.a, src.expectedAccount, { subscriptions: false });
    if (counted.complete) this.#capConnections(counted.conns);
    // The self-canary: a sweep that cannot see conn B cannot be trusted to see anyone.
    if (counted.complete && counted.conns.some((c) => c.user === this.#conns.rw.current.nkey)) {
      return counted.conns;
    }
    // Said, at most once a minute: a count that never arrives leaves the cap blind, and red
    // team 22 found it so with nothing in the log.
    const now = Date.now();
    if (now - this.#blindSaidAt >= 60_000) {
      this.#blindSaidAt = now;
      log.warn(
        `membership feed: the connection count is incomplete (${
          counted.reason ?? "the feed's own connection was not in it"
        }); the per-cred cap and the live view wait for a complete one`,
      );
    }
    this.status = {
      ...this.status,
      state: "up",
      lastIncomplete: counted.reason ?? "the feed's own connection was not in the scan",
    } as FeedStatus;
    return undefined;
  }

  /**
   * Subscription lists only of connections with chat interest: a member's other subscriptions
   * (its inbox, up to 1000 of up to 64 KiB each per connection) are not listed unless it also
   * subscribes a channel. Those lists are the member's to swell, so when they cannot be read
   * the rows keep the last complete listing's channels, marked with its date, and who is
   * connected stays current from the small scan (red team 20c). Undefined when skipped or
   * incomplete.
   */
  async #list(): Promise<ConnRecord[] | undefined> {
    if (this.#skip > 0) {
      this.#skip--;
      return undefined;
    }
    const listing = await scanConnz(this.#conns.a, this.#opts.src.expectedAccount, {
      subscriptions: true,
      interestIn: `${this.#opts.root}.chat.>`,
    });
    if (listing.complete) {
      this.#backoff = 0;
      return listing.conns;
    }
    this.#backoff = Math.min(MAX_LISTING_BACKOFF, Math.max(1, this.#backoff * 2));
    this.#skip = this.#backoff;
    const at = this.#listedAt ? new Date(this.#listedAt).toISOString() : "never";
    this.#opts.log.warn(
      `membership feed: the subscription listing did not arrive (${listing.reason}); ` +
        `channels stay as listed ${at}, next try in ${this.#backoff} sweeps`,
    );
    return undefined;
  }

  /**
   * Connections that arrived since the last listing are listed one by one, the smallest first,
   * so a member who joins during a fat listing still shows its channels.
   */
  async #listArrivals(counted: readonly ConnRecord[], now: number): Promise<void> {
    const { a } = this.#conns;
    const arrived = await listArrivals(a, this.#opts.src.expectedAccount, counted, this.#listed);
    for (const c of arrived) this.#listed.add(connKey(c));
    for (const [p, live] of feedRows(arrived, this.#chatPrefix, new Map(), now)) {
      this.#lastLive.set(p, [...new Set([...(this.#lastLive.get(p) ?? []), ...live.live])]);
    }
  }

  /** Brings the bucket to `next`; a full bucket loses the rows no sweep wrote, once a minute. */
  async #write(next: ReadonlyMap<string, FeedRow>, now: number): Promise<void> {
    const { kv, b } = this.#conns;
    const { log, bucket } = this.#opts;
    let refused = await writeRows(kv, this.#written, next);
    if (refused !== undefined && isStoreFull(refused) && now - this.#cleared > 60_000) {
      // Full of rows no sweep wrote (answers a member aimed at made-up keys): those go, at
      // most once a minute, and the rows are written again.
      this.#cleared = now;
      const n = await purgeJunkRows(b, bucket, ">", (_k, v) => isFeedRow(v));
      log.warn(`membership feed: the bucket was full; removed ${n} rows no sweep wrote`);
      refused = await writeRows(kv, this.#written, next);
    }
    if (refused !== undefined) {
      log.warn(`membership feed: a row was refused (${(refused as Error)?.message ?? refused})`);
    }
  }
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

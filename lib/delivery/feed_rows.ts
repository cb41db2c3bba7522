/**
 * The membership feed's rows: what one sweep's CONNZ scans and the members registry say each
 * principal's row of `cotal_membership_<s>` holds, bounded, and how the bucket is brought to
 * them. The sweep itself (its connections, its schedule) is in `membership_feed.ts`.
 *
 * @module
 */

import type { KV, NatsConnection } from "nats";
import { isValidChannel, jsonBytes } from "../wire/mod.ts";
import { type ConnRecord, scanConnz } from "./connz.ts";

/** One principal's row. */
export interface FeedRow {
  /** Live chat subscriptions, as channel patterns (wildcards kept). */
  live: string[];
  /** Channels with an open durable membership. */
  durable: string[];
  observedAt: number;
  /** Set when the row lists only the first channels that fit {@linkcode FEED_MAX_ROW_BYTES}. */
  truncated?: true;
  /**
   * Set when `live` is the last complete listing's, not this sweep's: the subscription lists
   * could not be read (see the feed's sweep in membership_feed.ts); who is connected is still current.
   */
  liveAsOf?: number;
}

/**
 * The most channel-name bytes one principal's row lists (frozen). A member may subscribe to
 * hundreds of channels with names of up to 4 KiB each: unbounded, its row outgrew the broker's
 * payload limit, every sweep failed on it, and the whole space's view froze (red team 20a).
 */
export const FEED_MAX_ROW_BYTES = 64 * 1024;

function same(a: FeedRow | undefined, b: FeedRow): boolean {
  return a !== undefined &&
    JSON.stringify([a.live, a.durable, a.liveAsOf]) ===
      JSON.stringify([b.live, b.durable, b.liveAsOf]);
}

/**
 * Each principal's row from one scan: the channels its live connections subscribe to and its
 * durable memberships. Infra connections (this daemon, the feed itself) subscribe to no channel
 * and get no row.
 */
export function feedRows(
  conns: readonly { principal?: string; subs: readonly string[] }[],
  chatPrefix: string,
  durable: ReadonlyMap<string, readonly string[]>,
  now: number,
): Map<string, FeedRow> {
  const live = new Map<string, Set<string>>();
  for (const c of conns) {
    if (!c.principal) continue;
    const set = live.get(c.principal) ?? new Set<string>();
    for (const s of c.subs) {
      const ch = channelOf(s, chatPrefix);
      if (ch !== undefined) set.add(ch);
    }
    live.set(c.principal, set);
  }
  const next = new Map<string, FeedRow>();
  for (const p of new Set([...live.keys(), ...durable.keys()])) {
    if ((live.get(p)?.size ?? 0) === 0 && (durable.get(p)?.length ?? 0) === 0) continue;
    next.set(p, boundedRow([...(live.get(p) ?? [])], [...(durable.get(p) ?? [])], now));
  }
  return next;
}

export const connKey = (c: ConnRecord) => `${c.serverId}/${c.cid}`;

/** Arrivals listed one by one per sweep, at most (frozen). */
const MAX_ARRIVALS_LISTED = 32;
/** An arrival holding more subscriptions than this is not listed on its own (frozen). */
const MAX_ARRIVAL_SUBS = 256;

/**
 * The subscriptions of attributed connections not in the last listing, one CONNZ each, fewest
 * subscriptions first; one that does not arrive is left for the next listing.
 */
export async function listArrivals(
  nc: NatsConnection,
  account: string,
  counted: readonly ConnRecord[],
  listed: ReadonlySet<string>,
): Promise<ConnRecord[]> {
  const arrivals = counted
    .filter((c) => c.principal && !listed.has(connKey(c)) && c.subCount <= MAX_ARRIVAL_SUBS)
    .sort((x, y) => x.subCount - y.subCount)
    .slice(0, MAX_ARRIVALS_LISTED);
  const out: ConnRecord[] = [];
  for (const c of arrivals) {
    const one = await scanConnz(nc, account, { subscriptions: true, cid: c.cid });
    const found = one.conns.find((o) => connKey(o) === connKey(c));
    if (one.complete && found) out.push({ ...c, subs: found.subs });
  }
  return out;
}

/** The small scan's connections with the listing's subscriptions where it has them. */
export function withListing(
  counted: readonly ConnRecord[],
  listed: readonly ConnRecord[],
): ConnRecord[] {
  const subs = new Map(listed.map((c) => [connKey(c), c.subs]));
  return counted.map((c) => ({ ...c, subs: subs.get(connKey(c)) ?? [] }));
}

/**
 * Rows when the listing could not be read: every connected principal keeps the channels the
 * last complete listing gave it (marked `liveAsOf`), one no longer connected loses them.
 */
export function staleRows(
  counted: readonly ConnRecord[],
  lastLive: ReadonlyMap<string, readonly string[]>,
  listedAt: number,
  durable: ReadonlyMap<string, readonly string[]>,
  now: number,
): Map<string, FeedRow> {
  const connected = new Set(counted.flatMap((c) => c.principal ? [c.principal] : []));
  const next = new Map<string, FeedRow>();
  for (const p of new Set([...connected, ...durable.keys()])) {
    const live = connected.has(p) ? [...(lastLive.get(p) ?? [])] : [];
    if (live.length === 0 && (durable.get(p)?.length ?? 0) === 0) continue;
    next.set(p, { ...boundedRow(live, [...(durable.get(p) ?? [])], now), liveAsOf: listedAt });
  }
  return next;
}

/**
 * The channel pattern a chat subscription covers, or undefined for anything else. `chatPrefix`
 * is `<root>.chat.`: a member may subscribe any form its grant covers, not only `*.*.<ch>` (one
 * sender, `local.bob.<ch>`, or one owner, `local.*.<ch>`), and each still reads the channel live
 * (red team 21). A subscription is whatever its member typed: only channel patterns are listed.
 */
export function channelOf(subject: string, chatPrefix: string): string | undefined {
  if (!subject.startsWith(chatPrefix)) return undefined;
  const rest = subject.slice(chatPrefix.length);
  // `chat.>` or `chat.<owner>.>`: every channel.
  if (rest === ">" || /^[^.]+\.>$/.test(rest)) return ">";
  const m = /^([^.]+)\.([^.]+)\.(.+)$/.exec(rest);
  if (!m) return undefined;
  const token = /^(\*|[A-Za-z0-9_]{1,64})$/;
  if (!token.test(m[1]) || !token.test(m[2])) return undefined;
  return isValidChannel(m[3]) ? m[3] : undefined;
}

/** A row of at most {@linkcode FEED_MAX_ROW_BYTES} of channel names: durable ones first. */
function boundedRow(live: string[], durable: string[], now: number): FeedRow {
  let room = FEED_MAX_ROW_BYTES;
  let truncated = false;
  const take = (names: string[]) =>
    names.sort().filter((n) => {
      const cost = new TextEncoder().encode(n).length + 3;
      if (cost > room) {
        truncated = true;
        return false;
      }
      room -= cost;
      return true;
    });
  const d = take(durable);
  const l = take(live);
  return { live: l, durable: d, observedAt: now, ...(truncated ? { truncated: true } : {}) };
}

/** True for a row a sweep wrote: a principal's row or the heartbeat, both dated. */
export function isFeedRow(value: Uint8Array): boolean {
  try {
    const v = JSON.parse(new TextDecoder().decode(value));
    return typeof v === "object" && v !== null && typeof v.observedAt === "number";
  } catch {
    return false;
  }
}

/**
 * Writes the rows that changed and deletes the ones gone, keeping `written` as the bucket is.
 * Resolves with the first write the bucket refused, if any (the other rows are written).
 */
export async function writeRows(
  kv: KV,
  written: Map<string, FeedRow>,
  next: ReadonlyMap<string, FeedRow>,
): Promise<unknown> {
  let failed: unknown;
  for (const [p, row] of next) {
    if (same(written.get(p), row)) continue;
    try {
      await kv.put(p, jsonBytes(row));
      written.set(p, row);
    } catch (err) {
      // One row the bucket refuses does not hold back the others' (said after the sweep).
      failed ??= err;
    }
  }
  for (const p of [...written.keys()]) {
    if (next.has(p)) continue;
    await kv.delete(p);
    written.delete(p);
  }
  return failed;
}

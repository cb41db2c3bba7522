/**
 * The connections one cred may hold in its space. A NATS user JWT has no connection limit and
 * the broker counts only per account, so one member's cred could open the whole space's share
 * (red team 20a: 400 of 400 accepted). The membership feed sees every connection of the space
 * on each sweep (it runs on every connect); the extras of a cred over the cap, newest first, are
 * kicked through the `$SYS` evictor.
 *
 * @module
 */
import type { ConnRecord } from "./connz.ts";

/**
 * The most connections one cred keeps (frozen). An agent uses one or two (a relay at most 8), a
 * daemon a handful, a CLI call one each.
 */
export const MAX_CONNECTIONS_PER_CRED = 64;

/** The connections past `max` of each cred (by user key), the newest of each cred first. */
export function connectionsOverCap(
  conns: readonly ConnRecord[],
  max: number = MAX_CONNECTIONS_PER_CRED,
): ConnRecord[] {
  const byUser = new Map<string, ConnRecord[]>();
  for (const c of conns) {
    if (!c.user) continue;
    const list = byUser.get(c.user) ?? [];
    list.push(c);
    byUser.set(c.user, list);
  }
  const over: ConnRecord[] = [];
  for (const list of byUser.values()) {
    if (list.length <= max) continue;
    // A server numbers its connections in the order they came: the highest are the newest.
    list.sort((a, b) => b.cid - a.cid);
    over.push(...list.slice(0, list.length - max));
  }
  return over;
}

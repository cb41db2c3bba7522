/**
 * An account-scoped CONNZ scan through the membership observer: every server answers for its
 * own connections, pages are followed while any server returns a full one, and each
 * connection is attributed to a principal by its signed `principal:` tag (anything without
 * one is dropped: attribution fails closed).
 *
 * @module
 */

import { type NatsConnection, RequestStrategy } from "nats";

/** One attributed (or unattributed) connection. */
export interface ConnRecord {
  cid: number;
  serverId: string;
  /** The `principal:<owner>.<actor>` tag, when the cred carries one. */
  principal?: string;
  /** The connection's user nkey. */
  user?: string;
  /** Its subscriptions, when asked for. */
  subs: string[];
}

/** The outcome of a scan. `complete` false means "unknown", never "gone". */
export interface ConnzScan {
  complete: boolean;
  conns: ConnRecord[];
  /** Why the scan is incomplete. */
  reason?: string;
}

const PAGE = 1024;
const MAX_PAGES = 64;
const DEC = new TextDecoder();

interface ConnzReply {
  server?: { id?: string };
  data?: { connections?: Record<string, unknown>[] };
  error?: unknown;
}

/** Scans the connections of `account` (the observer may scan only its own account). */
export async function scanConnz(
  nc: NatsConnection,
  account: string,
  opts: { subscriptions: boolean },
): Promise<ConnzScan> {
  const byKey = new Map<string, ConnRecord>();
  for (let page = 0; page < MAX_PAGES; page++) {
    const body = JSON.stringify({
      subscriptions: opts.subscriptions,
      auth: true,
      offset: page * PAGE,
      limit: PAGE,
    });
    let replies: ConnzReply[] = [];
    try {
      const it = await nc.requestMany(`$SYS.REQ.ACCOUNT.${account}.CONNZ`, body, {
        strategy: RequestStrategy.JitterTimer,
        jitter: 250,
        maxWait: 1500,
      });
      for await (const m of it) {
        try {
          replies.push(JSON.parse(DEC.decode(m.data)));
        } catch {
          return { complete: false, conns: [], reason: "a server sent an unparseable CONNZ reply" };
        }
      }
    } catch (err) {
      return {
        complete: false,
        conns: [],
        reason: `CONNZ failed (${(err as Error)?.message ?? err})`,
      };
    }
    replies = replies.filter((r) => r.data !== undefined || r.error !== undefined);
    if (replies.length === 0) {
      return { complete: false, conns: [], reason: "no server answered CONNZ" };
    }
    let full = false;
    for (const r of replies) {
      if (r.error !== undefined) {
        return { complete: false, conns: [], reason: "a server refused CONNZ" };
      }
      const serverId = r.server?.id;
      if (typeof serverId !== "string" || serverId === "") {
        return { complete: false, conns: [], reason: "a CONNZ reply carried no server id" };
      }
      const conns = r.data?.connections ?? [];
      if (conns.length >= PAGE) full = true;
      for (const c of conns) {
        const tags = Array.isArray(c.tags) ? c.tags as string[] : [];
        const principal = tags.find((t) => typeof t === "string" && t.startsWith("principal:"))
          ?.slice("principal:".length);
        if (typeof c.cid !== "number") {
          if (principal) {
            return { complete: false, conns: [], reason: "an attributable connection had no cid" };
          }
          continue;
        }
        byKey.set(`${serverId}/${c.cid}`, {
          cid: c.cid,
          serverId,
          ...(principal ? { principal } : {}),
          ...(typeof c.authorized_user === "string" ? { user: c.authorized_user } : {}),
          subs: Array.isArray(c.subscriptions_list) ? c.subscriptions_list as string[] : [],
        });
      }
    }
    if (!full) return { complete: true, conns: [...byKey.values()] };
  }
  return {
    complete: false,
    conns: [...byKey.values()],
    reason: "more connections than the scan pages",
  };
}

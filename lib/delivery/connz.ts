/**
 * An account-scoped CONNZ scan through the membership observer: every server answers for its
 * own connections, pages are followed while any server returns a full one, and each
 * connection is attributed only by what the broker itself vouches for:
 *
 * - a cred connection (CONNZ shows its `jwt`) by the JWT's signed `principal:` tag, and its user
 *   by the JWT's subject. Its `authorized_user` is not used: a client sets it by sending any
 *   `nkey` beside its JWT in CONNECT, which would let one cred spread its connections over
 *   invented users past the per-cred cap, or pile them onto another member's key;
 * - a user-mode connection (the auth callout's user, CONNZ shows no `jwt` and no tags) by its
 *   `authorized_user`, which the server takes from the name the callout signed
 *   (`calloutUserName`) and the client cannot set.
 *
 * Anything else is nobody's: attribution fails closed.
 *
 * @module
 */

import { type NatsConnection, RequestStrategy } from "nats";
import { decodeJwtUnverified } from "../nats/mod.ts";
import { principalFromCalloutName, principalFromTags } from "../trust/mod.ts";
import type { Principal } from "../trust/mod.ts";

/** One attributed (or unattributed) connection. */
export interface ConnRecord {
  cid: number;
  serverId: string;
  /** `<owner>.<actor>`, when the broker vouches for one (see the module doc). */
  principal?: string;
  /** The user the connection authenticated as: its JWT's subject, or the callout user's name. */
  user?: string;
  /** Its subscriptions, when asked for. */
  subs: string[];
  /** How many subscriptions it holds (every scan reports the count). */
  subCount: number;
}

/** The outcome of a scan. `complete` false means "unknown", never "gone". */
export interface ConnzScan {
  complete: boolean;
  conns: ConnRecord[];
  /** Why the scan is incomplete. */
  reason?: string;
}

/**
 * Connections per CONNZ page (frozen). Each entry carries client-chosen text, its connection
 * name, up to ~60 KiB beside its JWT under the broker's 64 KiB control line: 1,024 such entries
 * were a reply too large to arrive, which blinded the connection cap (red team 21). 128 keep a
 * page under 8 MiB whatever the members send.
 */
const PAGE = 128;
/** Enough pages for the space's whole connection limit (4,096), and one more. */
const MAX_PAGES = 33;
/**
 * How long one page waits for its answers (frozen). A broker holding a space's 4,096
 * connections took more than 1.5 s to answer the first page on a loaded machine, and every
 * sweep was then incomplete: the per-cred cap never ran (red team 22).
 */
export const CONNZ_WAIT_MS = 10_000;
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
  opts: {
    subscriptions: boolean;
    /**
     * Only connections with interest in this subject (nats-server's `filter_subject`); their
     * subscription lists stay whole.
     */
    interestIn?: string;
    /** Only this connection (nats-server's `cid`). */
    cid?: number;
  },
): Promise<ConnzScan> {
  const byKey = new Map<string, ConnRecord>();
  // How many servers answered the first page: later pages end as soon as they all have.
  let servers: number | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    const body = JSON.stringify({
      subscriptions: opts.subscriptions,
      auth: true,
      offset: page * PAGE,
      limit: PAGE,
      ...(opts.interestIn ? { filter_subject: opts.interestIn } : {}),
      ...(opts.cid !== undefined ? { cid: opts.cid } : {}),
    });
    let replies: ConnzReply[] = [];
    try {
      const it = await nc.requestMany(
        `$SYS.REQ.ACCOUNT.${account}.CONNZ`,
        body,
        servers === undefined
          ? { strategy: RequestStrategy.JitterTimer, jitter: 250, maxWait: CONNZ_WAIT_MS }
          : { strategy: RequestStrategy.Count, maxMessages: servers, maxWait: CONNZ_WAIT_MS },
      );
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
    servers ??= replies.length;
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
        const { principal, user } = attribute(c);
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
          ...(user ? { user } : {}),
          subs: Array.isArray(c.subscriptions_list) ? c.subscriptions_list as string[] : [],
          subCount: typeof c.subscriptions === "number" ? c.subscriptions : 0,
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

/** Who one CONNZ entry is, from what the broker vouches for (see the module doc). */
function attribute(c: Record<string, unknown>): { principal?: string; user?: string } {
  const dotted = (p: Principal | undefined) => p ? `${p.owner}.${p.actor}` : undefined;
  if (typeof c.jwt === "string") {
    // The broker authenticated this JWT for the connection (signature over its nonce, issuer
    // trusted by the account): reading its claims is reading what the broker checked.
    try {
      const claims = decodeJwtUnverified(c.jwt);
      const tags = (claims.nats as { tags?: unknown } | undefined)?.tags;
      return {
        principal: dotted(
          principalFromTags(Array.isArray(tags) ? tags.filter((t) => typeof t === "string") : []),
        ),
        user: typeof claims.sub === "string" ? claims.sub : undefined,
      };
    } catch {
      return {};
    }
  }
  if (typeof c.authorized_user !== "string" || c.authorized_user === "") return {};
  return {
    principal: dotted(principalFromCalloutName(c.authorized_user)),
    user: c.authorized_user,
  };
}

/**
 * Live eviction, the kill-live half of revocation: find a principal's connections with an
 * account-scoped CONNZ scan, KICK each on the server that reported it, and rescan until they
 * are gone. It must follow an already-committed deny-new (ACL removal, cred expiry): otherwise a
 * kicked client simply reconnects with a fresh connection id.
 *
 * Both `$SYS` connections are opened per call (the daemon keeps none standing), and the
 * evictor cred is only read once the scan found something to kick.
 *
 * @module
 */

import type { NatsConnection } from "nats";
import { connect } from "../nats/mod.ts";
import { CotalError, isCotalError } from "../errors.ts";
import {
  credsAuthenticatorFast,
  EVICTOR_INBOX_PREFIX,
  MEMBERSHIP_INBOX_PREFIX,
} from "../trust/mod.ts";
import { isPrincipalOwnerToken, isPrincipalToken } from "../wire/mod.ts";
import { type ConnRecord, scanConnz } from "./connz.ts";
import { loadEvictor, loadObserver, type SysSource } from "./sys_creds.ts";

/** What an eviction did. `verifiedGone` is true only after a complete rescan found nothing. */
export interface EvictResult {
  principal: string;
  kicked: number;
  remaining: number;
  verifiedGone: boolean;
  scanComplete: boolean;
  /** Set when something was left: the likely cause. */
  note?: string;
}

/** Options of {@linkcode evictPrincipal}. */
export interface EvictOptions {
  /** Rescans after the first kick; default 3. */
  maxVerifyRounds?: number;
  /** Wait before each rescan, ms; default 250. */
  settleMs?: number;
}

async function sysConnect(servers: string[], creds: string, inboxPrefix: string) {
  try {
    return await connect({
      servers,
      authenticator: credsAuthenticatorFast(creds),
      inboxPrefix,
      name: "cotal-delivery-sys",
      reconnect: false,
    });
  } catch (err) {
    throw new CotalError(
      "sys_connect_failed",
      `The broker refused the $SYS connection (${
        (err as Error)?.message ?? err
      }); the $SYS creds ` +
        `may be expired or from another broker.`,
    );
  }
}

/** KICKs each connection on the server that reported it; how many the servers confirmed. */
async function kickEach(ev: NatsConnection, conns: readonly ConnRecord[]): Promise<number> {
  let kicked = 0;
  for (const c of conns) {
    const reply = await ev.request(
      `$SYS.REQ.SERVER.${c.serverId}.KICK`,
      JSON.stringify({ cid: c.cid }),
      { timeout: 2000 },
    ).catch(() => undefined);
    const body = reply ? JSON.parse(new TextDecoder().decode(reply.data)) : undefined;
    if (body && body.error === undefined) kicked++;
  }
  return kicked;
}

/** Refuses anything that is not `<owner>.<actor>` with a real principal owner. */
export function assertEvictablePrincipal(principal: string): void {
  const [owner, actor, extra] = principal.split(".");
  if (
    extra !== undefined || !isPrincipalToken(owner) || !isPrincipalToken(actor) ||
    !isPrincipalOwnerToken(owner)
  ) {
    // A typo such as `foo.bar` must be refused, never reported as a healthy no-op.
    throw new CotalError(
      "invalid_principal",
      `${
        JSON.stringify(principal)
      } is not a principal (<owner>.<actor> with owner local or u_...).`,
    );
  }
}

/**
 * Kicks every live connection of `principal` (dot form) in the source's account and verifies
 * they are gone. Refuses (throws) when the `$SYS` creds are missing, foreign, torn or expired:
 * callers must read a refusal as UNKNOWN, never as "gone".
 */
export async function evictPrincipal(
  src: SysSource,
  servers: string[],
  principal: string,
  opts: EvictOptions = {},
): Promise<EvictResult> {
  assertEvictablePrincipal(principal);
  const observer = await loadObserver(src).catch((err) => {
    throw isCotalError(err)
      ? new CotalError(err.code, `${err.message} Until then removal is deny-new only.`)
      : err;
  });
  const rounds = opts.maxVerifyRounds ?? 3;
  const settle = opts.settleMs ?? 250;
  const obs = await sysConnect(servers, observer.text, MEMBERSHIP_INBOX_PREFIX);
  let ev: NatsConnection | undefined;
  const result: EvictResult = {
    principal,
    kicked: 0,
    remaining: 0,
    verifiedGone: false,
    scanComplete: false,
  };
  try {
    const find = async (): Promise<ConnRecord[] | undefined> => {
      const scan = await scanConnz(obs, src.expectedAccount, { subscriptions: false });
      if (!scan.complete) {
        result.note = scan.reason;
        return undefined;
      }
      return scan.conns.filter((c) => c.principal === principal);
    };
    let found = await find();
    if (!found) return result;
    result.scanComplete = true;
    for (let round = 0; found.length > 0 && round <= rounds; round++) {
      if (!ev) {
        const evictor = await loadEvictor(src, observer);
        ev = await sysConnect(servers, evictor.text, EVICTOR_INBOX_PREFIX);
      }
      result.kicked += await kickEach(ev, found);
      await new Promise((r) => setTimeout(r, settle));
      const again = await find();
      if (!again) {
        result.scanComplete = false;
        return result;
      }
      found = again;
    }
    result.remaining = found.length;
    result.verifiedGone = found.length === 0;
    if (!result.verifiedGone) {
      result.note = "connections keep coming back: is deny-new committed for this principal?";
    }
    return result;
  } finally {
    await obs.close().catch(() => {});
    await ev?.close().catch(() => {});
  }
}

/**
 * Kicks `conns` (from a scan of the source's account) through the `$SYS` evictor; resolves with
 * how many the servers confirmed. Refuses (throws) when the `$SYS` creds cannot be used.
 */
export async function kickConnections(
  src: SysSource,
  servers: string[],
  conns: readonly ConnRecord[],
): Promise<number> {
  if (conns.length === 0) return 0;
  const evictor = await loadEvictor(src, await loadObserver(src));
  const ev = await sysConnect(servers, evictor.text, EVICTOR_INBOX_PREFIX);
  try {
    return await kickEach(ev, conns);
  } finally {
    await ev.close().catch(() => {});
  }
}

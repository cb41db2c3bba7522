/**
 * The two system-account credentials: the membership observer (account-scoped CONNZ plus
 * connect/disconnect events) and the connection evictor (KICK). Both can be minted only while
 * the SYS seed is in memory (the call that created or rotated broker trust).
 *
 * A `$SYS` user without a permission block is broker admin, so each carries an explicit one.
 *
 * @module
 */
import { CotalError } from "../errors.ts";
import { encodeJwt, isPublicKey, parseSeed, renderCreds, seedSigner } from "../nats/mod.ts";
import { resolveExpiry } from "./lifetimes.ts";
import { assertExplicitPermissions } from "./mint.ts";
import type { Identity, LifetimeOpts, Permissions, SysAccountKeys } from "./types.ts";

/** Inbox prefix of the membership observer's connection (its only reply subtree). */
export const MEMBERSHIP_INBOX_PREFIX = "_INBOX.cotal-membership";
/** Inbox prefix of the connection evictor's connection (its only reply subtree). */
export const EVICTOR_INBOX_PREFIX = "_INBOX.cotal-evictor";

/** The membership observer's grants for data account `accountPub`. */
export function membershipObserverPermissions(accountPub: string): Permissions {
  return {
    pub: {
      allow: [`$SYS.REQ.ACCOUNT.${accountPub}.CONNZ`],
      // Not in the allow list anyway; denied explicitly so a widened allow cannot reach them.
      deny: ["$SYS.REQ.SERVER.PING.CONNZ", "$SYS.REQ.CLAIMS.>"],
    },
    sub: {
      allow: [
        `${MEMBERSHIP_INBOX_PREFIX}.>`,
        `$SYS.ACCOUNT.${accountPub}.CONNECT`,
        `$SYS.ACCOUNT.${accountPub}.DISCONNECT`,
      ],
      deny: [],
    },
  };
}

/** The connection evictor's grants: KICK on any server, replies on its own inbox subtree. */
export function connectionEvictorPermissions(): Permissions {
  return {
    pub: { allow: ["$SYS.REQ.SERVER.*.KICK"], deny: [] },
    sub: { allow: [`${EVICTOR_INBOX_PREFIX}.>`], deny: [] },
  };
}

function sysSeed(auth: { sys: SysAccountKeys }): string {
  const seed = auth?.sys?.signingSeed;
  if (typeof seed !== "string" || seed === "" || parseSeed(seed).kind !== "account") {
    throw new CotalError(
      "missing_sys_seed",
      "The system-account seed is not in memory (it is never persisted); mint $SYS creds in the call that creates or rotates broker trust.",
    );
  }
  return seed;
}

async function mintSys(
  auth: { sys: SysAccountKeys },
  identity: Identity,
  kind: "membership-observer" | "connection-evictor",
  perms: Permissions,
  opts: LifetimeOpts,
): Promise<string> {
  const seed = sysSeed(auth);
  if (!isPublicKey(identity?.id, "user") || parseSeed(identity.seed).kind !== "user") {
    throw new CotalError(
      "invalid_identity",
      "The identity is not an nkey user; use newIdentity().",
    );
  }
  const now = Math.floor(Date.now() / 1000);
  const exp = resolveExpiry(kind, opts, now);
  assertExplicitPermissions(perms, kind);
  const signer = await seedSigner(seed);
  if (signer.publicKey !== auth.sys.pub) {
    throw new CotalError(
      "sys_mismatch",
      "The in-memory SYS seed does not match the system account of this broker trust.",
    );
  }
  const jwt = await encodeJwt(
    {
      sub: identity.id,
      name: kind,
      exp,
      nats: { type: "user", pub: { ...perms.pub }, sub: { allow: perms.sub.allow } },
    },
    signer,
    { iat: now },
  );
  return await renderCreds(jwt, identity.seed);
}

/**
 * Mints the membership observer for the space whose data account is `auth.account.pub`:
 * account-scoped CONNZ requests and that account's CONNECT/DISCONNECT events, nothing else.
 */
export function mintMembershipObserverCreds(
  auth: { sys: SysAccountKeys; account: { pub: string } },
  identity: Identity,
  opts: LifetimeOpts = {},
): Promise<string> {
  if (!isPublicKey(auth?.account?.pub, "account")) {
    return Promise.reject(
      new CotalError(
        "invalid_account",
        "The observed account is not an account public key (A…); pass the space's SpaceAuth.",
      ),
    );
  }
  return mintSys(
    auth,
    identity,
    "membership-observer",
    membershipObserverPermissions(auth.account.pub),
    opts,
  );
}

/**
 * Mints the connection evictor: `$SYS.REQ.SERVER.*.KICK` only. It has no account scope, so
 * its callers take connection ids only from the observer's account-scoped scan.
 */
export function mintConnectionEvictorCreds(
  auth: { sys: SysAccountKeys },
  identity: Identity,
  opts: LifetimeOpts = {},
): Promise<string> {
  return mintSys(auth, identity, "connection-evictor", connectionEvictorPermissions(), opts);
}

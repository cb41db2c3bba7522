/**
 * `mintCreds`: a scoped, bounded user credential for any data-account profile.
 *
 * @module
 */
import { CotalError } from "../errors.ts";
import type { CotalErrorCode } from "../error_codes/mod.ts";
import { encodeJwt, isPublicKey, parseSeed, renderCreds, type Signer } from "../nats/mod.ts";
import { resolveExpiry } from "./lifetimes.ts";
import { syncSigner } from "./sync_keys.ts";
import { isProfile, permissionsFor, PROFILES } from "./profiles.ts";
import type { Identity, MintAuth, MintOpts, Permissions, Principal, Profile } from "./types.ts";
import { signRailToken as signRailTokenOf } from "./sign_rail_token.ts";

/**
 * The broker's `max_control_line` ({@linkcode serverConfig} renders it). A user JWT rides the
 * CONNECT line, so it must fit with room for the signature and connect options.
 */
export const MAX_CONTROL_LINE = 65536;
/** The largest user JWT a mint produces (the CONNECT line also carries ~1 KiB of options). */
export const MAX_USER_JWT_BYTES = MAX_CONTROL_LINE - 4096;

// Imported signing keys per signing-seed holder, so a burst of mints imports the key once.
// Keyed by the account object (not the seed string) and re-checked, so a changed seed re-imports.
const signers = new WeakMap<object, { seed: string; signer: Promise<Signer> }>();

/**
 * The (cached) signer of an account's signing seed. It implements lib/nats's `Signer` seam
 * over native `node:crypto` ed25519, which signs a ~5 KB user JWT in about half the time of
 * WebCrypto's promise round trip (measured in tests/bench/mint_bench.ts).
 */
export function accountSigner(account: MintAuth["account"]): Promise<Signer> {
  const hit = signers.get(account);
  if (hit && hit.seed === account.signingSeed) return hit.signer;
  const signer = nativeSigner(account.signingSeed);
  signers.set(account, { seed: account.signingSeed, signer });
  signer.catch(() => signers.delete(account));
  return signer;
}

/** The signer rail's token of `auth`'s space (lib/trust/sign_rail_token.ts). */
export async function signRailTokenFor(auth: MintAuth): Promise<string> {
  checkSigner(auth);
  return await signRailTokenOf(await accountSigner(auth.account), auth.space);
}

/** The profiles whose grants reach the signer's rail (its callers and the signer). */
const RAIL_PROFILES: ReadonlySet<Profile> = new Set<Profile>(["supervisor", "signer"]);

/** The CONNZ-visible tags that attribute a connection to its principal. */
export function principalTags(p: Principal): string[] {
  return [`owner:${p.owner}`, `actor:${p.actor}`, `principal:${p.owner}.${p.actor}`];
}

/** The principal a cred's signed tags name ({@linkcode principalTags}), if they name one. */
export function principalFromTags(tags: readonly string[] | undefined): Principal | undefined {
  const tag = (k: string) => tags?.find((t) => t.startsWith(`${k}:`))?.slice(k.length + 1);
  const owner = tag("owner");
  const actor = tag("actor");
  return owner && actor ? { owner, actor } : undefined;
}

/**
 * The name the auth callout gives the user JWT it mints for a user-mode member. nats-server
 * drops a callout user's tags from CONNZ but reports this name as the connection's
 * `authorized_user`, which the client cannot set, so it is how an account scan attributes a
 * user-mode connection ({@linkcode principalFromCalloutName}).
 */
export function calloutUserName(p: Principal): string {
  return `${p.owner}-${p.actor}`;
}

// Owner and actor are principal tokens (`[A-Za-z0-9_]{1,64}`, lib/wire/names.ts): no `-`, so the
// one `-` splits the name unambiguously.
const CALLOUT_NAME_RE = /^([A-Za-z0-9_]{1,64})-([A-Za-z0-9_]{1,64})$/;

/** The principal a callout user's name ({@linkcode calloutUserName}) carries, if it is one. */
export function principalFromCalloutName(name: string): Principal | undefined {
  const m = CALLOUT_NAME_RE.exec(name);
  return m ? { owner: m[1], actor: m[2] } : undefined;
}

function nativeSigner(seed: string): Promise<Signer> {
  try {
    const s = syncSigner(seed);
    return Promise.resolve({
      publicKey: s.publicKey,
      sign: (data: Uint8Array) => Promise.resolve(s.sign(data)),
    });
  } catch (err) {
    return Promise.reject(err);
  }
}

function refuse(code: CotalErrorCode, message: string): never {
  throw new CotalError(code, message);
}

function checkSigner(auth: MintAuth): void {
  if (typeof auth?.account?.signingSeed !== "string" || auth.account.signingSeed === "") {
    refuse(
      "missing_signing_seed",
      "This trust bundle has no account signing seed; load the space's account record (or a stripped signer bundle).",
    );
  }
  if (!isPublicKey(auth.account.pub, "account")) {
    refuse("invalid_account", "The bundle's account.pub is not an account public key (A…).");
  }
  if (parseSeed(auth.account.signingSeed).kind !== "account") {
    refuse("invalid_signing_seed", "The account signing seed is not an account seed (SA…).");
  }
}

function checkIdentity(identity: Identity): void {
  if (!isPublicKey(identity?.id, "user")) {
    refuse("invalid_identity", "The identity id is not a user public key (U…); use newIdentity().");
  }
  if (typeof identity.seed !== "string" || parseSeed(identity.seed).kind !== "user") {
    refuse("invalid_identity", "The identity seed is not a user seed (SU…); use newIdentity().");
  }
}

/** Refuses a permission block that would fall back to the NATS default (allow everything). */
export function assertExplicitPermissions(perms: Permissions, what: string): void {
  const ok = perms && Array.isArray(perms.pub?.allow) && Array.isArray(perms.sub?.allow) &&
    (perms.pub.allow.length > 0 || perms.pub.deny.length > 0) && perms.sub.allow.length > 0;
  if (!ok) {
    refuse(
      "missing_permissions",
      `Refusing to mint a ${what} credential without an explicit permission block; NATS would allow everything.`,
    );
  }
  for (const s of [...perms.pub.allow, ...perms.sub.allow]) {
    if (s === ">" || s === "$JS.>" || s === "$JS.API.>" || s === "$SYS.>") {
      refuse("permission_too_broad", `Refusing the allow-all grant ${s} in a ${what} credential.`);
    }
  }
}

function list(l: { allow: string[]; deny: string[] }) {
  return l.deny.length > 0 ? { allow: l.allow, deny: l.deny } : { allow: l.allow };
}

/**
 * The largest message a member's connection may publish, headers included: twice the largest
 * post, DM or task (64 KiB), room for every header a member sends. The broker's own limit is
 * 1 MiB, and it copies a message to every core subscriber before any stream refuses it: one
 * agent cred publishing 1 MiB rows on its own presence key from 8 connections got every
 * presence watcher (the supervisor's roster among them) cut as a slow consumer 3 times in 15 s,
 * while 128 KiB rows at a higher byte rate (13.7 GiB in 15 s) cut none (red team 46).
 */
export const MEMBER_MAX_PAYLOAD_BYTES = 128 * 1024;

/**
 * Per-connection limits signed into the credentials of the profiles that speak as a member or
 * for the operator (frozen): an agent's endpoint holds a few dozen subscriptions (its inbox, its
 * channels, two bucket watches), an observer's tail or a CLI call fewer, and each one costs the
 * broker memory. Unbounded, one observer cred held 200,000 on one connection, +300 MiB of broker
 * memory (red team 20a). Members also publish at most {@linkcode MEMBER_MAX_PAYLOAD_BYTES} a
 * message. The daemons' profiles carry none: they are the operator's own.
 */
export const CONNECTION_LIMITS: Readonly<
  Partial<Record<Profile, Readonly<{ subs: number; payload?: number }>>>
> = Object.freeze({
  agent: Object.freeze({ subs: 1000, payload: MEMBER_MAX_PAYLOAD_BYTES }),
  observer: Object.freeze({ subs: 1000, payload: MEMBER_MAX_PAYLOAD_BYTES }),
  probe: Object.freeze({ subs: 100, payload: MEMBER_MAX_PAYLOAD_BYTES }),
  "control-caller": Object.freeze({ subs: 100 }),
  admin: Object.freeze({ subs: 10_000 }),
  operator: Object.freeze({ subs: 10_000 }),
});

/**
 * Mints a `profile` credential for `identity` in `auth`'s space and returns the creds file
 * text. The expiry is always bounded: the profile's default, or `expiresInSeconds` /
 * `expiresAt` up to the profile's maximum. Refuses an unknown profile, both expiry options,
 * NaN / non-integer / non-positive values, a TTL above the maximum, an agent without a
 * `lifecycleUid`, channels the token rules would rewrite, and options foreign to the profile.
 *
 * @example
 * ```ts
 * const auth = await createSpaceAuth("demo");
 * const creds = await mintCreds(auth, newIdentity(), "provisioner");
 * ```
 */
export async function mintCreds(
  auth: MintAuth,
  identity: Identity,
  profile: Profile,
  opts: MintOpts = {},
): Promise<string> {
  checkIdentity(identity);
  return await renderCreds(await signUserJwt(auth, identity.id, profile, opts), identity.seed);
}

/**
 * The user JWT of a `profile` credential for the user key `publicKey`, signed with `auth`'s
 * account signing key: what {@linkcode mintCreds} signs, without the holder's seed (a signer
 * never sees one). Refuses what `mintCreds` refuses.
 *
 * @example
 * ```ts
 * const auth = await createSpaceAuth("demo");
 * const me = newIdentity();
 * const jwt = await signUserJwt(auth, me.id, "observer");
 * ```
 */
export async function signUserJwt(
  auth: MintAuth,
  publicKey: string,
  profile: Profile,
  opts: MintOpts = {},
): Promise<string> {
  checkProfile(profile);
  checkSigner(auth);
  return await signUserJwtWith(
    { space: auth.space, accountPub: auth.account.pub },
    await accountSigner(auth.account),
    publicKey,
    profile,
    opts,
  );
}

function checkProfile(profile: Profile): void {
  if (!isProfile(profile)) {
    const sys = profile === "membership-observer" || profile === "connection-evictor";
    refuse(
      "unknown_profile",
      sys
        ? `The ${profile} credential lives in the system account; mint it with mint${
          profile === "membership-observer" ? "MembershipObserver" : "ConnectionEvictor"
        }Creds while the SYS seed is in memory.`
        : `Unknown profile ${JSON.stringify(String(profile))}; use one of ${PROFILES.join(", ")}.`,
    );
  }
}

/**
 * {@linkcode signUserJwt} with any {@linkcode Signer} of the account's signing key instead of
 * its seed: a KMS or Vault-transit ed25519 key whose private half never leaves it. The account
 * JWT must list `signer.publicKey` in its `signing_keys` ({@linkcode setAccountSigningKey}).
 *
 * @example
 * ```ts
 * const auth = await createSpaceAuth("demo");
 * const signer = await seedSigner(auth.account.signingSeed); // or a KMS-backed Signer
 * const jwt = await signUserJwtWith(
 *   { space: "demo", accountPub: auth.account.pub },
 *   signer,
 *   newIdentity().id,
 *   "observer",
 * );
 * ```
 */
export async function signUserJwtWith(
  account: { readonly space: string; readonly accountPub: string },
  signer: Signer,
  publicKey: string,
  profile: Profile,
  opts: MintOpts = {},
): Promise<string> {
  checkProfile(profile);
  if (!isPublicKey(account.accountPub, "account")) {
    refuse("invalid_account", "The account public key is not an account public key (A…).");
  }
  if (!isPublicKey(signer?.publicKey, "account")) {
    refuse(
      "invalid_signing_key",
      "The signer's public key is not an account signing key (A…); sign with a key the account JWT lists in signing_keys.",
    );
  }
  if (!isPublicKey(publicKey, "user")) {
    refuse("invalid_identity", "The identity id is not a user public key (U…); use newIdentity().");
  }
  const now = Math.floor(Date.now() / 1000);
  const exp = resolveExpiry(profile, opts, now);
  const connId = opts.connId ?? publicKey;
  // Only the two ends of the signer's rail carry its token, computed here by the signing key.
  const signRailToken = RAIL_PROFILES.has(profile)
    ? await signRailTokenOf(signer, account.space)
    : undefined;
  const perms = permissionsFor(account.space, profile, { ...opts, connId, signRailToken });
  assertExplicitPermissions(perms, profile);
  const principal = opts.principal ?? { owner: "local", actor: connId };
  const jwt = await encodeJwt(
    {
      sub: publicKey,
      name: profile,
      exp,
      nats: {
        type: "user",
        pub: list(perms.pub),
        sub: list(perms.sub),
        issuer_account: account.accountPub,
        tags: principalTags(principal),
        ...(CONNECTION_LIMITS[profile] ?? {}),
      },
    },
    signer,
    { iat: now },
  );
  if (jwt.length > MAX_USER_JWT_BYTES) {
    refuse(
      "creds_too_large",
      `The ${profile} JWT is ${jwt.length} bytes, over the ${MAX_USER_JWT_BYTES}-byte limit the broker's control line allows; grant fewer channels (use a wildcard subtree).`,
    );
  }
  return jwt;
}

/**
 * The Cotal bearer issuer: Ed25519 keys named by their RFC 7638 thumbprint, a bounded
 * lifetime, rotation with a retention window, and a public JWKS. It refuses at mint every
 * shape `validateUserToken` would refuse, so an issued bearer always validates.
 *
 * @module
 */

import { calculateJwkThumbprint, CompactSign, exportJWK, generateKeyPair, importJWK } from "jose";
import { CotalError } from "../errors.ts";
import type { TokenRefusalReason } from "../error_codes/mod.ts";
import { BEARER_VERSION, MAX_BEARER_TTL_SEC, RETIRED_KID_RETENTION_SEC } from "./constants.ts";
import * as grammar from "./grammar.ts";
import { isPlainObject, type JsonWebKeySet, type KeyResolver, type PublicJwk } from "./jwks.ts";
import { bearerIssuer } from "./validate.ts";

/** What to put in a bearer. The issuer authors every claim; nothing here is copied blindly. */
export interface IssueRequest {
  /** Must equal the issuer's space (stated again so a caller cannot mint for the wrong one). */
  space: string;
  /** The derived owner (`u_...`), also the bearer's `sub`. */
  owner: string;
  /** The actor the bearer speaks as. */
  actor: string;
  /** The channels it may use, within the actor's grants. */
  scope?: readonly string[];
  /** The agent lifecycle it is for, if any. */
  lifecycleUid?: string;
  /** An id the holder's credential is tracked by. */
  credentialId?: string;
  /** One delegation link, `<derived owner>.<actor>`. */
  parent?: string;
  /** Requested lifetime in seconds: an integer in 1..900; defaults to 900. */
  ttlSec?: number;
  /** Unix seconds the bearer must not outlive (an upstream proof's `exp`); caps `exp`. */
  notAfter?: number;
}

/** A freshly signed bearer. */
export interface IssuedBearer {
  /** The signed bearer. */
  token: string;
  /** The owner it speaks for. */
  owner: string;
  /** The actor it speaks as. */
  actor: string;
  /** Unix seconds. */
  exp: number;
  /** The key id that signed it. */
  kid: string;
}

/** A bearer issuer for one space. Private keys stay inside; `exportRecord` is the only way out. */
export interface UserTokenIssuer {
  /** The space it issues for. */
  readonly space: string;
  /** `urn:cotal:auth:<space>`. */
  readonly issuer: string;
  /** The key id new bearers are signed with. */
  readonly activeKid: string;
  /** Sign a bearer with the active key. */
  issue(req: IssueRequest): Promise<IssuedBearer>;
  /** Add a fresh key and make it active; the previous key keeps verifying until retired. */
  rotate(): Promise<string>;
  /** Drop an inactive key once it has been inactive for the retention window. */
  retire(kid: string): void;
  /** Public keys only (`kty, crv, x, kid, alg, use`), active first. */
  jwks(): JsonWebKeySet;
  /** A live in-process resolver over this issuer's current keys. */
  resolver(): KeyResolver;
  /** The persistable record, private keys included: write it only to a SecretStore. */
  exportRecord(): string;
}

/** Options for {@linkcode createUserTokenIssuer}. */
export interface UserTokenIssuerOptions {
  /** The space it issues for. */
  space: string;
  /** A record from `exportRecord()`; when absent a new key is generated. */
  record?: string;
  /** Milliseconds since the epoch; defaults to `Date.now` (tests use it to mint old tokens). */
  clock?: () => number;
}

interface KeyEntry {
  kid: string;
  privateJwk: PublicJwk;
  privateKey: CryptoKey;
  publicKey: CryptoKey;
  inactiveSince?: number;
}

interface IssuerRecordKey {
  kid: string;
  privateJwk: PublicJwk;
  inactiveSince?: number;
}

/**
 * Create a bearer issuer for `space`, from a stored record or with a fresh Ed25519 key.
 *
 * @example
 * ```ts
 * const issuer = await createUserTokenIssuer({ space: "demo" });
 * const { token } = await issuer.issue({ space: "demo", owner, actor: "alice", ttlSec: 300 });
 * ```
 */
export async function createUserTokenIssuer(
  opts: UserTokenIssuerOptions,
): Promise<UserTokenIssuer> {
  const space = opts.space;
  if (typeof space !== "string" || space === "") {
    throw new CotalError("issuer_bad_space", "A bearer issuer needs a non-empty space name.");
  }
  const clock = opts.clock ?? Date.now;
  const now = () => Math.floor(clock() / 1000);
  const iss = bearerIssuer(space);
  const keys = new Map<string, KeyEntry>();
  let active: string;
  if (opts.record !== undefined) {
    active = await loadRecord(opts.record, iss, keys);
  } else {
    const entry = await newKey();
    keys.set(entry.kid, entry);
    active = entry.kid;
  }

  return {
    space,
    issuer: iss,
    get activeKid() {
      return active;
    },
    async issue(req) {
      const claims = buildClaims(req, space, iss, now());
      const entry = keys.get(active)!;
      const token = await new CompactSign(new TextEncoder().encode(JSON.stringify(claims)))
        .setProtectedHeader({ alg: "EdDSA", kid: entry.kid })
        .sign(entry.privateKey);
      return { token, owner: req.owner, actor: req.actor, exp: claims.exp, kid: entry.kid };
    },
    async rotate() {
      const entry = await newKey();
      keys.get(active)!.inactiveSince = now();
      keys.set(entry.kid, entry);
      active = entry.kid;
      return entry.kid;
    },
    retire(kid) {
      const entry = keys.get(kid);
      if (!entry) {
        throw new CotalError(
          "issuer_unknown_kid",
          `The issuer has no key ${JSON.stringify(kid)}; list kids with jwks().`,
        );
      }
      if (kid === active) {
        throw new CotalError(
          "issuer_retire_active",
          "The active signing key cannot be retired; rotate() first, then retire the old kid.",
        );
      }
      // A key loaded without a record of when it left service starts its window now.
      entry.inactiveSince ??= now();
      const left = entry.inactiveSince + RETIRED_KID_RETENTION_SEC - now();
      if (left > 0) {
        throw new CotalError(
          "issuer_retire_too_early",
          `Key ${kid} left service less than ${RETIRED_KID_RETENTION_SEC} s ago; bearers and ` +
            `cached JWKS may still rely on it, so retire it in ${left} s.`,
        );
      }
      keys.delete(kid);
    },
    jwks() {
      const ordered = [keys.get(active)!, ...[...keys.values()].filter((k) => k.kid !== active)];
      return {
        keys: ordered.map((k) => ({
          kty: "OKP",
          crv: "Ed25519",
          x: k.privateJwk.x,
          kid: k.kid,
          alg: "EdDSA",
          use: "sig",
        })),
      };
    },
    resolver() {
      return (kid, alg) => Promise.resolve(alg === "EdDSA" ? keys.get(kid)?.publicKey : undefined);
    },
    exportRecord() {
      const out: IssuerRecordKey[] = [...keys.values()].map((k) => {
        const row: IssuerRecordKey = { kid: k.kid, privateJwk: k.privateJwk };
        if (k.inactiveSince !== undefined) row.inactiveSince = k.inactiveSince;
        return row;
      });
      return JSON.stringify({ ver: 1, issuer: iss, activeKid: active, keys: out });
    },
  };
}

interface BearerClaims {
  iss: string;
  aud: string;
  sub: string;
  iat: number;
  nbf: number;
  exp: number;
  ver: number;
  jti: string;
  scope: string[];
  act: Record<string, unknown>;
}

function buildClaims(req: IssueRequest, space: string, iss: string, now: number): BearerClaims {
  if (!isPlainObject(req)) refuseIssue("bad_claim", "the request is not an object");
  if (req.space !== space) {
    throw new CotalError(
      "bearer_wrong_space",
      `This issuer mints bearers for space ${JSON.stringify(space)}, not ` +
        `${JSON.stringify(String(req.space).slice(0, 64))}; use that space's issuer.`,
    );
  }
  if (!grammar.isDerivedOwner(req.owner)) {
    refuseIssue("bad_subject", "owner is not a derived owner");
  }
  if (!grammar.isActorToken(req.actor)) refuseIssue("bad_actor", "actor is not an actor token");
  const scope = req.scope === undefined ? [] : [...req.scope];
  if (!grammar.isScopeList(scope)) {
    refuseIssue("bad_claim", "scope is not a list of distinct scopes");
  }
  if (req.lifecycleUid !== undefined && !grammar.isLifecycleUid(req.lifecycleUid)) {
    refuseIssue("bad_actor", "lifecycleUid is malformed");
  }
  if (req.credentialId !== undefined && !grammar.isCredentialId(req.credentialId)) {
    refuseIssue("bad_actor", "credentialId is malformed");
  }
  if (req.parent !== undefined && !grammar.isParentPrincipal(req.parent)) {
    refuseIssue("bad_actor", "parent is not one <derived owner>.<actor> link");
  }
  const ttl = req.ttlSec ?? MAX_BEARER_TTL_SEC;
  if (!Number.isSafeInteger(ttl) || ttl <= 0 || ttl > MAX_BEARER_TTL_SEC) {
    throw new CotalError(
      "bearer_bad_ttl",
      `The bearer lifetime ${String(ttl)} is not an integer in 1..${MAX_BEARER_TTL_SEC} s; ` +
        "ask for a shorter bearer and renew it.",
    );
  }
  let exp = now + ttl;
  if (req.notAfter !== undefined) {
    if (!Number.isFinite(req.notAfter)) refuseIssue("bad_ttl", "notAfter is not a number");
    exp = Math.min(exp, Math.floor(req.notAfter));
  }
  if (exp <= now) {
    throw new CotalError(
      "bearer_bad_ttl",
      "The upstream proof this bearer is capped by has no lifetime left; get a fresh one.",
    );
  }
  const act: Record<string, unknown> = { owner: req.owner, actor: req.actor, scope };
  if (req.lifecycleUid !== undefined) act.lifecycleUid = req.lifecycleUid;
  if (req.credentialId !== undefined) act.credentialId = req.credentialId;
  if (req.parent !== undefined) act.parent = req.parent;
  return {
    iss,
    aud: space,
    sub: req.owner,
    iat: now,
    nbf: now,
    exp,
    ver: BEARER_VERSION,
    jti: randomId(),
    scope,
    act,
  };
}

function refuseIssue(
  reason: Extract<TokenRefusalReason, "bad_actor" | "bad_claim" | "bad_subject" | "bad_ttl">,
  detail: string,
): never {
  throw new CotalError(`bearer_${reason}`, `Cannot issue the bearer: ${detail}; fix the request.`);
}

async function newKey(): Promise<KeyEntry> {
  const pair = await generateKeyPair("EdDSA", { crv: "Ed25519", extractable: true });
  const jwk = await exportJWK(pair.privateKey);
  const privateJwk: PublicJwk = { kty: "OKP", crv: "Ed25519", x: jwk.x, d: jwk.d };
  return await keyEntry(privateJwk);
}

async function keyEntry(privateJwk: PublicJwk, inactiveSince?: number): Promise<KeyEntry> {
  const { kty, crv, x, d } = privateJwk;
  if (kty !== "OKP" || crv !== "Ed25519" || typeof x !== "string" || typeof d !== "string") {
    throw new TypeError("not an Ed25519 private JWK");
  }
  const kid = await calculateJwkThumbprint({ kty, crv, x }, "sha256");
  const privateKey = await importJWK({ kty, crv, x, d }, "EdDSA");
  const publicKey = await importJWK({ kty, crv, x }, "EdDSA");
  if (!(privateKey instanceof CryptoKey) || !(publicKey instanceof CryptoKey)) {
    throw new TypeError("not an asymmetric key");
  }
  const entry: KeyEntry = { kid, privateJwk: { kty, crv, x, d }, privateKey, publicKey };
  if (inactiveSince !== undefined) entry.inactiveSince = inactiveSince;
  return entry;
}

async function loadRecord(text: string, iss: string, keys: Map<string, KeyEntry>): Promise<string> {
  const bad = (detail: string): never => {
    throw new CotalError(
      "issuer_record_malformed",
      `The stored bearer-issuer record is unusable (${detail}); restore it from backup ` +
        "(regenerating it invalidates every outstanding bearer).",
    );
  };
  let rec: unknown;
  try {
    rec = JSON.parse(text);
  } catch {
    bad("not JSON");
  }
  if (!isPlainObject(rec) || rec.ver !== 1) bad("not a version 1 record");
  const r = rec as Record<string, unknown>;
  if (r.issuer !== iss) bad(`issuer is not ${iss}`);
  if (!Array.isArray(r.keys) || r.keys.length === 0) bad("no keys");
  for (const k of r.keys as unknown[]) {
    if (!isPlainObject(k) || typeof k.kid !== "string" || !isPlainObject(k.privateJwk)) {
      bad("a key entry is malformed");
    }
    const row = k as Record<string, unknown>;
    const since = row.inactiveSince;
    if (since !== undefined && !Number.isSafeInteger(since)) bad("a key's inactiveSince is bad");
    let entry: KeyEntry;
    try {
      entry = await keyEntry(row.privateJwk as PublicJwk, since as number | undefined);
    } catch {
      bad("a key is not an Ed25519 private key");
    }
    // The kid is re-derived, so a record cannot relabel one key as another.
    if (entry!.kid !== row.kid) bad("a stored kid does not match its key's thumbprint");
    if (keys.has(entry!.kid)) bad("a key is listed twice");
    keys.set(entry!.kid, entry!);
  }
  if (typeof r.activeKid !== "string" || !keys.has(r.activeKid)) bad("activeKid is not a key");
  return r.activeKid as string;
}

function randomId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_")
    .replace(/=+$/, "");
}

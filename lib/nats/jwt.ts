/**
 * NATS v2 JWTs: encode with a {@linkcode Signer}, decode with signature verification.
 *
 * Format (nats-io/jwt v2): header `{"typ":"JWT","alg":"ed25519-nkey"}`; payload with
 * `jti`, `iat`, `iss`, `sub`, optional `name`/`aud`/`exp`/`nbf`, and `nats: {type, version: 2, …}`;
 * every segment unpadded base64url; the signature covers `header.payload`.
 *
 * @module
 */

import { createHash } from "node:crypto";
import { CotalError } from "../errors.ts";
import { base32Encode } from "./base32.ts";
import { base64urlDecode, base64urlEncode } from "./base64url.ts";
import { isPublicKey, kindLetter, type NKeyKind, publicKeyKind, withArticle } from "./nkeys.ts";
import { type Signer, verifySignature } from "./signer.ts";
import type {
  ClaimsByType,
  ClaimsInput,
  ClaimType,
  NatsClaims,
  OperatorLimits,
  User,
} from "./types.ts";

/** The only algorithm we write or accept: ed25519 over `header.payload` (JWT v2). */
export const JWT_ALGORITHM = "ed25519-nkey";
/** Tokens above this size are refused before parsing (the Go library's cap). */
export const MAX_JWT_BYTES = 1024 * 1024;

const HEADER = base64urlEncode(
  new TextEncoder().encode(JSON.stringify({ typ: "JWT", alg: JWT_ALGORITHM })),
);
const ENCODER = new TextEncoder();
const DECODER = new TextDecoder("utf-8", { fatal: true });

/** Which nkey roles may sign, and be the subject of, each claim type. */
const RULES: Readonly<Record<ClaimType, { issuers: NKeyKind[]; subject?: NKeyKind }>> = Object
  .freeze({
    operator: { issuers: ["operator"], subject: "operator" },
    // Only operator-signed: a self-signed account JWT is never trusted in operator mode.
    account: { issuers: ["operator"], subject: "account" },
    user: { issuers: ["account"], subject: "user" },
    // `sub` of a request is the account the callout runs for, not an nkey role we pin.
    authorization_request: { issuers: ["server"] },
    authorization_response: { issuers: ["account"], subject: "user" },
  });

/** Limits nsc and the Go library write for a new account: unlimited, JetStream off. */
export const DEFAULT_ACCOUNT_LIMITS: Readonly<OperatorLimits> = Object.freeze({
  subs: -1,
  data: -1,
  payload: -1,
  imports: -1,
  exports: -1,
  wildcards: true,
  conn: -1,
  leaf: -1,
});

/** An account unlimited but with no JetStream storage (the system and callout accounts). */
export const NO_STORAGE_ACCOUNT_LIMITS: Readonly<OperatorLimits> = Object.freeze({
  ...DEFAULT_ACCOUNT_LIMITS,
  mem_storage: 0,
  disk_storage: 0,
});

/** Options for {@linkcode encodeJwt}. */
export interface EncodeOptions {
  /** Issued-at in Unix seconds; defaults to now. */
  iat?: number;
}

/**
 * Encodes and signs claims as a NATS v2 JWT. `iss` comes from the signer; `iat`, `jti` and
 * `nats.version` are set here. User claims get the unlimited `subs`/`data`/`payload` defaults
 * the Go library writes (0 would mean "none allowed"); account claims get its default limits
 * for any limit not given.
 */
export async function encodeJwt(
  claims: ClaimsInput,
  signer: Signer,
  options: EncodeOptions = {},
): Promise<string> {
  const type = claims?.nats?.type;
  if (!isClaimType(type)) {
    throw new CotalError(
      "jwt_wrong_type",
      `Cannot encode claims of nats.type ${
        JSON.stringify(type)
      }; use operator, account, user, authorization_request or authorization_response.`,
    );
  }
  checkIssuer(type, signer.publicKey);
  const iat = options.iat ?? Math.floor(Date.now() / 1000);
  if (!isTimestamp(iat)) throw badTime("iat", iat);
  // The same checks decode applies, so we never sign a token our own decoder refuses.
  checkShape(type, claims as unknown as Record<string, unknown>);
  const payload: Record<string, unknown> = {
    ...claims,
    iat,
    iss: signer.publicKey,
    nats: { ...withDefaults(claims), version: 2 },
  };
  delete payload.jti;
  // jti: a hash of the claims without jti. Go uses SHA-512/256; the server treats jti as an
  // opaque id, so SHA-256 (same length) serves. Hashed synchronously: awaiting WebCrypto's
  // thread pool for 300 bytes cost a third of every mint.
  const digest = createHash("sha256").update(JSON.stringify(payload)).digest();
  const body = JSON.stringify({ jti: base32Encode(new Uint8Array(digest)), ...payload });
  const signingInput = `${HEADER}.${base64urlEncode(ENCODER.encode(body))}`;
  const signature = await signer.sign(ENCODER.encode(signingInput));
  return `${signingInput}.${base64urlEncode(signature)}`;
}

function withDefaults(claims: ClaimsInput): Record<string, unknown> {
  const nats = claims.nats as Record<string, unknown>;
  if (nats.type === "user") {
    const user = nats as Partial<User>;
    return { ...user, subs: user.subs ?? -1, data: user.data ?? -1, payload: user.payload ?? -1 };
  }
  if (nats.type === "account") {
    return { ...nats, limits: { ...DEFAULT_ACCOUNT_LIMITS, ...(nats.limits ?? {}) } };
  }
  return { ...nats };
}

/** Options for {@linkcode decodeJwt}. */
export interface DecodeOptions<T extends ClaimType = ClaimType> {
  /** Refuse (`jwt_wrong_type`) unless `nats.type` is this. */
  type?: T;
  /** The clock for `exp`/`nbf`, Unix seconds; defaults to now. */
  now?: number;
  /** Accept an expired or not-yet-valid token (to read it for renewal, never to trust it). */
  ignoreTimes?: boolean;
}

/**
 * Decodes a NATS v2 JWT and verifies its ed25519 signature against `iss`. Refuses a wrong
 * header or alg, bad base64url or JSON, missing fields, an issuer whose nkey role cannot sign
 * the claim type, a bad signature, a type other than `options.type`, and (unless
 * `ignoreTimes`) an expired or not-yet-valid token. Each refusal is a `CotalError`.
 *
 * This proves who signed the token, not that the signer is trusted: callers compare `iss`
 * (or `issuer_account`) with the key they expect.
 */
export async function decodeJwt<T extends ClaimType = ClaimType>(
  token: string,
  options: DecodeOptions<T> = {},
): Promise<ClaimsByType[T]> {
  const { claims, signingInput, signature } = parseJwt(token);
  const ok = await verifySignature(claims.iss, ENCODER.encode(signingInput), signature);
  if (!ok) {
    throw new CotalError(
      "jwt_bad_signature",
      `The JWT signature does not verify against its issuer ${claims.iss}; the token was altered or signed by another key.`,
    );
  }
  if (options.type !== undefined && claims.nats.type !== options.type) {
    throw new CotalError(
      "jwt_wrong_type",
      `The JWT is of type ${claims.nats.type}, but type ${options.type} was expected.`,
    );
  }
  if (!options.ignoreTimes) checkTimes(claims, options.now ?? Math.floor(Date.now() / 1000));
  return claims as ClaimsByType[T];
}

/**
 * Parses and shape-checks a JWT without verifying the signature. Internal: only for code that
 * verifies next (decodeJwt) or that reads a token it just produced; never exported from mod.ts.
 */
export function decodeJwtUnverified(token: string): NatsClaims {
  return parseJwt(token).claims;
}

interface ParsedJwt {
  claims: NatsClaims;
  signingInput: string;
  signature: Uint8Array;
}

function parseJwt(token: string): ParsedJwt {
  if (typeof token !== "string" || token.length === 0) {
    throw badEncoding("the token is empty or not a string");
  }
  if (token.length > MAX_JWT_BYTES) {
    throw new CotalError(
      "jwt_too_large",
      `The JWT is ${token.length} bytes, over the ${MAX_JWT_BYTES}-byte cap; refusing to parse it.`,
    );
  }
  const parts = token.split(".");
  if (parts.length !== 3) throw badEncoding(`it has ${parts.length} segments instead of 3`);
  const header = parseSegment(parts[0], "header");
  if (typeof header.typ !== "string" || header.typ.toUpperCase() !== "JWT") {
    throw badEncoding(`its header typ is ${JSON.stringify(header.typ)}, not "JWT"`);
  }
  if (header.alg !== JWT_ALGORITHM) {
    throw new CotalError(
      "jwt_bad_alg",
      `The JWT alg is ${
        JSON.stringify(header.alg)
      }; only "${JWT_ALGORITHM}" (NATS JWT v2) is accepted, so re-issue it with a current NATS tool.`,
    );
  }
  const payload = parseSegment(parts[1], "payload");
  const signature = base64urlDecode(parts[2]);
  if (signature === undefined) throw badEncoding("its signature is not base64url");
  const claims = checkClaims(payload);
  return { claims, signingInput: `${parts[0]}.${parts[1]}`, signature };
}

function parseSegment(segment: string, what: string): Record<string, unknown> {
  const bytes = base64urlDecode(segment);
  if (bytes === undefined) throw badEncoding(`its ${what} is not unpadded base64url`);
  let value: unknown;
  try {
    value = JSON.parse(DECODER.decode(bytes));
  } catch {
    throw badEncoding(`its ${what} is not UTF-8 JSON`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw badEncoding(`its ${what} is not a JSON object`);
  }
  return value as Record<string, unknown>;
}

function checkClaims(payload: Record<string, unknown>): NatsClaims {
  for (const field of ["jti", "iss", "sub"] as const) {
    if (typeof payload[field] !== "string" || payload[field] === "") throw missing(field);
  }
  if (!isTimestamp(payload.iat)) throw missing("iat");
  const nats = payload.nats;
  if (typeof nats !== "object" || nats === null || Array.isArray(nats)) throw missing("nats");
  const { type, version } = nats as Record<string, unknown>;
  if (type === undefined) throw missing("nats.type");
  if (version !== 2) {
    throw new CotalError(
      "jwt_bad_version",
      `The JWT has nats.version ${JSON.stringify(version)}; only version 2 JWTs are accepted.`,
    );
  }
  if (!isClaimType(type)) {
    throw new CotalError(
      "jwt_wrong_type",
      `The JWT nats.type ${JSON.stringify(type)} is not one lib/nats handles.`,
    );
  }
  checkIssuer(type, payload.iss as string);
  checkShape(type, payload);
  return payload as unknown as NatsClaims;
}

/** Checks shared by encode and decode: times, subject role, and per-type required fields. */
function checkShape(type: ClaimType, claims: Record<string, unknown>): void {
  for (const field of ["exp", "nbf"] as const) {
    if (claims[field] !== undefined && !isTimestamp(claims[field])) {
      throw badTime(field, claims[field]);
    }
  }
  checkSubject(type, claims.sub);
  const nats = claims.nats as Record<string, unknown>;
  if (type === "authorization_request") checkRequestShape(nats);
  if (type === "authorization_response") checkResponseShape(nats, claims.aud);
  if (type === "user" && nats.issuer_account !== undefined) {
    if (!isPublicKey(nats.issuer_account as string, "account")) {
      throw new CotalError(
        "jwt_bad_issuer",
        "The user JWT's issuer_account is not an account public key (A…).",
      );
    }
  }
}

function badTime(field: string, value: unknown): CotalError {
  return new CotalError(
    "jwt_bad_claims",
    `The JWT ${field} claim must be whole Unix seconds, not ${JSON.stringify(value)}.`,
  );
}

function checkRequestShape(nats: Record<string, unknown>): void {
  const server = nats.server_id as Record<string, unknown> | undefined;
  if (typeof server !== "object" || server === null || typeof server.id !== "string") {
    throw missing("nats.server_id.id");
  }
  if (!isPublicKey(nats.user_nkey as string, "user")) throw missing("nats.user_nkey");
}

function checkResponseShape(nats: Record<string, unknown>, aud: unknown): void {
  if (!isPublicKey(aud as string, "server")) {
    throw new CotalError(
      "jwt_bad_claims",
      "An authorization response needs aud = the requesting server's id (N…).",
    );
  }
  const hasJwt = typeof nats.jwt === "string" && nats.jwt !== "";
  const hasError = typeof nats.error === "string" && nats.error !== "";
  if (hasJwt === hasError) {
    throw new CotalError(
      "jwt_bad_claims",
      "An authorization response carries exactly one of nats.jwt (allow) or nats.error (deny).",
    );
  }
  if (nats.issuer_account !== undefined && !isPublicKey(nats.issuer_account as string, "account")) {
    throw new CotalError(
      "jwt_bad_issuer",
      "The authorization response's issuer_account is not an account public key (A…).",
    );
  }
}

function checkIssuer(type: ClaimType, issuer: string): void {
  const kind = publicKeyKind(issuer);
  const allowed = RULES[type].issuers;
  if (kind === undefined || !allowed.includes(kind)) {
    const want = allowed.map((k) => `${withArticle(k)} (${kindLetter(k)}…)`).join(" or ");
    throw new CotalError(
      "jwt_bad_issuer",
      `A ${type} JWT must be signed by ${want} key; ${
        kind === undefined ? "the issuer is not a public nkey" : `got ${withArticle(kind)} key`
      }.`,
    );
  }
}

function checkSubject(type: ClaimType, subject: unknown): void {
  const want = RULES[type].subject;
  if (typeof subject !== "string" || subject === "") throw missing("sub");
  if (want !== undefined && !isPublicKey(subject, want)) {
    throw new CotalError(
      "jwt_bad_subject",
      `A ${type} JWT's sub must be ${withArticle(want)} public key (${kindLetter(want)}…).`,
    );
  }
}

function checkTimes(claims: NatsClaims, now: number): void {
  if (claims.exp !== undefined && claims.exp > 0 && now > claims.exp) {
    throw new CotalError(
      "jwt_expired",
      `The ${claims.nats.type} JWT for ${claims.sub} expired at ${
        new Date(claims.exp * 1000).toISOString()
      }; mint a new one.`,
    );
  }
  if (claims.nbf !== undefined && claims.nbf > now) {
    throw new CotalError(
      "jwt_not_yet_valid",
      `The ${claims.nats.type} JWT for ${claims.sub} is not valid before ${
        new Date(claims.nbf * 1000).toISOString()
      }; check the clocks.`,
    );
  }
}

function isClaimType(value: unknown): value is ClaimType {
  return typeof value === "string" && Object.hasOwn(RULES, value);
}

function isTimestamp(value: unknown): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0;
}

function missing(field: string): CotalError {
  return new CotalError(
    "jwt_missing_field",
    `The JWT lacks the required field ${field} (or it has the wrong type).`,
  );
}

function badEncoding(why: string): CotalError {
  return new CotalError("jwt_bad_encoding", `The text is not a well-formed NATS JWT: ${why}.`);
}

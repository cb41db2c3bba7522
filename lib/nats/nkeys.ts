/**
 * NATS nkeys: the prefixed, CRC16-checked base32 spelling of ed25519 (and X25519 "curve")
 * keys. Seeds and public keys made here are interchangeable with nkeys.js and Go nkeys.
 *
 * @module
 */

import { createPrivateKey, createPublicKey } from "node:crypto";
import type { Buffer } from "node:buffer";
import { CotalError } from "../errors.ts";
import { base32Decode, base32Encode } from "./base32.ts";
import { base64urlDecode } from "./base64url.ts";

/** The role a key plays; its prefix byte makes the first character (`O`, `A`, `U`, `N`, `X`). */
export type NKeyKind = "operator" | "account" | "user" | "server" | "curve";

/** Prefix bytes chosen by NATS so each role base32-encodes to a readable first letter. */
const PREFIX: Readonly<Record<NKeyKind, number>> = Object.freeze({
  operator: 14 << 3, // 'O'
  account: 0, // 'A'
  user: 20 << 3, // 'U'
  server: 13 << 3, // 'N'
  curve: 23 << 3, // 'X'
});
const SEED_PREFIX = 18 << 3; // 'S'
const KIND_BY_PREFIX = new Map<number, NKeyKind>(
  Object.entries(PREFIX).map(([kind, byte]) => [byte, kind as NKeyKind]),
);

/** An nkey pair as text: the secret seed (`S…`) and its public key. */
export interface NKeyPair {
  readonly kind: NKeyKind;
  /** The secret seed, e.g. `SU…` for a user. Treat as a secret. */
  readonly seed: string;
  /** The public key, e.g. `U…` for a user. */
  readonly publicKey: string;
}

/** A seed taken apart: its role and the raw 32-byte private key (ed25519 seed or X25519 scalar). */
export interface ParsedSeed {
  readonly kind: NKeyKind;
  readonly raw: Uint8Array;
}

/** CRC-16/XMODEM (polynomial 0x1021, initial 0), the nkey checksum. */
function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
    crc &= 0xffff;
  }
  return crc;
}

function withChecksum(body: Uint8Array): string {
  const raw = new Uint8Array(body.length + 2);
  raw.set(body);
  const crc = crc16(body);
  raw[body.length] = crc & 0xff; // little-endian, as nkeys writes it
  raw[body.length + 1] = crc >>> 8;
  return base32Encode(raw);
}

/** Decodes base32 and checks the trailing CRC16; returns the body without the checksum. */
function checkedBody(text: string, what: string): Uint8Array {
  const raw = typeof text === "string" ? base32Decode(text) : undefined;
  if (raw === undefined || raw.length < 4) {
    throw new CotalError(
      "nkey_bad_encoding",
      `The ${what} is not an nkey (expected upper-case base32); pass the ${what} as written by nsc or nkeys.`,
    );
  }
  const body = raw.subarray(0, raw.length - 2);
  const crc = raw[raw.length - 2] | (raw[raw.length - 1] << 8);
  if (crc16(body) !== crc) {
    throw new CotalError(
      "nkey_bad_encoding",
      `The ${what} fails its nkey checksum; it was mistyped or truncated, so copy it again from its source.`,
    );
  }
  return body;
}

/** Encodes a 32-byte public key with its role prefix. */
export function encodePublicKey(kind: NKeyKind, raw: Uint8Array): string {
  if (raw.length !== 32) {
    throw new CotalError(
      "nkey_bad_length",
      `A ${kind} public key must be 32 bytes, not ${raw.length}.`,
    );
  }
  const body = new Uint8Array(33);
  body[0] = PREFIX[kind];
  body.set(raw, 1);
  return withChecksum(body);
}

/** Encodes a raw 32-byte private key as a seed for the given role. */
export function encodeSeed(kind: NKeyKind, raw: Uint8Array): string {
  if (raw.length !== 32) {
    throw new CotalError(
      "nkey_bad_length",
      `A ${kind} seed must hold 32 bytes, not ${raw.length}.`,
    );
  }
  const role = PREFIX[kind];
  const body = new Uint8Array(34);
  // Two prefix bytes spread over 10 bits so the text starts with 'S' and then the role letter.
  body[0] = SEED_PREFIX | (role >> 5);
  body[1] = (role & 31) << 3;
  body.set(raw, 2);
  return withChecksum(body);
}

/** Parses a seed (`SO…`, `SA…`, `SU…`, `SN…`, `SX…`) into its role and raw private key. */
export function parseSeed(seed: string): ParsedSeed {
  const body = checkedBody(seed, "seed");
  const first = body[0] & 0xf8;
  const role = ((body[0] & 0x07) << 5) | ((body[1] & 0xf8) >> 3);
  const kind = KIND_BY_PREFIX.get(role);
  if (first !== SEED_PREFIX || kind === undefined || body.length !== 34) {
    throw new CotalError(
      "nkey_bad_seed",
      "The text is not an nkey seed (a seed starts with 'S' and holds 32 bytes); pass the seed, not a public key.",
    );
  }
  return { kind, raw: body.slice(2) };
}

/** The role of a public key, or `undefined` when the text is not a valid public nkey. */
export function publicKeyKind(publicKey: string): NKeyKind | undefined {
  if (typeof publicKey !== "string" || publicKey.length !== 56) return undefined;
  const raw = base32Decode(publicKey);
  if (raw === undefined || raw.length !== 35) return undefined;
  const body = raw.subarray(0, 33);
  if (crc16(body) !== (raw[33] | (raw[34] << 8))) return undefined;
  return KIND_BY_PREFIX.get(body[0]);
}

/** True when `publicKey` is a well-formed public nkey, of `kind` when one is given. */
export function isPublicKey(publicKey: string, kind?: NKeyKind): boolean {
  const found = publicKeyKind(publicKey);
  return found !== undefined && (kind === undefined || found === kind);
}

/** Returns the raw 32 bytes of a public key after checking its checksum and, if given, its role. */
export function decodePublicKey(publicKey: string, kind?: NKeyKind): Uint8Array {
  const body = checkedBody(publicKey, "public key");
  const found = KIND_BY_PREFIX.get(body[0]);
  if (found === undefined || body.length !== 33) {
    throw new CotalError(
      "nkey_bad_prefix",
      "The text is not a public nkey (expected O…, A…, U…, N… or X… of 56 characters).",
    );
  }
  if (kind !== undefined && found !== kind) {
    throw new CotalError(
      "nkey_bad_prefix",
      `Expected ${withArticle(kind)} public key (${kindLetter(kind)}…) but got ${
        withArticle(found)
      } key (${kindLetter(found)}…).`,
    );
  }
  return body.slice(1);
}

const LETTER: Readonly<Record<NKeyKind, string>> = Object.freeze({
  operator: "O",
  account: "A",
  user: "U",
  server: "N",
  curve: "X",
});

/** "an account", "a user": for messages. */
export function withArticle(word: string): string {
  return `${/^[aeio]/.test(word) ? "an" : "a"} ${word}`; // "a user", "an account"
}

/** The first character of a public key of this role. */
export function kindLetter(kind: NKeyKind): string {
  return LETTER[kind];
}

const ED25519_PKCS8 = [0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65];
const ED25519_OID = 0x70;
const X25519_OID = 0x6e;
const PKCS8_TAIL = [0x04, 0x22, 0x04, 0x20];

/** Wraps a raw 32-byte private key in the fixed PKCS#8 envelope WebCrypto imports. */
export function pkcs8(raw: Uint8Array, curve: boolean): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(48);
  out.set(ED25519_PKCS8);
  out[11] = curve ? X25519_OID : ED25519_OID;
  out.set(PKCS8_TAIL, 12);
  out.set(raw, 16);
  return out;
}

/** Derives the public key of a seed (ed25519, or X25519 for curve seeds) through WebCrypto. */
export function publicKeyFromSeed(seed: string): Promise<string> {
  const { kind, raw } = parseSeed(seed);
  return publicKeyOf(kind, raw);
}

/** The public key of a raw 32-byte private key of the given role. */
export async function publicKeyOf(kind: NKeyKind, raw: Uint8Array): Promise<string> {
  const curve = kind === "curve";
  if (!curve) {
    // Derived synchronously with Deno's native ed25519: the WebCrypto round trip (import,
    // export as JWK, on a thread pool) dominated minting and creds rendering.
    const key = createPrivateKey({
      key: pkcs8(raw, false) as unknown as Buffer,
      format: "der",
      type: "pkcs8",
    });
    const spki = createPublicKey(key).export({ format: "der", type: "spki" });
    return encodePublicKey(kind, new Uint8Array(spki.subarray(spki.length - 32)));
  }
  const algorithm = curve ? "X25519" : "Ed25519";
  const usages: KeyUsage[] = curve ? ["deriveBits"] : ["sign"];
  const key = await crypto.subtle.importKey("pkcs8", pkcs8(raw, curve), algorithm, true, usages);
  const jwk = await crypto.subtle.exportKey("jwk", key);
  const x = jwk.x === undefined ? undefined : base64urlDecode(jwk.x);
  if (x === undefined || x.length !== 32) {
    throw new CotalError("nkey_bad_seed", "WebCrypto could not derive a public key from the seed.");
  }
  return encodePublicKey(kind, x);
}

/** Creates a fresh key pair of the given role from 32 random bytes. */
export async function createKeyPair(kind: NKeyKind): Promise<NKeyPair> {
  const raw = crypto.getRandomValues(new Uint8Array(32));
  return { kind, seed: encodeSeed(kind, raw), publicKey: await publicKeyOf(kind, raw) };
}

/** Creates an operator key pair (`SO…` / `O…`). */
export function createOperator(): Promise<NKeyPair> {
  return createKeyPair("operator");
}

/** Creates an account key pair (`SA…` / `A…`); also used for account signing keys. */
export function createAccount(): Promise<NKeyPair> {
  return createKeyPair("account");
}

/** Creates a user key pair (`SU…` / `U…`). */
export function createUser(): Promise<NKeyPair> {
  return createKeyPair("user");
}

/** Creates a curve (xkey) key pair (`SX…` / `X…`) for sealed auth-callout traffic. */
export function createCurve(): Promise<NKeyPair> {
  return createKeyPair("curve");
}

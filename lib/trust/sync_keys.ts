/**
 * Synchronous ed25519 for the two places that cannot await: `newIdentity()` (the seed's
 * signature is synchronous) and npm:nats's `Authenticator`, which must return the nonce
 * signature from a plain function call. WebCrypto is promise-only, so both use Deno's native
 * `node:crypto` ed25519 (~30 µs a signature), never pure-JS tweetnacl (~11 ms).
 *
 * @module
 */
import { createPrivateKey, createPublicKey, type KeyObject, sign, verify } from "node:crypto";
import {
  decodePublicKey,
  encodePublicKey,
  encodeSeed,
  type NKeyKind,
  notePair,
  parseSeed,
} from "../nats/mod.ts";
import type { Identity } from "./types.ts";

const PKCS8_ED25519 = [0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70];
const PKCS8_TAIL = [0x04, 0x22, 0x04, 0x20];

/** A private key object for a raw 32-byte ed25519 seed. */
function privateKeyOf(raw: Uint8Array): KeyObject {
  const der = new Uint8Array(48);
  der.set(PKCS8_ED25519);
  der.set(PKCS8_TAIL, 12);
  der.set(raw, 16);
  const key = createPrivateKey({ key: der as unknown as Buffer, format: "der", type: "pkcs8" });
  der.fill(0);
  return key;
}

/** The raw 32-byte public key of an ed25519 private key (the tail of its SPKI DER). */
function publicRawOf(key: KeyObject): Uint8Array {
  const spki = createPublicKey(key).export({ format: "der", type: "spki" });
  return new Uint8Array(spki.subarray(spki.length - 32));
}

/** A synchronous signer for one nkey seed. */
export interface SyncSigner {
  readonly publicKey: string;
  sign(data: Uint8Array): Uint8Array;
}

/** Imports an nkey seed for synchronous signing; the raw key bytes are wiped after import. */
export function syncSigner(seed: string): SyncSigner {
  const { kind, raw } = parseSeed(seed);
  const key = privateKeyOf(raw);
  raw.fill(0);
  const publicKey = encodePublicKey(kind, publicRawOf(key));
  return {
    publicKey,
    sign: (data) => new Uint8Array(sign(null, data, key)),
  };
}

const SPKI_ED25519 = [0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00];

/**
 * A synchronous check of ed25519 signatures by one nkey (a relay checks a CONNECT's proof inside
 * its protocol guard, which cannot await). Throws a `CotalError` when `publicKey` is no nkey.
 */
export function syncVerifier(publicKey: string): (data: Uint8Array, sig: Uint8Array) => boolean {
  const raw = decodePublicKey(publicKey);
  const der = new Uint8Array(44);
  der.set(SPKI_ED25519);
  der.set(raw, 12);
  const key = createPublicKey({ key: der as unknown as Buffer, format: "der", type: "spki" });
  return (data, sig) => sig.length === 64 && verify(null, data, key, sig);
}

/** A fresh nkey pair of `kind`, synchronously. */
export function newKeyPairSync(kind: NKeyKind): { publicKey: string; seed: string } {
  const raw = crypto.getRandomValues(new Uint8Array(32));
  const publicKey = encodePublicKey(kind, publicRawOf(privateKeyOf(raw)));
  const seed = encodeSeed(kind, raw);
  raw.fill(0);
  return { publicKey, seed };
}

/**
 * A fresh user identity: an nkey user (`id` = `U…` public key, `seed` = `SU…`).
 *
 * @example
 * ```ts
 * const creds = await mintCreds(auth, newIdentity(), "provisioner");
 * ```
 */
export function newIdentity(): Identity {
  const { publicKey, seed } = newKeyPairSync("user");
  notePair(seed, publicKey);
  return { id: publicKey, seed };
}

/**
 * The signing seam: everything that signs a NATS JWT or nonce goes through {@linkcode Signer},
 * so a key held elsewhere (a KMS or Vault-transit ed25519 key) can replace {@linkcode seedSigner}.
 *
 * @module
 */

import { CotalError } from "../errors.ts";
import { decodePublicKey, parseSeed, pkcs8, publicKeyOf } from "./nkeys.ts";

/** Signs bytes as one nkey. `publicKey` names the key (e.g. `A…`), so JWTs can set `iss`. */
export interface Signer {
  /** The nkey public key of the key that signs (`A…` for an account signing key). */
  readonly publicKey: string;
  /** The 64-byte ed25519 signature of `data` (a KMS key signs it where it lives). */
  sign(data: Uint8Array): Promise<Uint8Array>;
}

/**
 * The default signer: an ed25519 nkey seed imported into WebCrypto (~70 µs a signature,
 * versus ~11 ms for nkeys.js's pure-JS tweetnacl). The key is imported non-extractable.
 */
export async function seedSigner(seed: string): Promise<Signer> {
  const { kind, raw } = parseSeed(seed);
  if (kind === "curve") {
    throw new CotalError(
      "nkey_bad_seed",
      "A curve (SX…) seed encrypts but cannot sign; pass an operator, account, user or server seed.",
    );
  }
  const publicKey = await publicKeyOf(kind, raw);
  const key = await crypto.subtle.importKey("pkcs8", pkcs8(raw, false), "Ed25519", false, [
    "sign",
  ]);
  raw.fill(0);
  return {
    publicKey,
    async sign(data: Uint8Array): Promise<Uint8Array> {
      return new Uint8Array(await crypto.subtle.sign("Ed25519", key, data as BufferSource));
    },
  };
}

// Imported verify keys are cached: a callout verifies the same server and account keys often.
const VERIFY_CACHE_MAX = 256;
const verifyKeys = new Map<string, Promise<CryptoKey>>();

function verifyKey(publicKey: string): Promise<CryptoKey> {
  let key = verifyKeys.get(publicKey);
  if (key === undefined) {
    const raw = decodePublicKey(publicKey);
    key = crypto.subtle.importKey("raw", raw as BufferSource, "Ed25519", false, ["verify"]);
    key.catch(() => verifyKeys.delete(publicKey));
    if (verifyKeys.size >= VERIFY_CACHE_MAX) {
      verifyKeys.delete(verifyKeys.keys().next().value as string);
    }
    verifyKeys.set(publicKey, key);
  }
  return key;
}

/**
 * Verifies an ed25519 signature made by the nkey `publicKey`. Returns false for a bad
 * signature; throws a `CotalError` only when `publicKey` is not a signing nkey.
 */
export async function verifySignature(
  publicKey: string,
  data: Uint8Array,
  signature: Uint8Array,
): Promise<boolean> {
  if (publicKey.startsWith("X")) {
    throw new CotalError(
      "nkey_bad_prefix",
      "A curve (X…) key cannot verify signatures; pass the signer's O…, A…, U… or N… key.",
    );
  }
  if (signature.length !== 64) return false;
  const key = await verifyKey(publicKey);
  return await crypto.subtle.verify(
    "Ed25519",
    key,
    signature as BufferSource,
    data as BufferSource,
  );
}

/**
 * The signer rail's secret token: a subject segment only holders of the space's signing key can
 * compute, and only the creds they give it to (the supervisor's, the signer's) carry in their
 * grants.
 *
 * Why: the broker never checks a reply subject, so a member connected straight to the broker can
 * aim any broker answer (a KV put's ack, a stream read) at any subject it can name. Aimed at the
 * rail's requests, 57,000 acks a second from one agent connection pushed every honest request out
 * of the rail's stream; aimed at the supervisor's replies, 65 KB stream reads got the
 * supervisor's connection cut (red team 45). A subject a member cannot name is one it cannot aim
 * at: the rail's subjects carry this token, and an answer aimed anywhere else reaches nobody.
 *
 * The token is derived from an ed25519 signature by the account's signing key over a fixed
 * string, which is deterministic (RFC 8032), so a seed in process, the signer daemon and a
 * KMS-held key all compute the same one; nothing else is ever signed over those bytes (a JWT
 * signature covers a JWT's own encoding).
 *
 * @module
 */
import type { Signer } from "../nats/mod.ts";

const cache = new Map<string, Promise<string>>();

/** The rail token of `space` under the key `signer` holds: 32 lowercase hex characters. */
export function signRailToken(signer: Signer, space: string): Promise<string> {
  const key = `${signer.publicKey}\n${space}`;
  let hit = cache.get(key);
  if (!hit) {
    hit = (async () => {
      const sig = await signer.sign(new TextEncoder().encode(`cotal-sign-rail-v1\n${space}`));
      const hash = new Uint8Array(await crypto.subtle.digest("SHA-256", sig as BufferSource));
      return [...hash.subarray(0, 16)].map((b) => b.toString(16).padStart(2, "0")).join("");
    })();
    hit.catch(() => cache.delete(key));
    cache.set(key, hit);
  }
  return hit;
}

/** A well-formed rail token (what grants and subjects may carry). */
export function isSignRailToken(t: unknown): t is string {
  return typeof t === "string" && /^[0-9a-f]{32}$/.test(t);
}

/** Shared fixtures for the auth tests: owners, hand-built tokens, and refusal matchers. */
import type { CotalErrorCode } from "../../lib/error_codes/mod.ts";
import { base64url, importJWK } from "jose";
import { isCotalError } from "../../lib/errors.ts";
import type { UserTokenIssuer } from "../../lib/auth/issuer.ts";
import { deriveOwnerToken } from "../../lib/auth/owner.ts";

/** A fixed 32-byte owner secret. */
export const SECRET = new Uint8Array(32).fill(7);

/** A derived owner for `name`. */
export function ownerFor(name: string): Promise<string> {
  return deriveOwnerToken(SECRET, name);
}

/** Unix seconds now. */
export function now(): number {
  return Math.floor(Date.now() / 1000);
}

/** An `assert.rejects` matcher for a CotalError with `code`. */
export function code(expected: CotalErrorCode): (err: unknown) => boolean {
  return (err) => {
    if (isCotalError(err, expected)) return true;
    throw new Error(
      `expected CotalError ${expected}, got ${
        isCotalError(err) ? `${err.code}: ${err.message}` : String(err)
      }`,
    );
  };
}

/** base64url of a JSON value. */
export function b64json(value: unknown): string {
  return base64url.encode(new TextEncoder().encode(JSON.stringify(value)));
}

/** An unsigned token with any header and payload, and `sig` as the third part. */
export function rawToken(header: unknown, payload: unknown, sig = ""): string {
  return `${b64json(header)}.${b64json(payload)}.${sig}`;
}

/**
 * Sign any payload with the issuer's active private key (read back from its record), so a
 * test can build shapes the issuer itself refuses to mint.
 */
export async function forge(
  issuer: UserTokenIssuer,
  payload: Record<string, unknown>,
  header: Record<string, unknown> = {},
): Promise<string> {
  const rec = JSON.parse(issuer.exportRecord());
  const entry = rec.keys.find((k: { kid: string }) => k.kid === rec.activeKid);
  const key = await importJWK(entry.privateJwk, "EdDSA") as CryptoKey;
  // Signed by hand (not through jose) so headers jose refuses to emit, like crit, can be built.
  const input = `${b64json({ alg: "EdDSA", kid: rec.activeKid, ...header })}.${b64json(payload)}`;
  const sig = await crypto.subtle.sign("Ed25519", key, new TextEncoder().encode(input));
  return `${input}.${base64url.encode(new Uint8Array(sig))}`;
}

/** A well-formed bearer payload for `space` and `owner`, to be varied by tests. */
export function bearerClaims(
  space: string,
  owner: string,
  over: Record<string, unknown> = {},
): Record<string, unknown> {
  const t = now();
  const claims: Record<string, unknown> = {
    iss: `urn:cotal:auth:${space}`,
    aud: space,
    sub: owner,
    iat: t,
    nbf: t,
    exp: t + 300,
    ver: 1,
    scope: [],
    act: { owner, actor: "alice" },
    ...over,
  };
  for (const [k, v] of Object.entries(claims)) if (v === undefined) delete claims[k];
  return claims;
}

/**
 * Creds re-signed to expire sooner than Cotal's policy mints a standing cred: what an
 * embedder's own issuer may hand a daemon or an endpoint, and what renewal and doctor tests
 * need to reach "near expiry" in seconds rather than minutes.
 */
import { accountSigner } from "../../lib/trust/mint.ts";
import type { SpaceAuth } from "../../lib/trust/mod.ts";
import { encodeJwt, parseCreds, renderCreds } from "../../lib/nats/mod.ts";
import { decodeJwtUnverified } from "../../lib/nats/jwt.ts";

/** `creds` with the same identity and grants, re-signed by the space account to expire at `exp`. */
export async function resignedUntil(auth: SpaceAuth, creds: string, exp: number): Promise<string> {
  const { jwt, seed } = await parseCreds(creds);
  const claims = decodeJwtUnverified(jwt);
  const now = Math.floor(Date.now() / 1000);
  const signer = await accountSigner(auth.account);
  const again = await encodeJwt({ ...claims, exp } as never, signer, { iat: now });
  return await renderCreds(again, seed);
}

/** `creds` re-signed to live `ttl` seconds from now. */
export function resignedFor(auth: SpaceAuth, creds: string, ttl: number): Promise<string> {
  return resignedUntil(auth, creds, Math.floor(Date.now() / 1000) + ttl);
}

/**
 * `creds` re-signed without the per-message cap member profiles carry since red team 46
 * (`MEMBER_MAX_PAYLOAD_BYTES`): what a member cred signed before the cap may still send until
 * it expires, up to the broker's 1 MiB.
 */
export async function resignedWithoutPayloadCap(auth: SpaceAuth, creds: string): Promise<string> {
  const { jwt, seed } = await parseCreds(creds);
  const claims = decodeJwtUnverified(jwt) as unknown as { nats: Record<string, unknown> };
  const { payload: _cap, ...nats } = claims.nats;
  const signer = await accountSigner(auth.account);
  const again = await encodeJwt({ ...claims, nats } as never, signer, {
    iat: Math.floor(Date.now() / 1000),
  });
  return await renderCreds(again, seed);
}

/**
 * The seam every minter signs through. A {@linkcode CredentialSigner} is asked for the user JWT
 * of a profile for a public key; the holder's seed never leaves the caller, which renders the
 * creds itself ({@linkcode mintWith}). {@linkcode localSigner} signs in process from a trust
 * bundle (an embedder's default); `remoteSigner` in lib/signer asks the `cotal-signer` daemon,
 * so the caller never holds the account's signing seed. Anything that can produce an ed25519
 * signature over the JWT's signing input (a KMS or Vault-transit key) signs through
 * {@linkcode keySigner} without exporting a seed (docs/SECURITY.md, "The signer").
 *
 * @module
 */
import { renderCreds, type Signer } from "../nats/mod.ts";
import { signUserJwt, signUserJwtWith } from "./mint.ts";
import type { Identity, MintAuth, MintOpts, Profile } from "./types.ts";

/** What a signer is asked: whose key, which profile, and the mint options. */
export interface SignRequest {
  /** The holder's user public key (`U…`); its seed stays with the caller. */
  readonly publicKey: string;
  /** The profile whose grants and lifetime the JWT carries. */
  readonly profile: Profile;
  /** Mint options (principal, lifecycle, channels, TTL), as for `mintCreds`. */
  readonly opts?: MintOpts;
}

/** Signs user JWTs for one space. */
export interface CredentialSigner {
  /** The space whose account signs. */
  readonly space: string;
  /** Where it signs: `"local"` (this process holds the key) or `"remote"`. */
  readonly where: "local" | "remote";
  /** The signed user JWT, or a `CotalError` naming why it was refused. */
  sign(req: SignRequest): Promise<string>;
}

/**
 * A signer over any {@linkcode Signer} of the space's account signing key: a KMS or
 * Vault-transit ed25519 key whose private half never leaves it (its `sign` sends the JWT's
 * signing input and returns the 64-byte signature). The account JWT must list the key
 * (`setAccountSigningKey`). No seed is in this process, so it counts as remote: a Manager
 * signing through it leaves the daemon creds' re-signing to whoever holds a seed.
 *
 * @example
 * ```ts
 * const auth = await createSpaceAuth("demo");
 * const kmsKey: Signer = await seedSigner(auth.account.signingSeed); // a KMS client in production
 * const signer = keySigner("demo", auth.account.pub, kmsKey);
 * const creds = await mintWith(signer, newIdentity(), "observer");
 * ```
 */
export function keySigner(space: string, accountPub: string, key: Signer): CredentialSigner {
  return {
    space,
    where: "remote",
    sign: (req) =>
      signUserJwtWith({ space, accountPub }, key, req.publicKey, req.profile, req.opts ?? {}),
  };
}

/**
 * A signer over a trust bundle held in this process.
 *
 * @example
 * ```ts
 * const signer = localSigner(await createSpaceAuth("demo"));
 * const creds = await mintWith(signer, newIdentity(), "observer");
 * ```
 */
export function localSigner(auth: MintAuth): CredentialSigner {
  return {
    space: auth.space,
    where: "local",
    sign: (req) => signUserJwt(auth, req.publicKey, req.profile, req.opts ?? {}),
  };
}

/**
 * Creds for `identity`: the JWT from `signer`, rendered with the identity's seed here.
 *
 * @example
 * ```ts
 * const creds = await mintWith(localSigner(auth), newIdentity(), "provisioner");
 * ```
 */
export async function mintWith(
  signer: CredentialSigner,
  identity: Identity,
  profile: Profile,
  opts: MintOpts = {},
): Promise<string> {
  const jwt = await signer.sign({ publicKey: identity.id, profile, opts });
  return await renderCreds(jwt, identity.seed);
}

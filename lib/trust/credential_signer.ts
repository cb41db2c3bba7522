/**
 * The seam every minter signs through. A {@linkcode CredentialSigner} is asked for the user JWT
 * of a profile for a public key; the holder's seed never leaves the caller, which renders the
 * creds itself ({@linkcode mintWith}). {@linkcode localSigner} signs in process from a trust
 * bundle (an embedder's default); `remoteSigner` in lib/signer asks the `cotal-signer` daemon,
 * so the caller never holds the account's signing seed. Anything that can produce an ed25519
 * signature over the JWT's signing input (a KMS or Vault-transit key) can implement it without
 * exporting a seed (docs/SECURITY.md, "The signer").
 *
 * @module
 */
import { renderCreds } from "../nats/mod.ts";
import { signUserJwt } from "./mint.ts";
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

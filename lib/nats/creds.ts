/**
 * NATS creds files: a user JWT and its user seed in the decorated text format that
 * `nats`, `nsc`, nats.go and npm:nats `credsAuthenticator` read.
 *
 * @module
 */

import { CotalError } from "../errors.ts";
import { decodeJwtUnverified } from "./jwt.ts";
import { parseSeed, publicKeyFromSeed, withArticle } from "./nkeys.ts";

/** A parsed creds file. `seed` is a secret. */
export interface Creds {
  readonly jwt: string;
  readonly seed: string;
}

/**
 * Renders a creds file. Refuses a JWT that is not a user JWT, a seed that is not a user seed,
 * and a seed whose public key is not the JWT's `sub` (the broker would reject the connect).
 * Lines end in `\n` only: npm:nats's parser does not accept `\r\n`.
 */
export async function renderCreds(jwt: string, seed: string): Promise<string> {
  const claims = decodeJwtUnverified(jwt);
  if (claims.nats.type !== "user") {
    throw new CotalError(
      "creds_not_user",
      `A creds file holds a user JWT, not ${withArticle(claims.nats.type)} JWT.`,
    );
  }
  await checkPair(claims.sub, seed);
  return `-----BEGIN NATS USER JWT-----
${jwt}
------END NATS USER JWT------

************************* IMPORTANT *************************
The NKEY seed below proves this user's identity to the server.
Anyone holding this file can connect as the user: keep it secret.

-----BEGIN USER NKEY SEED-----
${seed}
------END USER NKEY SEED------

*************************************************************
`;
}

const JWT_BLOCK =
  /^-{3,}BEGIN NATS USER JWT-{3,}\r?\n\s*([A-Za-z0-9_\-.]+)\s*\r?\n-{3,}END NATS USER JWT-{3,}$/m;
const SEED_BLOCK =
  /^-{3,}BEGIN USER NKEY SEED-{3,}\r?\n\s*([A-Z2-7]+)\s*\r?\n-{3,}END USER NKEY SEED-{3,}$/m;

/**
 * Parses a creds file into its JWT and seed. Refuses text without both blocks, a JWT that
 * is not a user JWT, a seed that is not a user seed, and a seed that does not belong to the
 * JWT's subject. It does not verify the JWT's signature: the broker does, at connect.
 */
export async function parseCreds(text: string): Promise<Creds> {
  if (typeof text !== "string") {
    throw new CotalError("creds_bad_format", "Creds must be text (the content of a .creds file).");
  }
  const jwt = JWT_BLOCK.exec(text)?.[1];
  if (jwt === undefined) {
    throw new CotalError(
      "creds_bad_format",
      "The creds text has no '-----BEGIN NATS USER JWT-----' block; pass the content of a .creds file.",
    );
  }
  const seed = SEED_BLOCK.exec(text)?.[1];
  if (seed === undefined) {
    throw new CotalError(
      "creds_bad_format",
      "The creds text has no '-----BEGIN USER NKEY SEED-----' block; the file is truncated or is a bare JWT.",
    );
  }
  const claims = decodeJwtUnverified(jwt);
  if (claims.nats.type !== "user") {
    throw new CotalError(
      "creds_not_user",
      `The creds file holds ${
        withArticle(claims.nats.type)
      } JWT; a creds file must hold a user JWT.`,
    );
  }
  await checkPair(claims.sub, seed);
  return { jwt, seed };
}

/**
 * The line that marks a relayed creds text: a user JWT whose key a Cotal relay holds and proves
 * at connect (a sandboxed agent's; lib/manager/sandbox/relay.ts).
 */
export const RELAYED_CREDS_MARKER =
  "Cotal relay: this user's seed stays with its supervisor, whose relay proves the key at connect.";

/**
 * Renders the relayed creds text for `jwt`: the JWT and, so that any NATS client reads it as a
 * creds file, a stand-in seed of a fresh key that is not the JWT's. Its signatures prove
 * nothing: the broker refuses the text anywhere but through the relay, which replaces them.
 */
export function renderRelayedCreds(jwt: string, standInSeed: string): string {
  const claims = decodeJwtUnverified(jwt);
  if (claims.nats.type !== "user") {
    throw new CotalError(
      "creds_not_user",
      `A creds file holds a user JWT, not ${withArticle(claims.nats.type)} JWT.`,
    );
  }
  return `-----BEGIN NATS USER JWT-----
${jwt}
------END NATS USER JWT------

${RELAYED_CREDS_MARKER}
The seed below is a stand-in (not this user's key): it connects nowhere on its own.

-----BEGIN USER NKEY SEED-----
${standInSeed}
------END USER NKEY SEED------
`;
}

/** True when `text` is a relayed creds text (it carries the marker line). */
export function isRelayedCreds(text: string): boolean {
  return typeof text === "string" && text.includes(RELAYED_CREDS_MARKER);
}

/**
 * The JWT of a relayed creds text, and its stand-in seed (what proves, to a relay that listens
 * where others could dial, that the caller holds the text); refuses anything else the way
 * {@linkcode parseCreds} does.
 */
export function parseRelayedCreds(
  text: string,
): { readonly jwt: string; readonly standInSeed?: string } {
  const jwt = isRelayedCreds(text) ? JWT_BLOCK.exec(text)?.[1] : undefined;
  if (jwt === undefined) {
    throw new CotalError(
      "creds_bad_format",
      "The text is not relayed creds (a user JWT block and the Cotal relay line).",
    );
  }
  if (decodeJwtUnverified(jwt).nats.type !== "user") {
    throw new CotalError("creds_not_user", "Relayed creds hold a user JWT.");
  }
  const standInSeed = SEED_BLOCK.exec(text)?.[1];
  return standInSeed ? { jwt, standInSeed } : { jwt };
}

// Seeds recently checked against their public key: re-signing one identity (renewal, a burst
// of mints) derives it once. Bounded, and holds only what the caller already holds.
const pairs = new Map<string, string>();

/**
 * Records a seed's public key as known, for key pairs generated in this process (their public
 * key was just derived from the seed): rendering their creds then skips a second derivation.
 */
export function notePair(seed: string, publicKey: string): void {
  if (pairs.size >= 256) pairs.delete(pairs.keys().next().value!);
  pairs.set(seed, publicKey);
}

async function publicKeyCached(seed: string): Promise<string> {
  const hit = pairs.get(seed);
  if (hit !== undefined) return hit;
  const pub = await publicKeyFromSeed(seed);
  notePair(seed, pub);
  return pub;
}

async function checkPair(subject: string, seed: string): Promise<void> {
  if (parseSeed(seed).kind !== "user") {
    throw new CotalError(
      "creds_not_user",
      "The seed in a creds file must be a user seed (SU…), not an operator or account seed.",
    );
  }
  if (await publicKeyCached(seed) !== subject) {
    throw new CotalError(
      "creds_mismatch",
      `The seed does not belong to the JWT's subject ${subject}; pair each user JWT with the seed it was minted for.`,
    );
  }
}

/**
 * `getSpaceAuth`: one space's full signer, composed from the two trust records a store holds
 * (`auth/broker.json` and `auth/account.<hex>.json`) with the whole chain verified.
 *
 * @module
 */

import { CotalError, isCotalError } from "../errors.ts";
import {
  composeSpaceAuth,
  parseBrokerAuth,
  parseSpaceAccountAuth,
  type SpaceAuth,
  stripSpaceAuth,
  validateSpaceAuth,
} from "../trust/mod.ts";
import { isPublicKey, parseSeed } from "../nats/mod.ts";
import { BROKER_AUTH_KEY, SIGNER_BUNDLE_KEY, spaceAccountKey } from "./trust_keys.ts";
import type { SecretStore } from "./types.ts";

// Fixed sentences per refusal code: the trust parsers' own messages may quote a stored label,
// and an error here must never echo stored bytes.
const CHAIN_MESSAGES: Readonly<Record<string, string>> = Object.freeze({
  corrupt_trust_record: "does not parse or verify; restore it from backup",
  wrong_space: "holds another space (its label or signed account name differs); store each " +
    "space's record under its own key",
  foreign_account: "holds an account signed by another operator; use the broker trust record " +
    "it was created under",
  stale_signing_key: "names a signing key its account JWT no longer lists; load the record " +
    "written by the last rotation",
  stripped_bundle: "is a stripped bundle with no chain to verify; store the full records",
});

async function read(store: SecretStore, key: string, what: string): Promise<string | undefined> {
  try {
    return await store.get(key);
  } catch (err) {
    // A store refusal is never absence: a KMS timeout must not read as "no signer here".
    throw new CotalError(
      "space_auth_unreadable",
      `The secret store refused to read the ${what} (${
        isCotalError(err) ? err.code : "store error"
      }); check the store is reachable and this process may read it.`,
      { cause: err },
    );
  }
}

function rethrow(err: unknown, what: string): never {
  const code = isCotalError(err) && err.code in CHAIN_MESSAGES ? err.code : "corrupt_trust_record";
  throw new CotalError(code, `The ${what} ${CHAIN_MESSAGES[code]}.`);
}

/**
 * The verified {@linkcode SpaceAuth} of `space` from `store`: the broker record and the
 * space's account record are parsed, composed and validated as one chain (operator
 * self-signature, the operator-signed SYS and data accounts, seeds matching their keys, the
 * signing key listed, and the signed account name equal to `space`'s wire token).
 *
 * Refuses with `no_space_auth` when either record is absent (the error names the key, never a
 * value), `space_auth_unreadable` when the store refuses, and the chain codes
 * (`corrupt_trust_record`, `wrong_space`, `foreign_account`, `stale_signing_key`) otherwise.
 * No error message ever echoes stored bytes.
 *
 * @example
 * ```ts
 * const auth = await getSpaceAuth(workspaceSecretStore(root), "demo");
 * const creds = await mintCreds(auth, newIdentity(), "delivery");
 * ```
 */
export async function getSpaceAuth(store: SecretStore, space: string): Promise<SpaceAuth> {
  const accountKey = spaceAccountKey(space);
  const brokerText = await read(store, BROKER_AUTH_KEY, "broker trust record");
  const accountText = await read(store, accountKey, "space account record");
  if (brokerText === undefined || accountText === undefined) {
    // A container's mount: one bundle at the legacy key, used only where the split records
    // are absent (they always win: they carry the chain a bundle cannot prove).
    const bundle = await read(store, SIGNER_BUNDLE_KEY, "signer bundle");
    if (bundle !== undefined) return await parseSignerBundle(bundle, space);
    const missing = [
      ...(brokerText === undefined ? [BROKER_AUTH_KEY] : []),
      ...(accountText === undefined ? [accountKey] : []),
    ];
    throw new CotalError(
      "no_space_auth",
      `The secret store holds no signer for space ${JSON.stringify(space)} (missing ${
        missing.join(" and ")
      }); provision the space or point at the store that holds its trust records.`,
    );
  }
  let auth: SpaceAuth;
  try {
    const broker = await parseBrokerAuth(brokerText);
    const account = await parseSpaceAccountAuth(accountText, space);
    auth = composeSpaceAuth(broker, account);
  } catch (err) {
    rethrow(err, `stored signer of space ${JSON.stringify(space)}`);
  }
  try {
    await validateSpaceAuth(auth, space);
  } catch (err) {
    rethrow(err, `stored signer chain of space ${JSON.stringify(space)}`);
  }
  return auth;
}

/**
 * A bundle at {@linkcode SIGNER_BUNDLE_KEY}: a full one (`SpaceAuth` with every seed and JWT) is
 * verified as a chain like the split records; a stripped one keeps only what minting needs
 * (space, account public key, signing seed), so all it can prove is that the seed is an
 * account seed and the bundle names `space`. Whether its account is the broker's is left to a
 * preflight, which `remintDaemonCreds` asks for on every candidate.
 */
async function parseSignerBundle(text: string, space: string): Promise<SpaceAuth> {
  let v: SpaceAuth;
  try {
    v = JSON.parse(text);
  } catch {
    rethrow(undefined, "signer bundle (auth/auth.json)");
  }
  const what = "signer bundle (auth/auth.json)";
  if (v?.operator?.seed && v.account?.jwt) {
    try {
      await validateSpaceAuth(v, space);
      return v;
    } catch (err) {
      rethrow(err, what);
    }
  }
  if (typeof v?.space !== "string" || v.space !== space) {
    rethrow(new CotalError("wrong_space", ""), what);
  }
  const seed = v.account?.signingSeed;
  const pub = v.account?.pub;
  const seedKind = (() => {
    try {
      return typeof seed === "string" ? parseSeed(seed).kind : undefined;
    } catch {
      return undefined;
    }
  })();
  if (seedKind !== "account" || !isPublicKey(pub, "account")) rethrow(undefined, what);
  return stripSpaceAuth({
    ...v,
    account: { ...v.account, pub, signingSeed: seed },
  } as SpaceAuth);
}

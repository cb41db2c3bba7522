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
  validateSpaceAuth,
} from "../trust/mod.ts";
import { BROKER_AUTH_KEY, spaceAccountKey } from "./trust_keys.ts";
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

/**
 * The spaces' `$SYS` creds (membership observer, connection evictor), minted only while the
 * system account's seed is in memory: when the broker trust is created or the system account
 * rotated (`up --rotate-sys`).
 *
 * @module
 */
import { CotalError } from "../errors.ts";
import { decodeJwt, parseCreds } from "../nats/mod.ts";
import {
  type BrokerAuth,
  mintConnectionEvictorCreds,
  mintMembershipObserverCreds,
  newIdentity,
  rotateSystemAccount,
  serializeBrokerAuth,
  type SpaceAccountAuth,
} from "../trust/mod.ts";
import {
  BROKER_AUTH_KEY,
  connectionEvictorCredsKey,
  membershipObserverCredsKey,
  type SecretStore,
} from "../workspace/mod.ts";

/**
 * Mints the `$SYS` creds of each space (membership observer, connection evictor) into the store.
 * Only possible while the system seed is in memory: right after the broker trust is created or
 * its system account rotated, since the seed is never persisted.
 */
export async function mintSysCreds(
  root: string,
  store: SecretStore,
  broker: BrokerAuth,
  accounts: SpaceAccountAuth[],
): Promise<string[]> {
  if (!broker.sys.signingSeed) {
    throw new CotalError(
      "sys_seed_absent",
      "The system account's seed is not in memory (it is never stored); run 'cotal up --rotate-sys' on the stopped mesh to re-issue it.",
    );
  }
  const written: string[] = [];
  for (const a of accounts) {
    const observer = await mintMembershipObserverCreds(
      { sys: broker.sys, account: { pub: a.account.pub } },
      newIdentity(),
    );
    const evictor = await mintConnectionEvictorCreds({ sys: broker.sys }, newIdentity());
    const k1 = membershipObserverCredsKey(a.space, { root });
    const k2 = connectionEvictorCredsKey(a.space, { root });
    await store.put(k1, observer);
    await store.put(k2, evictor);
    written.push(k1, k2);
  }
  return written;
}

/**
 * The spaces of `accounts` whose `$SYS` creds are not both in the store, or were signed by
 * another system account than `broker`'s (restored from another root).
 */
export async function spacesWithoutSysCreds(
  root: string,
  store: SecretStore,
  accounts: SpaceAccountAuth[],
  broker: BrokerAuth,
): Promise<string[]> {
  const missing: string[] = [];
  for (const a of accounts) {
    const keys = [
      membershipObserverCredsKey(a.space, { root }),
      connectionEvictorCredsKey(a.space, { root }),
    ];
    for (const k of keys) {
      const text = await store.get(k);
      if (text === undefined || await issuerOf(text) !== broker.sys.pub) {
        missing.push(a.space);
        break;
      }
    }
  }
  return missing;
}

/** The issuer of a creds file's JWT, or undefined when it cannot be read. */
async function issuerOf(creds: string): Promise<string | undefined> {
  try {
    return (await decodeJwt((await parseCreds(creds)).jwt, { type: "user", ignoreTimes: true }))
      .iss;
  } catch {
    return undefined;
  }
}

/**
 * `cotal up --rotate-sys`: re-issues the system account (new key, operator JWT re-signed), stores
 * the new broker record, and mints fresh `$SYS` creds for every space. The broker must be stopped:
 * it reads the system account only at start.
 */
export async function rotateSys(
  root: string,
  store: SecretStore,
  broker: BrokerAuth,
  accounts: SpaceAccountAuth[],
): Promise<BrokerAuth> {
  const rotated = await rotateSystemAccount(broker);
  await store.put(BROKER_AUTH_KEY, serializeBrokerAuth(rotated));
  await mintSysCreds(root, store, rotated, accounts);
  return rotated;
}

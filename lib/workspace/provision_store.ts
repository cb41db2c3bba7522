/**
 * Filling a `SecretStore` for one space the way `cotal up` fills its own: the signer records
 * (`auth/broker.json`, `auth/account.<key>.json`), the daemon creds the delivery daemon and its
 * membership feed read, the `$SYS` creds of that feed and of the connection evictor, and the
 * feed's configuration. An embedder calls this instead of learning the record formats and the
 * keys; everything it writes is what `getSpaceAuth`, `runDelivery`, `remintDaemonCreds` and the
 * `Manager` read from an injected store.
 *
 * @module
 */
import {
  mintConnectionEvictorCreds,
  mintCreds,
  mintMembershipObserverCreds,
  newIdentity,
  serializeBrokerAuth,
  serializeSpaceAccountAuth,
} from "../trust/mod.ts";
import type { BrokerAuth, SpaceAccountAuth } from "../trust/mod.ts";
import {
  connectionEvictorCredsKey,
  deliveryCredsKey,
  membershipConfigKey,
  membershipObserverCredsKey,
  membershipRwCredsKey,
} from "./keys.ts";
import { BROKER_AUTH_KEY, spaceAccountKey } from "./trust_keys.ts";
import type { SecretStore } from "./types.ts";

/**
 * Writes everything one space's daemons read from an injected store (keys for
 * `{ injected: true }`) and returns the keys written, in order. Existing values are replaced, so
 * it is also how an embedder re-provisions after rotating its broker's system account.
 *
 * @example
 * ```ts
 * import {
 *   createBrokerAuth,
 *   createSpaceAccountAuth,
 *   MemorySecretStore,
 *   provisionSpaceStore,
 * } from "@cotal/deno";
 * const broker = await createBrokerAuth("my-broker");
 * const account = await createSpaceAccountAuth(broker, "team");
 * const store = new MemorySecretStore();
 * const keys = await provisionSpaceStore(store, broker, account);
 * // runDelivery(..., store) and new Manager({ ..., secretStore: store }) read from it
 * ```
 */
export async function provisionSpaceStore(
  store: SecretStore,
  broker: BrokerAuth,
  account: SpaceAccountAuth,
): Promise<string[]> {
  const space = account.space;
  const at = { injected: true } as const;
  const auth = { space, account: account.account };
  const records: [string, () => Promise<string> | string][] = [
    [BROKER_AUTH_KEY, () => serializeBrokerAuth(broker)],
    [spaceAccountKey(space), () => serializeSpaceAccountAuth(account)],
    [deliveryCredsKey(space, at), () => mintCreds(auth, newIdentity(), "delivery")],
    [membershipRwCredsKey(space, at), () => mintCreds(auth, newIdentity(), "membership-rw")],
    [
      membershipObserverCredsKey(space, at),
      () =>
        mintMembershipObserverCreds(
          { sys: broker.sys, account: { pub: account.account.pub } },
          newIdentity(),
        ),
    ],
    [
      connectionEvictorCredsKey(space, at),
      () => mintConnectionEvictorCreds({ sys: broker.sys }, newIdentity()),
    ],
    [
      membershipConfigKey(space, at),
      () => JSON.stringify({ accountId: account.account.pub }) + "\n",
    ],
  ];
  const written: string[] = [];
  for (const [key, value] of records) {
    await store.put(key, await value());
    written.push(key);
  }
  return written;
}

/**
 * A root's trust on disk: the space index and the signer records (broker trust, one account
 * per space) in the root's secret store, created once and read back verified.
 *
 * @module
 */
import { writeFileAtomic } from "../atomic_file.ts";
import { CotalError } from "../errors.ts";
import {
  adoptSpaceAccount,
  type BrokerAuth,
  createBrokerAuth,
  createSpaceAccountAuth,
  hasSpaceLimits,
  parseBrokerAuth,
  parseSpaceAccountAuth,
  serializeBrokerAuth,
  serializeSpaceAccountAuth,
  type SpaceAccountAuth,
} from "../trust/mod.ts";
import {
  BROKER_AUTH_KEY,
  createOnce,
  type SecretStore,
  spaceAccountKey,
} from "../workspace/mod.ts";

/** The non-secret index of the spaces a root serves: `<root>/spaces.json`. */
export interface SpaceIndex {
  spaces: string[];
}

/** Reads `<root>/spaces.json`; an absent file is an empty index, a corrupt one a refusal. */
export async function readSpaceIndex(root: string): Promise<SpaceIndex> {
  let text: string;
  try {
    text = await Deno.readTextFile(`${root}/spaces.json`);
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return { spaces: [] };
    throw err;
  }
  try {
    const v = JSON.parse(text);
    if (Array.isArray(v.spaces) && v.spaces.every((s: unknown) => typeof s === "string")) {
      return { spaces: v.spaces };
    }
  } catch {
    // Fall through.
  }
  throw new CotalError(
    "space_index_corrupt",
    `${root}/spaces.json is not a Cotal space index; restore it from a backup or remove the root.`,
  );
}

/** Writes the index atomically. */
export async function writeSpaceIndex(root: string, index: SpaceIndex): Promise<void> {
  await writeFileAtomic(
    `${root}/spaces.json`,
    JSON.stringify({ spaces: index.spaces }, null, 2) + "\n",
    { what: "The root's space index" },
  );
}

/** Loads the broker trust from the store; undefined when this root has none yet. */
export async function loadBrokerAuth(store: SecretStore): Promise<BrokerAuth | undefined> {
  const text = await store.get(BROKER_AUTH_KEY);
  return text === undefined ? undefined : await parseBrokerAuth(text);
}

/**
 * Loads the broker trust, or creates it (create-only, so two racing `up`s agree on one). A
 * freshly created one still holds the system signing seed in memory, for minting `$SYS` creds.
 */
export async function ensureBrokerAuth(
  store: SecretStore,
  label: string,
): Promise<{ broker: BrokerAuth; created: boolean }> {
  const existing = await loadBrokerAuth(store);
  if (existing) return { broker: existing, created: false };
  const broker = await createBrokerAuth(label);
  if (await createOnce(store, BROKER_AUTH_KEY, serializeBrokerAuth(broker))) {
    return { broker, created: true };
  }
  return { broker: (await loadBrokerAuth(store))!, created: false };
}

/** Loads one space's account record; undefined when absent. */
export async function loadSpaceAccount(
  store: SecretStore,
  space: string,
): Promise<SpaceAccountAuth | undefined> {
  const text = await store.get(spaceAccountKey(space));
  return text === undefined ? undefined : await parseSpaceAccountAuth(text, space);
}

/** Loads or creates (create-only) one space's data account under the broker's operator. */
export async function ensureSpaceAccount(
  store: SecretStore,
  broker: BrokerAuth,
  space: string,
): Promise<{ account: SpaceAccountAuth; created: boolean }> {
  const existing = await loadSpaceAccount(store, space);
  if (existing) {
    if (hasSpaceLimits(existing.account.jwt)) return { account: existing, created: false };
    // An account signed before this build's storage limits: re-stated with the same keys (its
    // creds keep working), so the broker enforces the limits from the next config render.
    const restated = await adoptSpaceAccount(broker, existing);
    await store.put(spaceAccountKey(space), serializeSpaceAccountAuth(restated));
    return { account: restated, created: false };
  }
  const account = await createSpaceAccountAuth(broker, space);
  if (await createOnce(store, spaceAccountKey(space), serializeSpaceAccountAuth(account))) {
    return { account, created: true };
  }
  return { account: (await loadSpaceAccount(store, space))!, created: false };
}

/**
 * Every space account the root serves, in index order. Refuses when any record is missing or
 * unreadable: a config rendered without a sibling would lock that space out of the broker.
 */
export async function loadAllSpaceAccounts(
  root: string,
  store: SecretStore,
): Promise<SpaceAccountAuth[]> {
  const { spaces } = await readSpaceIndex(root);
  const out: SpaceAccountAuth[] = [];
  for (const space of spaces) {
    const acct = await loadSpaceAccount(store, space);
    if (!acct) {
      throw new CotalError(
        "space_record_missing",
        `The root lists space '${space}' but its account record is missing; restore it with ` +
          `'cotal space restore' or remove the space with 'cotal space rm ${space}'.`,
      );
    }
    out.push(acct);
  }
  return out;
}

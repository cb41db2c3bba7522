/**
 * Workspace: the `SecretStore` seam, its filesystem and in-memory implementations, and the
 * per-space key builders.
 *
 * @module
 */

export type { SecretStore } from "./types.ts";
export { FsSecretStore, workspaceSecretStore } from "./fs_secret_store.ts";
export { MemorySecretStore } from "./memory_secret_store.ts";
export {
  CONNECTION_EVICTOR_CREDS_KIND,
  connectionEvictorCredsKey,
  DELIVERY_CREDS_KIND,
  deliveryCredsKey,
  MEMBERSHIP_CONFIG_KIND,
  MEMBERSHIP_OBSERVER_CREDS_KIND,
  MEMBERSHIP_RW_CREDS_KIND,
  membershipConfigKey,
  membershipObserverCredsKey,
  membershipRwCredsKey,
  spaceKeyHex,
  spaceSecretKey,
} from "./keys.ts";
export type { SecretStoreComposition } from "./keys.ts";
export { checkStoreKey } from "./store_key.ts";
export { BROKER_AUTH_KEY, isSignerKey, spaceAccountKey } from "./trust_keys.ts";

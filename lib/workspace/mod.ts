/**
 * Workspace: the `SecretStore` seam, its filesystem and in-memory implementations, the
 * per-space key builders, the composed space signer (`getSpaceAuth`), daemon-cred renewal
 * (`remintDaemonCreds`) and the credential doctor (`doctorAuth`).
 *
 * @module
 */

export type { SecretStore } from "./types.ts";
export { FsSecretStore, workspaceSecretStore } from "./fs_secret_store.ts";
export { MemorySecretStore } from "./memory_secret_store.ts";
export { createOnce } from "./create_once.ts";
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
  supervisorCredsKey,
} from "./keys.ts";
export type { SecretStoreComposition } from "./keys.ts";
export { checkStoreKey } from "./store_key.ts";
export { BROKER_AUTH_KEY, isSignerKey, SIGNER_BUNDLE_KEY, spaceAccountKey } from "./trust_keys.ts";
export { getSpaceAuth } from "./space_auth.ts";
export { provisionSpaceStore } from "./provision_store.ts";
export { secretStoreConformance } from "./store_conformance.ts";
export type { SecretStoreCase } from "./store_conformance.ts";
export {
  assertReminted,
  credFingerprint,
  nextResignDelayMs,
  REMINTABLE_DAEMON_CREDS,
  remintDaemonCreds,
  RESIGN_RETRY_MS,
  SUPERVISOR_CRED,
} from "./renewal.ts";
export type {
  CredPreflight,
  PreflightInfo,
  RemintableCred,
  RemintOptions,
  RemintResult,
} from "./renewal.ts";
export { credHealth, doctorAuth } from "./doctor.ts";
export type { CredHealth, DoctorAuthOptions, DoctorAuthRow } from "./doctor.ts";

// For the other areas of lib/ (not part of the embedder's contract in the root mod.ts).
export { isFailingCred } from "./doctor.ts";
export { doctorStore } from "./doctor_store.ts";
export type { StoreProblem } from "./doctor_store.ts";
export { HolderLock } from "./holder_lock.ts";
export {
  listMeshes,
  lookupMesh,
  machineHome,
  type MeshEntry,
  registerMesh,
  unregisterMesh,
} from "./machine_registry.ts";

/**
 * lib/trust: broker and space authorities, the profile matrix with its lifetimes, minting,
 * the broker config, the persisted trust records, and the fast creds authenticator.
 *
 * @module
 */
export {
  adoptSpaceAccount,
  composeSpaceAuth,
  createBrokerAuth,
  createSpaceAccountAuth,
  createSpaceAuth,
  hasSpaceLimits,
  isStrippedSpaceAuth,
  operatorName,
  rotateDataAccountSigningKey,
  rotateSystemAccount,
  setAccountSigningKey,
  SPACE_JETSTREAM_LIMITS,
  SPACE_MAX_CONNECTIONS,
  stripSpaceAuth,
} from "./authorities.ts";
export { credsAuthenticatorFast, type CredsSource } from "./connect_auth.ts";
export {
  CREDENTIAL_LIFETIMES,
  isCredentialKind,
  type LifetimeClass,
  type LifetimePolicy,
  RENEW_FRACTION,
  resolveExpiry,
  ROTATION_RENEWED_TTL_SEC,
  STANDING_RENEWABLE_TTL_SEC,
} from "./lifetimes.ts";
export {
  accountSigner,
  assertExplicitPermissions,
  CONNECTION_LIMITS,
  MAX_CONTROL_LINE,
  MAX_USER_JWT_BYTES,
  mintCreds,
  principalFromTags,
  principalTags,
  signUserJwt,
  signUserJwtWith,
} from "./mint.ts";
export { isProfile, type PermissionOpts, permissionsFor, PROFILES } from "./profiles.ts";
export {
  parseBrokerAuth,
  parseSpaceAccountAuth,
  serializeBrokerAuth,
  serializeSpaceAccountAuth,
  validateSpaceAuth,
} from "./records.ts";
export {
  BROKER_LOG_FILES,
  BROKER_LOG_ROTATE_BYTES,
  type ClusterConfig,
  type PreloadAccount,
  serverConfig,
  type ServerConfigOpts,
  type TlsConfig,
} from "./server_config.ts";
export {
  assertConnId,
  assertLifecycleUid,
  assertPrincipalOwner,
  assertValidActor,
  assertValidChannel,
  assertValidRole,
  isPrincipalOwnerToken,
  MAX_CHANNEL_LENGTH,
  MAX_PRINCIPAL_TOKEN_LENGTH,
  newLifecycleUid,
  token,
} from "./space_token.ts";
export {
  connectionEvictorPermissions,
  EVICTOR_INBOX_PREFIX,
  MEMBERSHIP_INBOX_PREFIX,
  membershipObserverPermissions,
  mintConnectionEvictorCreds,
  mintMembershipObserverCreds,
} from "./sys_mint.ts";
export { newIdentity, type SyncSigner, syncSigner } from "./sync_keys.ts";
export type {
  BrokerAuth,
  CredentialKind,
  DataAccountKeys,
  Identity,
  LifetimeOpts,
  MintAuth,
  MintOpts,
  OperatorKeys,
  PermissionList,
  Permissions,
  Principal,
  Profile,
  SpaceAccountAuth,
  SpaceAuth,
  SysAccountKeys,
  SysCredentialKind,
} from "./types.ts";
export {
  type CredentialSigner,
  keySigner,
  localSigner,
  mintWith,
  type SignRequest,
} from "./credential_signer.ts";
export {
  proveRequest,
  REQUEST_PROOF_WINDOW_MS,
  type RequestProver,
  requestProver,
  type RequestRail,
  type RequestTrust,
  requestTrustOf,
  RequestVerifier,
} from "./request_proof.ts";
export { signRail } from "./grant_names.ts";

// For the other areas of lib/ (not part of the embedder's contract in the root mod.ts).
export { jwtSubject, nonceProver } from "./connect_auth.ts";
export { spaceNames } from "./grant_names.ts";
export { calloutUserName, principalFromCalloutName } from "./mint.ts";
export { PROOF_HEADER, REQUEST_REPLAY_CAP } from "./request_proof.ts";
export { syncVerifier } from "./sync_keys.ts";

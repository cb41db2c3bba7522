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
  rotateDataAccountSigningKey,
  rotateSystemAccount,
  setAccountSigningKey,
  SPACE_JETSTREAM_LIMITS,
  stripSpaceAuth,
} from "./authorities.ts";
export { credsAuthenticatorFast } from "./connect_auth.ts";
export {
  CREDENTIAL_LIFETIMES,
  type LifetimeClass,
  type LifetimePolicy,
  RENEW_FRACTION,
  resolveExpiry,
  STANDING_RENEWABLE_TTL_SEC,
} from "./lifetimes.ts";
export {
  assertExplicitPermissions,
  CONNECTION_LIMITS,
  MAX_CONTROL_LINE,
  MEMBER_MAX_PAYLOAD_BYTES,
  mintCreds,
  principalFromTags,
  principalTags,
  signUserJwt,
  signUserJwtWith,
} from "./mint.ts";
export { isProfile, permissionsFor, PROFILES } from "./profiles.ts";
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
  BROKER_MAX_CONNECTIONS,
  type ClusterConfig,
  type PreloadAccount,
  serverConfig,
  type ServerConfigOpts,
  type TlsConfig,
} from "./server_config.ts";
export {
  assertConnId,
  assertLifecycleUid,
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
  EVICTOR_INBOX_PREFIX,
  MEMBERSHIP_INBOX_PREFIX,
  mintConnectionEvictorCreds,
  mintMembershipObserverCreds,
} from "./sys_mint.ts";
export { newIdentity, syncSigner } from "./sync_keys.ts";
export type {
  BrokerAuth,
  CredentialKind,
  DataAccountKeys,
  Identity,
  LifetimeOpts,
  MintAuth,
  MintOpts,
  OperatorKeys,
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
  type RequestTrust,
  requestTrustOf,
  RequestVerifier,
} from "./request_proof.ts";
export { signRail } from "./grant_names.ts";
export {
  AGENT_BEARER_PATH,
  AGENT_BEARER_RAIL,
  AGENT_BEARER_SUBJECT,
  type AgentBearerGrant,
  type AgentBearerHello,
  type AgentBearerIssued,
  type AgentBearerRequest,
  BEARER_CONNECT_RATE,
  MAX_AGENT_BEARER_BODY_BYTES,
  proofHeadersOf,
  proveAgentBearerRequest,
} from "./agent_bearer_rail.ts";
export { isSignRailToken, signRailToken } from "./sign_rail_token.ts";

// For the other areas of lib/ (not part of the embedder's contract in the root mod.ts).
export { jwtSubject, nonceProver } from "./connect_auth.ts";
export { spaceNames } from "./grant_names.ts";
export { calloutUserName, principalFromCalloutName, signRailTokenFor } from "./mint.ts";
export { PROOF_HEADER } from "./request_proof.ts";
export { syncVerifier } from "./sync_keys.ts";

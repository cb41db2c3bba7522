/**
 * Cotal for Deno: a coordination mesh for AI agents on NATS JetStream.
 *
 * This module is the embedder's contract: a curated list of named exports, grouped as the
 * specification groups them. Everything else under `lib/` is internal.
 *
 * @module
 */

// Errors
export { CotalError, isCotalError } from "./lib/errors.ts";
export type {
  AtomicFileErrorCode,
  AuthErrorCode,
  BrokerErrorCode,
  CliErrorCode,
  CotalErrorCode,
  DaemonErrorCode,
  DebianErrorCode,
  DeliveryErrorCode,
  EndpointErrorCode,
  ManagerErrorCode,
  McpErrorCode,
  MeshErrorCode,
  NatsErrorCode,
  RegistryErrorCode,
  SignerErrorCode,
  TokenRefusalReason,
  TrustErrorCode,
  WireErrorCode,
  WorkspaceErrorCode,
} from "./lib/error_codes/mod.ts";

// Daemon runners and lifecycle
export { runAuthService } from "./lib/auth/mod.ts";
export type { AuthServiceDaemon, RunAuthServiceOptions } from "./lib/auth/mod.ts";
export { runDelivery } from "./lib/delivery/mod.ts";
export type { DeliveryDaemon, DeliveryExit, DeliveryStatus } from "./lib/delivery/mod.ts";
export {
  DELIVERY_CREDS_KIND,
  deliveryCredsKey,
  getSpaceAuth,
  MEMBERSHIP_RW_CREDS_KIND,
  membershipRwCredsKey,
  remintDaemonCreds,
  SUPERVISOR_CRED,
} from "./lib/workspace/mod.ts";
export type {
  CredPreflight,
  RemintableCred,
  RemintOptions,
  RemintResult,
  SecretStoreComposition,
} from "./lib/workspace/mod.ts";
export { createRuntime, Manager } from "./lib/manager/mod.ts";
export type { ManagerOptions, ManagerUserAuth } from "./lib/manager/mod.ts";

// Provisioning and minting
export {
  createBrokerAuth,
  createSpaceAccountAuth,
  createSpaceAuth,
  CREDENTIAL_LIFETIMES,
  keySigner,
  localSigner,
  mintConnectionEvictorCreds,
  mintCreds,
  mintMembershipObserverCreds,
  mintWith,
  newIdentity,
  rotateDataAccountSigningKey,
  serverConfig,
  setAccountSigningKey,
  signUserJwt,
  signUserJwtWith,
  stripSpaceAuth,
} from "./lib/trust/mod.ts";
export type {
  BrokerAuth,
  CredentialKind,
  CredentialSigner,
  Identity,
  LifetimeOpts,
  MintAuth,
  MintOpts,
  Principal,
  Profile,
  ServerConfigOpts,
  SignRequest,
  SpaceAccountAuth,
  SpaceAuth,
} from "./lib/trust/mod.ts";
// What signs: an nkey seed in WebCrypto, or any key with the same two members (a KMS key)
export { seedSigner, type Signer } from "./lib/nats/mod.ts";
// The space's signer as a daemon, and the client a component signs through without a seed
export { readAudit, remoteSigner, runSigner, SIGNER_POLICY } from "./lib/signer/mod.ts";
export type {
  AuditEntry,
  ProfileRule,
  RemoteSigner,
  RemoteSignerOptions,
  RunningSigner,
  RunSignerOptions,
  SignerConnection,
  SignerStats,
} from "./lib/signer/mod.ts";
export {
  ensureDefaultDeliveryClass,
  newLifecycleUid,
  provisionAgent,
  provisionAgentDurables,
  setupSpaceStreams,
} from "./lib/wire/mod.ts";
export type {
  AgentChannelPolicy,
  BrokerTarget,
  DeliveryClass,
  EnsureDefaultDeliveryClassOptions,
  ProvisionAgentDurablesOptions,
  ProvisionAgentOptions,
  ProvisionedAgent,
  ProvisionedDurables,
  ResolvedChannelPolicy,
  SetupSpaceStreamsOptions,
  SpaceSetupOptions,
  SpaceSetupResult,
} from "./lib/wire/mod.ts";

// Auth building blocks
export {
  cotalAuthProvider,
  createCalloutAuth,
  createIdpBridge,
  createUserTokenIssuer,
  deriveOwnerToken,
  ensureCalloutAuth,
  ensureIssuer,
  ensureOwnerSecret,
  loadCalloutAuth,
  loadIssuer,
  loadOwnerSecret,
  pinnedJwksResolver,
  startAuthCallout,
  validateUserToken,
} from "./lib/auth/mod.ts";
export type {
  ActorAuthorizer,
  ActorRow,
  AuthCallout,
  AuthCalloutOptions,
  CalloutAuth,
  CalloutDecision,
  CalloutGrant,
  CalloutProvisionAuth,
  CotalAuthSession,
  CreateCalloutAuthOptions,
  IdpBridge,
  IdpBridgeOptions,
  IdpExchangeRequest,
  IdpExchangeResult,
  IssuedBearer,
  IssueRequest,
  JsonWebKeySet,
  JwsAlgorithm,
  KeyResolver,
  PinnedJwksResolverOptions,
  PublicJwk,
  ServiceKeys,
  UserTokenIssuer,
  UserTokenIssuerOptions,
  ValidatedBearer,
  ValidateUserTokenOptions,
  VerifiedIdpToken,
} from "./lib/auth/mod.ts";

// Seams and the wire
export {
  ConnectionEvent,
  CotalEndpoint,
  CotalMessageEvent,
  EndpointErrorEvent,
  EndpointWarningEvent,
  GapEvent,
  PresenceEvent,
  RenewalEvent,
  RosterEvent,
  TransportEvent,
} from "./lib/endpoint/mod.ts";
export type { GapEnd } from "./lib/wire/mod.ts";
export type {
  AgentCard,
  AgentCardInput,
  CredentialSource,
  Delivery,
  EndpointEventMap,
  EndpointListener,
  EndpointOptions,
  HistoryOptions,
  JoinResult,
  MessageMeta,
  MessageSource,
  MulticastOptions,
  OfflineReason,
  Presence,
  PresenceStatus,
  SendOptions,
} from "./lib/endpoint/mod.ts";
export {
  chatReadFilter,
  chatSubject,
  dmFilter,
  instSubject,
  parseSubject,
  subjectRoot,
  svcFilter,
  svcSubject,
} from "./lib/wire/mod.ts";
export type {
  ArtifactPart,
  CotalMessage,
  DataPart,
  EndpointRef,
  ExtensionPart,
  JsonValue,
  ParsedSubject,
  Part,
  SubjectParse,
  SubjectRefusal,
  TextPart,
} from "./lib/wire/mod.ts";
export type { SecretStore } from "./lib/workspace/mod.ts";
export {
  createOnce,
  FsSecretStore,
  MemorySecretStore,
  provisionSpaceStore,
  secretStoreConformance,
  workspaceSecretStore,
} from "./lib/workspace/mod.ts";
export type { SecretStoreCase } from "./lib/workspace/mod.ts";
// Provisioning a store by hand: the signer records and every per-space key a daemon reads
export {
  BROKER_AUTH_KEY,
  CONNECTION_EVICTOR_CREDS_KIND,
  connectionEvictorCredsKey,
  MEMBERSHIP_CONFIG_KIND,
  MEMBERSHIP_OBSERVER_CREDS_KIND,
  membershipConfigKey,
  membershipObserverCredsKey,
  SIGNER_BUNDLE_KEY,
  spaceAccountKey,
  spaceKeyHex,
  supervisorCredsKey,
} from "./lib/workspace/mod.ts";
export {
  composeSpaceAuth,
  parseBrokerAuth,
  parseSpaceAccountAuth,
  rotateSystemAccount,
  serializeBrokerAuth,
  serializeSpaceAccountAuth,
} from "./lib/trust/mod.ts";
export {
  AUTH_SERVICE_FILE,
  authServicePaths,
  findCotalRoot,
  readDiscoveryFile,
  userAuthStateDir,
} from "./lib/auth/mod.ts";
export type { AuthServiceDiscovery, AuthServicePaths } from "./lib/auth/mod.ts";
export { registry } from "./lib/registry.ts";
export type {
  AuthProvider,
  AuthProviderContext,
  AuthProviderSession,
  Command,
  Connector,
  LaunchContext,
  LaunchSpec,
  Runtime,
  RuntimeExit,
  RuntimeHandle,
  SpawnOptions,
  UserCredentials,
} from "./lib/registry.ts";
export type { ParsedArgs } from "./lib/cli/mod.ts";

// Types the contract's signatures name (so an embedder can spell them too)
export type { CalloutConnection, CalloutMsg } from "./lib/auth/mod.ts";
export { createActorLedger, ensureIdpPin, loadIdpPin } from "./lib/auth/mod.ts";
export type { IdpPin, PinStore } from "./lib/auth/mod.ts";
export type { ActorGrant, ActorLedger, ActorLedgerOptions } from "./lib/auth/mod.ts";
export type {
  FlagSpec,
  FlagsSpec,
  FlagValue,
  FlagValues,
  PositionalSpec,
  ValueOf,
} from "./lib/command_types.ts";
export type { DeliveryCounters, DeliveryLogger } from "./lib/delivery/mod.ts";
export type { FeedStatus } from "./lib/delivery/mod.ts";
export type { AnyListener, EndpointEvents } from "./lib/endpoint/mod.ts";
export type { AgentSkill, CardKind } from "./lib/endpoint/mod.ts";
export type { JsonObject } from "./lib/manager/mod.ts";
export type { AgentRow, AgentStatus } from "./lib/manager/mod.ts";
export type { BringBackReport, ManagerStatus } from "./lib/manager/mod.ts";
export type { DespawnResult } from "./lib/manager/mod.ts";
export type { SandboxFacts } from "./lib/manager/mod.ts";
export type { AgentIdRange } from "./lib/manager/mod.ts";
export type { IsolationMode } from "./lib/manager/mod.ts";
export type { AgentLimits } from "./lib/manager/mod.ts";
export type { NetMode } from "./lib/manager/mod.ts";
export type { DeploymentLayout } from "./lib/permissions.ts";
export type { Extension, ExtensionKind, ExtensionKinds, Registry } from "./lib/registry.ts";
export type { LifetimeClass, LifetimePolicy } from "./lib/trust/mod.ts";
export type { ClusterConfig, PreloadAccount, TlsConfig } from "./lib/trust/mod.ts";
export type {
  DataAccountKeys,
  OperatorKeys,
  SysAccountKeys,
  SysCredentialKind,
} from "./lib/trust/mod.ts";
export type { SpaceTarget } from "./lib/wire/mod.ts";
export type { DeliveryKind } from "./lib/wire/mod.ts";
export type { PreflightInfo } from "./lib/workspace/mod.ts";

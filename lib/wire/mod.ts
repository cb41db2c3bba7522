/**
 * lib/wire: Cotal's names, subjects, envelope, space streams and buckets, and provisioning.
 *
 * @module
 */

export {
  assertConcreteChannel,
  assertValidActorToken,
  assertValidChannel,
  assertValidLifecycleUid,
  assertValidOwnerToken,
  assertValidPrincipal,
  assertValidRole,
  hasWildcard,
  isLifecycleUid,
  isPrincipalOwnerToken,
  isPrincipalToken,
  isValidChannel,
  lifecycleTag,
  MAX_CHANNEL_LENGTH,
  MAX_PRINCIPAL_TOKEN_LENGTH,
  newLifecycleUid,
  parsePrincipalId,
  principalId,
  principalName,
  token,
} from "./names.ts";
export type { Principal } from "./names.ts";
export {
  chatReadFilter,
  chatSubject,
  CTL_SERVICES,
  ctlSubject,
  dinboxSubject,
  dlvSubject,
  dmFilter,
  instSubject,
  LIVE_PLANES,
  liveSubject,
  parseSubject,
  subjectMatches,
  subjectRoot,
  svcFilter,
  svcSubject,
} from "./subjects.ts";
export type { ParsedSubject, SubjectParse, SubjectRefusal } from "./subjects.ts";
export {
  aclKey,
  bucketNames,
  CHANNEL_DEFAULTS_KEY,
  chathistDurableName,
  dlvDurableName,
  dmDurableName,
  kvStreamName,
  memberKey,
  streamNames,
  svcDurableName,
} from "./resources.ts";
export type { SpaceBucketNames, SpaceStreamNames } from "./resources.ts";
export {
  assertFitsPayload,
  buildMessage,
  CORE_PART_KINDS,
  encodedSize,
  encodeMessage,
  normalizeMentions,
  validateMessage,
} from "./envelope.ts";
export type {
  ArtifactPart,
  BuildMessageInput,
  CotalMessage,
  DataPart,
  EndpointRef,
  ExtensionPart,
  JsonValue,
  Part,
  TextPart,
} from "./envelope.ts";
export { decodeMessage } from "./receive.ts";
export { isBrokerAnswer, STORED_MESSAGE_HEADERS } from "./broker_answer.ts";
export type { Decoded, DeliveryKind, DropReason } from "./receive.ts";
export { connectBroker, withBroker } from "./connect.ts";
export type { BrokerTarget } from "./connect.ts";
export { publishMessage, subjectForMessage } from "./publish.ts";
export { isNotFound } from "./js_errors.ts";
export {
  DEFAULT_DUPLICATE_WINDOW_MS,
  DELIVERY_LEASE_TTL_MS,
  MANAGER_LEASE_TTL_MS,
  MAX_MSGS_PER_SUBJECT,
  MEMBERSHIP_FEED_MAX_BYTES,
  PLANE3_DUPLICATE_WINDOW_MS,
  PRESENCE_MAX_ROW_BYTES,
  PRESENCE_TTL_MS,
  setupSpaceStreams,
  setupSpaceStreamsOn,
  spaceBucketConfigs,
  spaceStreamConfigs,
  STREAM_LIMITS,
} from "./streams.ts";
export type {
  CanonicalStream,
  SetupSpaceStreamsOptions,
  SpaceSetupOptions,
  SpaceSetupResult,
} from "./streams.ts";
export {
  assertDeliveryClass,
  effectiveDeliveryClass,
  effectiveReplay,
  ensureDefaultDeliveryClass,
  ensureDefaultDeliveryClassOn,
  MAX_DESCRIPTION_LENGTH,
  MAX_INSTRUCTIONS_LENGTH,
  readChannelRegistry,
  readChannelRegistryOn,
  seedChannelRegistry,
  validateChannelConfig,
} from "./channels.ts";
export type {
  ChannelConfig,
  ChannelDefaults,
  ChannelRegistry,
  DeliveryClass,
  EnsureDefaultDeliveryClassOptions,
  SeedChannelRegistryOptions,
  SpaceTarget,
} from "./channels.ts";
export { liveAclUids, readAclRow, reissueAclRow } from "./acl.ts";
export type { AclRecord } from "./acl.ts";
export { bindKv, listKeys, liveEntry } from "./kv.ts";
export {
  channelCovers,
  deprovisionAgent,
  DURABLE_ACK_WAIT_MS,
  provisionAgent,
  provisionAgentDurables,
  resolveChannelPolicy,
} from "./provision.ts";
export type {
  AgentChannelPolicy,
  DeprovisionAgentOptions,
  DeprovisionResult,
  ProvisionAgentDurablesOptions,
  ProvisionAgentOptions,
  ProvisionedAgent,
  ProvisionedDurables,
  ResolvedChannelPolicy,
} from "./provision.ts";
export { GAP_MARKER_HEADER, type GapEnd, type GapMarker, parseGapMarker } from "./gap_marker.ts";

// For the other areas of lib/ (not part of the embedder's contract in the root mod.ts).
export { strictChannelRow } from "./channels.ts";
export { errorText } from "./connect.ts";
export { wrapJs } from "./js_errors.ts";
export { isStoreFull, jsonBytes, purgeJunkRows } from "./kv.ts";
export { acquireKvLease, KvLease } from "./kv_lease.ts";
export type { KvLeaseView } from "./kv_lease.ts";
export { consumerInfo } from "./provision.ts";
export { followStream } from "./stream_follow.ts";
export type { FollowedMessage, StreamFollow } from "./stream_follow.ts";
export { DELIVERY_LEASE_KEY } from "./streams.ts";

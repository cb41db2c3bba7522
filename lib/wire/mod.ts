/**
 * lib/wire: Cotal's names, subjects, envelope, space streams and buckets, and provisioning.
 *
 * @module
 */

export {
  assertConcreteChannel,
  assertValidChannel,
  assertValidLifecycleUid,
  assertValidPrincipal,
  assertValidRole,
  hasWildcard,
  isLifecycleUid,
  isPrincipalOwnerToken,
  isPrincipalToken,
  isValidChannel,
  lifecycleTag,
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
  ctlSubject,
  dinboxSubject,
  dlvSubject,
  dmFilter,
  instSubject,
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
  encodedSize,
  encodeMessage,
  validateMessage,
} from "./envelope.ts";
export type {
  ArtifactPart,
  CotalMessage,
  DataPart,
  EndpointRef,
  ExtensionPart,
  JsonValue,
  Part,
  TextPart,
} from "./envelope.ts";
export { decodeMessage } from "./receive.ts";
export { isBrokerAnswer } from "./broker_answer.ts";
export type { DeliveryKind } from "./receive.ts";
export { connectBroker } from "./connect.ts";
export type { BrokerTarget } from "./connect.ts";
export { publishMessage, subjectForMessage } from "./publish.ts";
export { isNotFound } from "./js_errors.ts";
export {
  setupSpaceStreams,
  spaceBucketConfigs,
  spaceStreamConfigs,
  STREAM_LIMITS,
} from "./streams.ts";
export type { SetupSpaceStreamsOptions, SpaceSetupOptions, SpaceSetupResult } from "./streams.ts";
export {
  effectiveDeliveryClass,
  effectiveReplay,
  ensureDefaultDeliveryClass,
  readChannelRegistry,
  seedChannelRegistry,
  validateChannelConfig,
} from "./channels.ts";
export type {
  ChannelConfig,
  ChannelRegistry,
  DeliveryClass,
  EnsureDefaultDeliveryClassOptions,
  SpaceTarget,
} from "./channels.ts";
export { liveAclUids, readAclRow, reissueAclRow } from "./acl.ts";
export type { AclRecord } from "./acl.ts";
export { bindKv, listKeys, liveEntry } from "./kv.ts";
export {
  channelCovers,
  deprovisionAgent,
  provisionAgent,
  provisionAgentDurables,
  resolveChannelPolicy,
} from "./provision.ts";
export type {
  AgentChannelPolicy,
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

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
export type { Decoded, DeliveryKind, DropReason } from "./receive.ts";

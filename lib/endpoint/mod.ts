/**
 * lib/endpoint: `CotalEndpoint`, the long-lived client of one space (presence, channels, DM,
 * anycast, history, credential renewal, reconnect with backoff).
 *
 * @module
 */

export { CotalEndpoint, DEFAULT_SERVER } from "./endpoint.ts";
export { RETRY_BASE_MS, RETRY_CAP_MS } from "./backoff.ts";
export { PUBLISH_RETRIES, PUBLISH_TIMEOUT_MS } from "./publish.ts";
export { EndpointEvents, type EndpointListener } from "./emitter.ts";
export {
  ConnectionEvent,
  CotalMessageEvent,
  type Delivery,
  EndpointErrorEvent,
  type EndpointEventMap,
  EndpointWarningEvent,
  GapEvent,
  type MessageMeta,
  type MessageSource,
  type OfflineReason,
  PresenceEvent,
  RenewalEvent,
  RosterEvent,
  TransportEvent,
} from "./events.ts";
export { BEARER_REFRESH_MARGIN_MS, CREDS_RENEW_FRACTION, EXPIRY_MARGIN_MS } from "./credentials.ts";
export { DEFAULT_HEARTBEAT_MS, DEFAULT_PRESENCE_TTL_MS } from "./presence.ts";
export { BACKFILL_LIMIT } from "./channels.ts";
export { DELIVERY_FRAME_HEADER } from "./inbound.ts";
export {
  type AgentCard,
  type AgentCardInput,
  type AgentSkill,
  type CardKind,
  type CredentialSource,
  type EndpointOptions,
  type HistoryOptions,
  type JoinResult,
  type MulticastOptions,
  type Presence,
  type PresenceStatus,
  PROTOCOL_VERSION,
  type SendOptions,
} from "./types.ts";

// For the other areas of lib/ (not part of the embedder's contract in the root mod.ts).
export { errorText, parseHeldCreds } from "./credentials.ts";
export { seenKey } from "./dedupe.ts";
export type { AnyListener } from "./emitter.ts";
export { startWaitingForBroker } from "./wait_start.ts";

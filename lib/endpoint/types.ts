/**
 * Shapes of the endpoint: its options, the agent card and presence records, and the results
 * of its channel operations.
 *
 * @module
 */

import type { Part } from "../wire/mod.ts";

/** The wire protocol version an endpoint advertises in its card. */
export const PROTOCOL_VERSION = "0.4";

/** What kind of participant a card describes. */
export type CardKind = "agent" | "endpoint";

/** One advertised skill. */
export interface AgentSkill {
  /** The skill's id. */
  id: string;
  /** Its name. */
  name: string;
  /** What it does. */
  description?: string;
}

/** The card an endpoint publishes in presence. `id` is always the dot-form principal. */
export interface AgentCard {
  /** `<owner>.<actor>`; the endpoint overwrites it with its authenticated principal. */
  id: string;
  /** The owner, when it differs from the principal's. */
  owner?: string;
  /** The actor, when it differs from the principal's. */
  actor?: string;
  /** Display name, at most 128 characters, no `/`, no surrounding whitespace. */
  name: string;
  /** What kind of participant it is. */
  kind: CardKind;
  /** The anycast role this endpoint serves (its `svc_<role>` task queue). */
  role?: string;
  /** What it is for. */
  description?: string;
  /** Free tags. */
  tags?: string[];
  /** What it can do. */
  skills?: AgentSkill[];
  /** Free string metadata. */
  meta?: Record<string, string>;
  /** The card format version. */
  protocolVersion?: string;
}

/** The card as a caller passes it: `id` is derived, so it is optional. */
export type AgentCardInput = Omit<AgentCard, "id" | "kind"> & {
  id?: string;
  kind?: CardKind;
};

/** Presence status. */
export type PresenceStatus = "idle" | "waiting" | "working" | "offline";

/** A presence record, one per principal in `cotal_presence_<space>`. */
export interface Presence {
  /** The peer's card. */
  card: AgentCard;
  /** Its status. */
  status: PresenceStatus;
  /** What it is doing now. */
  activity?: string;
  /** {@linkcode lifecycleTag} of the writer's lifecycle uid (never the uid itself). */
  lifecycleTag?: string;
  /** Epoch ms of the writer's last heartbeat. */
  ts: number;
}

/** A renewal source: called ahead of each expiry and whenever a reconnect finds a dead credential. */
export type CredentialSource = () => Promise<string>;

/** Options of {@linkcode CotalEndpoint}. */
export interface EndpointOptions {
  /** The space this endpoint is bound to for its lifetime. */
  space: string;
  /** This endpoint's card; `id`, `owner` and `actor` are checked against the credential. */
  card: AgentCardInput;
  /** Broker URL(s); default `nats://127.0.0.1:4222`. */
  servers?: string | string[];
  /**
   * The managed incarnation id (`[a-z0-9]{26,32}`); keys the bind-only `dm_`/`dlv_` durables,
   * so it is required whenever the endpoint consumes.
   */
  lifecycleUid?: string;
  /**
   * Creds-file text, or an async function re-read at 75% of the JWT's life; a renewed cred is
   * proven on a throwaway connection, then swapped onto the live one. It must keep the nkey.
   */
  creds?: string | CredentialSource;
  /**
   * A Cotal bearer (presented with `sentinelCreds` to the auth callout), or an async function
   * refreshed 60 s before each expiry. A function needs explicit `card.owner` and `card.actor`.
   */
  bearer?: string | CredentialSource;
  /** The deny-all callout-account creds presented alongside a bearer. */
  sentinelCreds?: string;
  /** Channels joined at start (default none). `multicast` defaults to the first concrete one. */
  channels?: string[];
  /** Presence heartbeat period; default 2000 ms. */
  heartbeatMs?: number;
  /** Presence liveness window: a row older than this is offline; default 6000 ms. */
  ttlMs?: number;
  /** Write this endpoint's presence row (default true). */
  registerPresence?: boolean;
  /** Watch the space's presence and keep a roster (default true). */
  watchPresence?: boolean;
  /** Bind the DM, role and durable-delivery consumers (default true). */
  consume?: boolean;
  /**
   * Whether a consumer copy (a DM, a task, a durable channel copy) of a message already surfaced
   * is settled without surfacing again (default true: each id surfaces once). A host that keeps
   * messages itself, dedupes them by id and settles each copy only once it has kept it turns it
   * off: every consumer copy then surfaces with its delivery to settle (`cotal mcp`, whose live
   * copy or history of a post is in RAM, fault pass 9).
   */
  dedupeDurable?: boolean;
}

/** Options of a publish. */
export interface SendOptions {
  /** Extra content parts, after the text part. */
  parts?: Part[];
  /** Id of the parent message. */
  replyTo?: string;
  /** Conversation correlation id. */
  contextId?: string;
}

/** Options of a multicast. */
export interface MulticastOptions extends SendOptions {
  /** The concrete channel; default the first concrete boot channel. */
  channel?: string;
  /** Peer names to wake (channel messages only). */
  mentions?: string[];
}

/** The result of {@linkcode CotalEndpoint.joinChannel}. */
export interface JoinResult {
  /** The broker confirmed the live subscription. */
  joined: boolean;
  /** How many retained messages were surfaced as historical. */
  backfilled: number;
  /** The durable backstop is established for this channel. */
  durable: boolean;
  /** Why `durable` is false on a durable-class channel, or why the join did not happen. */
  reason?: string;
}

/** Options of {@linkcode CotalEndpoint.channelHistory}. */
export interface HistoryOptions {
  /** Newest N messages (default 100); a positive safe integer. */
  limit?: number;
  /** Aborts the read. */
  signal?: AbortSignal;
}

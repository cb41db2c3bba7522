/**
 * The Cotal message envelope: its types, the builder that refuses malformed messages before
 * they reach the wire, and the exact encoded size the broker will count against
 * `max_payload`.
 *
 * @module
 */

import { CotalError } from "../errors.ts";
import { assertConcreteChannel, assertValidRole, describe, parsePrincipalId } from "./names.ts";
import { CHAT_MAX_MESSAGE_BYTES, DIRECT_MAX_MESSAGE_BYTES } from "./streams.ts";

/** Who sent a message. `id` is the dot-form principal; receivers check it against the subject. */
export interface EndpointRef {
  /** `<owner>.<actor>`. */
  id: string;
  /** Display name. */
  name: string;
  /** The sender's role, if it has one. */
  role?: string;
}

/** Plain text content. */
export interface TextPart {
  /** A text part. */
  kind: "text";
  /** The text. */
  text: string;
}

/** Any JSON value (representable at every depth). */
export interface DataPart {
  /** A structured data part. */
  kind: "data";
  /** The data. */
  data: JsonValue;
}

/** A reference to bytes held elsewhere (the Object Store); never inline content. */
export interface ArtifactPart {
  /** A reference to content stored elsewhere. */
  kind: "artifact";
  /** Its name. */
  name: string;
  /** Its media type. */
  mediaType: string;
  /** `sha256:<64 lowercase hex>`; the receiver verifies it. */
  digest: string;
  /** Declared size in bytes; a receiver must never allocate from it. */
  size: number;
}

/** An extension part: `kind` is a reverse-DNS name such as `ai.cotal.status` or `ag-ui.frame`. */
export interface ExtensionPart {
  /** An extension's kind (not text, data or artifact). */
  kind: string;
  /** The extension's own fields. */
  [field: string]: unknown;
}

/** One piece of message content. */
export type Part = TextPart | DataPart | ArtifactPart | ExtensionPart;

/** A JSON value. */
export type JsonValue = null | boolean | number | string | JsonValue[] | {
  [key: string]: JsonValue;
};

/** The Cotal message (UTF-8 JSON body). Exactly one of `channel`, `to`, `toService` is set. */
export interface CotalMessage {
  /** Unique id, also sent as `Nats-Msg-Id`. */
  id: string;
  /** Epoch milliseconds. */
  ts: number;
  /** The space's display name. */
  space: string;
  /** Who sent it. */
  from: EndpointRef;
  /** Multicast target (a concrete channel). */
  channel?: string;
  /** Unicast target: the recipient's dot-form principal. */
  to?: string;
  /** Anycast target: a role. */
  toService?: string;
  /** Lowercased, trimmed, deduped peer names; channel messages only; omitted when empty. */
  mentions?: string[];
  /** Its content. */
  parts: Part[];
  /** Id of the parent message (flat threads). */
  replyTo?: string;
  /** Conversation correlation id. */
  contextId?: string;
}

/** Input to {@linkcode buildMessage}. */
export interface BuildMessageInput {
  space: string;
  from: EndpointRef;
  channel?: string;
  to?: string;
  toService?: string;
  /** Content; `text` is shorthand for one text part placed first. */
  parts?: Part[];
  text?: string;
  mentions?: string[];
  replyTo?: string;
  contextId?: string;
  /** Defaults to `crypto.randomUUID()`. */
  id?: string;
  /** Defaults to `Date.now()`. */
  ts?: number;
}

const EXTENSION_KIND_RE = /^[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$/;
const DIGEST_RE = /^sha256:[0-9a-f]{64}$/;

function invalid(what: string, fix: string): CotalError {
  return new CotalError("invalid_message", `The message ${what}; ${fix}.`);
}

/** Build a validated message; refuses anything a conformant receiver would drop. */
export function buildMessage(input: BuildMessageInput): CotalMessage {
  const parts = [...(input.text !== undefined ? [{ kind: "text", text: input.text }] : [])];
  const msg: CotalMessage = {
    id: input.id ?? crypto.randomUUID(),
    ts: input.ts ?? Date.now(),
    space: input.space,
    from: { ...input.from },
    parts: [...parts, ...(input.parts ?? [])] as Part[],
  };
  if (input.channel !== undefined) msg.channel = input.channel;
  if (input.to !== undefined) msg.to = input.to;
  if (input.toService !== undefined) msg.toService = input.toService;
  const mentions = normalizeMentions(input.mentions ?? []);
  if (mentions.length > 0) msg.mentions = mentions;
  if (input.replyTo !== undefined) msg.replyTo = input.replyTo;
  if (input.contextId !== undefined) msg.contextId = input.contextId;
  validateMessage(msg);
  return msg;
}

/** Lowercase, trim and dedupe mention names, dropping empty ones. */
export function normalizeMentions(mentions: readonly string[]): string[] {
  const out: string[] = [];
  for (const m of mentions) {
    if (typeof m !== "string") throw invalid("has a non-string mention", "pass names as strings");
    const n = m.trim().toLowerCase();
    if (n !== "" && !out.includes(n)) out.push(n);
  }
  return out;
}

/** Refuse a message that does not follow the envelope rules; names the offending field. */
export function validateMessage(msg: CotalMessage): void {
  if (typeof msg !== "object" || msg === null) throw invalid("is not an object", "build one");
  if (typeof msg.id !== "string" || msg.id === "") {
    throw invalid("has no id", "set a unique non-empty string id");
  }
  if (!Number.isSafeInteger(msg.ts) || msg.ts < 0) {
    throw invalid("has an invalid ts", "set ts to epoch milliseconds");
  }
  if (typeof msg.space !== "string" || msg.space === "") {
    throw invalid("has no space", "set the space name");
  }
  const from = msg.from;
  if (typeof from !== "object" || from === null || typeof from.name !== "string") {
    throw invalid("has no from", "set from { id, name } to the sending principal");
  }
  parsePrincipalId(from.id);
  if (from.role !== undefined) assertValidRole(from.role);
  const routes = [msg.channel, msg.to, msg.toService].filter((r) => r !== undefined);
  if (routes.length !== 1) {
    throw invalid(
      `sets ${routes.length} routing fields`,
      "set exactly one of channel, to or toService",
    );
  }
  if (msg.channel !== undefined) assertConcreteChannel(msg.channel);
  if (msg.to !== undefined) parsePrincipalId(msg.to);
  if (msg.toService !== undefined) assertValidRole(msg.toService);
  if (msg.mentions !== undefined) {
    if (msg.channel === undefined) {
      throw invalid("has mentions outside a channel", "mention peers on channel messages only");
    }
    const norm = normalizeMentions(msg.mentions);
    if (norm.length !== msg.mentions.length || norm.some((m, i) => m !== msg.mentions![i])) {
      throw invalid("has unnormalized mentions", "pass them through normalizeMentions()");
    }
  }
  for (const f of ["replyTo", "contextId"] as const) {
    if (msg[f] !== undefined && typeof msg[f] !== "string") {
      throw invalid(`has a non-string ${f}`, `set ${f} to a string or leave it out`);
    }
  }
  if (!Array.isArray(msg.parts)) throw invalid("has no parts", "set parts to an array");
  msg.parts.forEach((part, i) => validatePart(part, `parts[${i}]`));
}

/** Refuses a part a reader could not show: each kind with the fields it needs, typed. */
export function validatePart(part: Part, path: string): void {
  if (typeof part !== "object" || part === null || typeof part.kind !== "string") {
    throw invalid(`has a part without a kind at ${path}`, "give every part a string kind");
  }
  switch (part.kind) {
    case "text":
      if (typeof (part as TextPart).text !== "string") {
        throw invalid(`has a text part without text at ${path}`, "set text to a string");
      }
      return;
    case "data": {
      if (!("data" in part)) throw invalid(`has a data part without data at ${path}`, "set data");
      const bad = nonJsonPath((part as DataPart).data, `${path}.data`);
      if (bad) {
        throw invalid(`has a value JSON cannot carry at ${bad}`, "use plain JSON values only");
      }
      return;
    }
    case "artifact": {
      const a = part as ArtifactPart;
      if (typeof a.name !== "string" || typeof a.mediaType !== "string") {
        throw invalid(`has an artifact without name or mediaType at ${path}`, "set both");
      }
      if (typeof a.digest !== "string" || !DIGEST_RE.test(a.digest)) {
        throw invalid(
          `has an artifact digest ${describe(a.digest)} at ${path}`,
          'use "sha256:<64 lowercase hex>"',
        );
      }
      if (!Number.isSafeInteger(a.size) || a.size < 0) {
        throw invalid(
          `has an artifact size that is not a byte count at ${path}`,
          "set size to a non-negative integer",
        );
      }
      return;
    }
    default:
      if (!EXTENSION_KIND_RE.test(part.kind)) {
        throw invalid(
          `has part kind ${describe(part.kind)} at ${path}`,
          'use text, data, artifact or a reverse-DNS extension kind such as "ai.cotal.note"',
        );
      }
      {
        const bad = nonJsonPath(part as unknown, path);
        if (bad) {
          throw invalid(`has a value JSON cannot carry at ${bad}`, "use plain JSON values only");
        }
      }
  }
}

/** The path of the first value JSON cannot round-trip, or undefined when `v` is plain JSON. */
function nonJsonPath(v: unknown, path: string, seen = new Set<object>()): string | undefined {
  if (v === null || typeof v === "string" || typeof v === "boolean") return undefined;
  if (typeof v === "number") return Number.isFinite(v) ? undefined : path;
  if (typeof v !== "object") return path;
  if (seen.has(v)) return path;
  seen.add(v);
  try {
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        const bad = nonJsonPath(v[i], `${path}[${i}]`, seen);
        if (bad) return bad;
      }
      return undefined;
    }
    const proto = Object.getPrototypeOf(v);
    if (proto !== Object.prototype && proto !== null) return path;
    for (const [k, val] of Object.entries(v)) {
      const bad = nonJsonPath(val, `${path}.${k}`, seen);
      if (bad) return bad;
    }
    return undefined;
  } finally {
    seen.delete(v);
  }
}

const encoder = new TextEncoder();

/** The UTF-8 JSON body of a message. */
export function encodeMessage(msg: CotalMessage): Uint8Array {
  return encoder.encode(JSON.stringify(msg));
}

/**
 * Bytes the broker counts against `max_payload` for a JetStream publish of `msg`: the
 * `NATS/1.0` header block carrying `Nats-Msg-Id` plus the JSON body, exactly as npm:nats
 * frames it.
 */
export function encodedSize(msg: CotalMessage, body: Uint8Array = encodeMessage(msg)): number {
  const header = msg.id === ""
    ? 0
    : encoder.encode(`NATS/1.0\r\nNats-Msg-Id: ${msg.id}\r\n\r\n`).length;
  return header + body.length;
}

/**
 * Refuse a message that would not fit the broker's `max_payload`, or the stream that stores its
 * plane (a post: CHAT's cap; a DM or task: DM and TASK's); returns its encoded size.
 */
export function assertFitsPayload(
  msg: CotalMessage,
  maxPayload: number,
  body?: Uint8Array,
): number {
  const size = encodedSize(msg, body);
  const plane = msg.channel !== undefined
    ? { what: "a post", max: CHAT_MAX_MESSAGE_BYTES }
    : { what: msg.to !== undefined ? "a DM" : "a task", max: DIRECT_MAX_MESSAGE_BYTES };
  if (size > plane.max && plane.max < maxPayload) {
    throw new CotalError(
      "message_too_large",
      `The message is ${size} bytes but ${plane.what} holds at most ${plane.max}; move large ` +
        `content to the Object Store and reference it with an artifact part.`,
    );
  }
  if (size > maxPayload) {
    throw new CotalError(
      "message_too_large",
      `The message is ${size} bytes but the broker's max_payload is ${maxPayload}; move large ` +
        `content to the Object Store and reference it with an artifact part.`,
    );
  }
  return size;
}

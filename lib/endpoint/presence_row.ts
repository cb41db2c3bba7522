/**
 * Reading a peer's presence row. Every member writes its own row, so a row is the writer's
 * word and nothing more: it is rebuilt field by field, each field kept only when it has the
 * type and size the card format gives it, and nothing else in the row reaches a reader. A
 * `role` that is an object with its own `toString` (red team 29) made `cotal join` throw while
 * rendering, so the operator never saw that member come or go; an unchecked field would reach
 * `cotal ps`, `cotal mcp`'s roster and every embedder the same way.
 *
 * @module
 */

import { assertValidRole } from "../wire/mod.ts";
import type { AgentCard, AgentSkill, Presence, PresenceStatus } from "./types.ts";

/** Longest display name a card may carry. */
export const MAX_NAME_LENGTH = 128;
const STATUSES: readonly string[] = ["idle", "waiting", "working", "offline"];
/** Longest free text a row field keeps (description, activity, a skill's or a meta value). */
export const MAX_ROW_TEXT = 1024;
/** Most tags, skills and meta entries a card keeps. */
export const MAX_ROW_ITEMS = 32;
const MAX_ID = 256;
const MAX_TOKEN = 128;

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** A string of at most `max` characters, else undefined. */
function text(v: unknown, max: number): string | undefined {
  return typeof v === "string" && v.length <= max ? v : undefined;
}

function role(v: unknown): string | undefined {
  try {
    assertValidRole(v);
    return v;
  } catch {
    return undefined;
  }
}

function tags(v: unknown): string[] | undefined {
  if (!Array.isArray(v) || v.length > MAX_ROW_ITEMS) return undefined;
  const out = v.map((t) => text(t, MAX_TOKEN));
  return out.every((t): t is string => t !== undefined) ? out : undefined;
}

function skills(v: unknown): AgentSkill[] | undefined {
  if (!Array.isArray(v) || v.length > MAX_ROW_ITEMS) return undefined;
  const out: AgentSkill[] = [];
  for (const s of v) {
    if (!isObject(s)) return undefined;
    const id = text(s.id, MAX_TOKEN);
    const name = text(s.name, MAX_TOKEN);
    if (id === undefined || name === undefined) return undefined;
    const description = text(s.description, MAX_ROW_TEXT);
    out.push({ id, name, ...(description !== undefined ? { description } : {}) });
  }
  return out;
}

function meta(v: unknown): Record<string, string> | undefined {
  if (!isObject(v)) return undefined;
  const entries = Object.entries(v);
  if (entries.length > MAX_ROW_ITEMS) return undefined;
  const out: Record<string, string> = {};
  for (const [k, val] of entries) {
    const value = text(val, MAX_ROW_TEXT);
    if (k.length > MAX_TOKEN || value === undefined) return undefined;
    Object.defineProperty(out, k, { value, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

/** The card's optional fields a reader keeps: each well-formed one, by name. */
function optionalFields(v: Json): Record<string, unknown> {
  const optional = {
    owner: text(v.owner, MAX_TOKEN),
    actor: text(v.actor, MAX_TOKEN),
    role: role(v.role),
    description: text(v.description, MAX_ROW_TEXT),
    tags: tags(v.tags),
    skills: skills(v.skills),
    meta: meta(v.meta),
    protocolVersion: text(v.protocolVersion, 32),
  };
  return Object.fromEntries(Object.entries(optional).filter(([, x]) => x !== undefined));
}

/**
 * The first optional card field a reader would leave out (wrong type, too long, too many
 * items), for the writer's own check; undefined when every given field is kept.
 */
export function droppedCardField(card: object): string | undefined {
  const given = Object.entries(card).filter(([k, x]) =>
    x !== undefined && k !== "id" && k !== "name" && k !== "kind"
  );
  const kept = optionalFields(card as Json);
  return given.find(([k]) => !(k in kept))?.[0];
}

function card(v: unknown): AgentCard | undefined {
  if (!isObject(v)) return undefined;
  const id = text(v.id, MAX_ID);
  const name = text(v.name, MAX_NAME_LENGTH);
  if (id === undefined || !name || name.includes("/") || name.trim() !== name) return undefined;
  return {
    id,
    name,
    kind: v.kind === "endpoint" ? "endpoint" : "agent",
    ...optionalFields(v),
  } as AgentCard;
}

/**
 * The presence row in `data` rebuilt from its well-formed fields, or undefined when its card id,
 * name, status or timestamp is missing or malformed (the row is then no row at all).
 */
export function readPresenceRow(data: Uint8Array): Presence | undefined {
  let v: unknown;
  try {
    v = JSON.parse(new TextDecoder().decode(data));
  } catch {
    return undefined;
  }
  if (!isObject(v)) return undefined;
  const c = card(v.card);
  const status = typeof v.status === "string" && STATUSES.includes(v.status)
    ? v.status as PresenceStatus
    : undefined;
  if (!c || !status || typeof v.ts !== "number" || !Number.isFinite(v.ts)) return undefined;
  const activity = text(v.activity, MAX_ROW_TEXT);
  const lifecycleTag = typeof v.lifecycleTag === "string" && /^[0-9a-f]{24}$/.test(v.lifecycleTag)
    ? v.lifecycleTag
    : undefined;
  return {
    card: c,
    status,
    ...(activity !== undefined ? { activity } : {}),
    ...(lifecycleTag !== undefined ? { lifecycleTag } : {}),
    ts: v.ts,
  };
}

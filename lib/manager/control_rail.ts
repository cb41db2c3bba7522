/**
 * The manager's control rail: subjects and the versioned request/reply envelope.
 *
 * Naming follows the reference's endpoint rails: a request is
 * `cotal.<s>.ep.one.manager.<command>.<owner>.<actor>.<uid>.<nonce>` (the class, served by a
 * queue group) or `cotal.<s>.ep.inst.manager.<instanceId>.<command>.<owner>.<actor>.<uid>.<nonce>`
 * (one instance); the reply goes to
 * `cotal.<s>.ep.reply.manager.<instanceId>.<epoch>.<owner>.<actor>.<uid>.<nonce>`, derived from
 * the request subject and never from the payload, so the broker's grants on the caller's
 * `<owner>.<actor>` decide who hears it. Attach frames ride
 * `cotal.<s>.eps.manager.<sessionId>.<epoch>.<in|out>`.
 *
 * @module
 */
import { base64urlEncode } from "../nats/mod.ts";
import { CotalError } from "../errors.ts";
import type { CotalErrorCode } from "../error_codes/mod.ts";
import { isLifecycleUid, isPrincipalToken, type Principal, subjectRoot } from "../wire/mod.ts";

/** The envelope version this build speaks; another is refused with `unsupported_version`. */
export const CONTROL_VERSION = 1;
/** The endpoint token of the manager on the rails (and its queue group). */
export const MANAGER_ENDPOINT = "manager";
/** The commands a manager serves. */
export const MANAGER_COMMANDS = Object.freeze(
  ["status", "ps", "spawn", "despawn", "input", "attach"] as const,
);
/** One of {@linkcode MANAGER_COMMANDS}. */
export type ManagerCommand = typeof MANAGER_COMMANDS[number];
/** Largest control envelope accepted either way. */
export const MAX_CONTROL_BYTES = 256 * 1024;

const COMMAND_RE = /^[a-z0-9-]{1,32}$/;
const NONCE_RE = /^[A-Za-z0-9_-]{22,64}$/;
const ID_RE = /^[a-z0-9]{8,32}$/;

/** Who calls: a principal plus a per-call (or per-process) uid. */
export interface ControlCaller extends Principal {
  readonly uid: string;
}

/** A JSON object (the args of a request, the data of a reply). */
export type JsonObject = { [key: string]: unknown };

/** A request on the rail. `id` equals the subject's nonce. */
export interface ControlRequest {
  readonly v: typeof CONTROL_VERSION;
  readonly id: string;
  readonly command: string;
  readonly args: JsonObject;
}

/** A typed refusal: a stable code and one sentence. */
export interface ControlErrorBody {
  readonly code: string;
  readonly message: string;
}

/** A reply on the rail. */
export type ControlReply =
  | { readonly v: typeof CONTROL_VERSION; readonly id: string; readonly ok: true; data: unknown }
  | {
    readonly v: typeof CONTROL_VERSION;
    readonly id: string;
    readonly ok: false;
    readonly error: ControlErrorBody;
  };

/** A fresh nonce: 128 random bits, base64url (22 characters). */
export function newNonce(): string {
  return base64urlEncode(crypto.getRandomValues(new Uint8Array(16)));
}

function callerTokens(c: ControlCaller): string {
  if (!isPrincipalToken(c.owner) || !isPrincipalToken(c.actor) || !isLifecycleUid(c.uid)) {
    throw new CotalError(
      "invalid_caller",
      "A control caller needs owner and actor tokens and a lifecycle-uid-shaped uid.",
    );
  }
  return `${c.owner}.${c.actor}.${c.uid}`;
}

function checkId(what: string, v: string, re: RegExp): string {
  if (!re.test(v)) {
    throw new CotalError(
      "invalid_control_subject",
      `The ${what} ${JSON.stringify(v)} is malformed.`,
    );
  }
  return v;
}

/** A request subject; `instanceId` pins one manager instance (default: any of the class). */
export function requestSubject(
  space: string,
  command: string,
  caller: ControlCaller,
  nonce: string,
  instanceId?: string,
): string {
  checkId("command", command, COMMAND_RE);
  checkId("nonce", nonce, NONCE_RE);
  const route = instanceId === undefined
    ? `one.${MANAGER_ENDPOINT}`
    : `inst.${MANAGER_ENDPOINT}.${checkId("instance id", instanceId, ID_RE)}`;
  return `${subjectRoot(space)}.ep.${route}.${command}.${callerTokens(caller)}.${nonce}`;
}

/** The subscriptions a manager instance serves: the class rail and its own instance rail. */
export function serveFilters(space: string, instanceId: string): { one: string; inst: string } {
  const P = `${subjectRoot(space)}.ep`;
  return {
    one: `${P}.one.${MANAGER_ENDPOINT}.*.*.*.*.*`,
    inst: `${P}.inst.${MANAGER_ENDPOINT}.${checkId("instance id", instanceId, ID_RE)}.*.*.*.*.*`,
  };
}

/** The reply subject for a parsed request. */
export function replySubject(
  space: string,
  instanceId: string,
  epoch: string,
  caller: ControlCaller,
  nonce: string,
): string {
  return `${subjectRoot(space)}.ep.reply.${MANAGER_ENDPOINT}.${
    checkId("instance id", instanceId, ID_RE)
  }.${checkId("epoch", epoch, ID_RE)}.${callerTokens(caller)}.${checkId("nonce", nonce, NONCE_RE)}`;
}

/** What a caller subscribes to hear every reply meant for it. */
export function replyFilter(space: string, caller: ControlCaller): string {
  return `${subjectRoot(space)}.ep.reply.${MANAGER_ENDPOINT}.*.*.${callerTokens(caller)}.*`;
}

/** A request subject, parsed. */
export interface ParsedRequestSubject {
  readonly command: string;
  readonly caller: ControlCaller;
  readonly nonce: string;
  readonly instanceId?: string;
}

/** Parses a request subject of `space`; undefined when it is not one (dropped unanswered). */
export function parseRequestSubject(
  space: string,
  subject: string,
): ParsedRequestSubject | undefined {
  const prefix = `${subjectRoot(space)}.ep.`;
  if (!subject.startsWith(prefix)) return undefined;
  const t = subject.slice(prefix.length).split(".");
  let instanceId: string | undefined;
  let rest: string[];
  if (t[0] === "one" && t[1] === MANAGER_ENDPOINT) rest = t.slice(2);
  else if (t[0] === "inst" && t[1] === MANAGER_ENDPOINT && ID_RE.test(t[2] ?? "")) {
    instanceId = t[2];
    rest = t.slice(3);
  } else return undefined;
  if (rest.length !== 5) return undefined;
  const [command, owner, actor, uid, nonce] = rest;
  if (!COMMAND_RE.test(command) || !NONCE_RE.test(nonce)) return undefined;
  if (!isPrincipalToken(owner) || !isPrincipalToken(actor) || !isLifecycleUid(uid)) {
    return undefined;
  }
  const parsed = { command, caller: { owner, actor, uid }, nonce };
  return instanceId === undefined ? parsed : { ...parsed, instanceId };
}

/** An attach session's frame subject. */
export function sessionSubject(
  space: string,
  sessionId: string,
  epoch: string,
  dir: "in" | "out",
): string {
  return `${subjectRoot(space)}.eps.${MANAGER_ENDPOINT}.${
    checkId("session id", sessionId, ID_RE)
  }.${checkId("epoch", epoch, ID_RE)}.${dir}`;
}

function isObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

const ENC = new TextEncoder();
const DEC = new TextDecoder();

/** Encodes an envelope, refusing one over {@linkcode MAX_CONTROL_BYTES}. */
export function encodeEnvelope(v: ControlRequest | ControlReply): Uint8Array {
  const bytes = ENC.encode(JSON.stringify(v));
  if (bytes.length > MAX_CONTROL_BYTES) {
    throw new CotalError(
      "control_too_big",
      `A control message of ${bytes.length} bytes is over the ${MAX_CONTROL_BYTES}-byte limit; send less.`,
    );
  }
  return bytes;
}

function refuse(code: CotalErrorCode, message: string): never {
  throw new CotalError(code, message);
}

/**
 * Decodes a request body against its parsed subject. Refuses (`bad_request`) non-JSON, a
 * non-object, an id or command that disagrees with the subject, and args that are not an
 * object; `unsupported_version` for another envelope version.
 */
export function decodeRequest(data: Uint8Array, subject: ParsedRequestSubject): ControlRequest {
  if (data.length > MAX_CONTROL_BYTES) {
    refuse("bad_request", `The request is over the ${MAX_CONTROL_BYTES}-byte limit.`);
  }
  let v: unknown;
  try {
    v = JSON.parse(DEC.decode(data));
  } catch {
    refuse("bad_request", "The request body is not JSON; send a control envelope.");
  }
  if (!isObject(v)) refuse("bad_request", "The request body must be a JSON object.");
  if (v.v !== CONTROL_VERSION) {
    refuse(
      "unsupported_version",
      `This manager speaks control envelope v${CONTROL_VERSION}, not ${
        JSON.stringify(v.v)?.slice(0, 20)
      }; upgrade the caller or the manager.`,
    );
  }
  if (v.id !== subject.nonce) {
    refuse("bad_request", "The request id does not match the nonce in its subject.");
  }
  if (v.command !== subject.command) {
    refuse("bad_request", "The request's command does not match the command in its subject.");
  }
  const args = v.args ?? {};
  if (!isObject(args)) refuse("bad_request", "The request's args must be a JSON object.");
  return { v: CONTROL_VERSION, id: v.id as string, command: v.command as string, args };
}

/** Decodes a reply; a malformed one is refused with `bad_reply`. */
export function decodeReply(data: Uint8Array): ControlReply {
  let v: unknown;
  try {
    v = JSON.parse(DEC.decode(data));
  } catch {
    refuse("bad_reply", "The manager's reply is not JSON.");
  }
  if (!isObject(v) || typeof v.id !== "string" || typeof v.ok !== "boolean") {
    refuse("bad_reply", "The manager's reply is not a control envelope.");
  }
  if (v.v !== CONTROL_VERSION) {
    refuse(
      "unsupported_version",
      `The manager replied with envelope v${
        JSON.stringify(v.v)?.slice(0, 20)
      }, not v${CONTROL_VERSION}.`,
    );
  }
  if (v.ok) return { v: CONTROL_VERSION, id: v.id, ok: true, data: v.data ?? null };
  const e = isObject(v.error) ? v.error : {};
  return {
    v: CONTROL_VERSION,
    id: v.id,
    ok: false,
    error: {
      code: typeof e.code === "string" ? e.code.slice(0, 64) : "error",
      message: typeof e.message === "string" ? e.message.slice(0, 2000) : "no message",
    },
  };
}

/** The attach frames, both directions. */
export type SessionFrame =
  | { readonly k: "ready" }
  | { readonly k: "b"; readonly b: string }
  | { readonly k: "resize"; readonly cols: number; readonly rows: number }
  | { readonly k: "end"; readonly reason: string };

/** Parses one session frame; undefined for anything else (dropped). */
export function decodeFrame(data: Uint8Array): SessionFrame | undefined {
  let v: unknown;
  try {
    v = JSON.parse(DEC.decode(data));
  } catch {
    return undefined;
  }
  if (!isObject(v)) return undefined;
  switch (v.k) {
    case "ready":
      return { k: "ready" };
    case "b":
      return typeof v.b === "string" && /^[A-Za-z0-9+/]*={0,2}$/.test(v.b)
        ? { k: "b", b: v.b }
        : undefined;
    case "resize": {
      const ok = (n: unknown) => Number.isInteger(n) && (n as number) > 0 && (n as number) <= 1000;
      return ok(v.cols) && ok(v.rows)
        ? { k: "resize", cols: v.cols as number, rows: v.rows as number }
        : undefined;
    }
    case "end":
      return { k: "end", reason: typeof v.reason === "string" ? v.reason.slice(0, 100) : "" };
    default:
      return undefined;
  }
}

/** Encodes one session frame. */
export function encodeFrame(f: SessionFrame): Uint8Array {
  return ENC.encode(JSON.stringify(f));
}

/** Bytes to the `b` frame's base64 and back. */
export function bytesToBase64(b: Uint8Array): string {
  let s = "";
  for (let i = 0; i < b.length; i += 0x8000) {
    s += String.fromCharCode(...b.subarray(i, i + 0x8000));
  }
  return btoa(s);
}

/** The inverse of {@linkcode bytesToBase64}. */
export function base64ToBytes(s: string): Uint8Array {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

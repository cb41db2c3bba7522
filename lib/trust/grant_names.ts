/**
 * The subject, stream, bucket and durable names grants are built from (reference A §3).
 * lib/wire owns the public names; trust keeps this private copy because dependencies point
 * `trust <- wire`, and the profile tests pin both to the same strings against a real broker.
 *
 * @module
 */
import { token } from "./space_token.ts";

/** The wire names of one space, as grants need them. */
export interface SpaceNames {
  /** `cotal.<token>`: the subject root. */
  root: string;
  streams: { chat: string; dm: string; task: string; inbox: string; dlv: string };
  /** The signer rail's stream (lib/signer/rail.ts): the signer's own, none of the space's data. */
  signStream: string;
  buckets: {
    presence: string;
    channels: string;
    members: string;
    acl: string;
    membership: string;
    delivery: string;
    manager: string;
    setaside: string;
  };
}

/** The names of `space` (token applied once, here). */
export function spaceNames(space: string): SpaceNames {
  const s = token(space);
  return {
    root: `cotal.${s}`,
    streams: {
      chat: `CHAT_${s}`,
      dm: `DM_${s}`,
      task: `TASK_${s}`,
      inbox: `INBOX_${s}`,
      dlv: `DLV_${s}`,
    },
    signStream: `SIGN_${s}`,
    buckets: {
      presence: `cotal_presence_${s}`,
      channels: `cotal_channels_${s}`,
      members: `cotal_members_${s}`,
      acl: `cotal_acl_${s}`,
      membership: `cotal_membership_${s}`,
      delivery: `cotal_delivery_${s}`,
      manager: `cotal_manager_${s}`,
      setaside: `cotal_setaside_${s}`,
    },
  };
}

/** The JetStream stream that backs KV bucket `bucket`. */
export function kvStream(bucket: string): string {
  return `KV_${bucket}`;
}

/** The `<owner>-<actor>-<uid>` suffix of lifecycle-keyed durables (`-` never occurs in a token). */
export function lifecycleKey(owner: string, actor: string, uid: string): string {
  return `${owner}-${actor}-${uid}`;
}

const API = "$JS.API";

/** `$JS.API.INFO`: every JetStream client asks it first. */
export const JS_INFO = `${API}.INFO`;

/** Builders for the enumerated `$JS` grants (never `$JS.>`). */
export const js = {
  streamInfo: (st: string) => `${API}.STREAM.INFO.${st}`,
  streamCreate: (st: string) => `${API}.STREAM.CREATE.${st}`,
  streamUpdate: (st: string) => `${API}.STREAM.UPDATE.${st}`,
  streamDelete: (st: string) => `${API}.STREAM.DELETE.${st}`,
  streamPurge: (st: string) => `${API}.STREAM.PURGE.${st}`,
  /**
   * A stored message by sequence, last or next for a subject. Never Direct Get: its answer is
   * the stored bytes and headers verbatim, sent to whatever reply subject the requester names
   * (the broker checks no reply subject), so a requester could replay its own row onto any
   * subject of the space. This answer wraps the message in JSON, which no reader takes for a
   * row or a message.
   */
  msgGet: (st: string) => `${API}.STREAM.MSG.GET.${st}`,
  /** Consumer create, old bare form and the named/filtered form. */
  consumerCreate: (
    st: string,
  ) => [`${API}.CONSUMER.CREATE.${st}`, `${API}.CONSUMER.CREATE.${st}.>`],
  durableCreate: (st: string, name = ">") => `${API}.CONSUMER.DURABLE.CREATE.${st}.${name}`,
  /** The extended create subject whose trailing filter the server pins (code 10131). */
  consumerCreateFiltered: (st: string, name: string, filter: string) =>
    `${API}.CONSUMER.CREATE.${st}.${name}.${filter}`,
  /** The stream's consumers with their configurations, a page at a time. */
  consumerList: (st: string) => `${API}.CONSUMER.LIST.${st}`,
  consumerInfo: (st: string, name = ">") => `${API}.CONSUMER.INFO.${st}.${name}`,
  consumerDelete: (st: string, name = ">") => `${API}.CONSUMER.DELETE.${st}.${name}`,
  msgNext: (st: string, name = ">") => `${API}.CONSUMER.MSG.NEXT.${st}.${name}`,
  ack: (st: string, name = "*") => `$JS.ACK.${st}.${name}.>`,
  /** Flow-control replies of push consumers (KV watchers) on one stream. */
  flowControl: (st: string) => `$JS.FC.${st}.>`,
  /** A snapshot request, and the acks of its chunks (the server's flow control). */
  streamSnapshot: (st: string) => `${API}.STREAM.SNAPSHOT.${st}`,
  snapshotAck: (st: string) => `$JS.SNAPSHOT.ACK.${st}.>`,
  /** A restore request, and the chunks sent to the subject its answer names. */
  streamRestore: (st: string) => `${API}.STREAM.RESTORE.${st}`,
  restoreChunk: (st: string) => `$JS.SNAPSHOT.RESTORE.${st}.>`,
} as const;

/** Every verb a KV reader needs: bind, get, watch, and watcher cleanup. */
export function kvRead(bucket: string): string[] {
  const st = kvStream(bucket);
  return [
    js.streamInfo(st),
    js.msgGet(st),
    ...js.consumerCreate(st),
    js.consumerInfo(st),
    js.consumerDelete(st),
    js.flowControl(st),
  ];
}

/**
 * A consumer-less watch of a bucket (lib/endpoint/bucket_watch.ts): bind, a stored-message get to walk
 * its rows, and a subscription to its writes. No consumer create: a credential that may create
 * one may aim its deliveries at any subject (the broker does not check a deliver subject).
 */
export function kvWatch(bucket: string): { pub: string[]; sub: string[] } {
  const st = kvStream(bucket);
  return {
    pub: [js.streamInfo(st), js.msgGet(st)],
    sub: [`$KV.${bucket}.>`],
  };
}

/** A point read of a KV bucket (bind and get) without a watch. */
export function kvGet(bucket: string): string[] {
  const st = kvStream(bucket);
  return [js.streamInfo(st), js.msgGet(st)];
}

/** The write subject of `key` (or a key pattern) in `bucket`. */
export function kvKey(bucket: string, key: string): string {
  return `$KV.${bucket}.${key}`;
}

/**
 * The signer's rail (lib/signer): a caller asks on `<root>.sign.req.<owner>.<actor>.<nonce>`,
 * naming itself (the broker lets each caller publish only under its own name), and the answer
 * comes on `<root>.sign.reply.<owner>.<actor>.<nonce>` (derived from the request's subject,
 * never from a reply subject the caller names).
 */
export const signRail = {
  request: (root: string, token: string, owner: string, actor: string, nonce: string) =>
    `${root}.sign.req.${token}.${owner}.${actor}.${nonce}`,
  reply: (root: string, token: string, owner: string, actor: string, nonce: string) =>
    `${root}.sign.reply.${token}.${owner}.${actor}.${nonce}`,
  /**
   * The rail token a cred's publish grants carry (lib/trust/sign_rail_token.ts), or undefined
   * when the cred may not reach the rail.
   */
  tokenIn: (root: string, pubAllow: readonly string[] | undefined): string | undefined => {
    const prefix = `${root}.sign.req.`;
    for (const s of pubAllow ?? []) {
      if (!s.startsWith(prefix)) continue;
      const t = s.slice(prefix.length).split(".")[0];
      if (/^[0-9a-f]{32}$/.test(t)) return t;
    }
    return undefined;
  },
} as const;

/**
 * The operator's everyday operations on a running root: minting a scoped cred from the root's
 * signer, sending one text message, and tailing a space's channels.
 *
 * @module
 */
import { brokerNotRunning } from "./stack.ts";
import { abortableSleep } from "../abortable_sleep.ts";
import { cotalCommand } from "../cli/mod.ts";
import { headersOf } from "../nats/mod.ts";
import type { NatsConnection } from "nats";
import { CotalError, isCotalError } from "../errors.ts";
import { safeText } from "../safe_text.ts";
import { isProfile, mintCreds, newIdentity, type Profile } from "../trust/mod.ts";
import {
  bindKv,
  bucketNames,
  buildMessage,
  chatReadFilter,
  connectBroker,
  decodeMessage,
  deprovisionAgent,
  type DeprovisionResult,
  errorText,
  isNotFound,
  liveAclUids,
  parsePrincipalId,
  provisionAgent,
  publishMessage,
  streamNames,
  subjectRoot,
  svcDurableName,
} from "../wire/mod.ts";
import { workspaceSecretStore } from "../workspace/mod.ts";
import { deliveryRequest } from "../delivery/mod.ts";
import { isReservedAgentName } from "../manager/mod.ts";
import { runningBroker } from "./space.ts";
import { loadSpaceAccount, readSpaceIndex } from "./trust_state.ts";

/** The local operator's principal: `local.<actor>`. */
export function operatorPrincipal(actor: string) {
  return { owner: "local", actor };
}

/** Options for {@linkcode mintForRoot}. */
export interface RootMintOptions {
  profile: string;
  actor?: string;
  expiresInSeconds?: number;
  lifecycleUid?: string;
  role?: string;
  allowSubscribe?: string[];
  allowPublish?: string[];
}

/** The signer of one of a root's spaces, or `space_unknown` naming how to add it. */
async function rootSigner(root: string, space: string) {
  const account = await loadSpaceAccount(workspaceSecretStore(root), space);
  if (!account) throw await spaceUnknown(root, space);
  return { space, account: account.account };
}

/**
 * `space_unknown` for a space a root does not serve, naming the ones it does first: a typo in
 * `--space` is likelier than a space still to add (newcomer pass 11 was told to add its typo).
 */
export async function spaceUnknown(root: string, space: string): Promise<CotalError> {
  const { spaces } = await readSpaceIndex(root).catch(() => ({ spaces: [] as string[] }));
  const add = `add it with '${cotalCommand()} space add ${space}'`;
  return new CotalError(
    "space_unknown",
    spaces.length
      ? `Space '${space}' has no account under ${root}, which serves ${
        spaces.map((s) => `'${s}'`).join(", ")
      }: pass --space with one of them, or ${add}.`
      : `Space '${space}' has no account under ${root}; ${add}.`,
  );
}

/** Mints a cred for one of a root's spaces from the root's own signer. */
export async function mintForRoot(
  root: string,
  space: string,
  opts: RootMintOptions,
): Promise<string> {
  if (!isProfile(opts.profile)) {
    throw new CotalError(
      "usage",
      `'${opts.profile}' is not a Cotal profile; see 'cotal mint --help' for the list.`,
    );
  }
  return await mintCreds(
    await rootSigner(root, space),
    await newIdentity(),
    opts.profile as Profile,
    {
      principal: operatorPrincipal(opts.actor ?? "operator"),
      expiresInSeconds: opts.expiresInSeconds,
      lifecycleUid: opts.lifecycleUid,
      role: opts.role,
      allowSubscribe: opts.allowSubscribe,
      allowPublish: opts.allowPublish,
    },
  );
}

/**
 * An agent cred for a member the operator runs by hand (`cotal mint --profile agent
 * --provision`): its durables and ACL row made on the root's running broker, as `cotal spawn`
 * makes them, then the cred, whose grants follow from the same role and channels.
 */
export async function provisionForRoot(
  root: string,
  space: string,
  opts: {
    actor: string;
    lifecycleUid: string;
    role?: string;
    channels: string[];
    expiresInSeconds?: number;
  },
  warn: (line: string) => void = (l) => console.error(l),
): Promise<string> {
  if (isReservedAgentName(opts.actor)) {
    throw new CotalError(
      "name_reserved",
      `The name ${
        JSON.stringify(opts.actor)
      } is reserved for the mesh itself; pick another --actor.`,
    );
  }
  const live = await runningBroker(root);
  if (!live) {
    throw new CotalError(
      "broker_not_running",
      `--provision makes the agent's durables on the running broker, and ${root} runs none; start it with '${cotalCommand()} up --root ${root}'.`,
    );
  }
  const auth = await rootSigner(root, space);
  const provisioner = await mintCreds(auth, newIdentity(), "provisioner");
  const p = await provisionAgent({
    servers: live.url,
    creds: provisioner,
    space,
    auth,
    identity: newIdentity(),
    principal: operatorPrincipal(opts.actor),
    lifecycleUid: opts.lifecycleUid,
    ...(opts.channels.length
      ? {
        subscribe: opts.channels,
        allowSubscribe: opts.channels,
        allowPublish: opts.channels.filter((c) => !/[*>]/.test(c)),
      }
      : {}),
    ...(opts.role ? { role: opts.role } : {}),
    ...(opts.expiresInSeconds ? { expiresInSeconds: opts.expiresInSeconds } : {}),
  }).catch((err) => {
    // The library names its own function; the operator's way out is the command.
    if (!isCotalError(err, "lifecycle_still_live")) throw err;
    const uids = /live lifecycle ([^;]+);/.exec(err.message)?.[1]?.split(",")[0].trim() ?? "<uid>";
    throw new CotalError(
      "lifecycle_still_live",
      `local.${opts.actor} still has a live lifecycle (${uids}): end it with ` +
        `'${cotalCommand()} deprovision ${opts.actor} --lifecycle ${uids}', or provision ` +
        `another --actor.`,
    );
  });
  await joinDurably(live.url, space, operatorPrincipal(opts.actor), p.creds, opts.channels, warn);
  return p.creds;
}

/**
 * A provisioned member's durable memberships, made as the member right away: posts sent before
 * it first starts are then copied to it (fault pass 12: a member whose first start made them
 * missed every post sent before). A channel the daemon does not take durably (a wildcard, a
 * channel whose class is not durable) is left to the member's own join; one the daemon does not
 * answer for is said through `warn`, and the member's first start asks again.
 */
async function joinDurably(
  servers: string,
  space: string,
  member: { owner: string; actor: string },
  creds: string,
  channels: readonly string[],
  warn: (line: string) => void,
): Promise<void> {
  const concrete = channels.filter((c) => !/[*>]/.test(c));
  if (!concrete.length) return;
  const nc = await connectBroker({ servers, creds }, { name: "cotal provision" });
  try {
    for (const channel of concrete) {
      try {
        await deliveryRequest(nc, space, member, "durableJoin", { channel }, {
          timeoutMs: 10_000,
        });
      } catch (err) {
        warn(
          `warning: #${channel} is not kept for ${member.owner}.${member.actor} until it first ` +
            `starts (the delivery daemon said: ${
              safeText(errorText(err))
            }); posts sent before then are ` +
            `not copied to it.`,
        );
      }
    }
  } finally {
    await nc.close().catch(() => {});
  }
}

/**
 * Undoes `mint --provision`: removes the durables and the ACL row of `local.<actor>`'s lifecycle
 * `lifecycleUid` on the running broker (what the member's creds then reach is nothing; the creds
 * themselves expire on their own).
 */
export async function deprovisionForRoot(
  root: string,
  space: string,
  actor: string,
  lifecycleUid: string,
): Promise<DeprovisionResult> {
  const live = await runningBroker(root);
  if (!live) {
    throw new CotalError(
      "broker_not_running",
      `Deprovisioning removes the agent's durables on the running broker, and ${root} runs none; start it with '${cotalCommand()} up --root ${root}'.`,
    );
  }
  const auth = await rootSigner(root, space);
  const principal = operatorPrincipal(actor);
  const creds = await mintCreds(auth, newIdentity(), "deprovisioner", {
    deprovisionTarget: { ...principal, lifecycleUid },
  });
  return await deprovisionAgent({ servers: live.url, creds, space, principal, lifecycleUid });
}

/** Connects to a root's running broker as a short-lived operator-side profile. */
export async function connectAs(
  root: string,
  space: string,
  profile: Profile,
  actor = "operator",
): Promise<NatsConnection> {
  const live = await runningBroker(root);
  if (!live) {
    throw await brokerNotRunning(root);
  }
  const creds = await mintForRoot(root, space, { profile, actor, expiresInSeconds: 300 });
  return await connectBroker({ servers: live.url, creds }, { name: `cotal ${profile}` });
}

/**
 * One request on a space's delivery-admin rail (`setAside`, `health`, ...), asked as the local
 * `actor` with a one-minute control-caller cred of the root.
 */
export async function deliveryAdmin(
  root: string,
  space: string,
  url: string,
  op: string,
  opts: { actor?: string; timeoutMs?: number } = {},
): Promise<unknown> {
  const actor = opts.actor ?? "operator";
  const creds = await mintForRoot(root, space, {
    profile: "control-caller",
    actor,
    expiresInSeconds: 60,
  });
  const nc = await connectBroker({ servers: url.split(","), creds });
  try {
    return await deliveryRequest(nc, space, { owner: "local", actor }, op, {}, {
      service: "delivery-admin",
      timeoutMs: opts.timeoutMs ?? 10_000,
    });
  } finally {
    await nc.close();
  }
}

/** Where a message goes: exactly one of a channel, a peer (`owner.actor`) or a role. */
export interface SendTarget {
  channel?: string;
  to?: string;
  role?: string;
}

/**
 * Whether `local.<actor>` has a live agent in `space` (a live ACL row): a send `--as` it speaks
 * in that agent's name, which its receivers cannot tell from its own.
 */
export async function isLiveAgent(root: string, space: string, actor: string): Promise<boolean> {
  const nc = await connectAs(root, space, "provisioner");
  try {
    const jsm = await nc.jetstreamManager();
    const acl = bucketNames(space).acl;
    const p = parsePrincipalId(`local.${actor}`, { anyOwner: true });
    return (await liveAclUids(jsm, await bindKv(nc, acl), acl, p)).length > 0;
  } finally {
    await nc.close();
  }
}

/**
 * Refuses a DM to a principal with no live lifecycle, or a task to a role no agent was ever
 * given: DM and TASK keep only what a durable waits for, so the broker would acknowledge it and
 * keep nothing (docs/SPEC.md §4). Asked with a provisioner cred of the root.
 */
export async function assertRecipient(
  root: string,
  space: string,
  target: SendTarget,
): Promise<void> {
  const nc = await connectAs(root, space, "provisioner");
  try {
    const jsm = await nc.jetstreamManager();
    if (target.to !== undefined) {
      // An agent's name as spawn and ps print it (`upper_1`) is the local owner's actor.
      if (!target.to.includes(".") && /^[A-Za-z0-9_-]{1,64}$/.test(target.to)) {
        throw new CotalError(
          "usage",
          `'${target.to}' is not a principal: a DM goes to <owner>.<actor>, and an agent or ` +
            `session named ${target.to} is local.${target.to} (--to local.${target.to}).`,
        );
      }
      const p = parsePrincipalId(target.to, { anyOwner: true });
      // Rows read one by one: a member who left has a purge marker where its row was.
      const acl = bucketNames(space).acl;
      const live = await liveAclUids(jsm, await bindKv(nc, acl), acl, p);
      if (live.length === 0) {
        throw new CotalError(
          "recipient_unknown",
          `${target.to} has no live agent in space '${space}', so a DM to it would not be ` +
            `kept; check the name with 'cotal ps', or spawn it first.`,
        );
      }
      return;
    }
    try {
      await jsm.consumers.info(streamNames(space).task, svcDurableName(target.role!));
    } catch (err) {
      if (!isNotFound(err)) throw err;
      throw new CotalError(
        "role_unknown",
        `No agent in space '${space}' was ever given the role '${target.role}', so a task to it ` +
          `would not be kept; spawn one with 'cotal spawn --role ${target.role} ...' first.`,
      );
    }
  } finally {
    await nc.close();
  }
}

/** Sends one text message as the local operator; returns its id and stream sequence. */
export async function sendText(
  root: string,
  space: string,
  target: SendTarget,
  text: string,
  actor = "operator",
): Promise<{ id: string; seq: number; stream: string; note?: string }> {
  const given = [target.channel, target.to, target.role].filter((v) => v !== undefined);
  if (given.length !== 1) {
    throw new CotalError(
      "usage",
      "Say where the message goes with exactly one of --channel, --to or --role.",
    );
  }
  if (text.trim() === "") {
    throw new CotalError("usage", "The message is empty; give its text after the flags.");
  }
  if (target.channel === undefined) await assertRecipient(root, space, target);
  const note = target.channel === undefined
    ? undefined
    : await newChannelNote(root, space, target.channel).catch(() => undefined);
  const nc = await connectAs(root, space, "operator", actor);
  try {
    const msg = buildMessage({
      space,
      from: { id: `local.${actor}`, name: actor },
      channel: target.channel,
      to: target.to,
      toService: target.role,
      text,
    });
    const ack = await publishMessage(nc, msg);
    return { id: msg.id, seq: ack.seq, stream: ack.stream, ...(note ? { note } : {}) };
  } finally {
    await nc.close();
  }
}

/** The most channel subjects a typo check reads. */
const CHANNEL_SCAN_MAX = 10_000;

/**
 * A note when `channel` has never had a post in the space's retained history, naming the
 * channels closest to it: a post there is kept, but nobody reads a typo (newcomer pass 11 sent
 * to #genral without a word). Undefined when the channel is known.
 */
async function newChannelNote(
  root: string,
  space: string,
  channel: string,
): Promise<string | undefined> {
  const nc = await connectAs(root, space, "provisioner");
  try {
    return await channelNote(nc, space, channel);
  } finally {
    await nc.close();
  }
}

async function channelNote(
  nc: NatsConnection,
  space: string,
  channel: string,
): Promise<string | undefined> {
  const jsm = await nc.jetstreamManager();
  const chat = streamNames(space).chat;
  const own = await jsm.streams.info(chat, { subjects_filter: chatReadFilter(space, channel) });
  // `num_subjects` counts the whole stream's; the filtered map is what this channel has.
  if (Object.keys(own.state.subjects ?? {}).length > 0) return undefined;
  const all = await jsm.streams.info(chat, { subjects_filter: `${subjectRoot(space)}.chat.>` });
  const known = new Set<string>();
  for (const subject of Object.keys(all.state.subjects ?? {}).slice(0, CHANNEL_SCAN_MAX)) {
    known.add(subject.split(".").slice(5).join("."));
  }
  const near = [...known].filter((c) => editDistance(c, channel) <= 2).sort().slice(0, 3);
  return `note: #${channel} has no earlier post in this space's history${
    near.length ? `; did you mean ${near.map((c) => `#${c}`).join(", ")}?` : ""
  } (the post is kept: whoever joins #${channel} reads it)`;
}

/** Levenshtein distance, for short names only. */
function editDistance(a: string, b: string): number {
  if (Math.abs(a.length - b.length) > 2) return 3;
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = row;
  }
  return prev[b.length];
}

/** One line of `cotal tail`. */
export interface TailLine {
  ts: number;
  channel: string;
  from: string;
  text: string;
  id: string;
}

/**
 * How long `tail` waits for a broker that went away (a restart the watchdog makes is back in
 * well under a second) before it gives up, saying so.
 */
export const TAIL_BROKER_WAIT_MS = 60_000;

/** Options of {@linkcode tail}. */
export interface TailOptions {
  signal?: AbortSignal;
  /** Stop after this many lines. */
  max?: number;
  /** Called once the first subscription is in place. */
  ready?: () => void;
  /** Called when the connection ended and `tail` dials again, and when it is back. */
  gap?: (what: "lost" | "back", why?: string) => void;
}

/**
 * Streams a space's channel traffic as an observer until `signal` aborts (or `max` lines).
 * Malformed or forged messages are skipped, never printed. A connection that ends (a broker
 * restart, the observer cred's expiry) is dialled again with a fresh cred; a broker gone for
 * {@linkcode TAIL_BROKER_WAIT_MS} ends the tail with its error. Newcomer pass 9: `tail` ended
 * silently, exit 0, at a broker restart the watchdog healed at once.
 */
export async function tail(
  root: string,
  space: string,
  onLine: (line: TailLine) => void,
  opts: TailOptions = {},
): Promise<number> {
  let n = 0;
  let started = false;
  let lostAt: number | undefined;
  while (!opts.signal?.aborted) {
    let nc: NatsConnection;
    try {
      nc = await connectAs(root, space, "observer");
    } catch (err) {
      if (!started || Date.now() - (lostAt ?? Date.now()) > TAIL_BROKER_WAIT_MS) throw err;
      await abortableSleep(500, opts.signal ?? new AbortController().signal);
      continue;
    }
    try {
      // The client's own reconnects (the broker back within its wait) are said too.
      void (async () => {
        for await (const st of nc.status()) {
          if (st.type === "disconnect") opts.gap?.("lost", "disconnected");
          else if (st.type === "reconnect") opts.gap?.("back");
        }
      })().catch(() => {});
      const sub = nc.subscribe(`${subjectRoot(space)}.chat.>`);
      const stop = () => sub.unsubscribe();
      opts.signal?.addEventListener("abort", stop, { once: true });
      await nc.flush();
      if (!started) opts.ready?.();
      else opts.gap?.("back");
      started = true;
      lostAt = undefined;
      try {
        for await (const m of sub) {
          const d = decodeMessage(m.subject, m.data, { space, headers: headersOf(m) });
          if (!d.ok) continue;
          const text = d.message.parts.map((p) => p.kind === "text" ? p.text : `[${p.kind}]`)
            .join(" ");
          onLine({
            ts: d.message.ts,
            channel: d.message.channel ?? "",
            from: d.message.from.id,
            text,
            id: d.message.id,
          });
          if (++n === opts.max) return n;
        }
      } finally {
        opts.signal?.removeEventListener("abort", stop);
      }
      if (opts.signal?.aborted) break;
      // The connection ended under us (its reconnects failed, or its cred expired): dial again
      // with a fresh cred.
      lostAt = Date.now();
    } finally {
      await nc.close().catch(() => {});
    }
  }
  return n;
}

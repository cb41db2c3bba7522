/**
 * `cotal join`: the operator joins a space interactively as `local.<actor>` — a real member with
 * presence, its own durables and a bounded agent cred, removed again when it leaves. Lines read
 * are posted to the current channel; `/`-commands do the rest.
 */
import { brokerNotRunning } from "./stack.ts";
import { CotalEndpoint, type CotalMessageEvent } from "../endpoint/mod.ts";
import { safeText } from "../safe_text.ts";
import { CotalError, isCotalError } from "../errors.ts";
import { type MintAuth, mintCreds, newIdentity, newLifecycleUid } from "../trust/mod.ts";
import {
  bindKv,
  bucketNames,
  connectBroker,
  deprovisionAgent,
  liveAclUids,
  liveEntry,
  provisionAgent,
} from "../wire/mod.ts";
import { workspaceSecretStore } from "../workspace/mod.ts";
import { assertRecipient, spaceUnknown } from "./ops.ts";
import { runningBroker } from "./space.ts";
import { loadSpaceAccount } from "./trust_state.ts";

/** Options for {@linkcode join}. */
export interface JoinOptions {
  root: string;
  space: string;
  actor: string;
  /** Channels joined at start; the first is current. Posting is granted on exactly these. */
  channels: string[];
  /** Lines typed by the operator; the session ends when they end or on `/quit`. */
  lines: AsyncIterable<string>;
  print: (line: string) => void;
}

export const JOIN_HELP = [
  "text            post to the current channel",
  "/join <ch>      read a channel; lines go to it when --channel named it, else stay where they were",
  "/leave <ch>     leave a channel (your lines then go to another you may post to, or nowhere)",
  "/dm <o.a> text  direct message one peer",
  "/task <role> t  hand a task to a role (anycast)",
  "/who            who is online",
  "/quit           leave the space",
].join("\n");

/** How much of a data part a line shows. */
const DATA_SHOWN = 120;

/** A part as one line shows it: text as is, data as its JSON (cut short), others by kind. */
function partText(p: CotalMessageEvent["message"]["parts"][number]): string {
  if (p.kind === "text") return String(p.text);
  if (p.kind !== "data") return `[${p.kind}]`;
  const json = JSON.stringify(p.data) ?? "null";
  return `[data ${json.length > DATA_SHOWN ? `${json.slice(0, DATA_SHOWN)}...` : json}]`;
}

function describe(ev: CotalMessageEvent): string {
  const m = ev.message;
  const text = m.parts.map(partText).join(" ");
  const where = m.channel !== undefined
    ? `#${m.channel}`
    : m.toService !== undefined
    ? `@${m.toService}`
    : "(dm)";
  // An escape in it is shown, not acted on; its own lines are indented under the first, so no
  // line of a message can pass for another message.
  return safeText(`${ev.meta.historical ? "[history] " : ""}${where} ${m.from.id}: ${text}`, {
    lines: true,
  }).replace(/\r?\n/g, "\n    ");
}

/** What a presence line adds to an id: the card's name when it says more, role, description. */
function who(card: { id: string; name: string; role?: string; description?: string }): string {
  const said = [
    card.name !== card.id.split(".").pop() ? card.name : undefined,
    card.role ? `role ${card.role}` : undefined,
    card.description,
  ].filter((x): x is string => !!x);
  return said.length ? ` (${safeText(said.join(", ").slice(0, 160))})` : "";
}

/** How long a session whose input ended waits for the replies of the tasks it sent. */
export const TASK_REPLY_WAIT_MS = 30_000;

/** Runs one interactive session; resolves with the number of lines posted. */
export async function join(opts: JoinOptions): Promise<number> {
  if (opts.channels.length === 0) {
    throw new CotalError("usage", "Name at least one channel to join with --channel <name>.");
  }
  const { live, auth, principal, lifecycleUid, creds, resumed } = await provisionSession(opts);
  const ep = new CotalEndpoint({
    space: opts.space,
    servers: live.url,
    card: { name: opts.actor, owner: "local", actor: opts.actor },
    lifecycleUid,
    creds,
    channels: opts.channels,
  });
  // Tasks sent in this session whose reply has not come: at the end of the input the session
  // waits for them (bounded), so a piped '/task' is not cut off from its answer.
  const awaiting = new Set<string>();
  let answered = () => {};
  // What arrives while the session starts is printed after the line saying it joined.
  let early: string[] | undefined = [];
  const print = (line: string): void => {
    if (early) early.push(line);
    else opts.print(line);
  };
  ep.addEventListener("message", (ev) => {
    const replyTo = ev.message.replyTo;
    if (replyTo !== undefined && awaiting.delete(replyTo)) answered();
    print(describe(ev));
    if (ev.delivery.durable && !ev.delivery.settled) ev.delivery.ack().catch(() => {});
  });
  ep.addEventListener("presence", (ev) => {
    if (ev.change === "update") return;
    const change = ev.change === "join" ? "is online" : "went offline";
    print(`* ${ev.presence.card.id} ${change}${who(ev.presence.card)}`);
  });
  ep.addEventListener("warning", (ev) => print(`! ${ev.error.message}`));
  let current: string | undefined = opts.channels[0];
  let posted = 0;
  let quit = false;
  await ep.start();
  opts.print(
    `joined space '${opts.space}' as local.${opts.actor} in #${current}; /help for commands`,
  );
  if (resumed) {
    opts.print(
      `(took over the session local.${opts.actor} left without its cleanup: what was sent to it since follows)`,
    );
  }
  for (const line of early) opts.print(line);
  early = undefined;
  try {
    for await (const raw of opts.lines) {
      const line = raw.trim();
      if (line === "") continue;
      try {
        if (!line.startsWith("/")) {
          if (current === undefined) {
            opts.print("! no channel to post to: /join one you may post to, or /dm, /task");
            continue;
          }
          await ep.multicast(line, { channel: current });
          posted++;
          continue;
        }
        const [cmd, arg, ...rest] = line.split(/\s+/);
        if (cmd === "/quit") {
          quit = true;
          break;
        } else if (cmd === "/help") opts.print(JOIN_HELP);
        else if (cmd === "/who") {
          opts.print(ep.getRoster().map((p) => `${p.card.id} ${p.status}`).join("\n") || "nobody");
        } else if (cmd === "/join" && arg) {
          await ep.joinChannel(arg);
          // Lines go to a channel this session may post to; another one is only read here.
          if (opts.channels.includes(arg)) {
            current = arg;
            opts.print(`reading and posting in #${arg}`);
          } else {
            opts.print(
              `reading #${arg}; your lines still go to #${current} (posting to #${arg} needs 'cotal join --channel ${arg}')`,
            );
          }
        } else if (cmd === "/leave" && arg) {
          current = await leave(ep, arg, current, opts);
        } else if (cmd === "/dm" && arg && rest.length) {
          // As cotal send: a DM nobody will read is refused, not queued into nothing.
          // Said in this session's words: /dm, not the CLI's --to (newcomer pass 10).
          await assertRecipient(opts.root, opts.space, { to: arg }).catch((err) => {
            throw isCotalError(err, "usage")
              ? new CotalError("usage", err.message.replace(/\(--to (\S+)\)/, "(/dm $1 <text>)"))
              : err;
          });
          await ep.unicast(arg, rest.join(" "));
          posted++;
          opts.print(`-> DM to ${safeText(arg)} sent`);
        } else if (cmd === "/task" && arg && rest.length) {
          await assertRecipient(opts.root, opts.space, { role: arg });
          awaiting.add((await ep.anycast(arg, rest.join(" "))).id);
          posted++;
          opts.print(`-> task to role ${safeText(arg)} sent; its reply shows here`);
        } else opts.print(`? unknown or incomplete command '${line}'; /help lists them`);
      } catch (err) {
        opts.print(`! ${(err as Error).message}`);
      }
    }
    if (!quit && awaiting.size > 0) {
      await awaitReplies(awaiting, (fn) => (answered = fn), opts.print);
    }
  } finally {
    await ep.stop();
    const deprov = await mintCreds(auth, newIdentity(), "deprovisioner", {
      deprovisionTarget: { ...principal, lifecycleUid },
    });
    await deprovisionAgent({
      servers: live.url,
      creds: deprov,
      space: opts.space,
      principal,
      lifecycleUid,
    }).catch((err) => opts.print(`! could not remove this session's durables: ${err.message}`));
  }
  return posted;
}

/**
 * `/leave <channel>`: stops reading it, and says where the session's lines go now: a channel
 * left no longer takes them (newcomer pass 8: they still did, unsaid), another joined one this
 * session may post to does, else nothing until a /join. Returns the channel lines go to.
 */
async function leave(
  ep: CotalEndpoint,
  channel: string,
  current: string | undefined,
  opts: JoinOptions,
): Promise<string | undefined> {
  const { left } = await ep.leaveChannel(channel);
  if (!left) {
    opts.print(`you were not reading #${safeText(channel)}`);
    return current;
  }
  if (channel !== current) {
    opts.print(`left #${safeText(channel)}`);
    return current;
  }
  const other = opts.channels.find((c) => c !== channel && ep.joinedChannels().includes(c));
  opts.print(
    other
      ? `left #${safeText(channel)}; your lines now go to #${other}`
      : `left #${
        safeText(channel)
      }; your lines go nowhere until you /join a channel you may post to`,
  );
  return other;
}

/**
 * The session's member: a fresh lifecycle of `local.<actor>` provisioned on the running broker
 * (its durables, ACL row and a 12-hour cred), or a refusal naming what is missing.
 */
async function provisionSession(opts: JoinOptions) {
  const live = await runningBroker(opts.root);
  if (!live) {
    throw await brokerNotRunning(opts.root);
  }
  const account = await loadSpaceAccount(workspaceSecretStore(opts.root), opts.space);
  if (!account) throw await spaceUnknown(opts.root, opts.space);
  const auth = { space: opts.space, account: account.account };
  const principal = { owner: "local", actor: opts.actor };
  const provisioner = await mintCreds(auth, newIdentity(), "provisioner");
  // A session that ended without its cleanup (killed) left its lifecycle: DMs sent to it since
  // were accepted and wait in its DM durable. This session takes it over and reads them.
  const left = await leftSession(live.url, auth, opts.space, principal);
  const lifecycleUid = left ?? newLifecycleUid();
  const agent = await provisionAgent({
    servers: live.url,
    creds: provisioner,
    space: opts.space,
    principal,
    lifecycleUid,
    auth,
    identity: newIdentity(),
    subscribe: opts.channels,
    allowSubscribe: [">"],
    allowPublish: opts.channels,
    expiresInSeconds: 12 * 3600,
  });
  return { live, auth, principal, lifecycleUid, creds: agent.creds, resumed: left !== undefined };
}

/**
 * The lifecycle an earlier session of `principal` left (its ACL row still live) when nobody is
 * present under that name now, or undefined. One present is another live session: refused.
 */
async function leftSession(
  url: string,
  auth: MintAuth,
  space: string,
  principal: { owner: string; actor: string },
): Promise<string | undefined> {
  const creds = await mintCreds(auth, newIdentity(), "provisioner", { expiresInSeconds: 60 });
  const nc = await connectBroker({ servers: url.split(","), creds }, { name: "cotal join" });
  try {
    const jsm = await nc.jetstreamManager();
    const b = bucketNames(space);
    const id = `${principal.owner}.${principal.actor}`;
    const uids = await liveAclUids(jsm, await bindKv(nc, b.acl), b.acl, principal);
    if (uids.length !== 1) return undefined;
    // A presence row lives while its session beats (it ages out 6 s after a kill).
    if (await presenceLive(url, auth, b.presence, id)) {
      throw new CotalError(
        "session_live",
        `${id} is joined in another session now; join under another name (--as), or end ` +
          `that one first.`,
      );
    }
    return uids[0];
  } finally {
    await nc.close();
  }
}

/**
 * Whether `id`'s presence row is live, read with an observer cred (the provisioner may not read
 * presence): a row deleted by a session that then died before its cleanup is no session.
 */
async function presenceLive(
  url: string,
  auth: MintAuth,
  bucket: string,
  id: string,
): Promise<boolean> {
  const creds = await mintCreds(auth, newIdentity(), "observer", { expiresInSeconds: 60 });
  const nc = await connectBroker({ servers: url.split(","), creds }, { name: "cotal join" });
  try {
    return (await liveEntry(await bindKv(nc, bucket), id, bucket)) !== undefined;
  } finally {
    await nc.close();
  }
}

/**
 * Waits (at most {@linkcode TASK_REPLY_WAIT_MS}) for the replies of the tasks still in
 * `awaiting`; `onAnswer` is given the check each reply runs.
 */
async function awaitReplies(
  awaiting: Set<string>,
  onAnswer: (check: () => void) => void,
  print: (line: string) => void,
): Promise<void> {
  const n = awaiting.size;
  print(`waiting up to ${TASK_REPLY_WAIT_MS / 1000} s for ${n} task repl${n === 1 ? "y" : "ies"}`);
  const done = new Promise<void>((r) => onAnswer(() => awaiting.size === 0 && r()));
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<void>((r) => (timer = setTimeout(r, TASK_REPLY_WAIT_MS)));
  await Promise.race([done, late]);
  clearTimeout(timer);
  if (awaiting.size > 0) {
    print(
      `! ${awaiting.size} task(s) not answered within ${
        TASK_REPLY_WAIT_MS / 1000
      } s; their replies come to this session, which ends now (end a session with /quit not to wait)`,
    );
  }
}

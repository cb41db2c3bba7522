import { parseCreds } from "../../nats/creds.ts";
import { decodeJwtUnverified } from "../../nats/jwt.ts";
import { newLifecycleUid } from "../../wire/names.ts";
import { writeFileAtomic } from "../atomic_file.ts";
import { safeText } from "../../cli/terminal.ts";
import { defineCommand, denoIo, JSON_FLAG, printResult } from "../../cli/mod.ts";
import { CotalError } from "../../errors.ts";
import { registry } from "../../registry.ts";
import { PROFILES } from "../../trust/mod.ts";
import { assertValidSpaceName } from "../names.ts";
import { mintForRoot, sendText, tail } from "../ops.ts";
import { join } from "../join.ts";
import { TextLineStream } from "../../cli/lines.ts";
import { resolveMeshRoot, ROOT_FLAG } from "./common.ts";

const SPACE_FLAG = {
  space: { type: "string", default: "default", description: "the space" },
} as const;

function parseTtl(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  if (!/^\d+$/.test(text)) {
    throw new CotalError(
      "usage",
      `--ttl must be a whole number of seconds, not '${text}'; each profile caps it (see docs/SECURITY.md).`,
    );
  }
  return Number(text);
}

/** `cotal mint`: a scoped cred for one profile, from this root's signer. */
export const mintCommand = defineCommand({
  kind: "command",
  name: "mint",
  summary: "mint a scoped credential for a profile (bounded lifetime)",
  flags: {
    ...ROOT_FLAG,
    ...SPACE_FLAG,
    profile: {
      type: "string",
      required: true,
      description: `one of: ${PROFILES.join(", ")}`,
    },
    actor: { type: "string", description: "the actor name (owner is 'local')" },
    lifecycle: {
      type: "string",
      value: "uid",
      description: "the agent profile's lifecycle uid (default: a new one, printed)",
    },
    ttl: { type: "string", value: "seconds", description: "lifetime; capped by the profile" },
    out: {
      type: "string",
      value: "file",
      description: "write the creds file here (0600; never over an existing file)",
    },
  },
  async run({ values }) {
    const space = assertValidSpaceName(values.space);
    const root = await resolveMeshRoot(values.root, space);
    // An agent cred names its lifecycle: a given one, or a new one the operator is told.
    const lifecycleUid = values.profile === "agent"
      ? values.lifecycle ?? newLifecycleUid()
      : values.lifecycle;
    const creds = await mintForRoot(root, space, {
      profile: values.profile,
      actor: values.actor,
      expiresInSeconds: parseTtl(values.ttl),
      ...(lifecycleUid ? { lifecycleUid } : {}),
    });
    if (values.out) {
      await writeFileAtomic(values.out, creds, { noClobber: true, what: "--out" });
      console.error(`wrote ${safeText(values.out)}`);
    } else {
      await Deno.stdout.write(new TextEncoder().encode(creds));
    }
    // What a client needs to use it, and when it stops working.
    const { jwt } = await parseCreds(creds);
    const claims = decodeJwtUnverified(jwt);
    if (claims.exp) {
      console.error(
        `expires ${new Date(claims.exp * 1000).toISOString()} (in ${
          claims.exp - Math.floor(Date.now() / 1000)
        } s); a NATS client connects with inboxPrefix "_INBOX_${claims.sub}"`,
      );
    }
    if (values.profile === "agent" && !values.lifecycle) {
      console.error(`lifecycle uid ${lifecycleUid} (its durables are provisioned by cotal spawn)`);
    }
  },
});

/** `cotal send`: one text message as the local operator. */
export const sendCommand = defineCommand({
  kind: "command",
  name: "send",
  summary: "send a text message to a channel, a peer or a role",
  flags: {
    ...ROOT_FLAG,
    ...SPACE_FLAG,
    ...JSON_FLAG,
    channel: { type: "string", description: "post to this channel" },
    to: {
      type: "string",
      value: "owner.actor",
      description: "DM this peer (it must have a live agent: a DM to no one is not kept)",
    },
    role: {
      type: "string",
      description: "hand a task to this role (anycast; some agent must have been given it)",
    },
    as: { type: "string", default: "operator", description: "the actor to send as" },
  },
  positionals: [{ name: "text", description: "the message", required: true, variadic: true }],
  async run({ values, positionals }) {
    const space = assertValidSpaceName(values.space);
    const root = await resolveMeshRoot(values.root, space);
    const r = await sendText(
      root,
      space,
      { channel: values.channel, to: values.to, role: values.role },
      positionals.join(" "),
      values.as,
    );
    printResult(
      denoIo(),
      { json: values.json === true },
      r,
      (v) => `sent ${v.id} (${v.stream} #${v.seq})`,
    );
  },
});

/** `cotal tail`: an observer's line stream of a space's channels. */
export const tailCommand = defineCommand({
  kind: "command",
  name: "tail",
  summary: "print a space's channel messages as they arrive (Ctrl-C stops)",
  flags: {
    ...ROOT_FLAG,
    ...SPACE_FLAG,
    ...JSON_FLAG,
    count: { type: "string", value: "n", description: "stop after n messages" },
  },
  async run({ values }) {
    const space = assertValidSpaceName(values.space);
    const root = await resolveMeshRoot(values.root, space);
    const max = values.count === undefined ? undefined : Number(values.count);
    if (max !== undefined && (!Number.isInteger(max) || max < 1)) {
      throw new CotalError(
        "usage",
        `--count must be a whole number above 0, not '${values.count}'.`,
      );
    }
    const ac = new AbortController();
    const stop = () => ac.abort();
    Deno.addSignalListener("SIGINT", stop);
    try {
      await tail(root, space, (l) => {
        if (values.json) console.log(JSON.stringify(l));
        else {
          console.log(
            `${new Date(l.ts).toISOString()} #${safeText(l.channel)} ${safeText(l.from)}: ${
              safeText(l.text)
            }`,
          );
        }
      }, { signal: ac.signal, max, ready: () => console.error(`tailing space '${space}'`) });
    } finally {
      Deno.removeSignalListener("SIGINT", stop);
    }
  },
});

registry.register([mintCommand, sendCommand, tailCommand]);

function userName(): string {
  // Read at run time, never at import: a CLI row without USER must still load this module.
  try {
    const u = Deno.env.get("USER");
    if (u && /^[A-Za-z0-9_]{1,64}$/.test(u)) return u;
  } catch {
    // Not granted: fall back.
  }
  return "operator";
}

/** `cotal join`: join a space interactively as yourself. */
export const joinCommand = defineCommand({
  kind: "command",
  name: "join",
  summary: "join a space interactively as local.<actor> (lines post; /help lists commands)",
  flags: {
    ...ROOT_FLAG,
    ...SPACE_FLAG,
    as: { type: "string", description: "your actor name (default: $USER, else 'operator')" },
    channel: {
      type: "string",
      multiple: true,
      default: ["general"],
      description: "a channel to join and post to (repeatable; the first is current)",
    },
  },
  async run({ values }) {
    const space = assertValidSpaceName(values.space);
    const root = await resolveMeshRoot(values.root, space);
    const lines = Deno.stdin.readable.pipeThrough(new TextDecoderStream()).pipeThrough(
      new TextLineStream(),
    );
    await join({
      root,
      space,
      actor: values.as ?? userName(),
      channels: [...values.channel],
      lines,
      // Every line a peer's text reaches: control characters shown, never run.
      print: (l: string) => console.log(safeText(l, { lines: true })),
    });
  },
});

registry.register([joinCommand]);

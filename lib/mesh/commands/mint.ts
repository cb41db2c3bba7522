/**
 * `cotal mint` and `cotal deprovision`: scoped creds for outside clients from this root's
 * signer, and undoing a `mint --provision`.
 *
 * @module
 */
import { decodeJwtUnverified, parseCreds } from "../../nats/mod.ts";
import { assertValidLifecycleUid, newLifecycleUid } from "../../wire/mod.ts";
import { writeError, writeFileAtomic } from "../../atomic_file.ts";
import { safeText } from "../../safe_text.ts";
import { defineCommand, denoIo, JSON_FLAG, printResult } from "../../cli/mod.ts";
import { CotalError, isCotalError } from "../../errors.ts";
import { CREDENTIAL_LIFETIMES, principalFromTags, PROFILES } from "../../trust/mod.ts";
import { appendAudit, signerAuditPath } from "../../signer/mod.ts";
import { assertValidSpaceName } from "../names.ts";
import { deprovisionForRoot, mintForRoot, provisionForRoot } from "../ops.ts";
import { callerPath, localActor, resolveMeshRoot, ROOT_FLAG, SPACE_FLAG } from "./common.ts";
import { readMeshRecord } from "../stack.ts";
import { registry } from "../../registry.ts";

/** A lifetime as `mint --help` writes them: seconds, or a number with s, m, h or d. */
function parseTtl(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const m = /^(\d+)([smhd]?)$/.exec(text);
  if (!m) {
    throw new CotalError(
      "usage",
      `--ttl takes seconds or a number with s, m, h or d (3600, 90m, 12h, 1d), not '${text}'; each profile caps it (see 'cotal mint --help').`,
    );
  }
  return Number(m[1]) * { "": 1, s: 1, m: 60, h: 3600, d: 86_400 }[m[2] as "" | "s"]!;
}

/** Each profile `cotal mint` offers, with its default and longest lifetime (the frozen policy). */
function profileList(): string {
  const span = (s: number) =>
    s % 86400 === 0 ? `${s / 86400}d` : s % 3600 === 0 ? `${s / 3600}h` : `${s / 60}m`;
  return PROFILES.map((p) => {
    const { defaultTtlSeconds: d, maxTtlSeconds: max } = CREDENTIAL_LIFETIMES[p];
    return `${p} (${d === max ? span(max) : `${span(d)}, at most ${span(max)}`})`;
  }).join(", ");
}

/** Where the NATS CLI keeps its contexts (`nats context`), as it resolves the dir itself. */
function natsContextDir(): string {
  const xdg = Deno.env.get("XDG_CONFIG_HOME");
  const home = Deno.env.get("HOME");
  if (!xdg && !home) {
    throw new CotalError(
      "usage",
      "--context needs HOME or XDG_CONFIG_HOME to find the NATS CLI's contexts.",
    );
  }
  return `${xdg || `${home}/.config`}/nats/context`;
}

/** What `cotal mint` reports (`--json`, and the lines on stderr). */
export interface MintReport {
  profile: string;
  /** The cred's user public key (its JWT `sub`). */
  subject: string;
  /** Who it speaks as (`local.<actor>`), for the profiles that carry a principal. */
  principal?: string;
  /** ISO time the cred stops working. */
  expiresAt: string;
  /** The inbox prefix a NATS client must use (its grants cover only that). */
  inboxPrefix: string;
  /** Observer and admin: the one consumer it may make to read history (`hist_<subject>`). */
  historyConsumer?: string;
  lifecycleUid?: string;
  /** Where the creds were written (else they are on stdout, or in `creds` with --json). */
  out?: string;
  /** The NATS CLI context written, by path. */
  context?: string;
  creds?: string;
}

/** `cotal mint`: a scoped cred for one profile, from this root's signer. */
export const mintCommand = defineCommand({
  kind: "command",
  name: "mint",
  summary: "mint a scoped credential for a profile (bounded lifetime)",
  flags: {
    ...ROOT_FLAG,
    ...SPACE_FLAG,
    ...JSON_FLAG,
    profile: {
      type: "string",
      required: true,
      description: `one of (default lifetime): ${profileList()}`,
    },
    actor: {
      type: "string",
      description:
        "the actor name (owner is 'local'; default: agent for --profile agent, else operator)",
    },
    lifecycle: {
      type: "string",
      value: "uid",
      description: "the agent profile's lifecycle uid (default: a new one, printed)",
    },
    ttl: {
      type: "string",
      value: "time",
      description:
        "lifetime in seconds or with s, m, h, d (90m, 12h, 1d; default: the profile's, listed at --profile); capped by the profile",
    },
    provision: {
      type: "boolean",
      description: "with --profile agent: also make its durables and ACL row on the running " +
        "broker, as cotal spawn does (what a member run by hand, e.g. cotal mcp --creds, needs)",
    },
    role: { type: "string", description: "with --provision: the role whose tasks it takes" },
    channel: {
      type: "string",
      multiple: true,
      description: "with --provision: a channel it joins, reads and posts to",
    },
    out: {
      type: "string",
      value: "file",
      description: "write the creds file here (0600; an existing file only with --force)",
    },
    force: { type: "boolean", description: "replace an existing --out file or --context" },
    context: {
      type: "string",
      value: "name",
      description:
        "also write a NATS CLI context <name> (servers, creds, inbox prefix); needs --out",
    },
  },
  async run({ values }) {
    const space = assertValidSpaceName(values.space);
    const root = await resolveMeshRoot(values.root, space);
    const force = values.force === true;
    const { out, contextPath } = await mintOutputs(values.out, values.context, force);
    // An agent cred names its lifecycle: a given one, or a new one the operator is told.
    const lifecycleUid = values.profile === "agent"
      ? values.lifecycle ?? newLifecycleUid()
      : values.lifecycle;
    const provision = values.provision === true;
    if (provision && values.profile !== "agent") {
      throw new CotalError(
        "usage",
        "--provision makes an agent's durables; use it with --profile agent.",
      );
    }
    if (!provision && (values.role !== undefined || values.channel?.length)) {
      throw new CotalError(
        "usage",
        "--role and --channel shape a provisioned agent; add --provision (with --profile agent).",
      );
    }
    const creds = await (provision
      ? provisionForRoot(root, space, {
        actor: localActor(values.actor ?? "agent"),
        lifecycleUid: lifecycleUid!,
        ...(values.role ? { role: values.role } : {}),
        channels: values.channel ?? [],
        ...(parseTtl(values.ttl) ? { expiresInSeconds: parseTtl(values.ttl) } : {}),
      })
      : mintForRoot(root, space, {
        profile: values.profile,
        // One default per profile, provisioned or not (newcomer pass 12 got local.operator
        // without --provision and local.agent with it).
        actor: values.actor !== undefined
          ? localActor(values.actor)
          : values.profile === "agent"
          ? "agent"
          : undefined,
        expiresInSeconds: parseTtl(values.ttl),
        ...(lifecycleUid ? { lifecycleUid } : {}),
      })).catch((err) => {
        // A --ttl past the profile's cap is a usage mistake like any other flag's.
        throw isCotalError(err) && err.code === "invalid_lifetime"
          ? new CotalError(
            "usage",
            `--ttl: ${err.message.replace(/ ?\bexpiresInSeconds\b/g, "")}`,
          )
          : err;
      });
    const { jwt } = await parseCreds(creds);
    const claims = decodeJwtUnverified(jwt);
    // Every cred the CLI hands out goes into the space's signing trail, beside the signer's.
    const principal = principalFromTags(claims.nats.tags);
    appendAudit(signerAuditPath(root, space), {
      at: new Date().toISOString(),
      caller: "local.operator",
      via: "cli",
      ...(principal ? { principal: `${principal.owner}.${principal.actor}` } : {}),
      profile: values.profile,
      subject: claims.sub,
      ...(claims.exp && claims.iat ? { ttlSeconds: claims.exp - claims.iat } : {}),
      decision: "allowed",
    });
    const report: MintReport = {
      profile: values.profile,
      subject: claims.sub,
      ...(principal ? { principal: `${principal.owner}.${principal.actor}` } : {}),
      expiresAt: new Date((claims.exp ?? 0) * 1000).toISOString(),
      inboxPrefix: `_INBOX_${claims.sub}`,
      ...(values.profile === "observer" || values.profile === "admin"
        ? { historyConsumer: `hist_${claims.sub}` }
        : {}),
      ...(lifecycleUid ? { lifecycleUid } : {}),
    };
    if (out) {
      await writeFileAtomic(out, creds, { noClobber: !force, what: "--out" });
      report.out = out;
      if (contextPath) {
        await writeNatsContext(root, space, contextPath, { report, force });
        report.context = contextPath;
      }
    } else if (values.json) {
      report.creds = creds;
    } else {
      await Deno.stdout.write(new TextEncoder().encode(creds));
    }
    if (values.json) {
      printResult(denoIo(), { json: true }, report);
      return;
    }
    if (report.out) console.error(`wrote ${safeText(report.out)}`);
    if (report.context) {
      console.error(
        `wrote NATS CLI context ${report.context} (nats --context ${values.context} ...)`,
      );
    }
    // What a client needs to use it, and when it stops working.
    if (claims.exp) {
      console.error(
        `${values.profile} cred for ${claims.sub} expires ${report.expiresAt} (in ${
          claims.exp - Math.floor(Date.now() / 1000)
        } s); a NATS client connects with inboxPrefix "${report.inboxPrefix}"${
          report.historyConsumer
            ? ` and reads history through the one consumer it may make, ${report.historyConsumer}`
            : ""
        }`,
      );
    }
    if (values.profile === "agent" && !values.lifecycle) {
      console.error(
        provision
          ? `lifecycle uid ${lifecycleUid} (its durables are made; cotal mcp --creds needs it; ` +
            `undo with: cotal deprovision ${
              safeText(localActor(values.actor ?? "agent"))
            } --lifecycle ${lifecycleUid})`
          : `lifecycle uid ${lifecycleUid} (add --provision to make its durables, as cotal spawn does)`,
      );
    }
  },
});

/**
 * Where `mint` writes: `--out` (as the caller typed it) and `--context`'s file, each refused
 * when it exists without `--force`, `--context` without `--out` or with a bad name.
 */
async function mintOutputs(
  outFlag: string | undefined,
  context: string | undefined,
  force: boolean,
): Promise<{ out?: string; contextPath?: string }> {
  if (context !== undefined) {
    if (!outFlag) {
      throw new CotalError(
        "usage",
        "--context needs --out <file>: a context points at a creds file.",
      );
    }
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(context)) {
      throw new CotalError(
        "usage",
        `--context must be 1 to 64 letters, digits, '-' or '_', not '${safeText(context)}'.`,
      );
    }
  }
  const out = outFlag === undefined ? undefined : callerPath(outFlag);
  // Before anything is minted or provisioned (fault pass 10: --provision made the member's
  // durables, then the write failed, and the retry was refused as a live lifecycle).
  // (The context dir is made when the context is written.)
  if (
    out && !(await Deno.stat(out.replace(/\/[^/]*$/, "") || "/").catch(() => undefined))
      ?.isDirectory
  ) {
    throw writeError(out, "--out", new Deno.errors.NotFound());
  }
  // A directory is refused by the write itself, with its own sentence.
  const exists = async (path: string) =>
    (await Deno.lstat(path).catch(() => undefined))?.isDirectory === false;
  const contextPath = contextFile(context);
  for (const [flag, path] of [["--out", out], ["--context", contextPath]] as const) {
    if (path && !force && await exists(path)) {
      throw new CotalError(
        "file_exists",
        `${flag} ${
          JSON.stringify(path)
        } already exists; pass --force to replace it, or name another.`,
      );
    }
  }
  return { ...(out ? { out } : {}), ...(contextPath ? { contextPath } : {}) };
}

function contextFile(context: string | undefined): string | undefined {
  return context !== undefined ? `${natsContextDir()}/${context}.json` : undefined;
}

/** Writes a NATS CLI context for the cred `mint` wrote to `report.out`. */
async function writeNatsContext(
  root: string,
  space: string,
  contextPath: string,
  { report, force }: { report: MintReport; force: boolean },
): Promise<void> {
  const url = (await readMeshRecord(root))?.url;
  if (!url) {
    throw new CotalError(
      "broker_unknown",
      `--context needs the broker's address, and ${root} was never brought up; run 'cotal up --root ${root}' first.`,
    );
  }
  await Deno.mkdir(natsContextDir(), { recursive: true, mode: 0o700 });
  await writeFileAtomic(
    contextPath,
    JSON.stringify(
      {
        description: `Cotal space ${space}, ${report.profile} cred (expires ${report.expiresAt})`,
        url,
        creds: report.out,
        inbox_prefix: report.inboxPrefix,
      },
      null,
      2,
    ) + "\n",
    { noClobber: !force, what: "--context" },
  );
}

/** `cotal deprovision`: undo `mint --provision`. */
export const deprovisionCommand = defineCommand({
  kind: "command",
  name: "deprovision",
  summary: "remove the durables and ACL row 'mint --provision' made for a member",
  flags: {
    ...ROOT_FLAG,
    ...SPACE_FLAG,
    ...JSON_FLAG,
    lifecycle: {
      type: "string",
      value: "uid",
      description: "the lifecycle uid mint --provision printed",
    },
  },
  positionals: [{
    name: "actor",
    description: "the member's actor (local.<actor>)",
    required: true,
  }],
  async run({ values, positionals }) {
    const space = assertValidSpaceName(values.space);
    const root = await resolveMeshRoot(values.root, space);
    if (values.lifecycle === undefined) {
      throw new CotalError(
        "usage",
        "Name the lifecycle with --lifecycle <uid>: the one 'cotal mint --provision' printed.",
      );
    }
    const uid = values.lifecycle;
    try {
      assertValidLifecycleUid(uid);
    } catch {
      throw new CotalError(
        "usage",
        `--lifecycle takes the uid 'cotal mint --provision' printed, not '${safeText(uid)}'.`,
      );
    }
    const actor = localActor(positionals[0]);
    const r = await deprovisionForRoot(root, space, actor, uid);
    printResult(
      denoIo(),
      { json: values.json === true },
      { member: `local.${actor}`, lifecycleUid: uid, ...r },
      (v) =>
        v.removed.length === 0
          ? `local.${safeText(actor)} had no durables under lifecycle ${uid}${
            v.aclPurged ? "; its ACL row is purged" : ""
          }`
          : `deprovisioned local.${safeText(actor)} (lifecycle ${uid}): removed ${
            v.removed.join(", ") || "no durables"
          }${v.aclPurged ? "; its ACL row purged" : ""}`,
    );
  },
});

registry.register([mintCommand, deprovisionCommand]);

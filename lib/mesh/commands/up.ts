/**
 * `cotal up`, `down` and `status`: the stack's lifecycle and its health at a glance.
 *
 * @module
 */
import { HUNG_AFTER_MS } from "../../heartbeat.ts";
import { cotalCommand, defineCommand, denoIo, JSON_FLAG, printResult } from "../../cli/mod.ts";
import { registry } from "../../registry.ts";
import { down, up } from "../up.ts";
import { cliCommand } from "../daemons.ts";
import {
  componentFiles,
  componentLabel,
  type ComponentStatus,
  listComponents,
  readMeshRecord,
  spaceComponentId,
} from "../stack.ts";
import { lastStorageFault } from "../storage_fault.ts";
import { processStartTime } from "../pidfile.ts";
import { safeText } from "../../safe_text.ts";
import { readSpaceIndex } from "../trust_state.ts";
import { deliveryAdmin, mintForRoot, spaceUnknown } from "../ops.ts";
import {
  DEFAULT_AGENT_IDS,
  LIMIT_NAMES,
  ManagerClient,
  parseIdRange,
  parseLimitsFlag,
} from "../../manager/mod.ts";
import { connect, flushWithin } from "../../nats/mod.ts";
import { credsAuthenticatorFast } from "../../trust/mod.ts";
import { assertValidSpaceName } from "../names.ts";
import { CotalError } from "../../errors.ts";
import { parseIdpUrl, type UserAuthConfig } from "../user_auth.ts";
import { parsePort, resolveExistingRoot, resolveRoot, ROOT_FLAG } from "./common.ts";
import { listMeshes, spaceKeyHex } from "../../workspace/mod.ts";
import {
  doctorAuth,
  doctorStore,
  isFailingCred,
  workspaceSecretStore,
} from "../../workspace/mod.ts";
import { credRows, storeRows } from "./doctor.ts";
import { neverStartedDaemons } from "../space.ts";

function userAuthFrom(on: boolean, idp?: string, audience?: string): UserAuthConfig | undefined {
  if (!on) {
    if (idp !== undefined || audience !== undefined) {
      throw new CotalError("usage", "--idp and --audience go with --user-auth; add --user-auth.");
    }
    return undefined;
  }
  if (idp === undefined) {
    throw new CotalError(
      "usage",
      "--user-auth needs --idp <issuer url>, the OIDC issuer to trust.",
    );
  }
  parseIdpUrl(idp);
  return { idp, ...(audience !== undefined ? { audience } : {}) };
}

/** Validates a flag's text with `parse` (a usage error on refusal) and keeps the text. */
function checked(parse: () => unknown, text: string): string {
  try {
    parse();
  } catch (err) {
    throw new CotalError("usage", (err as Error).message);
  }
  return text;
}

function isolationFrom(v: string | undefined): "bwrap" | "deno-only" | undefined {
  if (v === undefined || v === "bwrap" || v === "deno-only") return v;
  throw new CotalError("usage", `--isolation must be bwrap or deno-only, not '${v}'.`);
}

/** `cotal up`: bring the stack up for a space. */
export const upCommand = defineCommand({
  kind: "command",
  name: "up",
  summary: "bring up the broker and daemons for a space (Ctrl-C stops it, or --detach)",
  flags: {
    ...ROOT_FLAG,
    ...JSON_FLAG,
    space: { type: "string", default: "default", description: "the space to serve" },
    host: {
      type: "string",
      description:
        "the broker's listen address (default: the root's last, else 127.0.0.1); a running broker's is refused: cotal down first",
    },
    port: {
      type: "string",
      description:
        "the broker's client port (default: the root's last, else 4222); a running broker's is refused: cotal down first",
    },
    detach: { type: "boolean", description: "start in the background and return" },
    isolation: {
      type: "string",
      value: "mode",
      description: "how agents are isolated: bwrap (default) or deno-only (explicit opt-in)",
    },
    "agent-limits": {
      type: "string",
      value: "name=value,...",
      description: `every agent's limits in these spaces (${LIMIT_NAMES.join(", ")}), ` +
        "within frozen bounds, e.g. memory=2G,processes=512",
    },
    "agent-ids": {
      type: "string",
      value: "first-last",
      description: "uids a root supervisor gives agents (first is their group; default " +
        `${DEFAULT_AGENT_IDS.first}-${DEFAULT_AGENT_IDS.first + DEFAULT_AGENT_IDS.count - 1})`,
    },
    "user-auth": {
      type: "boolean",
      description: "user mode: agents and people connect with IdP-backed bearers (needs --idp)",
    },
    idp: { type: "string", value: "issuer url", description: "the OIDC issuer to pin" },
    audience: { type: "string", description: "the audience IdP tokens carry (default: issuer)" },
    monitor: {
      type: "string",
      value: "[host:]port",
      description:
        "serve the broker's HTTP monitoring (/varz, /connz, /jsz) here; loopback unless a host is given; off stops a kept one; a running broker keeps its own until it starts again",
    },
    "rotate-sys": {
      type: "boolean",
      description: "re-issue the system account and its $SYS creds (mesh must be stopped)",
    },
  },
  async run({ values }) {
    // A root keeps its broker's address: a later up (after down, or over a running stack) and the
    // commands that print it again need not repeat --host and --port.
    const last = await readMeshRecord(resolveRoot(values.root)).catch(() => undefined);
    const port = parsePort(values.port ?? String(last?.port ?? 4222));
    const host = values.host ?? last?.host ?? "127.0.0.1";
    const io = denoIo();
    const json = values.json === true;
    // A root that serves spaces already is brought up as it is: a new space is `space add`'s
    // (newcomer pass 9's typo in --space made a second space, with its own account).
    const space = assertValidSpaceName(values.space);
    const { spaces } = await readSpaceIndex(resolveRoot(values.root)).catch(() => ({
      spaces: [] as string[],
    }));
    if (spaces.length && !spaces.includes(space)) {
      throw new CotalError(
        "usage",
        `This root serves ${spaces.map((s) => `'${s}'`).join(", ")}, not '${space}': bring it ` +
          `up with --space ${spaces[0]} (every space comes up), or add '${space}' with ` +
          `'${cotalCommand()} space add ${space}'.`,
      );
    }
    // A new root while this machine runs another mesh: said, since every command run from a
    // directory without ./.cotal now has two to choose from (newcomer pass 11 forgot a cd).
    if (!spaces.length && !json) {
      const here = resolveRoot(values.root);
      const others = [...new Set((await listMeshes()).map((e) => e.root))].filter((r) =>
        r !== here
      );
      if (others.length) {
        console.error(
          `note: this machine already runs a mesh under ${
            others.map((r) => safeText(r)).join(", ")
          }; this up starts another under ${safeText(here)} (pass --root to act on one).`,
        );
      }
    }
    const stop = Promise.withResolvers<void>();
    const onSignal = () => stop.resolve();
    // Closing the terminal (SIGHUP) stops the stack as Ctrl-C does, not by killing this
    // process under its daemons (newcomer pass 7).
    for (const sig of STOP_SIGNALS) Deno.addSignalListener(sig, onSignal);
    try {
      const result = await up({
        root: resolveRoot(values.root),
        space,
        host,
        port,
        detach: values.detach === true,
        rotateSys: values["rotate-sys"] === true,
        isolation: isolationFrom(values.isolation),
        ...(values["agent-limits"] !== undefined
          ? {
            agentLimits: checked(
              () => parseLimitsFlag(values["agent-limits"]!),
              values["agent-limits"],
            ),
          }
          : {}),
        ...(values["agent-ids"] !== undefined
          ? { agentIds: checked(() => parseIdRange(values["agent-ids"]!), values["agent-ids"]) }
          : {}),
        userAuth: userAuthFrom(values["user-auth"] === true, values.idp, values.audience),
        ...(values.monitor !== undefined ? { monitor: monitorAddress(values.monitor) } : {}),
        // The same up again, should this one be killed before it finishes (a rotation is not
        // repeated: the resumed up finds the broker it started running).
        resume: cliCommand(Deno.args.filter((a) => a !== "--rotate-sys")),
        // With --json, progress goes to stderr so stdout is one JSON document. A terminal that
        // was closed refuses the lines; the stop they report goes on without them.
        say: (l) => {
          try {
            json ? console.error(l) : console.log(l);
          } catch {
            // Nowhere to say it.
          }
        },
        untilStopped: stop.promise,
      });
      if (json) printResult(io, { json }, result);
    } finally {
      for (const sig of STOP_SIGNALS) Deno.removeSignalListener(sig, onSignal);
    }
    return 0;
  },
});

const STOP_SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;

/** `--monitor 8222` is loopback's port 8222; `--monitor host:port` is taken as given. */
function monitorAddress(text: string): string {
  // "off" turns a kept monitor off (the mesh record keeps "" for it).
  if (text === "off") return "";
  const m = /^(?:(.+):)?(\d+)$/.exec(text);
  if (!m) {
    throw new CotalError(
      "usage",
      `--monitor must be a port or host:port (e.g. 8222 or 127.0.0.1:8222), or off, not '${text}'.`,
    );
  }
  return `${m[1] ?? "127.0.0.1"}:${parsePort(m[2], "--monitor's port")}`;
}

/** `cotal down`: stop every component of a root, dependants first. */
export const downCommand = defineCommand({
  kind: "command",
  name: "down",
  summary:
    "stop the broker and daemons of a root, despawning its agents (checks each pid's identity first)",
  flags: {
    ...ROOT_FLAG,
    ...JSON_FLAG,
    "keep-agents": {
      type: "boolean",
      description: "stop the agents but keep them on the roster: the next up brings them back",
    },
  },
  async run({ values }) {
    const root = await resolveExistingRoot(values.root);
    const existed = (await Deno.stat(root).catch(() => undefined))?.isDirectory === true;
    // Read first: down may leave the root without its running state, never without its index.
    const { spaces } = await readSpaceIndex(root).catch(() => ({ spaces: [] as string[] }));
    // A root found through the machine registry is named before it is stopped (newcomer pass
    // 11: a down from an unrelated directory despawned another dir's agents without a word).
    const elsewhere = values.root === undefined && root !== resolveRoot(undefined);
    if (elsewhere && values.json !== true && existed) {
      console.error(
        `stopping the mesh under ${safeText(root)} (no ./.cotal here: the machine's registry)`,
      );
    }
    const result = await down(root, { keepAgents: values["keep-agents"] === true });
    // Said by space name, as status says them (`delivery.default`); --json keeps the ids.
    const label = (id: string) => componentLabel(id, spaces);
    printResult(denoIo(), { json: values.json === true }, result, (r) => {
      const rows = Object.entries(r);
      return rows.length
        ? rows.map(([id, what]) => safeText(`${label(id)}: ${what}`)).join("\n")
        : `nothing is running under ${safeText(root)}${
          existed ? "" : " (there is no Cotal state directory there)"
        }`;
    });
    return 0;
  },
});

/** How long a delivery loop fails without a success before `status` calls it stalled. */
const STALL_REPORTED_MS = 30_000;

function deliveryHealth(
  root: string,
  space: string,
  url: string,
): Promise<{ stalledSince?: number; lastError?: string }> {
  return deliveryAdmin(root, space, url, "health", {
    actor: "status",
    timeoutMs: 3_000,
  }) as Promise<{ stalledSince?: number; lastError?: string }>;
}

/** A beat older than this is a daemon `status` calls not answering (half the watchdog's). */
const STALE_BEAT_MS = HUNG_AFTER_MS / 2;

/** How long the broker may take to answer one round trip before `status` calls it silent. */
const BROKER_ANSWER_MS = 3_000;

/** Undefined when the broker answers a round trip in time; else what it did instead. */
async function brokerSilence(
  root: string,
  space: string,
  url: string,
): Promise<string | undefined> {
  const creds = await mintForRoot(root, space, {
    profile: "control-caller",
    actor: "status",
    expiresInSeconds: 60,
  });
  let nc;
  try {
    nc = await connect({
      servers: url.split(","),
      authenticator: credsAuthenticatorFast(creds),
      timeout: BROKER_ANSWER_MS,
      reconnect: false,
      name: "cotal status",
    });
  } catch (err) {
    return `no answer to a connect within ${BROKER_ANSWER_MS / 1000} s (${(err as Error).message})`;
  }
  try {
    return (await flushWithin(nc, BROKER_ANSWER_MS))
      ? undefined
      : `no answer to a ping within ${BROKER_ANSWER_MS / 1000} s`;
  } finally {
    await nc.close().catch(() => {});
  }
}

async function supervisorStatus(
  root: string,
  space: string,
  url: string,
): Promise<{ isolation: string; signing?: string }> {
  const creds = await mintForRoot(root, space, {
    profile: "control-caller",
    actor: "status",
    expiresInSeconds: 60,
  });
  await using ctl = await ManagerClient.connect({ servers: url, space, creds });
  return await ctl.request<{ isolation: string; signing?: string }>("status", {}, {
    timeoutMs: 3_000,
  });
}

/** `cotal status`: each component and its health, and the health of every stored cred. */
export const statusCommand = defineCommand({
  kind: "command",
  name: "status",
  summary: "show each component of a root, its health, and the health of its creds",
  flags: {
    ...ROOT_FLAG,
    ...JSON_FLAG,
    space: {
      type: "string",
      value: "name",
      description: "only this space's daemons and creds (with the broker and the watchdogs)",
    },
  },
  async run({ values }) {
    const root = await resolveExistingRoot(values.root);
    const at = await Deno.stat(root).catch(() => undefined);
    if (!at?.isDirectory) {
      throw new CotalError(
        at ? "root_not_directory" : "no_root",
        `There is no Cotal state directory at ${JSON.stringify(root)}${
          at ? " (it is a file)" : ""
        }; pass --root the directory 'cotal up' used.`,
      );
    }
    const index = await readSpaceIndex(root).catch(() => ({ spaces: [] as string[] }));
    const only = values.space;
    if (only !== undefined && !index.spaces.includes(only)) throw await spaceUnknown(root, only);
    const spaces = only === undefined ? index.spaces : [only];
    // `--space`: the shared components (no space's hex in their id) and that space's own.
    const others = new Set(index.spaces.filter((s) => s !== only).map(spaceKeyHex));
    const mine = (id: string) => only === undefined || !others.has(id.split(".")[1] ?? "");
    const listed = (await listComponents(root)).filter((c) => mine(c.id));
    // A space's daemon that never started (an interrupted space add) has no record: shown too.
    const components = [...listed, ...await neverStartedDaemons(root, spaces, listed)];
    const creds = components.length
      ? (await doctorAuth(root).catch(() => [])).filter((c) =>
        only === undefined || c.space === undefined || c.space === only
      )
      : [];
    const credsOk = creds.every((c) => !isFailingCred(c.status));
    const store = components.length ? await doctorStore(workspaceSecretStore(root)) : [];
    // A running broker that logged a storage fault since it started refuses writes.
    const brokerFault = components.some((c) => c.id === "nats-server" && c.state === "running")
      ? await lastStorageFault(componentFiles(root, "nats-server").logFile)
      : undefined;
    // Each running supervisor says which isolation it enforces, and where it signs, over its
    // control rail.
    const isolation: Record<string, string> = {};
    const signing: Record<string, string> = {};
    const rec = await readMeshRecord(root);
    // A process that runs is not one that answers (frozen, or wedged): the broker is asked for
    // one round trip first, and a running daemon that does not answer its rail is said so. A
    // hung broker leaves the rest unasked: each would only wait out its own deadline.
    const unanswered: Record<string, string> = {};
    const running = (id: string) => components.some((c) => c.id === id && c.state === "running");
    if (rec && running("nats-server") && spaces.length) {
      const silent = await brokerSilence(root, spaces[0], rec.url);
      if (silent) unanswered["nats-server"] = silent;
    }
    const brokerOk = unanswered["nats-server"] === undefined;
    for (const space of spaces) {
      const id = spaceComponentId("supervise", space);
      if (!rec || !brokerOk || !running(id)) continue;
      const st = await supervisorStatus(root, space, rec.url).catch((err) => {
        unanswered[id] = `its control rail did not answer (${(err as Error).message})`;
        return { isolation: `unknown (${(err as Error).message})`, signing: undefined };
      });
      isolation[space] = st.isolation;
      signing[space] = st.signing === "remote"
        ? "remote: the supervisor holds no seed; cotal-signer signs its credentials"
        : st.signing === "local"
        ? "local: the supervisor loads the space's signer records"
        : "unknown";
    }
    const stalled = rec && brokerOk
      ? await deliveryStalls(
        root,
        rec.url,
        spaces.filter((sp) => running(spaceComponentId("delivery", sp))),
        unanswered,
      )
      : {};
    await staleBeats(root, components, unanswered);
    const label = (id: string) => safeText(componentLabel(id, spaces));
    // A foreground up heals its stack in its own process: no watchdog component to list, so it
    // is named instead (newcomer pass 11 read the missing watchdog as an unwatched stack).
    const foreground = rec && !rec.detached && rec.owner &&
        processStartTime(rec.owner.pid) === rec.owner.startTime
      ? rec.owner.pid
      : undefined;
    const healthy = components.length > 0 && components.every((c) => c.state === "running") &&
      credsOk && store.length === 0 && brokerFault === undefined &&
      Object.keys(stalled).length === 0 && Object.keys(unanswered).length === 0;
    printResult(
      denoIo(),
      { json: values.json === true },
      {
        healthy,
        root,
        ...(rec ? { broker: rec.url } : {}),
        // `name` is the label the text form and `cotal logs` use; `id` names the files.
        components: components.map((c) => ({ ...c, name: componentLabel(c.id, spaces) })),
        ...(brokerFault ? { brokerFault } : {}),
        creds,
        store,
        isolation,
        signing,
        stalled,
        unanswered,
        ...(rec?.monitor ? { monitor: rec.monitor } : {}),
        ...(foreground ? { healedBy: { foregroundUp: foreground } } : {}),
      },
      (r) =>
        r.components.length
          ? [
            `root:    ${safeText(root)}`,
            ...(r.broker ? [`broker:  ${safeText(r.broker)}`] : []),
            "",
            // By kind and space name (the ids carry the space's hex, for --json and the files).
            ...r.components.map((c) =>
              `${label(c.id).padEnd(32)} ${
                c.state === "running"
                  ? `running${c.pid ? ` (pid ${c.pid})` : ""}${
                    r.unanswered[c.id] ? ` but not answering: ${safeText(r.unanswered[c.id])}` : ""
                  }`
                  : `not running${c.pid ? ` (pid ${c.pid} is gone)` : ""}`
              }`
            ),
            ...(r.components.some((c) => c.state !== "running")
              ? [`restart what is not running: ${cotalCommand()} up --root ${safeText(root)}`]
              : []),
            ...(r.healedBy
              ? [
                `healing: the foreground 'cotal up' (pid ${r.healedBy.foregroundUp}) restarts ` +
                `what dies, as a detached stack's watchdogs do`,
              ]
              : []),
            ...(r.monitor ? [`monitor: http://${r.monitor}/ (varz, connz, jsz)`] : []),
            ...(r.brokerFault
              ? [`broker cannot write: ${safeText(r.brokerFault)} (the watchdog restarts it)`]
              : []),
            ...Object.entries(r.stalled).map(([sp, what]) =>
              `delivery (${safeText(sp)}): ${safeText(what)}`
            ),
            ...Object.entries(r.isolation).map(([sp, iso]) => `isolation (${sp}): ${iso}`),
            ...Object.entries(r.signing).map(([sp, how]) => `signing (${sp}): ${how}`),
            "",
            "creds:",
            credRows(r.creds) || "  none",
            ...(r.store.length ? ["", "store:", storeRows(r.store)] : []),
          ].join("\n")
          : `nothing is running under ${safeText(root)}; start it with '${cotalCommand()} up ` +
            `--root ${safeText(root)}'`,
    );
    return healthy ? 0 : 1;
  },
});

registry.register([upCommand, downCommand, statusCommand]);

/**
 * Every daemon that beats (lib/heartbeat.ts) says whether it still runs, the ones no rail
 * reaches too (the signer, the auth service, the watchdogs): fault pass 8 froze the signer and
 * the watchdog-peer and status said healthy. A beat older than half the watchdog's limit is
 * added to `unanswered`.
 */
async function staleBeats(
  root: string,
  components: readonly ComponentStatus[],
  unanswered: Record<string, string>,
): Promise<void> {
  for (const c of components) {
    if (c.state !== "running" || unanswered[c.id] !== undefined) continue;
    const beat = await Deno.stat(componentFiles(root, c.id).beatFile).catch(() => undefined);
    const since = c.since ? Date.parse(c.since) : NaN;
    const age = beat?.mtime ? Date.now() - beat.mtime.getTime() : undefined;
    if (age !== undefined && age > STALE_BEAT_MS && !(Date.now() - since <= STALE_BEAT_MS)) {
      unanswered[c.id] = `its heartbeat is ${Math.round(age / 1000)} s old (frozen or wedged)`;
    }
  }
}

/**
 * Each running delivery daemon of `spaces` says whether a loop has only failed for a while (a
 * stall its process state would never show); one that does not answer is added to `unanswered`.
 */
async function deliveryStalls(
  root: string,
  url: string,
  spaces: readonly string[],
  unanswered: Record<string, string>,
): Promise<Record<string, string>> {
  const stalled: Record<string, string> = {};
  for (const space of spaces) {
    const id = spaceComponentId("delivery", space);
    const h = await deliveryHealth(root, space, url).catch((err) => {
      unanswered[id] = `its admin rail did not answer (${(err as Error).message})`;
      return undefined;
    });
    if (h?.stalledSince !== undefined && Date.now() - h.stalledSince >= STALL_REPORTED_MS) {
      stalled[space] = `stalled since ${new Date(h.stalledSince).toISOString()}: ${
        h.lastError ?? "unknown"
      } (its log: ${componentFiles(root, id).logFile})`;
    }
  }
  return stalled;
}

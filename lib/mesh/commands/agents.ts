/**
 * `cotal spawn`, `cotal ps`, `cotal despawn` and `cotal attach`: the agent verbs, talking to the
 * space's running supervisor over its control rail with a short-lived `control-caller` cred
 * minted from this root's signer.
 *
 * @module
 */
import { brokerNotRunning } from "../stack.ts";
import {
  ATTACH_RESET,
  AttachFilter,
  consoleSize,
  cotalCommand,
  defineCommand,
  denoIo,
  JSON_FLAG,
  parseSize,
  printResult,
} from "../../cli/mod.ts";
import { CotalError, isCotalError } from "../../errors.ts";
import { limitBoundsText, ManagerClient } from "../../manager/mod.ts";
import type { AgentRow } from "../../manager/mod.ts";
import { registry } from "../../registry.ts";
import { safeText } from "../../safe_text.ts";
import { personaSpawnFields, readPersona } from "../persona.ts";
import { assertValidSpaceName } from "../names.ts";
import { mintForRoot } from "../ops.ts";
import { runningBroker } from "../space.ts";
import { localActor, resolveMeshRoot, TARGET_FLAGS } from "./common.ts";
// The persona verbs register themselves beside these.
import "./persona.ts";
import {
  absolutePath,
  childRequests,
  envFrom,
  harnessOnPath,
  int,
  limitsFrom,
  netMode,
} from "./spawn_args.ts";

/** Ctrl-]: leaves `cotal attach` (the agent keeps running). */
export const DETACH_KEY = 0x1d;

async function client(
  values: { root?: string; space: string; server?: string },
  ttlSeconds = 300,
): Promise<ManagerClient> {
  const space = assertValidSpaceName(values.space);
  const root = await resolveMeshRoot(values.root, space);
  const url = values.server ?? (await runningBroker(root))?.url;
  if (!url) {
    throw await brokerNotRunning(root, " or pass --server");
  }
  const creds = await mintForRoot(root, space, {
    profile: "control-caller",
    actor: "operator",
    expiresInSeconds: ttlSeconds,
  });
  return await ManagerClient.connect({ servers: url.split(","), space, creds });
}

/** What `ps` shows of an agent's sandbox: its uid and network, or the mode without one. */
function sandboxCell(a: AgentRow): string {
  const s = a.sandbox;
  if (!s) return "-";
  if (s.mode === "deno-only") return "deno-only";
  return `uid ${s.uid} ${s.net === "relay" ? "net:relay" : "net:HOST"}${
    s.cgroup === "none" ? "" : ` cg${s.cgroup}`
  }`;
}

function rowLine(a: AgentRow): string {
  const row = `${a.name.padEnd(20)} ${a.agent.padEnd(12)} ${(a.role ?? "-").padEnd(12)} ${
    a.status.padEnd(10)
  } ${(a.present ? "online" : "offline").padEnd(8)} ${String(a.pid ?? "-").padEnd(7)} ${
    sandboxCell(a)
  }`;
  // A retired agent's reason is a sentence: on its own line, so the columns stay columns
  // (newcomer pass 10).
  return a.status === "retired" && a.reason ? `${row}\n  why: ${safeText(a.reason)}` : row;
}

/** `cotal spawn`: start an agent under the space's supervisor. */
export const spawnCommand = defineCommand({
  kind: "command",
  name: "spawn",
  summary: "start an agent under the space's supervisor (task runner by default)",
  flags: {
    ...TARGET_FLAGS,
    ...JSON_FLAG,
    agent: {
      type: "string",
      description:
        "the connector: task-runner (default), module, program, claude-code, codex, gemini, opencode (or an installed one)",
    },
    prompt: {
      type: "string",
      value: "text",
      description: "a harness's instructions (claude-code: its appended system prompt)",
    },
    model: { type: "string", description: "the model a harness uses" },
    name: { type: "string", description: "the agent's name (default <role>_<n>)" },
    role: { type: "string", description: "the anycast role it serves (task runner: 'tasks')" },
    module: { type: "string", value: "file", description: "a module agent's .ts/.js file" },
    subscribe: { type: "string", multiple: true, description: "a channel joined at boot" },
    "allow-subscribe": { type: "string", multiple: true, description: "a channel it may read" },
    "allow-publish": { type: "string", multiple: true, description: "a channel it may post to" },
    trusted: { type: "boolean", description: "operator-trusted: may run without bwrap" },
    restarts: { type: "string", value: "n", description: "crashes it survives (default 3)" },
    window: { type: "string", value: "s", description: "the restart window (default 120)" },
    timeout: { type: "string", value: "s", description: "readiness window (default 30)" },
    workdir: {
      type: "string",
      value: "dir",
      description: "a directory it works in, read-write (its cwd; a root supervisor's agents " +
        "write it as members of the agents' group)",
    },
    expose: {
      type: "string",
      multiple: true,
      value: "path",
      description: "a path it may read (a harness's install dir); never Cotal's state",
    },
    net: {
      type: "string",
      value: "mode",
      description: "relay (default: its own network, the broker only) or host (shares the " +
        "host's network: an explicit opt-out, shown in ps)",
    },
    limit: {
      type: "string",
      multiple: true,
      value: "name=value",
      // With the bounds: newcomer pass 8 read 256M as valid, and the least is 1G.
      description: `a resource limit, e.g. memory=2G (bounds: ${limitBoundsText()})`,
    },
    env: {
      type: "string",
      multiple: true,
      value: "NAME",
      description: "a variable of this shell the agent gets too (a harness's provider key, e.g. " +
        "ANTHROPIC_API_KEY); kept with the agent in the supervisor's store, never in its launch file",
    },
  },
  positionals: [{
    name: "persona | command",
    description:
      "a persona of this root (<root>/personas/<name>.md), and/or the program (absolute path) and its args, after --",
    variadic: true,
  }],
  async run({ values, positionals }) {
    // A first word that is no absolute path names a persona: its fields, under the flags given.
    const root = positionals[0] !== undefined && !positionals[0].startsWith("/")
      ? await resolveMeshRoot(values.root, assertValidSpaceName(values.space))
      : undefined;
    const persona = root
      ? await readPersona(root, positionals[0]).catch((err) => {
        if (!isCotalError(err, "persona_unknown")) throw err;
        // Often a program given by name (`-- sh -c ...`): say both readings.
        throw new CotalError(
          "persona_unknown",
          `${err.message.replace(/\.$/, "")}; a program is given after -- by its absolute ` +
            `path (e.g. -- /bin/sh -c '...', or -- $(command -v ${
              safeText(positionals[0].slice(0, 64))
            }) ...).`,
        );
      })
      : undefined;
    const spawnable = root && persona?.spawn.length
      ? await childRequests(root, persona)
      : undefined;
    const [given, ...givenArgs] = persona ? positionals.slice(1) : positionals;
    const agent = values.agent ?? persona?.agent ?? "task-runner";
    // The program after -- wins; then the persona's; a harness's is found on this shell's PATH.
    const command = given ?? persona?.command ?? harnessOnPath(agent);
    const args = given !== undefined ? givenArgs : persona?.command ? [...persona.args] : [];
    // What the supervisor would refuse for want of a program is a usage error here (exit 2).
    if ((agent === "task-runner" || agent === "program") && !command) {
      throw new CotalError(
        "usage",
        `The ${agent} agent needs a program: give its absolute path and args after -- ` +
          `(cotal spawn --name worker -- /bin/cat), or name a persona.`,
      );
    }
    if (agent === "module" && !values.module && !persona) {
      throw new CotalError("usage", "The module agent needs --module <file.ts>.");
    }
    const readiness = int(values.timeout, "--timeout", 1, 300) ?? 30;
    const window = int(values.window, "--window", 1, 3600);
    const req: Record<string, unknown> = {
      ...(persona ? personaSpawnFields(persona) : {}),
      agent,
      ...(values.name ? { name: values.name } : {}),
      ...(values.role ? { role: values.role } : {}),
      ...(command ? { command, args } : {}),
      ...(values.module
        ? {
          module: values.module.startsWith("/") ? values.module : `${Deno.cwd()}/${values.module}`,
        }
        : {}),
      ...(values.subscribe?.length ? { subscribe: values.subscribe } : {}),
      ...(values["allow-subscribe"]?.length ? { allowSubscribe: values["allow-subscribe"] } : {}),
      ...(values["allow-publish"]?.length ? { allowPublish: values["allow-publish"] } : {}),
      ...(values.trusted ? { trusted: true } : {}),
      ...(values.restarts !== undefined
        ? { restarts: int(values.restarts, "--restarts", 0, 20) }
        : {}),
      ...(window !== undefined ? { windowMs: window * 1000 } : {}),
      readinessMs: readiness * 1000,
      ...(values.workdir ? { workdir: absolutePath(values.workdir) } : {}),
      ...(values.expose?.length ? { expose: values.expose.map(absolutePath) } : {}),
      ...(values.net ? { net: netMode(values.net) } : {}),
      ...(values.limit?.length ? { limits: limitsFrom(values.limit) } : {}),
      ...(values.prompt !== undefined ? { prompt: values.prompt } : {}),
      ...(values.model !== undefined ? { model: values.model } : {}),
      ...(values.env?.length || persona?.env.length
        ? { env: envFrom([...(persona?.env ?? []), ...(values.env ?? [])]) }
        : {}),
      ...(spawnable ? { spawnable } : {}),
    };
    await using ctl = await client(values);
    // Who ran before, to tell a late outcome by its role: only when the supervisor names it.
    const before = typeof req.name === "string" ? new Set<string>() : await agentNames(ctl);
    let late = false;
    // Past the readiness window, room for the watchdog to replace a frozen supervisor (20 s)
    // and the request, re-sent on silence, to reach the new one.
    const row = await ctl.request<AgentRow>("spawn", req, { timeoutMs: (readiness + 30) * 1000 })
      .catch(async (err) => {
        if (!isCotalError(err, "manager_unavailable")) throw err;
        // The supervisor may have taken the spawn and then stopped answering (killed, frozen):
        // one that comes back brings its roster, this agent included. Its outcome is looked for
        // before the spawn is called failed, so a retry does not meet 'already running'.
        const found = await spawnedSince(ctl, before, { name: req.name, role: req.role });
        if (found) {
          late = true;
          return found;
        }
        throw new CotalError(
          "spawn_unknown",
          `${err.message} If it comes back it may still start the agent: check ` +
            `'${cotalCommand()} ps' before spawning it again.`,
        );
      });
    printResult(
      denoIo(),
      { json: values.json === true },
      row,
      (r) =>
        `spawned ${r.name} (${r.id}, ${
          r.sandbox
            ? `${r.sandbox.mode}, network: ${
              r.sandbox.net === "relay" ? "its own, the broker only" : r.sandbox.net
            }`
            : r.isolation
        })${
          late ? " (its supervisor stopped answering during the spawn, then started it)" : ""
        }; attach: ${cotalCommand()} attach${
          values.root !== undefined ? ` --root ${values.root}` : ""
        }${(values.space ?? "default") === "default" ? "" : ` --space ${values.space}`} ${r.name}`,
    );
  },
});

/** How long `spawn` looks for an agent its silent supervisor may still have started. */
const SPAWN_OUTCOME_WAIT_MS = 30_000;

/** The names on the supervisor's roster now, or none when it does not answer. */
async function agentNames(ctl: ManagerClient): Promise<Set<string>> {
  const ps = await ctl.request<{ agents: AgentRow[] }>("ps", {}, { timeoutMs: 5_000 })
    .catch(() => ({ agents: [] as AgentRow[] }));
  return new Set(ps.agents.map((a) => a.name));
}

/**
 * The agent a spawn asked for, once a supervisor lists it running (by its name, or, when the
 * supervisor was to choose one, a new name with the asked role), within
 * {@linkcode SPAWN_OUTCOME_WAIT_MS}; undefined when none appears.
 */
async function spawnedSince(
  ctl: ManagerClient,
  before: ReadonlySet<string>,
  asked: { name?: unknown; role?: unknown },
): Promise<AgentRow | undefined> {
  const deadline = Date.now() + SPAWN_OUTCOME_WAIT_MS;
  while (Date.now() < deadline) {
    const ps = await ctl.request<{ agents: AgentRow[] }>("ps", {}, { timeoutMs: 5_000 })
      .catch(() => undefined);
    const row = ps?.agents.find((a) =>
      a.status === "running" &&
      (typeof asked.name === "string"
        ? a.name === asked.name
        : !before.has(a.name) && a.role === asked.role)
    );
    if (row) return row;
    await new Promise((r) => setTimeout(r, 1_000));
  }
  return undefined;
}

/** `cotal ps`: the supervisor's agents. */
export const psCommand = defineCommand({
  kind: "command",
  name: "ps",
  summary: "list the agents the space's supervisor runs",
  flags: { ...TARGET_FLAGS, ...JSON_FLAG },
  async run({ values }) {
    await using ctl = await client(values);
    const r = await ctl.request<{ agents: AgentRow[] }>("ps");
    printResult(
      denoIo(),
      { json: values.json === true },
      r,
      (v) =>
        v.agents.length
          ? [
            `${"NAME".padEnd(20)} ${"AGENT".padEnd(12)} ${"ROLE".padEnd(12)} ${
              "STATUS".padEnd(10)
            } PRESENCE PID     SANDBOX`,
          ]
            .concat(v.agents.map(rowLine)).join("\n")
          : "no agents; start one with 'cotal spawn'",
    );
  },
});

/** `cotal despawn`: stop an agent and remove its footprint. */
export const despawnCommand = defineCommand({
  kind: "command",
  name: "despawn",
  summary: "stop an agent and remove its durables, creds and dir",
  flags: { ...TARGET_FLAGS, ...JSON_FLAG },
  positionals: [{ name: "name", description: "the agent", required: true }],
  async run({ values, positionals }) {
    await using ctl = await client(values);
    const r = await ctl.request<{ name: string; childrenEnded?: string[] }>("despawn", {
      name: localActor(positionals[0]),
      // Long enough for the watchdog to replace a frozen supervisor (20 s) and the request,
      // re-sent on silence, to reach the new one.
    }, { timeoutMs: 60_000 });
    printResult(
      denoIo(),
      { json: values.json === true },
      r,
      (v) =>
        `despawned ${v.name}${
          v.childrenEnded?.length
            ? `, and the agents it spawned: ${v.childrenEnded.join(", ")}`
            : ""
        }`,
    );
  },
});

/** `cotal attach`: the agent's terminal, both ways, until Ctrl-] (or stdin ends). */
export const attachCommand = defineCommand({
  kind: "command",
  name: "attach",
  summary: "drive an agent's terminal (Ctrl-] detaches; the agent keeps running)",
  flags: {
    ...TARGET_FLAGS,
    size: {
      type: "string",
      value: "COLSxROWS",
      description: "the terminal size (default: this one's)",
    },
  },
  positionals: [{ name: "name", description: "the agent", required: true }],
  async run({ values, positionals }) {
    const size = parseSize(values.size) ?? consoleSize();
    await using ctl = await client(values, 3600);
    const out = Deno.stdout;
    // The agent's rendering reaches this terminal; what acts beyond the screen (a title, the
    // clipboard, DCS strings, window operations) does not (lib/cli/attach_filter.ts).
    const filter = new AttachFilter();
    const session = await ctl.attach(
      localActor(positionals[0]),
      (b) => void out.write(filter.push(b)),
      size ?? {},
    );
    console.error(`[cotal attach: ${safeText(positionals[0])}; Ctrl-] detaches]\r`);
    const raw = Deno.stdin.isTerminal();
    if (raw) Deno.stdin.setRaw(true);
    const onResize = () => {
      const s = consoleSize();
      if (s) session.resize(s.cols, s.rows);
    };
    if (raw) Deno.addSignalListener("SIGWINCH", onResize);
    const reader = Deno.stdin.readable.getReader();
    const typing = (async () => {
      while (true) {
        const { value, done } = await reader.read();
        if (done) return "stdin closed";
        const at = value.indexOf(DETACH_KEY);
        if (at >= 0) {
          if (at > 0) session.write(value.subarray(0, at));
          return "detached";
        }
        session.write(value);
      }
    })();
    const why = await Promise.race([typing, session.ended]);
    if (raw) {
      Deno.removeSignalListener("SIGWINCH", onResize);
      Deno.stdin.setRaw(false);
    }
    reader.releaseLock();
    try {
      await session.close();
    } finally {
      // What the agent switched on (the alternate screen, mouse reporting, hidden text, a
      // scroll region, line drawing) is switched off: the operator's shell gets its terminal
      // back, whatever the close did.
      if (out.isTerminal()) {
        await out.write(new TextEncoder().encode(ATTACH_RESET)).catch(() => {});
      }
    }
    console.error(`\r\n[cotal attach: ${safeText(why)}]`);
  },
});

registry.register([spawnCommand, psCommand, despawnCommand, attachCommand]);

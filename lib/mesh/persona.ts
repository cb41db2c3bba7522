/**
 * Personas: an agent described once, in `<root>/personas/<name>.md`, and spawned by name
 * (`cotal spawn <name>`). The file is front matter between `---` lines, then the instructions a
 * harness is given (its system prompt):
 *
 * ```md
 * ---
 * agent: claude-code
 * role: reviewer
 * channels: [general, reviews]
 * model: claude-sonnet-4-5
 * description: reviews the diffs it is sent
 * env: [ANTHROPIC_API_KEY]
 * spawn: [tester]
 * ---
 * You review pull requests. Be brief.
 * ```
 *
 * Front matter is a strict subset of YAML: one `key: value` per line, a value is a word, a
 * quoted string or a `[a, b]` list. An unknown key, a malformed line or a bad value is refused
 * with the file, the line and the field. Personas live beside the root's state, not in
 * `<root>/agents/`, which holds the running agents' own dirs.
 *
 * @module
 */
import { CotalError } from "../errors.ts";
import { cotalCommand } from "../cli/mod.ts";
import { PERSONA_NAME } from "../manager/mod.ts";

/** An agent described by a persona file. */
export interface Persona {
  readonly name: string;
  readonly file: string;
  /** The connector (`claude-code`, `program`, `task-runner`, ...). */
  readonly agent: string;
  readonly role?: string;
  /** Channels it joins, reads and may post to. */
  readonly channels: readonly string[];
  readonly model?: string;
  readonly description?: string;
  /** Variables of the operator's shell the agent gets (`cotal spawn --env` for each). */
  readonly env: readonly string[];
  /**
   * Personas the agent may start itself (its `spawn` tool): resolved by `cotal spawn` from this
   * root into the parent's request; a persona listed here may not list any in turn.
   */
  readonly spawn: readonly string[];
  /**
   * The program it runs (absolute): a task runner's command or a harness's binary; `cotal
   * spawn <persona> -- <program> [args]` gives another.
   */
  readonly command?: string;
  /** The program's arguments. */
  readonly args: readonly string[];
  /** The instructions: the file's body. */
  readonly instructions: string;
}

/** The keys a persona's front matter may set. */
export const PERSONA_KEYS = [
  "agent",
  "role",
  "channels",
  "model",
  "description",
  "env",
  "spawn",
  "command",
  "args",
] as const;

/** Where a root's personas live. */
export function personaDir(root: string): string {
  return `${root}/personas`;
}

const NAME = PERSONA_NAME;

function refuse(file: string, line: number, field: string, why: string): never {
  throw new CotalError("persona_invalid", `${file}:${line}: ${field}: ${why}.`);
}

function parseValue(raw: string, file: string, line: number, key: string): string | string[] {
  const v = raw.trim();
  if (v.startsWith("[")) {
    if (!v.endsWith("]")) refuse(file, line, key, "a list must end with ']'");
    const inner = v.slice(1, -1).trim();
    if (inner === "") return [];
    return inner.split(",").map((x) => {
      const item = unquote(x.trim(), file, line, key);
      if (item === "") refuse(file, line, key, "a list item is empty");
      return item;
    });
  }
  return unquote(v, file, line, key);
}

function unquote(v: string, file: string, line: number, key: string): string {
  if (v.startsWith('"') || v.startsWith("'")) {
    if (v.length < 2 || v[v.length - 1] !== v[0]) {
      refuse(file, line, key, "a quoted value must end with its quote");
    }
    return v.slice(1, -1);
  }
  if (/[#[\]{}]/.test(v)) refuse(file, line, key, `'${v.slice(0, 40)}' needs quotes`);
  return v;
}

/** Parses a persona file's text; `file` names it in every refusal. */
export function parsePersona(name: string, file: string, text: string): Persona {
  if (!NAME.test(name)) {
    refuse(file, 1, "name", "a persona's file name must be letters, digits, '_' or '-'");
  }
  const lines = text.split("\n");
  if (lines[0]?.trim() !== "---") refuse(file, 1, "front matter", "the file must start with ---");
  const end = lines.findIndex((l, i) => i > 0 && l.trim() === "---");
  if (end < 0) refuse(file, lines.length, "front matter", "no closing --- line");
  const fields: Record<string, string | string[]> = {};
  for (let i = 1; i < end; i++) {
    const l = lines[i];
    if (l.trim() === "" || l.trim().startsWith("#")) continue;
    const m = /^([A-Za-z][A-Za-z0-9_-]*)\s*:(.*)$/.exec(l);
    if (!m) refuse(file, i + 1, "front matter", "each line must be 'key: value'");
    const [, key, raw] = m;
    if (!(PERSONA_KEYS as readonly string[]).includes(key)) {
      refuse(file, i + 1, key, `not a persona field (the fields are ${PERSONA_KEYS.join(", ")})`);
    }
    if (key in fields) refuse(file, i + 1, key, "set twice");
    fields[key] = parseValue(raw, file, i + 1, key);
  }
  const lineOf = (key: string) => lines.findIndex((l) => l.startsWith(`${key}:`)) + 1 || 1;
  const str = (key: string): string | undefined => {
    const v = fields[key];
    if (v === undefined) return undefined;
    if (typeof v !== "string" || v === "") refuse(file, lineOf(key), key, "must be one value");
    return v;
  };
  const agent = str("agent");
  if (agent === undefined) refuse(file, 1, "agent", "missing (the connector, e.g. claude-code)");
  const channels = fields.channels ?? [];
  if (!Array.isArray(channels)) {
    refuse(file, lineOf("channels"), "channels", "must be a list, like [general, reviews]");
  }
  const env = fields.env ?? [];
  if (!Array.isArray(env) || env.some((n) => !/^[A-Z][A-Z0-9_]{0,63}$/.test(n))) {
    refuse(
      file,
      lineOf("env"),
      "env",
      "must be a list of variable names, like [ANTHROPIC_API_KEY]",
    );
  }
  const spawn = fields.spawn ?? [];
  if (!Array.isArray(spawn) || spawn.length > 8 || spawn.some((n) => !NAME.test(n))) {
    refuse(
      file,
      lineOf("spawn"),
      "spawn",
      "must be a list of at most 8 persona names, like [tester]",
    );
  }
  const command = str("command");
  if (command !== undefined && (!command.startsWith("/") || command.split("/").includes(".."))) {
    refuse(
      file,
      lineOf("command"),
      "command",
      "must be an absolute path without '..', like /bin/sh",
    );
  }
  const args = fields.args ?? [];
  if (!Array.isArray(args)) {
    refuse(file, lineOf("args"), "args", "must be a list, like [-c, 'tr a-z A-Z']");
  }
  const instructions = lines.slice(end + 1).join("\n").trim();
  const role = str("role");
  const model = str("model");
  const description = str("description");
  return {
    name,
    file,
    agent,
    ...(role !== undefined ? { role } : {}),
    channels,
    ...(model !== undefined ? { model } : {}),
    ...(description !== undefined ? { description } : {}),
    env,
    spawn,
    ...(command !== undefined ? { command } : {}),
    args,
    instructions,
  };
}

/** Reads persona `name` of `root`; refuses one that is not there, naming the ones that are. */
export async function readPersona(root: string, name: string): Promise<Persona> {
  if (!NAME.test(name)) {
    throw new CotalError(
      "persona_unknown",
      `'${name.slice(0, 64)}' is not a persona name (letters, digits, '_' or '-').`,
    );
  }
  const file = `${personaDir(root)}/${name}.md`;
  let text: string;
  try {
    text = await Deno.readTextFile(file);
  } catch {
    // A file that does not parse hides none of the good ones (newcomer pass 11 read "none").
    const broken: string[] = [];
    const known = (await listPersonas(root, (n) => broken.push(n)).catch(() => [])).map((p) =>
      p.name
    );
    throw new CotalError(
      "persona_unknown",
      `There is no persona '${name}' (${file}); the personas are: ${known.join(", ") || "none"}${
        broken.length
          ? ` (and ${
            broken.join(", ")
          }, which do not parse: '${cotalCommand()} persona list' says why)`
          : ""
      }.`,
    );
  }
  return parsePersona(name, file, text);
}

/**
 * Every persona of `root`, by name; a file that does not parse is refused with its line, or,
 * with `onInvalid`, reported there and skipped (so one bad file hides none of the good ones).
 */
export async function listPersonas(
  root: string,
  onInvalid?: (name: string, err: CotalError) => void,
): Promise<Persona[]> {
  const out: Persona[] = [];
  let entries: Deno.DirEntry[];
  try {
    entries = [...Deno.readDirSync(personaDir(root))];
  } catch {
    return [];
  }
  for (const e of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    if (!e.isFile || !e.name.endsWith(".md")) continue;
    const name = e.name.slice(0, -3);
    const file = `${personaDir(root)}/${e.name}`;
    try {
      out.push(parsePersona(name, file, await Deno.readTextFile(file)));
    } catch (err) {
      if (!onInvalid || !(err instanceof CotalError)) throw err;
      onInvalid(name, err);
    }
  }
  return out;
}

/** The spawn request fields a persona gives (the command line's own flags win). */
export function personaSpawnFields(p: Persona): Record<string, unknown> {
  return {
    agent: p.agent,
    ...(p.role ? { role: p.role } : {}),
    ...(p.channels.length
      ? {
        subscribe: [...p.channels],
        allowSubscribe: [...p.channels],
        allowPublish: p.channels.filter((c) => !/[*>]/.test(c)),
      }
      : {}),
    ...(p.model ? { model: p.model } : {}),
    ...(p.description ? { description: p.description } : {}),
    ...(p.instructions ? { prompt: p.instructions } : {}),
    ...(p.command ? { command: p.command, args: [...p.args] } : {}),
  };
}

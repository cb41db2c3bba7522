/**
 * What `cotal spawn`'s flags and persona become in a spawn request: numbers and paths checked
 * at the terminal (one sentence each, exit 2), variables read from this shell, harness binaries
 * found on its PATH, and the requests of the personas an agent may spawn.
 *
 * @module
 */
import { CotalError } from "../../errors.ts";
import { HARNESS_INSTALL, parseLimitsFlag } from "../../manager/mod.ts";
import { type Persona, personaSpawnFields, readPersona } from "../persona.ts";

/** `--env NAME`s with their values from this shell; an unset one is refused, named. */
export function envFrom(names: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of names) {
    const value = Deno.env.get(name);
    if (value === undefined) {
      throw new CotalError(
        "usage",
        `--env ${name}: ${name} is not set in this shell; export it first (the agent gets this shell's value).`,
      );
    }
    out[name] = value;
  }
  return out;
}

export function int(text: string | undefined, flag: string, min: number, max: number) {
  if (text === undefined) return undefined;
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < min || n > max) {
    throw new CotalError("usage", `${flag} must be a whole number from ${min} to ${max}.`);
  }
  return n;
}

export function absolutePath(p: string): string {
  return p.startsWith("/") ? p : `${Deno.cwd()}/${p}`;
}

export function netMode(v: string): "relay" | "host" {
  if (v === "relay" || v === "host") return v;
  throw new CotalError("usage", `--net must be relay or host, not '${v.slice(0, 40)}'.`);
}

export function limitsFrom(flags: string[]): Record<string, string> {
  try {
    // Validated here for a sentence at the terminal; the supervisor checks them again.
    parseLimitsFlag(flags.join(","));
  } catch (err) {
    throw new CotalError("usage", (err as Error).message);
  }
  return Object.fromEntries(
    flags.map((f) => [f.slice(0, f.indexOf("=")), f.slice(f.indexOf("=") + 1)]),
  );
}

/**
 * The absolute path of a harness connector's binary on this shell's PATH; undefined for other
 * connectors, or when it is not there (the supervisor then refuses with how to install it).
 */
export function harnessOnPath(agent: string): string | undefined {
  const h = HARNESS_INSTALL[agent];
  if (!h) return undefined;
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    if (!dir.startsWith("/")) continue;
    try {
      const st = Deno.statSync(`${dir}/${h.bin}`);
      if (st.isFile && (st.mode ?? 0) & 0o111) return `${dir}/${h.bin}`;
    } catch {
      // Not in this dir.
    }
  }
  return undefined;
}

/**
 * The spawn requests of the personas `parent` may start (its `spawn:` list), as this shell
 * resolves them: each persona's fields, its harness on this PATH and its variables from this
 * shell, all checked now so the agent's own spawn never meets a missing piece.
 */
export async function childRequests(
  root: string,
  parent: Persona,
): Promise<Record<string, Record<string, unknown>>> {
  const out: Record<string, Record<string, unknown>> = {};
  for (const name of parent.spawn) {
    const child = await readPersona(root, name);
    if (child.spawn.length) {
      throw new CotalError(
        "persona_invalid",
        `${parent.file}: spawn: ${name} may spawn agents of its own (${child.file}); an agent's children may not.`,
      );
    }
    const command = child.command ?? harnessOnPath(child.agent);
    if (HARNESS_INSTALL[child.agent] && !command) {
      const h = HARNESS_INSTALL[child.agent];
      throw new CotalError(
        "harness_missing",
        `${parent.file}: spawn: ${name} needs ${h.bin} on this shell's PATH (install it with '${h.install}').`,
      );
    }
    out[name] = {
      ...personaSpawnFields(child),
      ...(command ? { command, args: [...child.args] } : {}),
      ...(child.env.length ? { env: envFrom(child.env) } : {}),
    };
  }
  return out;
}

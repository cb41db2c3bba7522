/**
 * The operator's own broker settings: `<root>/broker/operator.conf`, pulled into the rendered
 * `nats.conf` by an `include`, for what Cotal does not render (TLS, clustering, leafnodes,
 * gateways, websockets, the monitoring port). The rendered file stays Cotal's ("do not edit");
 * this one is the operator's, and survives every re-render.
 *
 * Only listener and transport settings are taken: a top-level key outside
 * {@linkcode OPERATOR_INCLUDE_KEYS} (accounts, authorization, the operator, the resolver, the
 * system account, JetStream, payload and control-line limits, another include) is refused with
 * its line, so an include cannot loosen the trust model or the limits Cotal's security rests on.
 * Every rendered config is then checked by `nats-server -t` before it replaces the last good
 * one, so a broken include never reaches a running broker's reload.
 *
 * @module
 */
import { CotalError } from "../errors.ts";

/** The operator's include file, beside `nats.conf` (nats-server resolves includes from there). */
export const OPERATOR_INCLUDE = "operator.conf";

/** The top-level keys an operator include may set. */
export const OPERATOR_INCLUDE_KEYS: ReadonlySet<string> = new Set([
  "tls",
  "cluster",
  "leafnodes",
  "gateway",
  "websocket",
  "mqtt",
  "http",
  "https",
  "http_port",
  "https_port",
  "http_base_path",
  "server_name",
  "server_tags",
  "client_advertise",
  "max_connections",
  "ping_interval",
  "ping_max",
  "write_deadline",
  "lame_duck_duration",
  "lame_duck_grace_period",
  "connect_error_reports",
  "reconnect_error_reports",
  "debug",
  "trace",
  "logtime",
  "logtime_utc",
  "syslog",
  "remote_syslog",
]);

/**
 * The top-level keys of a nats-server config text with their line numbers: what sits at brace
 * and bracket depth 0, outside strings and comments.
 */
export function topLevelKeys(text: string): { key: string; line: number }[] {
  const out: { key: string; line: number }[] = [];
  let depth = 0;
  let line = 1;
  let atStart = true;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "\n") {
      line++;
      atStart = true;
      continue;
    }
    if (c === "#" || (c === "/" && text[i + 1] === "/")) {
      while (i < text.length && text[i] !== "\n") i++;
      i--;
      continue;
    }
    if (c === '"' || c === "'") {
      for (i++; i < text.length && text[i] !== c; i++) {
        if (text[i] === "\\") i++;
        if (text[i] === "\n") line++;
      }
      atStart = false;
      continue;
    }
    if (c === "{" || c === "[") depth++;
    else if (c === "}" || c === "]") depth = Math.max(0, depth - 1);
    else if (/\s|,|;/.test(c)) {
      continue;
    } else if (depth === 0 && atStart) {
      const m = /^[^\s:=\{\[,;]+/.exec(text.slice(i))!;
      out.push({ key: m[0], line });
      i += m[0].length - 1;
    }
    atStart = false;
  }
  return out;
}

/** Refuses an include that sets anything beyond listeners and transport. */
export function checkOperatorInclude(text: string, path: string): void {
  for (const { key, line } of topLevelKeys(text)) {
    if (!OPERATOR_INCLUDE_KEYS.has(key.toLowerCase())) {
      throw new CotalError(
        "operator_include_refused",
        `${path}:${line} sets '${key.slice(0, 64)}', which Cotal renders itself or does not ` +
          `allow there; an operator include may set only ${
            [...OPERATOR_INCLUDE_KEYS].slice(0, 8).join(", ")
          } and other listener settings (see docs/SPEC.md).`,
      );
    }
  }
}

/** Runs `nats-server -t` on a rendered config; refuses it with the broker's own words. */
export async function testBrokerConfig(binary: string, configPath: string): Promise<void> {
  const child = new Deno.Command(binary, {
    args: ["-t", "-c", configPath],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const timer = setTimeout(() => {
    try {
      child.kill("SIGKILL");
    } catch {
      // Already gone.
    }
  }, 10_000);
  const out = await child.output().finally(() => clearTimeout(timer));
  if (out.success) return;
  const said = new TextDecoder().decode(out.stderr).trim().split("\n").pop() ?? "";
  throw new CotalError(
    "broker_config_invalid",
    `nats-server refused the configuration (${
      said.replace(/^nats-server:\s*/, "").slice(0, 300) || `exit ${out.code}`
    }); fix ${OPERATOR_INCLUDE} beside it, the last good configuration stays in place.`,
  );
}

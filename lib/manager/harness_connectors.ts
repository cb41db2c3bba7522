/**
 * Connectors for AI harnesses that speak MCP: each launches its harness as the agent's program
 * (on its pty, inside its sandbox) with `cotal mcp` configured as that harness documents, so the
 * model gets the mesh as tools. `claude-code`: Claude Code's `--mcp-config` (a JSON string),
 * `--strict-mcp-config` (no other MCP server it may find), the spawn's instructions as
 * `--append-system-prompt` and its model as `--model`.
 *
 * `codex`: the Codex CLI with the server as a `-c mcp_servers.cotal={...}` override (an inline
 * TOML table: nothing is written to its config file), the spawn's model as `--model` and its
 * instructions as the session's initial prompt (Codex has no system-prompt flag).
 *
 * The MCP server runs inside the same sandbox as the harness, so its command names paths as the
 * sandbox sees them; the runner fills `RUNNER_PLACEHOLDERS` in a program's arguments
 * with its own values (`lib/manager/runner.ts`). Harnesses start MCP servers with a minimal
 * environment of their own (Claude Code passes HOME, PATH, SHELL, TERM, USER and LOGNAME), so what
 * `cotal mcp` needs is spelled out in the server's `env`.
 *
 * @module
 */
import { CotalError } from "../errors.ts";
import { type Connector, type LaunchSpec, registry } from "../registry.ts";
import type { ManagerLaunchContext } from "./connectors.ts";
import { cotalMcpServer } from "./mcp_command.ts";

/** The install hint of each harness, for the refusal when it is not found. */
export const HARNESS_INSTALL: Readonly<Record<string, { bin: string; install: string }>> = Object
  .freeze({
    "claude-code": { bin: "claude", install: "npm install -g @anthropic-ai/claude-code" },
    codex: { bin: "codex", install: "npm install -g @openai/codex" },
    gemini: { bin: "gemini", install: "npm install -g @google/gemini-cli" },
    opencode: { bin: "opencode", install: "npm install -g opencode-ai" },
  });

/**
 * What the `gemini` connector's shell does before the harness runs: Gemini CLI reads MCP servers
 * only from a settings file, so its settings (the first argument) are written into the agent's
 * own home, then the harness (the rest) replaces the shell.
 */
export const GEMINI_SETTINGS_SCRIPT =
  'mkdir -p "$HOME/.gemini" && printf %s "$1" > "$HOME/.gemini/settings.json" && shift && exec "$@"';

/** A TOML inline table of string values, string lists and nested tables (JSON strings are TOML). */
export function tomlInline(
  v: Readonly<Record<string, string | readonly string[] | object>>,
): string {
  const value = (x: unknown): string =>
    typeof x === "string"
      ? JSON.stringify(x)
      : Array.isArray(x)
      ? `[${x.map(value).join(", ")}]`
      : tomlInline(x as Record<string, string>);
  return `{${
    Object.entries(v).map(([k, x]) =>
      `${/^[A-Za-z0-9_-]+$/.test(k) ? k : JSON.stringify(k)} = ${value(x)}`
    )
      .join(", ")
  }}`;
}

function harnessPath(ctx: ManagerLaunchContext, connector: string): string {
  const h = HARNESS_INSTALL[connector];
  if (!ctx.program) {
    throw new CotalError(
      "harness_missing",
      `The ${connector} connector needs ${h.bin} (install it with '${h.install}'), found on PATH ` +
        `by cotal spawn or given as an absolute path after --.`,
    );
  }
  return ctx.program;
}

/** `claude-code`: Claude Code on the agent's pty with `cotal mcp` as its one MCP server. */
export const claudeCodeConnector: Connector = Object.freeze({
  kind: "connector",
  name: "claude-code",
  requires: ["claude"],
  buildLaunch(ctx: ManagerLaunchContext): LaunchSpec {
    const command = harnessPath(ctx, "claude-code");
    const server = { type: "stdio", ...cotalMcpServer() };
    return {
      command,
      args: [
        "--mcp-config",
        JSON.stringify({ mcpServers: { cotal: server } }),
        "--strict-mcp-config",
        ...(ctx.prompt ? ["--append-system-prompt", ctx.prompt] : []),
        ...(ctx.model ? ["--model", ctx.model] : []),
        ...(ctx.args ?? []),
      ],
    };
  },
});

/** `codex`: the Codex CLI on the agent's pty with `cotal mcp` as an MCP server. */
export const codexConnector: Connector = Object.freeze({
  kind: "connector",
  name: "codex",
  requires: ["codex"],
  buildLaunch(ctx: ManagerLaunchContext): LaunchSpec {
    const command = harnessPath(ctx, "codex");
    return {
      command,
      args: [
        "-c",
        `mcp_servers.cotal=${tomlInline(cotalMcpServer())}`,
        ...(ctx.model ? ["--model", ctx.model] : []),
        ...(ctx.args ?? []),
        ...(ctx.prompt ? [ctx.prompt] : []),
      ],
    };
  },
});

/**
 * `gemini`: Gemini CLI on the agent's pty with `cotal mcp` in its user settings
 * (`~/.gemini/settings.json`, written into the agent's private home by a shell that then execs
 * the harness). Folder trust is off in those settings: the sandbox is the boundary, and an
 * untrusted folder would disable every MCP server. The instructions are the interactive prompt.
 */
export const geminiConnector: Connector = Object.freeze({
  kind: "connector",
  name: "gemini",
  requires: ["gemini"],
  buildLaunch(ctx: ManagerLaunchContext): LaunchSpec {
    const command = harnessPath(ctx, "gemini");
    const settings = {
      security: { folderTrust: { enabled: false } },
      mcpServers: { cotal: cotalMcpServer() },
    };
    return {
      command: "/bin/sh",
      args: [
        "-c",
        GEMINI_SETTINGS_SCRIPT,
        "sh",
        JSON.stringify(settings),
        command,
        ...(ctx.model ? ["--model", ctx.model] : []),
        ...(ctx.prompt ? ["--prompt-interactive", ctx.prompt] : []),
        ...(ctx.args ?? []),
      ],
    };
  },
});

/**
 * `opencode`: OpenCode on the agent's pty with `cotal mcp` as a local MCP server in its inline
 * configuration (`OPENCODE_CONFIG_CONTENT`, set for the harness alone by env(1)); the
 * instructions as its `--prompt`.
 */
export const opencodeConnector: Connector = Object.freeze({
  kind: "connector",
  name: "opencode",
  requires: ["opencode"],
  buildLaunch(ctx: ManagerLaunchContext): LaunchSpec {
    const command = harnessPath(ctx, "opencode");
    const server = cotalMcpServer();
    const config = {
      mcp: {
        cotal: {
          type: "local",
          command: [server.command, ...server.args],
          environment: server.env,
          enabled: true,
        },
      },
    };
    return {
      command: "/usr/bin/env",
      args: [
        `OPENCODE_CONFIG_CONTENT=${JSON.stringify(config)}`,
        command,
        ...(ctx.model ? ["--model", ctx.model] : []),
        ...(ctx.prompt ? ["--prompt", ctx.prompt] : []),
        ...(ctx.args ?? []),
      ],
    };
  },
});

registry.register([claudeCodeConnector, codexConnector, geminiConnector, opencodeConnector]);

/**
 * Claude Code as a judge of `cotal mcp`'s configuration: its own npm package, pinned, installed
 * into the project cache by the test set-up when npm can fetch it. Its `claude mcp` commands
 * check an MCP server without a model or an account (offline).
 */
import { projectCacheDir } from "../../lib/broker/find.ts";

/** The Claude Code release the judge runs. */
export const CLAUDE_CODE_VERSION = "2.1.332";

/** Where the judge lives once installed. */
export function claudeCodeBin(): string {
  return `${projectCacheDir()}/claude-code/node_modules/.bin/claude`;
}

/** True when the judge is installed. */
export function haveClaudeCode(): boolean {
  try {
    return Deno.statSync(claudeCodeBin()).isFile;
  } catch {
    return false;
  }
}

/** Installs the judge with npm into the cache; says why not when it cannot (never throws). */
export async function ensureClaudeCode(): Promise<string> {
  if (haveClaudeCode()) return `using ${claudeCodeBin()}`;
  const prefix = `${projectCacheDir()}/claude-code`;
  try {
    const child = new Deno.Command("npm", {
      args: [
        "install",
        "--no-audit",
        "--no-fund",
        "--prefix",
        prefix,
        `@anthropic-ai/claude-code@${CLAUDE_CODE_VERSION}`,
      ],
      stdout: "null",
      stderr: "piped",
    }).spawn();
    const timer = setTimeout(() => child.kill("SIGKILL"), 180_000);
    const out = await child.output().finally(() => clearTimeout(timer));
    if (!out.success || !haveClaudeCode()) {
      return `not installed (npm exited ${out.code}): the Claude Code judge test is skipped`;
    }
    return `installed ${CLAUDE_CODE_VERSION} at ${claudeCodeBin()}`;
  } catch (err) {
    return `not installed (${(err as Error).message}): the Claude Code judge test is skipped`;
  }
}

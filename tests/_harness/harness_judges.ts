/**
 * AI harnesses as judges of Cotal's MCP configuration: each harness's own npm package, pinned,
 * installed into the project cache by the test set-up when npm can fetch it. Their `mcp`
 * commands read (Codex) or health-check (Claude Code, Gemini CLI, OpenCode) an MCP server
 * without a model or an account, offline.
 */
import { projectCacheDir } from "../../lib/project_cache.ts";

/** The judges: npm package, pinned version, binary. */
export const JUDGES = Object.freeze({
  "claude-code": { pkg: "@anthropic-ai/claude-code", version: "2.1.332", bin: "claude" },
  codex: { pkg: "@openai/codex", version: "0.171.0", bin: "codex" },
  gemini: { pkg: "@google/gemini-cli", version: "0.61.0", bin: "gemini" },
  opencode: { pkg: "opencode-ai", version: "1.18.33", bin: "opencode" },
});

/** A judge's name. */
export type JudgeName = keyof typeof JUDGES;

/** Where a judge's binary lives once installed. */
export function judgeBin(name: JudgeName): string {
  return `${projectCacheDir()}/${name}/node_modules/.bin/${JUDGES[name].bin}`;
}

/** True when the judge is installed. */
export function haveJudge(name: JudgeName): boolean {
  try {
    return Deno.statSync(judgeBin(name)).isFile;
  } catch {
    return false;
  }
}

/** Installs a judge with npm into the cache; says why not when it cannot (never throws). */
export async function ensureJudge(name: JudgeName): Promise<string> {
  const j = JUDGES[name];
  if (haveJudge(name)) return `using ${judgeBin(name)}`;
  try {
    const child = new Deno.Command("npm", {
      args: [
        "install",
        "--no-audit",
        "--no-fund",
        "--prefix",
        `${projectCacheDir()}/${name}`,
        `${j.pkg}@${j.version}`,
      ],
      stdout: "null",
      stderr: "null",
    }).spawn();
    const timer = setTimeout(() => child.kill("SIGKILL"), 180_000);
    const out = await child.output().finally(() => clearTimeout(timer));
    if (!out.success || !haveJudge(name)) {
      return `not installed (npm exited ${out.code}): its judge test is skipped`;
    }
    return `installed ${j.pkg}@${j.version} at ${judgeBin(name)}`;
  } catch (err) {
    return `not installed (${(err as Error).message}): its judge test is skipped`;
  }
}

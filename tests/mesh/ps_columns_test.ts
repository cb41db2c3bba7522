/**
 * `ps` keeps its columns: a retired agent's reason is a sentence, and newcomer pass 10 saw it
 * push the rest of the row out of line. The reason is on a line of its own under the row.
 */
import assert from "node:assert/strict";
import type { AgentRow } from "../../lib/manager/managed_agent.ts";
import { freePort, removeTempDir, tempDir, waitFor } from "../_harness/broker.ts";
import { cotalIn, cotalQuietly } from "../_harness/cotal_cli.ts";

Deno.test("mesh - ps shows a retired agent's reason under its row, the columns in line", async () => {
  const root = await tempDir("cotal-pscols-");
  const run = cotalIn(root);
  try {
    await run("up", "--detach", "--port", `${freePort()}`);
    await run(
      "spawn",
      "--agent",
      "program",
      "--name",
      "brief",
      "--restarts",
      "0",
      "--",
      "/bin/sh",
      "-c",
      "sleep 2; exit 3",
    );
    await waitFor(async () => {
      const rows = JSON.parse((await run("ps", "--json")).stdout).agents as AgentRow[];
      return rows.some((r) => r.name === "brief" && r.status === "retired");
    }, { timeoutMs: 30_000, what: "brief retired" });
    const lines = (await run("ps")).stdout.split("\n");
    const at = lines.findIndex((l) => l.startsWith("brief "));
    assert.ok(at >= 0, lines.join("\n"));
    assert.match(lines[at], /^brief {16}\S+ +\S+ +retired {4}(online|offline) /);
    assert.match(lines[at + 1], /^ {2}why: \S/);
  } finally {
    await cotalQuietly(root, "down");
    await removeTempDir(root);
  }
});

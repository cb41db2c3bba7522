/**
 * A name whose principal has a live lifecycle this supervisor does not run (a space restored
 * from another root, or an agent provisioned by hand with `cotal mint --provision`): newcomer
 * pass 10's `spawn --role upper` after a restore failed with the library's "deprovision it with
 * deprovisionAgent". A name the supervisor chooses moves on to the next one; a name asked for
 * is refused with the `cotal deprovision` that ends the other lifecycle.
 */
import assert from "node:assert/strict";
import { freePort, removeTempDir, tempDir } from "../_harness/broker.ts";
import { cotalIn, cotalQuietly } from "../_harness/cotal_cli.ts";

const COTAL = new URL("../../cmd/cotal.ts", import.meta.url).pathname;

Deno.test("mesh - spawn passes over a name another lifecycle holds, and names the deprovision when asked for it", async () => {
  const root = await tempDir("cotal-foreign-");
  const run = cotalIn(root);
  try {
    await run("up", "--detach", "--port", `${freePort()}`);
    const minted = await run(
      ...["mint", "--profile", "agent", "--provision", "--actor", "upper_1"],
      ...["--out", `${root}/upper_1.creds`, "--json"],
    );
    const { lifecycleUid } = JSON.parse(minted.stdout);
    const row = JSON.parse(
      (await run("spawn", "--role", "upper", "--json", "--", "/bin/cat")).stdout,
    );
    assert.equal(row.name, "upper_2");
    const asked = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", COTAL, "spawn", "--name", "upper_1", "--root", root, "--", "/bin/cat"],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const stderr = new TextDecoder().decode(asked.stderr);
    assert.equal(asked.code, 1, stderr);
    assert.match(
      stderr,
      new RegExp(
        `upper_1 has a lifecycle this supervisor does not run .*'cotal deprovision upper_1 --lifecycle ${lifecycleUid}' ends it`,
      ),
    );
    // Ended as it says, the name is free again.
    await run("deprovision", "upper_1", "--lifecycle", lifecycleUid);
    const again = JSON.parse(
      (await run("spawn", "--name", "upper_1", "--json", "--", "/bin/cat")).stdout,
    );
    assert.equal(again.name, "upper_1");
  } finally {
    await cotalQuietly(root, "down");
    await removeTempDir(root);
  }
});

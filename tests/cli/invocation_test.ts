import assert from "node:assert/strict";
import { cotalCommand, denoTaskCommand } from "../../lib/cli/invocation.ts";
import { removeTempDir, tempDir } from "../_harness/broker.ts";

Deno.test("cli - the commands Cotal prints name the installed cotal, or the npx form when none is on PATH", async () => {
  const dir = await tempDir("cotal-path-");
  try {
    // Only npx: the form the README's first session uses, with this Deno's version.
    assert.equal(
      cotalCommand(`${dir}:/nonexistent`),
      `npx -y deno@${Deno.version.deno} task cotal`,
    );
    // A `cotal` that is not executable does not count.
    await Deno.writeTextFile(`${dir}/cotal`, "#!/bin/sh\n", { mode: 0o644 });
    assert.match(cotalCommand(dir), /^npx /);
    await Deno.chmod(`${dir}/cotal`, 0o755);
    assert.equal(cotalCommand(`/nonexistent:${dir}`), "cotal");
  } finally {
    await removeTempDir(dir);
  }
});

Deno.test("cli - a deno task Cotal tells the operator to run is the npx form when no deno is on PATH (newcomer pass 10)", async () => {
  const dir = await tempDir("cotal-path-");
  try {
    assert.equal(denoTaskCommand("compile", dir), `npx -y deno@${Deno.version.deno} task compile`);
    await Deno.writeTextFile(`${dir}/deno`, "#!/bin/sh\n", { mode: 0o755 });
    await Deno.chmod(`${dir}/deno`, 0o755);
    assert.equal(denoTaskCommand("compile", dir), "deno task compile");
  } finally {
    await removeTempDir(dir);
  }
});

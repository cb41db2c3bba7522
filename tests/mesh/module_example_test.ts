/**
 * The README's module agent, `examples/agents/echo.js`, spawned with the CLI as a newcomer
 * would (`cotal spawn --agent module --module ...`) and asked over `cotal join` (newcomer pass 12
 * found `module` named but never shown: a module without `run(ctx)`, or one that never took its
 * endpoint, was all they could make).
 */
import assert from "node:assert/strict";
import { down, up } from "../../lib/mesh/up.ts";
import { freePort, removeTempDir, tempDir, waitFor } from "../_harness/broker.ts";

const COTAL = new URL("../../cmd/cotal.ts", import.meta.url).pathname;
const ECHO = new URL("../../examples/agents/echo.js", import.meta.url).pathname;

Deno.test("mesh - the README's module agent answers a DM in upper case", async () => {
  const root = await tempDir("cotal-echo-");
  const home = await tempDir("cotal-home-");
  try {
    await up({
      root,
      space: "default",
      host: "127.0.0.1",
      port: freePort(),
      detach: true,
      say: () => {},
      untilStopped: Promise.resolve(),
    });
    const spawn = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", COTAL, "spawn", "--agent", "module", "--module", ECHO, "--name", "echo"]
        .concat(["--root", root]),
      env: { COTAL_HOME: home },
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(120_000),
    }).output();
    const said = new TextDecoder().decode(spawn.stdout) + new TextDecoder().decode(spawn.stderr);
    assert.equal(spawn.code, 0, said);
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", COTAL, "join", "--root", root, "--as", "me"],
      env: { COTAL_HOME: home },
      stdin: "piped",
      stdout: "piped",
      stderr: "null",
    }).spawn();
    const out: string[] = [];
    const reading = (async () => {
      for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) out.push(chunk);
    })();
    const writer = child.stdin.getWriter();
    try {
      await waitFor(() => /local\.echo is online/.test(out.join("")), {
        timeoutMs: 60_000,
        what: "the echo agent online in join",
      });
      await writer.write(new TextEncoder().encode("/dm local.echo hello module\n"));
      await waitFor(() => /^\(dm\) local\.echo: HELLO MODULE$/m.test(out.join("")), {
        timeoutMs: 30_000,
        what: "the echo agent's answer",
      });
      await writer.write(new TextEncoder().encode("/quit\n"));
    } finally {
      await writer.close().catch(() => {});
      try {
        child.kill();
      } catch {
        // Ended.
      }
      await child.status;
      await reading;
    }
  } finally {
    await down(root).catch(() => {});
    await removeTempDir(root);
    await removeTempDir(home);
  }
});

/**
 * A member the operator runs by hand, as the README shows: `cotal mint --profile agent
 * --provision` makes its durables and ACL row on the running broker (what `cotal spawn` makes)
 * and writes its cred; `cotal mcp --creds` then joins with it, and the MCP SDK's own client
 * sees its channel and the DM the operator sends it. Misuse of the flags is refused.
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { down, up } from "../../lib/mesh/up.ts";
import { lookupMesh, registerMesh } from "../../lib/workspace/machine_registry.ts";
import { denoDir } from "../../lib/manager/start_runner.ts";
import { MCP_V8_FLAGS } from "../../lib/manager/mcp_command.ts";
import { freePort, removeTempDir, tempDir } from "../_harness/broker.ts";
import { CONFIG, COTAL } from "./_mcp_agent.ts";

async function cotal(args: string[], env: Record<string, string>) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", COTAL, ...args],
    env,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

Deno.test("mcp - a member run by hand: mint --provision makes what cotal mcp --creds joins with", async () => {
  const root = await tempDir("cotal-mintprov-");
  const home = await tempDir("cotal-mintprov-home-");
  const env = { COTAL_HOME: home };
  let client: Client | undefined;
  try {
    const { url } = await up({
      root,
      space: "prov",
      host: "127.0.0.1",
      port: freePort(),
      detach: true,
      say: () => {},
      untilStopped: Promise.resolve(),
    });
    // The commands below run with COTAL_HOME=home: the mesh is registered there too (up, run
    // here, registers in this process's home; test files running at once share its environment).
    await registerMesh({ space: "prov", root, url }, home);
    assert.ok(await lookupMesh("prov", home));
    const creds = `${root}/bob.creds`;
    const minted = await cotal([
      ...["mint", "--root", root, "--space", "prov", "--profile", "agent", "--provision"],
      ...["--actor", "bob", "--channel", "general", "--out", creds, "--json"],
    ], env);
    assert.equal(minted.code, 0, minted.stderr);
    const { lifecycleUid } = JSON.parse(minted.stdout);
    // A space no mesh here serves: one sentence, exit 2, never a wait on a port.
    const nowhere = await cotal(
      ["mcp", "--creds", creds, "--space", "elsewhere", "--lifecycle-uid", lifecycleUid],
      env,
    );
    assert.equal(nowhere.code, 2, nowhere.stderr);
    assert.match(nowhere.stderr, /No mesh on this machine serves space "elsewhere"; pass --server/);

    const transport = new StdioClientTransport({
      command: Deno.execPath(),
      args: [
        ...["run", "-A", `--v8-flags=${MCP_V8_FLAGS.join(",")}`, `--config=${CONFIG}`, COTAL],
        ...["mcp", "--creds", creds, "--space", "prov", "--lifecycle-uid", lifecycleUid],
        // No --server: the machine registry names the mesh that serves the space.
        ...["--channel", "general", "--inbox", `${root}/inbox`],
      ],
      env: { PATH: "/usr/bin:/bin", HOME: home, COTAL_HOME: home, DENO_DIR: denoDir() },
      stderr: "pipe",
    });
    let stderr = "";
    transport.stderr?.on("data", (c: Uint8Array) => (stderr += new TextDecoder().decode(c)));
    client = new Client({ name: "cotal-test", version: "1" });
    await client.connect(transport).catch((err: Error) => {
      throw new Error(`cotal mcp did not start: ${err.message}\n${stderr}`);
    });
    const call = async (name: string, args: Record<string, unknown> = {}) => {
      const r = await client!.callTool({ name, arguments: args }, undefined, { timeout: 60_000 });
      assert.equal(r.isError, undefined, JSON.stringify(r.content));
      return JSON.parse((r.content as { text: string }[])[0].text);
    };
    assert.deepEqual((await call("channels", { action: "list" })).joined, ["general"]);
    // Its DM queue exists: the operator's DM is kept for it and arrives.
    const sent = await cotal(
      ["send", "--root", root, "--space", "prov", "--to", "local.bob", "review this"],
      env,
    );
    assert.equal(sent.code, 0, sent.stderr);
    const got = await call("wait", { timeout_seconds: 30 });
    assert.deepEqual(got.messages.map((m: { text: string }) => m.text), ["review this"]);

    // Undone with the command it printed: bob's durables and ACL row go, a DM to him is refused.
    const printed = await cotal([
      ...["mint", "--root", root, "--space", "prov", "--profile", "agent", "--provision"],
      ...["--actor", "carol", "--out", `${root}/carol.creds`],
    ], env);
    assert.match(printed.stderr, /undo with: cotal deprovision carol --lifecycle [0-9a-z]+\)/);
    const undo = await cotal([
      ...["deprovision", "--root", root, "--space", "prov", "bob", "--lifecycle", lifecycleUid],
    ], env);
    assert.equal(undo.code, 0, undo.stderr);
    assert.match(
      undo.stdout,
      /^deprovisioned local\.bob \(lifecycle \S+\): removed .*dm_.*; its ACL row purged/,
    );
    const after = await cotal(
      ["send", "--root", root, "--space", "prov", "--to", "local.bob", "still there?"],
      env,
    );
    assert.equal(after.code, 1);
    assert.match(after.stderr, /local\.bob has no live agent in space 'prov'/);
    const again = await cotal(
      ["deprovision", "--root", root, "--space", "prov", "bob", "--lifecycle", lifecycleUid],
      env,
    );
    assert.match(
      again.stdout,
      /^local\.bob had no durables under lifecycle \S+; its ACL row is purged/,
    );
    const bad = await cotal(["deprovision", "--root", root, "--space", "prov", "bob"], env);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /Name the lifecycle with --lifecycle <uid>/);

    // --out in a directory that does not exist is refused before anything is provisioned:
    // the corrected retry works (fault pass 10: it was refused as a live lifecycle).
    const missing = await cotal([
      ...["mint", "--root", root, "--space", "prov", "--profile", "agent", "--provision"],
      ...["--actor", "dave", "--out", `${root}/no/such/dir/dave.creds`],
    ], env);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /is in a directory that does not exist; create it first/);
    const retried = await cotal([
      ...["mint", "--root", root, "--space", "prov", "--profile", "agent", "--provision"],
      ...["--actor", "dave", "--out", `${root}/dave.creds`],
    ], env);
    assert.equal(retried.code, 0, retried.stderr);

    // Misuse: --provision is an agent's; --role and --channel need it; a reserved name.
    for (
      const [args, code, re] of [
        [["--profile", "observer", "--provision"], 2, /use it with --profile agent/],
        [["--profile", "agent", "--role", "r"], 2, /add --provision/],
        [["--profile", "agent", "--provision", "--actor", "operator"], 2, /is reserved/],
      ] as const
    ) {
      const r = await cotal(["mint", "--root", root, "--space", "prov", ...args], env);
      assert.equal(r.code, code, args.join(" "));
      assert.match(r.stderr, re, args.join(" "));
    }
  } finally {
    await client?.close().catch(() => {});
    await down(root).catch(() => {});
    await removeTempDir(root);
    await removeTempDir(home);
  }
});

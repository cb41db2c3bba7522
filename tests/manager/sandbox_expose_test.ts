import assert from "node:assert/strict";
import { sandboxArgs } from "../../lib/manager/sandbox/isolation.ts";
import { testBwrap } from "./_agent_fixture.ts";
import { removeTempDir, tempDir } from "../_harness/broker.ts";

Deno.test("manager - a checkout under a hidden dir is bound back read-only, its state dir hidden again", () => {
  const args = sandboxArgs({
    agentDir: "/tmp/co/.cotal/agents/a1",
    hide: ["/tmp"],
    hideAll: ["/tmp", "/tmp/co/.cotal", "/tmp/co/.cotal/secrets"],
    expose: ["/tmp/co", "/usr/lib/cotal", "/tmp"],
    env: {},
  });
  const s = args.join(" ");
  assert.match(s, /--tmpfs \/tmp --ro-bind \/tmp\/co \/tmp\/co --tmpfs \/tmp\/co\/\.cotal /);
  assert.ok(!s.includes("--ro-bind /usr/lib/cotal"), "a visible dir is not bound again");
  assert.ok(!s.includes("--ro-bind /tmp /tmp"), "a hidden dir itself is never exposed");
  // The agent's own dir comes last, writable, over the re-hidden state.
  assert.ok(s.indexOf("--bind /tmp/co/.cotal/agents/a1") > s.indexOf("--tmpfs /tmp/co/.cotal"));
});

Deno.test("manager - inside bwrap the exposed checkout is readable and its state root is empty", async () => {
  const bwrap = await testBwrap();
  const co = await tempDir("cotal-co-");
  try {
    await Deno.mkdir(`${co}/.cotal/secrets/auth`, { recursive: true });
    await Deno.mkdir(`${co}/.cotal/agents/a1`, { recursive: true });
    await Deno.writeTextFile(`${co}/code.txt`, "code");
    await Deno.writeTextFile(`${co}/.cotal/secrets/auth/broker.json`, "SIGNER");
    const args = sandboxArgs({
      agentDir: `${co}/.cotal/agents/a1`,
      hide: ["/tmp"],
      hideAll: ["/tmp", `${co}/.cotal`],
      expose: [co],
      env: { PATH: "/usr/bin:/bin" },
    });
    const out = await new Deno.Command(bwrap, {
      args: [
        ...args,
        "/bin/sh",
        "-c",
        `cat ${co}/code.txt; echo; cat ${co}/.cotal/secrets/auth/broker.json 2>&1; ls -A ${co}/.cotal`,
      ],
      stdout: "piped",
      stderr: "piped",
      clearEnv: true,
    }).output();
    const text = new TextDecoder().decode(out.stdout);
    assert.match(text, /^code\n/);
    assert.ok(!text.includes("SIGNER"), text);
    assert.match(text, /No such file or directory/);
  } finally {
    await removeTempDir(co);
  }
});

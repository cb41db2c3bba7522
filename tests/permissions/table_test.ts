import assert from "node:assert/strict";
import {
  denoCompileFlags,
  denoRunFlags,
  type DeploymentLayout,
  EXECUTABLES,
} from "../../lib/permissions.ts";

const agent = { agentDir: "/A/agents/a1", launchFile: "/A/agents/a1/launch.json" };
function layout(root: string): DeploymentLayout {
  return { root, broker: ["127.0.0.1:4222"], machineHome: `${root}-home` };
}

function flagValues(flags: string[], name: string): string[] {
  return flags.filter((f) => f.startsWith(`${name}=`)).flatMap((f) =>
    f.slice(name.length + 1).split(",")
  );
}

for (const root of ["/srv/one/.cotal", "/var/lib/cotal"]) {
  Deno.test(`permissions - the table rendered for ${root}`, () => {
    const l = layout(root);
    const signer = `${root}/secrets/auth`;
    for (const exe of EXECUTABLES) {
      const run = denoRunFlags(exe, l, {
        agentDir: `${root}/agents/a1`,
        launchFile: `${root}/agents/a1/launch.json`,
      });
      const compile = denoCompileFlags(exe, l, "/out");
      for (const flags of [run, compile]) {
        // Nothing is ever granted unscoped, with one measured exception: the supervisor's pty
        // (`@lydell/node-pty` under Deno 2.9.6 wraps its fd in node:tty.ReadStream, which
        // checks read-all and write-all; see the cotal-supervise row and
        // tests/manager/pty_runtime_test.ts). The supervisor holds the signer anyway; an agent
        // never gets it.
        const wide = exe === "cotal-supervise" ? ["--allow-read", "--allow-write"] : [];
        for (const bare of ["--allow-read", "--allow-run", "--allow-write", "--allow-net"]) {
          assert.equal(flags.includes(bare), wide.includes(bare), `${exe} and a bare ${bare}`);
        }
        assert.ok(!flags.includes("--allow-all") && !flags.includes("-A"), `${exe} has -A`);
        assert.equal(flags.includes("--allow-ffi"), exe === "cotal-supervise", `${exe} ffi`);
        assert.ok(flags.includes("--no-prompt"));
        // Every read grant stays inside the layout.
        for (const p of flagValues(flags, "--allow-read")) {
          assert.ok(p.startsWith(root), `${exe} reads ${p} outside ${root}`);
        }
      }
      if (exe === "cotal-agent" || exe === "cotal-delivery") {
        for (const flags of [run, compile]) {
          assert.ok(
            flagValues(flags, "--deny-read").includes(signer),
            `${exe} must deny ${signer}`,
          );
          assert.ok(!flagValues(flags, "--allow-read").includes(signer));
        }
      }
      assert.deepEqual(compile.slice(-2), ["--output", `/out/${exe}`]);
    }
  });
}

Deno.test("permissions - the agent runner's row: its dir only, store denied, one program at most", () => {
  const l = layout("/R");
  const without = denoRunFlags("cotal-agent", l, agent);
  assert.deepEqual(flagValues(without, "--allow-read"), [agent.agentDir, agent.launchFile]);
  assert.deepEqual(flagValues(without, "--allow-write"), [agent.agentDir]);
  assert.deepEqual(flagValues(without, "--deny-read"), ["/R/secrets/auth", "/R/secrets"]);
  assert.deepEqual(flagValues(without, "--allow-net"), ["127.0.0.1:4222"]);
  assert.ok(!without.some((f) => f.startsWith("--allow-run")));
  assert.ok(
    !flagValues(without, "--allow-env").some((v) => v.startsWith("COTAL_") && v !== "COTAL_LAUNCH"),
  );
  const withProgram = denoRunFlags("cotal-agent", l, { ...agent, program: "/usr/bin/python3" });
  assert.deepEqual(flagValues(withProgram, "--allow-run"), ["/usr/bin/python3"]);
  assert.throws(() => denoRunFlags("cotal-agent", l), /needs the agent's layout/);
});

Deno.test("permissions - delivery is scoped to its own space's cred dir when the space is known", () => {
  const flags = denoRunFlags("cotal-delivery", { ...layout("/R"), spaceKey: "space.ab12" });
  assert.deepEqual(flagValues(flags, "--allow-read"), ["/R/secrets/space.ab12"]);
  assert.ok(!flags.some((f) => f.startsWith("--allow-run")));
});

Deno.test("permissions - a daemon started with its row cannot read the signer (deno run, same flags)", async () => {
  const root = await Deno.makeTempDir({ prefix: "cotal-perm-" });
  try {
    await Deno.mkdir(`${root}/secrets/auth`, { recursive: true });
    await Deno.mkdir(`${root}/secrets/space.ab12`, { recursive: true });
    await Deno.writeTextFile(`${root}/secrets/auth/broker.json`, "{}");
    await Deno.writeTextFile(`${root}/secrets/space.ab12/delivery.creds`, "creds");
    const probe = `${root}/probe.ts`;
    await Deno.writeTextFile(
      probe,
      `const out: Record<string, string> = {};
for (const p of Deno.args) {
  try { Deno.readTextFileSync(p); out[p] = "read"; } catch (e) { out[p] = (e as Error).name; }
}
console.log(JSON.stringify(out));`,
    );
    const l = { ...layout(root), spaceKey: "space.ab12" };
    const flags = denoRunFlags("cotal-delivery", l);
    const signerFile = `${root}/secrets/auth/broker.json`;
    const credFile = `${root}/secrets/space.ab12/delivery.creds`;
    const out = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        ...flags,
        probe,
        signerFile,
        `${root}/secrets/space.ab12/../auth/broker.json`,
        credFile,
      ],
      stdout: "piped",
      stderr: "piped",
      clearEnv: true,
    }).output();
    const result = JSON.parse(new TextDecoder().decode(out.stdout));
    assert.equal(result[signerFile], "NotCapable");
    assert.equal(result[`${root}/secrets/space.ab12/../auth/broker.json`], "NotCapable");
    assert.equal(result[credFile], "read");
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

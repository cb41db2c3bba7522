import assert from "node:assert/strict";
import {
  AGENT_SLOTS,
  denoCompileFlags,
  denoRunFlags,
  type DeploymentLayout,
  EXECUTABLES,
  releaseLayout,
} from "../../lib/permissions.ts";

// The runner's row is rendered in the paths it sees inside its sandbox.
const agent = {
  launchDir: "/run/cotal/launch",
  launchFile: "/run/cotal/launch/launch.json",
  home: "/home/agent",
  tmp: "/tmp",
  sockets: ["/run/cotal/control.sock", "/run/cotal/broker.sock"],
  net: ["127.0.0.1:4222"],
};
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
      const run = denoRunFlags(exe, l, agent);
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
        // Only the operator's CLI reads any variable (the one `cotal spawn --env NAME` names).
        assert.equal(
          flags.includes("--allow-env"),
          exe === "cotal",
          `${exe} and a bare --allow-env`,
        );
        assert.ok(flags.includes("--no-prompt"));
        // Every read grant stays inside the layout (the runner's: inside its sandbox).
        for (const p of flagValues(flags, "--allow-read")) {
          const inside = exe === "cotal-agent" && flags === run
            ? [agent.launchDir, agent.home, agent.tmp, ...agent.sockets].includes(p)
            : p.startsWith(root);
          assert.ok(inside, `${exe} reads ${p} outside ${root}`);
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

Deno.test("permissions - the agent runner's row: its own dirs and sockets, store denied, one program at most", () => {
  const l = layout("/R");
  const without = denoRunFlags("cotal-agent", l, agent);
  assert.deepEqual(flagValues(without, "--allow-read"), [
    "/run/cotal/launch",
    "/home/agent",
    "/tmp",
    ...agent.sockets,
  ]);
  assert.deepEqual(flagValues(without, "--allow-write"), ["/home/agent", "/tmp", ...agent.sockets]);
  assert.deepEqual(flagValues(without, "--deny-read"), ["/R/secrets/auth", "/R/secrets"]);
  // The relay's loopback port inside its own network namespace, and its two sockets.
  assert.deepEqual(flagValues(without, "--allow-net"), [
    "127.0.0.1:4222",
    "unix:/run/cotal/control.sock",
    "unix:/run/cotal/broker.sock",
  ]);
  assert.ok(!without.some((f) => f.startsWith("--allow-run")));
  assert.ok(
    !flagValues(without, "--allow-env").some((v) => v.startsWith("COTAL_") && v !== "COTAL_LAUNCH"),
  );
  const withProgram = denoRunFlags("cotal-agent", l, { ...agent, program: "/usr/bin/python3" });
  assert.deepEqual(flagValues(withProgram, "--allow-run"), ["/usr/bin/python3"]);
  assert.throws(() => denoRunFlags("cotal-agent", l), /needs the agent's layout/);
  // A workdir is the one operator-chosen place it may write.
  const withWork = denoRunFlags("cotal-agent", l, { ...agent, workdir: "/srv/project" });
  assert.ok(flagValues(withWork, "--allow-write").includes("/srv/project"));
});

Deno.test("permissions - the supervisor may make exactly its agents' sockets, three per slot", () => {
  const flags = denoRunFlags("cotal-supervise", {
    ...layout("/R"),
    agentSocketDir: "/R/run/sockets",
  });
  const unix = flagValues(flags, "--allow-net").filter((n) => n.startsWith("unix:"));
  assert.equal(unix.length, AGENT_SLOTS * 3);
  assert.ok(unix.includes("unix:/R/run/sockets/0.control"));
  assert.ok(unix.includes(`unix:/R/run/sockets/${AGENT_SLOTS - 1}.broker`));
  assert.ok(unix.includes("unix:/R/run/sockets/0.spawn"));
  assert.ok(unix.every((n) => /^unix:\/R\/run\/sockets\/\d+\.(control|broker|spawn)$/.test(n)));
});

Deno.test("permissions - release binaries are built for systemd: the supervisor denies the signer records, the signer may serve any space's dir", () => {
  const l = releaseLayout("/var/lib/cotal", ["127.0.0.1:4222"]);
  const signer = "/var/lib/cotal/secrets/auth";
  const sup = denoCompileFlags("cotal-supervise", l, "/out");
  assert.ok(flagValues(sup, "--deny-read").includes(signer));
  assert.ok(flagValues(sup, "--deny-write").includes(signer));
  const sig = denoCompileFlags("cotal-signer", l, "/out");
  assert.deepEqual(flagValues(sig, "--allow-read"), [
    signer,
    "/var/lib/cotal/secrets",
    "/var/lib/cotal/audit",
  ]);
  assert.deepEqual(flagValues(sig, "--allow-write"), [
    "/var/lib/cotal/logs",
    "/var/lib/cotal/audit",
    "/var/lib/cotal/secrets",
  ]);
  // The supervisor's row has no way to the audit trail either (its unit hides it too).
  assert.ok(flagValues(sup, "--deny-write").includes("/var/lib/cotal/audit"));
  assert.ok(!sig.includes("--allow-run") && !sig.some((f) => f.startsWith("--allow-run=")));
  // Development rows for one space keep the signer's writes to that space's dir; it reads the
  // store's root, which the store checks before a write (a row without it re-signed nothing).
  const dev = denoRunFlags("cotal-signer", { ...layout("/R"), spaceKey: "space.ab" });
  assert.deepEqual(flagValues(dev, "--allow-read"), ["/R/secrets/auth", "/R/secrets", "/R/audit"]);
  assert.deepEqual(flagValues(dev, "--allow-write"), [
    "/R/logs",
    "/R/audit",
    "/R/secrets/space.ab",
  ]);
});

Deno.test("permissions - delivery is scoped to its own space's cred dir when the space is known", () => {
  const flags = denoRunFlags("cotal-delivery", { ...layout("/R"), spaceKey: "space.ab12" });
  // Its cred dir, and the one lock file that lets a successor prove it died.
  assert.deepEqual(flagValues(flags, "--allow-read"), [
    "/R/secrets/space.ab12",
    "/R/run/delivery/space.ab12.lock",
  ]);
  assert.deepEqual(flagValues(flags, "--allow-write"), [
    "/R/logs",
    "/R/run/delivery/space.ab12.lock",
  ]);
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

Deno.test("permissions - a watched daemon may write its one heartbeat file, the CLI and an agent none, and the watchdog dials only the broker", () => {
  const beat = "/R/run/delivery.ab12.beat";
  const l = { ...layout("/R"), spaceKey: "space.ab12", heartbeat: beat };
  for (const exe of EXECUTABLES) {
    const flags = denoRunFlags(exe, l, agent);
    const writes = flagValues(flags, "--allow-write");
    const watched = exe !== "cotal" && exe !== "cotal-agent";
    // The supervisor's row is write-all (its pty); every other watched row names the file.
    if (exe !== "cotal-supervise") assert.equal(writes.includes(beat), watched, exe);
    if (watched) {
      const env = flagValues(flags, "--allow-env");
      assert.ok(env.includes("COTAL_*") || env.includes("COTAL_HEARTBEAT"), `${exe} env ${env}`);
    }
  }
  // The watchdog's net is the broker's client port, for its probe; nothing else.
  const wd = denoRunFlags("cotal-watchdog", l);
  assert.deepEqual(flagValues(wd, "--allow-net"), ["127.0.0.1:4222"]);
  assert.deepEqual(flagValues(wd, "--allow-env"), ["COTAL_HEARTBEAT"]);
  // Without a heartbeat (systemd, release binaries) nothing is added.
  const plain = denoRunFlags("cotal-watchdog", layout("/R"));
  assert.equal(flagValues(plain, "--allow-env").length, 0);
  assert.ok(!flagValues(plain, "--allow-write").some((p) => p.endsWith(".beat")));
});

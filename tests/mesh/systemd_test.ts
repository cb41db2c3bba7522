import assert from "node:assert/strict";
import {
  defaultSystemdLayout,
  renderSysusers,
  renderTmpfiles,
  renderUnits,
  UNIT_USERS,
} from "../../lib/mesh/systemd.ts";
import { spaceKeyHex } from "../../lib/workspace/mod.ts";
import { removeTempDir, tempDir } from "../_harness/broker.ts";

const COTAL = new URL("../../cmd/cotal.ts", import.meta.url).pathname;

function directives(text: string): Map<string, string[]> {
  const m = new Map<string, string[]>();
  for (const line of text.split("\n")) {
    const i = line.indexOf("=");
    if (i <= 0 || line.startsWith("[")) continue;
    const k = line.slice(0, i);
    m.set(k, [...(m.get(k) ?? []), line.slice(i + 1)]);
  }
  return m;
}

Deno.test("systemd - every service carries its user, the lockdown and the signer exclusion", () => {
  const l = defaultSystemdLayout(["alpha", "beta"]);
  const units = renderUnits(l);
  const services = Object.keys(units).filter((n) =>
    n.endsWith(".service") && !n.includes("restart")
  );
  assert.equal(services.length, 1 + 3 * 2);
  const users = new Set<string>();
  for (const name of services) {
    const d = directives(units[name]);
    for (const must of ["NoNewPrivileges", "ProtectSystem", "Restart", "User", "ExecStart"]) {
      assert.ok(d.has(must), `${name} lacks ${must}=`);
    }
    assert.deepEqual(d.get("ProtectSystem"), ["strict"]);
    assert.deepEqual(d.get("NoNewPrivileges"), ["yes"]);
    assert.ok(d.get("ExecStart")![0].startsWith("/"), `${name} runs an absolute path`);
    users.add(d.get("User")![0]);
    // Everyone but the signer's holder is denied the whole secret store.
    if (!name.startsWith("cotal-supervise")) {
      assert.ok(
        d.get("InaccessiblePaths")?.includes("/var/lib/cotal/secrets"),
        `${name} must not see the secrets`,
      );
    }
  }
  assert.deepEqual([...users].sort(), Object.values(UNIT_USERS).sort());
  const delivery = directives(units["cotal-delivery-alpha.service"]);
  assert.deepEqual(delivery.get("LoadCredential"), [
    `delivery.creds:/var/lib/cotal/secrets/space.${spaceKeyHex("alpha")}/delivery.creds`,
  ]);
  assert.match(delivery.get("ExecStart")![0], /^\/usr\/local\/bin\/cotal-delivery /);
  assert.match(units["cotal-delivery-alpha.path"], /PathChanged=.*delivery\.creds/);
  assert.match(renderSysusers(), /^u cotal-delivery -:cotal /m);
  assert.match(renderTmpfiles(l), /^d \/var\/lib\/cotal\/secrets 0700 cotal-supervise cotal -$/m);
});

const hasAnalyze = (() => {
  try {
    return Deno.statSync("/usr/bin/systemd-analyze").isFile;
  } catch {
    return false;
  }
})();

Deno.test({
  name: hasAnalyze
    ? "systemd - systemd-analyze verify accepts every unit"
    : "systemd - systemd-analyze verify (skipped: systemd-analyze is not installed here)",
  ignore: !hasAnalyze,
  async fn() {
    const dir = await tempDir("cotal-units-");
    try {
      // verify checks that ExecStart binaries exist: stand-ins mark where the real ones go.
      await Deno.mkdir(`${dir}/bin`);
      for (const b of ["cotal-delivery", "cotal-supervise", "cotal-auth-service", "nats-server"]) {
        await Deno.writeTextFile(`${dir}/bin/${b}`, "#!/bin/sh\n", { mode: 0o755 });
      }
      const units = renderUnits({
        ...defaultSystemdLayout(["alpha"]),
        binDir: `${dir}/bin`,
        natsServer: `${dir}/bin/nats-server`,
      });
      const files: string[] = [];
      for (const [name, text] of Object.entries(units)) {
        await Deno.writeTextFile(`${dir}/${name}`, text);
        files.push(`${dir}/${name}`);
      }
      const out = await new Deno.Command("systemd-analyze", {
        args: ["verify", "--man=no", ...files],
        stdout: "piped",
        stderr: "piped",
      }).output();
      const err = new TextDecoder().decode(out.stderr);
      assert.equal(out.code, 0, err);
      // A broken unit is caught the same way, so a pass above means something.
      await Deno.writeTextFile(`${dir}/broken.service`, "[Service]\nExecStart=relative/x\n");
      const bad = await new Deno.Command("systemd-analyze", {
        args: ["verify", "--man=no", `${dir}/broken.service`],
        stdout: "null",
        stderr: "null",
      }).output();
      assert.notEqual(bad.code, 0);
    } finally {
      await removeTempDir(dir);
    }
  },
});

Deno.test("systemd - install writes units, sysusers and tmpfiles under --dest; bad input is refused", async () => {
  const dest = await tempDir("cotal-etc-");
  try {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", COTAL, "systemd", "install", "--space", "alpha", "--dest", dest],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    for (
      const f of ["systemd/cotal-nats.service", "sysusers.d/cotal.conf", "tmpfiles.d/cotal.conf"]
    ) {
      assert.ok((await Deno.stat(`${dest}/${f}`)).isFile, f);
    }
    for (
      const [args, re] of [
        [
          ["systemd", "print", "--space", "alpha", "--bin-dir", "rel/bin"],
          /--bin-dir must be an absolute path/,
        ],
        [["systemd", "print", "--space", "no.dots"], /not a usable space name/],
        [["systemd", "print", "--state-dir", `${dest}/empty`], /No spaces under/],
      ] as const
    ) {
      const r = await new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", COTAL, ...args],
        stdout: "piped",
        stderr: "piped",
      }).output();
      assert.equal(r.code, 2, args.join(" "));
      assert.match(new TextDecoder().decode(r.stderr), re);
    }
  } finally {
    await removeTempDir(dest);
  }
});
